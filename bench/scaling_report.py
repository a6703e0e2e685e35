#!/usr/bin/env python3
"""The figures bench/scaling.sh prints, from what its steps leave behind. Standard library only.

  scaling_report.py throughput DB            evaluations, the span they took, evaluations per minute
  scaling_report.py once DB RUN [WORKER]     every candidate of RUN evaluated and counted once; the
                                             leases that expired (WORKER's: the one killed)
  scaling_report.py isolation DIR            fitness of the fixed genome per phase (alone, busy, alone)
  scaling_report.py gpu-map WORKERS_LOG SMI_DIR   nvidia-smi's processes mapped to the workers
  scaling_report.py table TSV                the scaling rows as a table, speedups against 1 worker

DB is an evo.db evod left (its evaluations, candidates, leases and workers tables). Each command
prints key=value lines or a table, and exits 1 when what it checks does not hold.
"""
import glob
import json
import os
import re
import sqlite3
import statistics
import sys


def connect(path):
    if not os.path.isfile(path):
        sys.exit(f"scaling_report: no database at {path}")
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def throughput(db_path):
    db = connect(db_path)
    first = db.execute("SELECT MIN(created_ms) FROM runs").fetchone()[0]
    last, evaluations = db.execute("SELECT MAX(created_ms), COUNT(*) FROM evaluations").fetchone()
    candidates = db.execute("SELECT COUNT(*) FROM candidates WHERE state = 'done'").fetchone()[0]
    if not evaluations or first is None:
        print("evaluations=0 span_s=0 per_min=0 candidates=0")
        return 1
    span_s = max(0.001, (last - first) / 1000.0)
    columns = [row[1] for row in db.execute("PRAGMA table_info(runs)")]
    gpu_ms = db.execute("SELECT SUM(gpu_ms) FROM runs").fetchone()[0] if "gpu_ms" in columns else None
    share = f" gpu_share={gpu_ms / (span_s * 1000):.2f}" if gpu_ms is not None else ""
    print(f"evaluations={evaluations} candidates={candidates} span_s={span_s:.1f} "
          f"per_min={evaluations / span_s * 60:.1f}{share}")
    return 0


def once(db_path, run_id, killed=None):
    """Each candidate of the run done, with one first measurement (none when served from the result
    cache) and at most one confirmation."""
    db = connect(db_path)
    run = db.execute("SELECT generations * population FROM runs WHERE id = ?", (run_id,)).fetchone()
    if not run:
        sys.exit(f"scaling_report: no run {run_id} in {db_path}")
    rows = db.execute(
        "SELECT c.id, c.state, c.result_source, "
        "  (SELECT COUNT(*) FROM evaluations e WHERE e.candidate_id = c.id AND e.is_confirmation = 0), "
        "  (SELECT COUNT(*) FROM evaluations e WHERE e.candidate_id = c.id AND e.is_confirmation = 1) "
        "FROM candidates c WHERE c.run_id = ?", (run_id,)).fetchall()
    not_done = [r[0] for r in rows if r[1] != "done"]
    twice = [r[0] for r in rows if r[3] > 1 or r[4] > 1]
    missing = [r[0] for r in rows if r[3] == 0 and "cache" not in (r[2] or "").lower()]
    expired = db.execute(
        "SELECT COUNT(*) FROM leases l JOIN candidates c ON c.id = l.candidate_id "
        "WHERE c.run_id = ? AND l.outcome = 'expired'", (run_id,)).fetchone()[0]
    killed_expired = 0
    if killed:
        killed_expired = db.execute(
            "SELECT COUNT(*) FROM leases l JOIN workers w ON w.id = l.worker_id "
            "JOIN candidates c ON c.id = l.candidate_id "
            "WHERE c.run_id = ? AND w.name = ? AND l.outcome = 'expired'", (run_id, killed)).fetchone()[0]
    evaluations = sum(r[3] + r[4] for r in rows)
    print(f"planned={run[0]} candidates={len(rows)} not_done={len(not_done)} evaluations={evaluations} "
          f"counted_twice={len(twice)} missing={len(missing)} leases_expired={expired}"
          + (f" of_the_killed_worker={killed_expired}" if killed else ""))
    for what, ids in (("not done", not_done), ("counted twice", twice), ("no evaluation", missing)):
        if ids:
            print(f"  {what}: {' '.join(ids[:10])}{' ...' if len(ids) > 10 else ''}")
    ok = len(rows) == run[0] and not not_done and not twice and not missing
    print("every candidate counted once: " + ("yes" if ok else "NO"))
    return 0 if ok else 1


def isolation(directory):
    """DIR/PHASE-N.json: `evo-worker eval --json` outputs, PHASE alone1, busy, alone2."""
    phases = {}
    for phase in ("alone1", "busy", "alone2"):
        times = []
        for path in sorted(glob.glob(os.path.join(directory, f"{phase}-*.json"))):
            try:
                with open(path) as f:
                    e = json.load(f)
            except (OSError, ValueError):
                continue
            if e.get("status") == "OK" and e.get("fitnessUs"):
                times.append(float(e["fitnessUs"]))
        phases[phase] = times
    for phase, times in phases.items():
        if times:
            print(f"{phase:7s} n={len(times)} median_us={statistics.median(times):.3f} "
                  f"min_us={min(times):.3f} max_us={max(times):.3f}")
        else:
            print(f"{phase:7s} n=0 (no OK evaluation: see the step's logs)")
    alone = phases["alone1"] + phases["alone2"]
    busy = phases["busy"]
    if not alone or not busy:
        return 1
    a, b = statistics.median(alone), statistics.median(busy)
    # The noise: how far the alone timings, before and after, stray from their own median.
    noise = max(abs(t - a) for t in alone) / a
    diff = (b - a) / a
    verdict = "within the noise" if abs(diff) <= noise else "OUTSIDE the noise"
    print(f"busy/alone {b / a:.4f} ({diff * 100:+.2f} %), the alone timings' own spread "
          f"±{noise * 100:.2f} %: {verdict}")
    return 0


def gpu_map(workers_log, smi_dir):
    """Which GPU each worker's processes ran on, from nvidia-smi samples taken while they worked:
    SMI_DIR/gpus.csv (index, uuid) and SMI_DIR/apps-N.csv (pid, gpu_uuid, used MiB) with
    SMI_DIR/ppids-N.txt (pid ppid of every process then). A worker's GPU contexts belong to its
    evaluation children, so each pid is followed up to the worker that started it."""
    started = {}
    with open(workers_log, errors="replace") as f:
        for m in re.finditer(r"event=worker_started name=(\S+) pid=(\d+)", f.read()):
            started[int(m.group(2))] = m.group(1)
    index_of = {}
    gpus_csv = os.path.join(smi_dir, "gpus.csv")
    if os.path.isfile(gpus_csv):
        for line in open(gpus_csv):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 2 and parts[0].isdigit():
                index_of[parts[1]] = int(parts[0])
    seen = {}  # worker name -> set of GPU indices
    unmapped = set()
    for apps in sorted(glob.glob(os.path.join(smi_dir, "apps-*.csv"))):
        parent = {}
        ppids = apps.replace("apps-", "ppids-").replace(".csv", ".txt")
        if os.path.isfile(ppids):
            for line in open(ppids):
                parts = line.split()
                if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                    parent[int(parts[0])] = int(parts[1])
        for line in open(apps):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 2 or not parts[0].isdigit():
                continue
            pid, gpu = int(parts[0]), index_of.get(parts[1], parts[1])
            p, hops = pid, 0
            while p not in started and p in parent and hops < 8:
                p, hops = parent[p], hops + 1
            if p in started:
                seen.setdefault(started[p], set()).add(gpu)
            else:
                unmapped.add((pid, gpu))
    ok = True
    print(f"{'worker':24s} {'its GPU':>7s}  GPUs nvidia-smi saw its processes on")
    for name in sorted(started.values()):
        m = re.search(r":gpu(\d+)$", name)
        own = int(m.group(1)) if m else None
        gpus = sorted(seen.get(name, set()), key=str)
        mark = "" if gpus == [own] else ("  (not seen)" if not gpus else "  <-- NOT ONLY ITS OWN")
        if gpus and gpus != [own]:
            ok = False
        print(f"{name:24s} {str(own):>7s}  {' '.join(map(str, gpus)) or '-'}{mark}")
    if unmapped:
        print(f"processes on a GPU not traced to a worker (another namespace, or not ours): "
              f"{' '.join(f'{p}@{g}' for p, g in sorted(unmapped, key=str)[:10])}")
    print("each worker on its own GPU: " + ("yes" if ok and seen else "NO" if not ok else "no process seen"))
    return 0 if ok and seen else 1


def table(tsv):
    """TSV rows: workers, evaluations, span_s, per_min, status."""
    rows = []
    for line in open(tsv):
        parts = line.rstrip("\n").split("\t")
        if len(parts) >= 5 and parts[0].isdigit():
            rows.append((int(parts[0]), int(parts[1]), float(parts[2]), float(parts[3]), parts[4]))
    rows.sort()
    base = next((r[3] for r in rows if r[0] == 1 and r[3] > 0), None)
    print(f"{'workers':>7s} {'evaluations':>11s} {'seconds':>8s} {'eval/min':>9s} {'speedup':>8s}  status")
    for k, n, span, per_min, status in rows:
        speedup = f"{per_min / base:.2f}x" if base else "-"
        print(f"{k:7d} {n:11d} {span:8.1f} {per_min:9.1f} {speedup:>8s}  {status}")
    return 0


def main(argv):
    commands = {"throughput": (throughput, 1, 1), "once": (once, 2, 3), "isolation": (isolation, 1, 1),
                "gpu-map": (gpu_map, 2, 2), "table": (table, 1, 1)}
    if len(argv) < 2 or argv[1] not in commands:
        sys.exit(__doc__)
    fn, lo, hi = commands[argv[1]]
    if not lo <= len(argv) - 2 <= hi:
        sys.exit(__doc__)
    return fn(*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))

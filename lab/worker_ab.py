#!/usr/bin/env python3
"""Two worker builds, the same genomes: error figures compared bit for bit, times side by side.

  lab/worker_ab.py OLD_BUNDLE NEW_BUNDLE DISPATCH_JSON [DISPATCH_JSON ...] [--rounds N] [--sanitize-first]

Each bundle is a deploy/bundle.sh folder (its bin/evo-worker runs `eval --json`). The cases are the
genomes of the dispatch tables (`evoctl export --table` JSON), each with every shape it serves in that
table, evaluated once per round by each build, the builds' order alternating. The inputs are drawn from
fixed seeds, so two builds that draw, launch, reference and compare alike report identical error
figures; the times are the gate's fitness medians, comparable only within this one call.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def cases_from(paths):
    cases = {}
    for path in paths:
        with open(path) as f:
            table = json.load(f)
        for s in table["shapes"]:
            genome = s["genome"]
            seed, _, genes = genome.partition(":")
            text = s["shape"] + (":causal" if s.get("causal") else "") + (":" + s["dtype"] if s.get("dtype", "fp16") != "fp16" else "")
            cases.setdefault((seed, genes), []).append(text)
    return [(seed, genes, shapes) for (seed, genes), shapes in cases.items()]


def shape_results(evaluation):
    out = []
    for r in evaluation.get("shapes", []):
        get = lambda *names: next((r[n] for n in names if n in r), 0.0)
        out.append((get("rel_l2_error", "relL2Error"), get("max_abs_error", "maxAbsError"),
                    get("median_us", "medianUs")))
    return out


def evaluate(bundle, seed, genes, shapes, cache, sanitize):
    cmd = [os.path.join(bundle, "bin", "evo-worker"), "eval", "--seed", seed, "--genome", genes, "--json",
           "--cache-dir", cache]
    for s in shapes:
        cmd += ["--shape", s]
    if sanitize:
        cmd.append("--sanitize")
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        ev = json.loads(p.stdout)
    except json.JSONDecodeError:
        sys.exit(f"{bundle}: exit {p.returncode}, not JSON: {p.stdout[-400:]} {p.stderr[-800:]}")
    return ev


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sanitize-first", action="store_true", help="also run the sanitizer gate on the first case")
    a = ap.parse_args()
    cases = cases_from(a.tables)
    caches = {b: tempfile.mkdtemp(prefix="ab-cache-") for b in (a.old, a.new)}
    mismatches = 0
    print(f"{'genome':<58} {'shape':<22} {'rel_old':>9} {'rel_new':>9} {'old_us':>8} {'new_us':>8} {'new/old':>7} same")
    for i, (seed, genes, shapes) in enumerate(cases):
        times = {a.old: [], a.new: []}
        figures = {}
        statuses = {}
        for r in range(a.rounds):
            order = (a.old, a.new) if r % 2 == 0 else (a.new, a.old)
            for b in order:
                ev = evaluate(b, seed, genes, shapes, caches[b], a.sanitize_first and i == 0 and r == 0)
                statuses[b] = ev.get("status", "OK")
                res = shape_results(ev)
                figures.setdefault(b, [x[:2] for x in res])
                times[b].append([x[2] for x in res])
        short = ",".join(g.split("=")[1] for g in genes.split(","))
        for j, s in enumerate(shapes):
            fo = figures[a.old][j] if j < len(figures[a.old]) else (None, None)
            fn = figures[a.new][j] if j < len(figures[a.new]) else (None, None)
            to = statistics.median(t[j] for t in times[a.old] if j < len(t)) if figures[a.old] else 0
            tn = statistics.median(t[j] for t in times[a.new] if j < len(t)) if figures[a.new] else 0
            same = fo == fn and statuses[a.old] == statuses[a.new]
            mismatches += not same
            print(f"{short:<58} {s:<22} {fo[0] or 0:9.2e} {fn[0] or 0:9.2e} {to:8.2f} {tn:8.2f} "
                  f"{(tn / to if to else 0):7.3f} {'yes' if same else 'NO ' + statuses[a.old] + '/' + statuses[a.new]}")
    print(f"cases {len(cases)}, rounds {a.rounds}, figure mismatches {mismatches}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())

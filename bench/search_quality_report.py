#!/usr/bin/env python3
"""The figures of bench/search_quality.sh, from the databases it leaves. Standard library only.

  search_quality_report.py [--label MODEL] OUT_DIR
  search_quality_report.py --best RUN_DIR     its run's best confirmed µs (nothing if none)
  search_quality_report.py --target US        the time within 1 % of US that a run may stop at
  search_quality_report.py --ended RUN_DIR    exit 0 when its run has ended (DONE, CANCELLED or
                                              FAILED), 1 when it has not or there is none

OUT_DIR holds one folder per run, SHAPE-STRATEGY-SEED, each with the evo.db of its
bench/shape_suite.sh invocation, and may hold a SHAPE-reference folder: a run of the genomes known
best (search_quality.sh's EVO_REFERENCE). A run's best is its best confirmed elite (a time two
measurements agreed on); the best known per shape is EVO_BEST_KNOWN's ("BxHxSxD=US ..."), else the
reference run's best, else the best of every run of that shape here. For each run: its best, and
the seconds from its first lease and the evaluations (confirmations included) until an elite within
1 % of the best known was confirmed, and whether it stopped there (its target); a run faster than
the best known by more than 1 % says so. Then, per shape and strategy, the medians over its runs
and how many got there. Exits 1 when a folder has no database or no run.
"""
import argparse
import os
import re
import sqlite3
import statistics
import sys

WITHIN = 1.01


def run_figures(db_path):
    """(evaluations, [(ms from the first lease, confirmed µs, evaluations by then)] in time order,
    whether the run stopped at its target)."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    stop = "stop_reason" if "stop_reason" in columns else "''"
    run = db.execute(f"SELECT id, started_ms, {stop} FROM runs ORDER BY created_ms LIMIT 1").fetchone()
    if run is None:
        return None
    run_id, started, stop_reason = run
    times = [row[0] for row in db.execute(
        "SELECT e.created_ms FROM evaluations e JOIN candidates c ON c.id = e.candidate_id WHERE c.run_id = ? "
        "ORDER BY e.created_ms", (run_id,))]
    elites = db.execute(
        "SELECT e.created_ms, c.fitness_us FROM candidates c JOIN evaluations e ON e.id = c.final_evaluation_id "
        "WHERE c.run_id = ? AND c.state = 'done' AND c.elite_eligible = 1 AND c.fitness_us IS NOT NULL "
        "ORDER BY e.created_ms", (run_id,)).fetchall()
    out = [(at - started, us, sum(1 for t in times if t <= at)) for at, us in elites]
    return len(times), out, stop_reason == "target_reached"


ENDED_STATES = (3, 4, 5)  # evo.proto's RunState: DONE, CANCELLED, FAILED


def has_ended(run_dir):
    """Whether run_dir's evo.db holds a run that has ended (a run cut off mid-way has not)."""
    db_path = os.path.join(run_dir, "evo.db")
    if not os.path.isfile(db_path):
        return False
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        row = db.execute("SELECT state FROM runs ORDER BY created_ms LIMIT 1").fetchone()
    except sqlite3.Error:
        return False
    return row is not None and row[0] in ENDED_STATES


def mark_of(run_dir):
    """The best known time search_quality.sh judged the run by (its GPU's reference run's best, or
    EVO_BEST_KNOWN's), as it wrote it beside the run; None when it wrote none."""
    try:
        with open(os.path.join(run_dir, "mark_us")) as f:
            return float(f.read())
    except (OSError, ValueError):
        return None


def best_of(run_dir):
    """The best confirmed µs of the run in run_dir's evo.db; None when it has none."""
    db = os.path.join(run_dir, "evo.db")
    figures = run_figures(db) if os.path.isfile(db) else None
    return min((us for _, us, _ in figures[1]), default=None) if figures else None


def parse_best_known(text):
    best = {}
    for item in text.split():
        m = re.fullmatch(r"([0-9x]+)=([0-9.]+)", item)
        if not m:
            sys.exit(f"search_quality_report: EVO_BEST_KNOWN: '{item}' is not BxHxSxD=US")
        best[m.group(1)] = float(m.group(2))
    return best


def shape_mark(out_dir, shape, runs, best_known):
    """(µs, where it came from) for the shape's runs: EVO_BEST_KNOWN's, else the marks written
    beside its runs (each its GPU's reference run), else its reference run's best, else the best
    of its runs; (None, ...) when there is none."""
    if best_known.get(shape):
        return best_known[shape], "given"
    marks = [mark for k, (_, _, _, mark) in runs.items() if k[0] == shape and mark]
    if marks and min(marks) == max(marks):
        return marks[0], "reference run"
    if marks:
        return None, f"each run's GPU's reference run, {min(marks):.3f}-{max(marks):.3f} us"
    known = best_of(os.path.join(out_dir, f"{shape}-reference"))
    if known:
        return known, "reference run"
    return min((us for k, (_, elites, _, _) in runs.items() if k[0] == shape for _, us, _ in elites),
               default=None), "best of these runs"


def report_shape(label, shape, runs, shape_known, summary):
    """The shape's lines: its best known, then each run's best and when it came within 1 % of its
    mark (the run's own where it has one); each run's hit into summary."""
    known, source = shape_known
    if known:
        print(f"{label}{shape}: best known {known:.3f} us ({source})")
    elif source.startswith("each run"):
        print(f"{label}{shape}: best known per GPU ({source})")
    else:
        print(f"{label}{shape}: no confirmed elite")
    for (_, strategy, seed), (evaluations, elites, stopped, mark) in sorted(runs.items()):
        run_known = known or mark
        best = min((us for _, us, _ in elites), default=None)
        hit = next(((ms, n) for ms, us, n in elites if run_known and us <= run_known * WITHIN), None)
        reached = f"{hit[0] / 1000:.1f} s {hit[1]} evals" if hit else "not reached"
        if stopped:
            reached += ", stopped at its target"
        if best and run_known and best * WITHIN < run_known:
            reached += f", {100 * (1 - best / run_known):.1f} % faster than the best known"
        best_text = f"{best:.3f}" if best else "-"
        mark_text = f" (mark {mark:.3f})" if mark and not known else ""
        print(f"{label}{shape} {strategy} {seed}: {best_text} us {evaluations} evals{mark_text} | {reached}")
        summary.setdefault((shape, strategy), []).append(hit)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="")
    parser.add_argument("--best", metavar="RUN_DIR")
    parser.add_argument("--target", metavar="US", type=float)
    parser.add_argument("--ended", metavar="RUN_DIR")
    parser.add_argument("out_dir", nargs="?")
    args = parser.parse_args(argv[1:])
    if args.best:
        best = best_of(args.best)
        if best:
            print(f"{best:.4f}")
        return 0
    if args.target:
        print(f"{args.target * WITHIN:.4f}")
        return 0
    if args.ended:
        return 0 if has_ended(args.ended) else 1
    if not args.out_dir:
        parser.error("OUT_DIR is needed")
    runs = {}
    for name in sorted(os.listdir(args.out_dir)):
        m = re.fullmatch(r"([0-9x]+)-([a-z]+)-([0-9]+)", name)
        if not m or not os.path.isdir(os.path.join(args.out_dir, name)):
            continue
        db = os.path.join(args.out_dir, name, "evo.db")
        figures = run_figures(db) if os.path.isfile(db) else None
        if figures is None:
            print(f"!! {name}: no database or no run")
            return 1
        runs[(m.group(1), m.group(2), int(m.group(3)))] = (*figures, mark_of(os.path.join(args.out_dir, name)))
    if not runs:
        print(f"!! no run folder in {args.out_dir}")
        return 1
    best_known = parse_best_known(os.environ.get("EVO_BEST_KNOWN", ""))
    label = f"{args.label} " if args.label else ""
    summary = {}
    print(f"{label}shape strategy seed: best_us evaluations | to within 1% of best known: seconds evaluations")
    for shape in sorted({k[0] for k in runs}):
        report_shape(label, shape, {k: v for k, v in runs.items() if k[0] == shape},
                     shape_mark(args.out_dir, shape, runs, best_known), summary)
    print(f"{label}median over seeds (runs that got there / runs):")
    for (shape, strategy), hits in sorted(summary.items()):
        got = [h for h in hits if h]
        seconds = f"{statistics.median(h[0] for h in got) / 1000:.1f} s" if got else "-"
        evaluations = f"{statistics.median(h[1] for h in got):.0f} evals" if got else "-"
        print(f"{label}{shape} {strategy}: {seconds} {evaluations} ({len(got)}/{len(hits)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

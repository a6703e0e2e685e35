#!/usr/bin/env python3
"""search_quality_report.py on made-up databases: the seconds and evaluations to within 1 % of the
best known come from the first confirmed elite that close, a run that never gets there says so,
and EVO_BEST_KNOWN, else the marks beside the runs (their GPUs' reference runs), else a reference
run, overrides the runs' own best. No GPU, no evod."""
import contextlib
import io
import os
import sqlite3
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import search_quality_report  # noqa: E402


def make_run(folder, elites, evaluations_ms, stop_reason="", state=3):
    """A database with one run started at 1000 ms: `elites` (ms, µs) confirmed at those times, and
    evaluations at `evaluations_ms`; the run in `state` (3: DONE), ended for `stop_reason`."""
    os.makedirs(folder)
    db = sqlite3.connect(os.path.join(folder, "evo.db"))
    db.executescript("""
        CREATE TABLE runs (id TEXT, created_ms INTEGER, started_ms INTEGER, stop_reason TEXT, state INTEGER);
        CREATE TABLE candidates (id TEXT, run_id TEXT, state TEXT, elite_eligible INTEGER, fitness_us REAL,
                                 final_evaluation_id INTEGER);
        CREATE TABLE evaluations (id INTEGER PRIMARY KEY, candidate_id TEXT, created_ms INTEGER);
    """)
    db.execute("INSERT INTO runs VALUES ('run-0001', 500, 1000, ?, ?)", (stop_reason, state))
    for i, ms in enumerate(evaluations_ms):
        db.execute("INSERT INTO evaluations VALUES (?, ?, ?)", (i + 1, f"c{i}", ms))
        db.execute("INSERT INTO candidates VALUES (?, 'run-0001', 'done', 0, NULL, ?)", (f"c{i}", i + 1))
    for ms, us in elites:
        eid = evaluations_ms.index(ms) + 1
        db.execute("UPDATE candidates SET elite_eligible = 1, fitness_us = ? WHERE final_evaluation_id = ?", (us, eid))
    db.commit()
    db.close()


def report(out_dir, env=""):
    os.environ["EVO_BEST_KNOWN"] = env
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = search_quality_report.main(["search_quality_report.py", out_dir])
    return rc, out.getvalue()


class SearchQualityReport(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        # evolve: 10.0 at 21 s (the 3rd evaluation), 8.05 at 61 s (the 6th); surrogate: 8.0 at 31 s.
        make_run(os.path.join(d, "1x8x512x64-evolve-1"), [(22000, 10.0), (62000, 8.05)],
                 [2000, 12000, 22000, 32000, 42000, 62000])
        make_run(os.path.join(d, "1x8x512x64-surrogate-1"), [(32000, 8.0)], [2000, 12000, 32000])
        make_run(os.path.join(d, "1x8x512x64-random-1"), [(12000, 9.0)], [2000, 12000])

    def tearDown(self):
        self.tmp.cleanup()

    def test_each_run_is_timed_to_within_one_percent_of_the_best_of_the_runs(self):
        rc, text = report(self.tmp.name)
        self.assertEqual(rc, 0)
        self.assertIn("1x8x512x64: best known 8.000 us", text)
        self.assertIn("1x8x512x64 evolve 1: 8.050 us 6 evals | 61.0 s 6 evals", text)
        self.assertIn("1x8x512x64 surrogate 1: 8.000 us 3 evals | 31.0 s 3 evals", text)
        self.assertIn("1x8x512x64 random 1: 9.000 us 2 evals | not reached", text)
        self.assertIn("1x8x512x64 random: - - (0/1)", text)

    def test_a_best_known_from_elsewhere_is_the_mark(self):
        rc, text = report(self.tmp.name, "1x8x512x64=9.95")
        self.assertEqual(rc, 0)
        self.assertIn("1x8x512x64 evolve 1: 8.050 us 6 evals | 21.0 s 3 evals", text)
        self.assertIn("1x8x512x64 random 1: 9.000 us 2 evals | 11.0 s 2 evals", text)

    def test_a_reference_run_is_the_mark_and_a_run_faster_by_more_than_one_percent_says_so(self):
        make_run(os.path.join(self.tmp.name, "1x8x512x64-reference"), [(12000, 8.9), (22000, 8.2)],
                 [2000, 12000, 22000])
        rc, text = report(self.tmp.name)
        self.assertEqual(rc, 0)
        self.assertIn("1x8x512x64: best known 8.200 us (reference run)", text)
        self.assertIn("1x8x512x64 evolve 1: 8.050 us 6 evals | 61.0 s 6 evals, 1.8 % faster than the best known", text)
        self.assertIn("1x8x512x64 random 1: 9.000 us 2 evals | not reached\n", text)
        self.assertNotIn("reference", text.replace("(reference run)", ""), "the reference is no strategy's run")

    def test_each_run_is_judged_against_the_mark_of_its_own_gpu(self):
        d = self.tmp.name
        for name, mark in (("1x8x512x64-evolve-1", 8.2), ("1x8x512x64-surrogate-1", 7.95),
                           ("1x8x512x64-random-1", 8.95)):
            with open(os.path.join(d, name, "mark_us"), "w") as f:
                f.write(f"{mark}\n")
        rc, text = report(d)
        self.assertEqual(rc, 0)
        self.assertIn("1x8x512x64: best known per GPU (each run's GPU's reference run, 7.950-8.950 us)", text)
        self.assertIn("1x8x512x64 evolve 1: 8.050 us 6 evals (mark 8.200) | 61.0 s 6 evals, 1.8 % faster", text)
        self.assertIn("1x8x512x64 surrogate 1: 8.000 us 3 evals (mark 7.950) | 31.0 s 3 evals\n", text)
        self.assertIn("1x8x512x64 random 1: 9.000 us 2 evals (mark 8.950) | 11.0 s 2 evals\n", text)

    def test_a_run_that_stopped_at_its_target_says_so(self):
        make_run(os.path.join(self.tmp.name, "1x8x512x64-surrogate-2"), [(12000, 8.04)], [2000, 12000],
                 stop_reason="target_reached")
        rc, text = report(self.tmp.name)
        self.assertEqual(rc, 0)
        self.assertIn("1x8x512x64 surrogate 2: 8.040 us 2 evals | 11.0 s 2 evals, stopped at its target", text)

    def test_best_and_target_for_the_script(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = search_quality_report.main(["r", "--best", os.path.join(self.tmp.name, "1x8x512x64-evolve-1")])
            rc += search_quality_report.main(["r", "--best", os.path.join(self.tmp.name, "none")])
            rc += search_quality_report.main(["r", "--target", "8.2"])
        self.assertEqual(rc, 0)
        self.assertEqual(out.getvalue(), "8.0500\n8.2820\n")

    def test_a_run_has_ended_when_its_database_says_so(self):
        make_run(os.path.join(self.tmp.name, "1x8x512x64-evolve-2"), [], [2000], state=2)  # RUNNING: cut off
        ended = lambda name: search_quality_report.main(["r", "--ended", os.path.join(self.tmp.name, name)])
        self.assertEqual(ended("1x8x512x64-evolve-1"), 0)
        self.assertEqual(ended("1x8x512x64-evolve-2"), 1)
        self.assertEqual(ended("none"), 1)

    def test_a_folder_without_a_database_fails(self):
        os.makedirs(os.path.join(self.tmp.name, "1x8x512x64-evolve-2"))
        rc, text = report(self.tmp.name)
        self.assertEqual(rc, 1)
        self.assertIn("1x8x512x64-evolve-2: no database or no run", text)


if __name__ == "__main__":
    unittest.main()

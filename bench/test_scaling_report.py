#!/usr/bin/env python3
"""scaling_report.py on made-up inputs: the checks that bench/scaling.sh leans on must fail when
what they check does not hold (a candidate counted twice, a worker's process on another GPU, a
busy median outside the noise). No GPU, no evod."""
import contextlib
import io
import json
import os
import sqlite3
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling_report  # noqa: E402


def run(fn, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = fn(*args)
    return rc, out.getvalue()


class Database:
    """The columns scaling_report reads, as evod's store names them."""

    def __init__(self, path):
        self.db = sqlite3.connect(path)
        self.db.executescript("""
            CREATE TABLE runs (id TEXT, generations INTEGER, population INTEGER, created_ms INTEGER);
            CREATE TABLE workers (id TEXT, name TEXT);
            CREATE TABLE candidates (id TEXT, run_id TEXT, state TEXT, result_source TEXT);
            CREATE TABLE leases (id TEXT, candidate_id TEXT, worker_id TEXT, outcome TEXT);
            CREATE TABLE evaluations (candidate_id TEXT, is_confirmation INTEGER, created_ms INTEGER);
        """)
        self.db.execute("INSERT INTO runs VALUES ('run-0001', 1, 3, 1000)")
        self.db.executemany("INSERT INTO workers VALUES (?, ?)", [("w-a", "h:gpu0"), ("w-b", "h:gpu1")])
        for i, t in enumerate((31000, 61000, 91000)):
            c = f"run-0001-c{i}"
            self.db.execute("INSERT INTO candidates VALUES (?, 'run-0001', 'done', 'measured')", (c,))
            self.db.execute("INSERT INTO evaluations VALUES (?, 0, ?)", (c, t))
            self.db.execute("INSERT INTO leases VALUES (?, ?, 'w-a', 'reported')", (f"l{i}", c))
        # c1 was first leased by the worker that was killed.
        self.db.execute("INSERT INTO leases VALUES ('l9', 'run-0001-c1', 'w-b', 'expired')")
        self.db.commit()


class ScalingReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "evo.db")
        self.db = Database(self.path)

    def tearDown(self):
        self.db.db.close()
        self.dir.cleanup()

    def test_throughput_counts_evaluations_from_submit_to_last_report(self):
        rc, out = run(scaling_report.throughput, self.path)
        self.assertEqual(rc, 0)
        self.assertIn("evaluations=3 candidates=3 span_s=90.0 per_min=2.0", out)

    def test_throughput_gives_the_gpu_gates_share_of_the_span_where_runs_count_it(self):
        self.db.db.execute("ALTER TABLE runs ADD COLUMN gpu_ms REAL NOT NULL DEFAULT 0")
        self.db.db.execute("UPDATE runs SET gpu_ms = 45000")
        self.db.db.commit()
        rc, out = run(scaling_report.throughput, self.path)
        self.assertEqual(rc, 0)
        self.assertIn("per_min=2.0 gpu_share=0.50", out)

    def test_once_holds_and_names_the_killed_workers_expired_lease(self):
        rc, out = run(scaling_report.once, self.path, "run-0001", "h:gpu1")
        self.assertEqual(rc, 0, out)
        self.assertIn("counted_twice=0 missing=0 leases_expired=1 of_the_killed_worker=1", out)

    def test_once_fails_on_a_candidate_counted_twice(self):
        self.db.db.execute("INSERT INTO evaluations VALUES ('run-0001-c1', 0, 95000)")
        self.db.db.commit()
        rc, out = run(scaling_report.once, self.path, "run-0001")
        self.assertEqual(rc, 1)
        self.assertIn("counted twice: run-0001-c1", out)

    def test_once_fails_on_a_candidate_lost(self):
        self.db.db.execute("UPDATE candidates SET state = 'leased' WHERE id = 'run-0001-c2'")
        self.db.db.execute("DELETE FROM evaluations WHERE candidate_id = 'run-0001-c2'")
        self.db.db.commit()
        rc, out = run(scaling_report.once, self.path, "run-0001")
        self.assertEqual(rc, 1)
        self.assertIn("not done: run-0001-c2", out)

    def write(self, name, text):
        with open(os.path.join(self.dir.name, name), "w") as f:
            f.write(text)

    def test_gpu_map_follows_evaluation_children_to_their_worker(self):
        self.write("workers.log", "x event=worker_started name=h:gpu0 pid=100\n"
                                  "x event=worker_started name=h:gpu1 pid=200\n")
        smi = os.path.join(self.dir.name, "smi")
        os.mkdir(smi)
        self.write("smi/gpus.csv", "0, GPU-aaa\n1, GPU-bbb\n")
        self.write("smi/apps-0.csv", "101, GPU-aaa, 500 MiB\n201, GPU-bbb, 500 MiB\n")
        self.write("smi/ppids-0.txt", "101 100\n201 200\n100 1\n200 1\n")
        rc, out = run(scaling_report.gpu_map, os.path.join(self.dir.name, "workers.log"), smi)
        self.assertEqual(rc, 0, out)
        self.assertIn("each worker on its own GPU: yes", out)
        # A later sample finds GPU 1's worker's child on GPU 0.
        self.write("smi/apps-1.csv", "202, GPU-aaa, 500 MiB\n")
        self.write("smi/ppids-1.txt", "202 200\n")
        rc, out = run(scaling_report.gpu_map, os.path.join(self.dir.name, "workers.log"), smi)
        self.assertEqual(rc, 1)
        self.assertIn("NOT ONLY ITS OWN", out)

    def test_isolation_compares_busy_with_the_alone_spread(self):
        def phase(name, times):
            for i, t in enumerate(times):
                self.write(f"{name}-{i}.json", json.dumps({"status": "OK", "fitnessUs": t}))
        phase("alone1", [10.0, 10.2])
        phase("alone2", [9.9, 10.1])
        phase("busy", [10.05, 10.1])
        rc, out = run(scaling_report.isolation, self.dir.name)
        self.assertEqual(rc, 0)
        self.assertIn("within the noise", out)
        phase("busy", [11.0, 11.2])
        rc, out = run(scaling_report.isolation, self.dir.name)
        self.assertIn("OUTSIDE the noise", out)

    def test_table_gives_speedups_over_one_worker(self):
        self.write("s.tsv", "2\t100\t60.0\t100.0\tcomplete\n1\t100\t120.0\t50.0\tcomplete\n")
        rc, out = run(scaling_report.table, os.path.join(self.dir.name, "s.tsv"))
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"\n\s+1 .* 1\.00x  complete\n\s+2 .* 2\.00x  complete")


if __name__ == "__main__":
    unittest.main()

"""Tests of the lab's tools that run without torch or a GPU: python3 lab/test_lab_tools.py"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ncu_source_summary  # noqa: E402
import worker_ab  # noqa: E402


class NcuSourceSummary(unittest.TestCase):
    HEADER = ['"Address"', '"Source"', '"Warp Stall Sampling (All Samples)"', '"Instructions Executed"',
              '"stall_wait"', '"stall_barrier"', '"stall_wait (Not Issued)"']

    def write_csv(self, rows):
        path = os.path.join(tempfile.mkdtemp(), "source.csv")
        with open(path, "w") as f:
            f.write('"Kernel Name","void k(int)",\n')
            f.write(",".join(self.HEADER) + "\n")
            for r in rows:
                f.write(",".join(f'"{v}"' for v in r) + "\n")
        return path

    def test_regions_opcodes_and_samples_no_column_names(self):
        # Four warps: a prologue run once, a two-instruction loop run three times, the copy warp's
        # instruction once in four, and an HGMMA whose samples have no reason column.
        path = self.write_csv([
            ("0x1000", "LDC R1, c[0x0][0x28]", 10, 4, 2, 8, 0),
            ("0x1010", "@!P0  BRA 0x2000", 40, 12, 0, 40, 0),
            ("0x1020", "HGMMA.64x64x16.F32 R24, gdesc[UR4], RZ", 30, 12, 5, 0, 0),
            ("0x1030", "EXIT", 20, 1, 20, 0, 0),
        ])
        instrs = ncu_source_summary.read_source(path)
        self.assertEqual([i["samples"] for i in instrs], [10, 40, 30, 20])
        self.assertEqual(ncu_source_summary.opcode(instrs[1]["text"]), "BRA")
        text = ncu_source_summary.summarize(instrs, top=2)
        self.assertIn("100 samples, 4 warps", text)
        self.assertIn("(no column)              25", text)  # the HGMMA's 30 less its 5 "wait"
        self.assertIn("the most executed region (3.00 x per warp)", text)
        self.assertRegex(text, r"BRA +1 instructions +40 samples +40.0%")
        self.assertRegex(text, r"00010  3.00    40 40.0%  @!P0  BRA")
        self.assertNotIn("EXIT  ", text.split("by opcode:")[1].split("the 2 instructions")[0])

    def test_a_file_that_is_not_the_source_page_is_one_line_and_exit_2(self):
        path = os.path.join(tempfile.mkdtemp(), "details.txt")
        with open(path, "w") as f:
            f.write("Section: Warp State Statistics\n")
        err = io.StringIO()
        with redirect_stderr(err):
            self.assertEqual(ncu_source_summary.main([path]), 2)
        self.assertEqual(len(err.getvalue().strip().splitlines()), 1)
        self.assertIn("no 'Warp Stall Sampling (All Samples)' column", err.getvalue())
        with redirect_stderr(io.StringIO()):
            self.assertEqual(ncu_source_summary.main([path + ".missing"]), 2)


class LaunchWarmthProbe(unittest.TestCase):
    def test_the_warmth_probe_refuses_a_missing_or_bad_table_in_one_line(self):
        probe = os.path.join(HERE, "launch_warmth_probe.py")
        proc = subprocess.run([sys.executable, probe], capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr.strip().splitlines(),
                         ["error: --dispatch JSON is required (the table whose kernels are probed)"])
        missing = os.path.join(HERE, "no-such-dispatch.json")
        proc = subprocess.run([sys.executable, probe, "--dispatch", missing], capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr.strip().splitlines(), [f"error: dispatch file not found: {missing}"])


class WorkerAb(unittest.TestCase):
    def test_cases_group_a_tables_shapes_by_genome_with_suffixes(self):
        path = os.path.join(tempfile.mkdtemp(), "t.dispatch.json")
        g = "fa_s512_v3:BLOCK_M=64,SCHEDULE=tma"
        with open(path, "w") as f:
            f.write('{"shapes": [{"genome": "%s", "shape": "1x8x512x64", "causal": false, "dtype": "fp16"},'
                    ' {"genome": "%s", "shape": "1x8x512x64", "causal": true, "dtype": "bf16"},'
                    ' {"genome": "fa_s512_v3:BLOCK_M=16", "shape": "2x8x512x64", "causal": false}]}' % (g, g))
        self.assertEqual(worker_ab.cases_from([path]), [
            ("fa_s512_v3", "BLOCK_M=64,SCHEDULE=tma", ["1x8x512x64", "1x8x512x64:causal:bf16"]),
            ("fa_s512_v3", "BLOCK_M=16", ["2x8x512x64"]),
        ])

    def test_shape_results_read_either_json_spelling(self):
        ev = {"shapes": [{"relL2Error": 2e-4, "maxAbsError": 1e-3, "medianUs": 4.5},
                         {"rel_l2_error": 3e-4, "max_abs_error": 2e-3, "median_us": 5.5}]}
        self.assertEqual(worker_ab.shape_results(ev), [(2e-4, 1e-3, 4.5), (3e-4, 2e-3, 5.5)])


if __name__ == "__main__":
    unittest.main()

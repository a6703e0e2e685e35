"""Tests of everything in bench/ that runs without torch: python3 bench/test_bench_tables.py"""
from __future__ import annotations

import ctypes
import importlib.util
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
import unittest
from contextlib import redirect_stderr
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_args  # noqa: E402
import bench_build  # noqa: E402
import bench_clocks  # noqa: E402
import bench_dispatch  # noqa: E402
import bench_fp8  # noqa: E402
import bench_report  # noqa: E402
import bench_rounds  # noqa: E402
import bench_shapes  # noqa: E402
import compare_sdpa  # noqa: E402
import launch_cover  # noqa: E402
import triton_fa_space  # noqa: E402
from evolved_lib import EvolvedError, EvolvedLib  # noqa: E402


class ShapeParsing(unittest.TestCase):
    def test_both_spellings(self):
        self.assertEqual(bench_shapes.parse_shape("1,8,512,64"), bench_shapes.Shape(1, 8, 512, 64))
        self.assertEqual(bench_shapes.parse_shape("2x16x4096x128").key, "2x16x4096x128")
        self.assertEqual(bench_shapes.parse_shape(" 2x16x4096x128 ").label, "2,16,4096,128")

    def test_rejects_malformed(self):
        for bad in ("1,8,512", "1,8,512,64,1", "a,8,512,64", "1,-8,512,64", "0,8,512,64", "1,8,512,96", ""):
            with self.assertRaises(bench_shapes.ShapeError, msg=bad):
                bench_shapes.parse_shape(bad)

    def test_grouped_heads_and_unequal_lengths(self):
        Shape = bench_shapes.Shape
        chunk = bench_shapes.parse_shape("1x32x512x4096x128:kv8")
        self.assertEqual(chunk, Shape(1, 32, 512, 128, heads_kv=8, seq_k=4096))
        self.assertEqual((chunk.seq_q, chunk.seq_k, chunk.heads_kv, chunk.group), (512, 4096, 8, 4))
        self.assertEqual(chunk.key, "1x32x512x4096x128:kv8")
        self.assertEqual(chunk.label, "1,32,512,4096,128:kv8")
        self.assertEqual(bench_shapes.parse_shape("1,32,512,4096,128:kv8"), chunk)   # commas, the same shape
        self.assertEqual(bench_shapes.parse_shape(" 1X32X512X4096X128:KV8 "), chunk)
        prefill = bench_shapes.parse_shape("1x32x2048x128:kv8")
        self.assertEqual((prefill.seq_k, prefill.key, prefill.label), (2048, "1x32x2048x128:kv8", "1,32,2048,128:kv8"))
        # Canonical: Sq and Sk apart only where they differ, :kvN only where N != H.
        self.assertEqual(bench_shapes.parse_shape("1x8x512x512x64").key, "1x8x512x64")
        self.assertEqual(bench_shapes.parse_shape("1x8x512x64:kv8").key, "1x8x512x64")
        self.assertEqual(bench_shapes.parse_shape("1x8x512x512x64:kv8"), bench_shapes.Shape(1, 8, 512, 64))
        self.assertEqual(bench_shapes.parse_shape("16x32x1x4096x128:kv8").key, "16x32x1x4096x128:kv8")
        self.assertFalse(bench_shapes.Shape(1, 8, 512, 64).is_gqa)
        self.assertEqual(hash(bench_shapes.Shape(1, 8, 512, 64)), hash(bench_shapes.Shape(1, 8, 512, 64, 8, 512)))

    def test_problem_text_takes_evos_suffixes_in_any_order(self):
        for text in ("1x32x512x4096x128:kv8:causal:bf16", "1x32x512x4096x128:bf16:causal:kv8"):
            self.assertEqual(bench_shapes.parse_problem(text),
                             (bench_shapes.Shape(1, 32, 512, 128, 8, 4096), True, "bf16"), text)
        self.assertEqual(bench_shapes.parse_problem("1x8x512x64"), (bench_shapes.Shape(1, 8, 512, 64), None, None))
        # --shapes leaves causality and dtype to --causal and --dtype.
        with self.assertRaisesRegex(bench_shapes.ShapeError, "--causal"):
            bench_shapes.parse_shape("1x32x2048x128:kv8:causal")
        with self.assertRaisesRegex(bench_shapes.ShapeError, "--dtype"):
            bench_shapes.parse_shape("1x32x2048x128:bf16")

    def test_e4m3_is_a_dtype_suffix_and_fp8_is_not(self):
        shape, causal, dtype = bench_shapes.parse_problem("2x16x4096x128:causal:e4m3")
        self.assertEqual((shape, causal, dtype), (bench_shapes.Shape(2, 16, 4096, 128), True, "e4m3"))
        self.assertEqual(bench_shapes.parse_problem("1x32x512x4096x128:e4m3:kv8")[2], "e4m3")
        self.assertEqual(bench_shapes.parse_problem("1x8x512x64:fp16")[2], "fp16")
        with self.assertRaisesRegex(bench_shapes.ShapeError, r"two dtypes \(':bf16', ':e4m3'\)"):
            bench_shapes.parse_problem("1x8x512x64:bf16:e4m3")
        with self.assertRaisesRegex(bench_shapes.ShapeError, "unknown suffix ':fp8' .*fp16, bf16 or e4m3"):
            bench_shapes.parse_problem("1x8x512x64:fp8")
        with self.assertRaisesRegex(bench_shapes.ShapeError, "--dtype"):
            bench_shapes.parse_shape("1x8x512x64:e4m3")
        self.assertEqual(bench_shapes.dtype_choices(), "fp16, bf16 or e4m3")

    def test_fp8_v_rows_are_padded_to_16_bytes(self):
        self.assertEqual([bench_shapes.fp8_pitch(n) for n in (1, 15, 16, 17, 777, 4096, 4097)],
                         [16, 16, 16, 32, 784, 4096, 4112])

    def test_rejects_bad_kv_heads_and_suffixes(self):
        cases = {"1x32x512x128:kv5": "do not divide", "1x8x512x64:kv16": "at most 8", "1x8x512x64:kv0": "positive",
                 "1x8x512x64:kv": "unknown suffix", "1x8x512x64:kvx": "unknown suffix",
                 "1x32x512x128:kv8:kv8": "given twice", "1x8x512x64:causal:causal": "given twice",
                 "1x8x512x64:fp8": "unknown suffix", "1x8x512x64:": "unknown suffix",
                 "1x8x512x512x512x64": "expected", "1x8x512x0x64": "positive", "1x8x512x4096x96:kv8": "head_dim"}
        for text, why in cases.items():
            with self.assertRaisesRegex(bench_shapes.ShapeError, why, msg=text):
                bench_shapes.parse_problem(text)

    def test_causal_with_more_queries_than_keys_is_refused(self):
        wide = bench_shapes.parse_shape("1,8,1024,512,64")    # non-causal: fine
        bench_shapes.check_causal(wide, False)
        with self.assertRaisesRegex(bench_shapes.ShapeError, "causal with seq_q 1024 > seq_k 512 is refused"):
            bench_shapes.check_causal(wide, True)
        with self.assertRaisesRegex(bench_shapes.ShapeError, "is refused"):
            bench_shapes.parse_problem("1x8x1024x512x64:causal")
        with self.assertRaisesRegex(bench_shapes.ShapeError, "is refused"):
            bench_shapes.attention_flops(wide, True)
        bench_shapes.check_causal(bench_shapes.parse_shape("1,8,512,1024,64"), True)   # fewer queries: bottom-right

    def test_causal(self):
        self.assertEqual(bench_shapes.parse_causal("both"), [False, True])
        self.assertEqual(bench_shapes.parse_causal("1"), [True])
        self.assertEqual(bench_shapes.parse_causal("0"), [False])
        with self.assertRaises(bench_shapes.ShapeError):
            bench_shapes.parse_causal("maybe")

    def test_packed_varlen_text_parses_and_prints_canonically(self):
        text = "17+250+600+1100+1500+2000+2500+3000x32x128:kv8:causal:bf16"
        shape, causal, dtype = bench_shapes.parse_problem(text)
        self.assertEqual((causal, dtype), (True, "bf16"))
        self.assertTrue(shape.is_varlen)
        self.assertFalse(bench_shapes.parse_shape("1x8x512x64").is_varlen)
        self.assertEqual(shape.key, "17+250+600+1100+1500+2000+2500+3000x32x128:kv8")
        self.assertEqual(shape.label, shape.key)
        self.assertEqual((shape.batch, shape.heads, shape.heads_kv, shape.head_dim, shape.group), (8, 32, 8, 128, 4))
        self.assertEqual(shape.seqlens_q, (17, 250, 600, 1100, 1500, 2000, 2500, 3000))
        self.assertEqual(shape.seqlens_k, shape.seqlens_q)
        self.assertEqual((shape.total_q, shape.total_k, shape.max_seq_q, shape.max_seq_k), (10967, 10967, 3000, 3000))
        self.assertEqual(shape.cu_seqlens_q, (0, 17, 267, 867, 1967, 3467, 5467, 7967, 10967))
        self.assertTrue(shape.equal_lengths)
        # Lq/Lk items: a chunk of 512 queries over 4096 keys beside a whole prompt.
        chunked = bench_shapes.parse_shape("512/4096+3000x32x128:kv8")
        self.assertEqual(chunked.seqs, ((512, 4096), (3000, 3000)))
        self.assertEqual((chunked.cu_seqlens_q, chunked.cu_seqlens_k), ((0, 512, 3512), (0, 4096, 7096)))
        self.assertEqual((chunked.max_seq_q, chunked.max_seq_k), (3000, 4096))
        self.assertFalse(chunked.equal_lengths)
        # Canonical text: L where Lq == Lk, :kvN only where N != H; it parses back to the same shape.
        for given, key in {"512/4096+3000x32x128:kv8": "512/4096+3000x32x128:kv8",
                           " 512/512+7X8X64:KV8 ": "512+7x8x64",
                           "3000/3000x32x128": "3000/3000x32x128",
                           "1/64x8x64:kv2": "1/64x8x64:kv2"}.items():
            parsed = bench_shapes.parse_shape(given)
            self.assertEqual(parsed.key, key, given)
            self.assertEqual(bench_shapes.parse_shape(parsed.key), parsed, given)
        # One sequence is a packed batch by its '/', and not the dense shape of batch 1.
        single = bench_shapes.parse_shape("3000/3000x32x128:kv8")
        self.assertEqual((single.is_varlen, single.batch), (True, 1))
        self.assertNotEqual(single, bench_shapes.parse_shape("1x32x3000x128:kv8"))
        self.assertEqual(bench_shapes.VarlenShape(((5, 5),), 8, 64), bench_shapes.VarlenShape(((5, 5),), 8, 64, 8))
        # The comma forms with four or five numbers and no x are the dense shapes they always were.
        self.assertEqual(bench_shapes.parse_shape("1,8,512,64"), bench_shapes.Shape(1, 8, 512, 64))

    def test_packed_varlen_text_rejects_malformed(self):
        cases = {"+x32x128": "sequence '' is not", "17++250x32x128": "sequence '' is not",
                 "3000x32x128": "expected",
                 "17+abcx32x128": "sequence 'abc'", "17+5/x32x128": "sequence '5/'", "17+5/6/7x32x128": "'5/6/7'",
                 "17+0x32x128": "positive", "17+5/0x32x128": "positive", "17+250x0x128": "positive",
                 "17+250x32x96": "head_dim 96", "17+250xhx128": "expected", "17+250x32x128:kv5": "do not divide",
                 "17+250x8x64:kv16": "at most 8", "17+250x32x128:kv8:kv8": "given twice",
                 "17+250x32x128:fp8": "unknown suffix"}
        for text, why in cases.items():
            with self.assertRaisesRegex(bench_shapes.ShapeError, why, msg=text):
                bench_shapes.parse_problem(text)
        # Causal is bottom-right per sequence: one with more queries than keys refuses the whole batch.
        wide = bench_shapes.parse_shape("17+3000/10x32x128:kv8")
        bench_shapes.check_causal(wide, False)
        with self.assertRaisesRegex(bench_shapes.ShapeError, "sequence 1's seq_q 3000 > seq_k 10 is refused"):
            bench_shapes.check_causal(wide, True)
        with self.assertRaisesRegex(bench_shapes.ShapeError, "is refused"):
            bench_shapes.parse_problem("17+3000/10x32x128:kv8:causal")
        bench_shapes.check_causal(bench_shapes.parse_shape("17+10/3000x32x128"), True)
        with self.assertRaisesRegex(bench_shapes.ShapeError, "--causal"):
            bench_shapes.parse_shape("17+250x32x128:causal")


class Floors(unittest.TestCase):
    shape = bench_shapes.Shape(1, 8, 512, 64)

    def test_issue_figures(self):
        # issue 5: 1,8,512,64 moves 2 MiB and does 0.54 GFLOP
        self.assertEqual(bench_shapes.attention_bytes(self.shape), 2 * 2 ** 20)
        self.assertEqual(bench_shapes.attention_flops(self.shape, False), 536870912.0)
        self.assertAlmostEqual(bench_shapes.attention_flops(self.shape, True), 536870912.0 * 513 / 1024)

    def test_bottom_right_causal_counts_each_visible_pair(self):
        # Sq 3 over Sk 5, bottom-right: row 0 sees keys 0..2, row 1 0..3, row 2 0..4: 3 + 4 + 5 = 12 of 15.
        chunk = bench_shapes.Shape(1, 1, 3, 64, seq_k=5)
        self.assertEqual(bench_shapes.visible_pairs(chunk, True), 12)
        self.assertEqual(bench_shapes.visible_pairs(chunk, False), 15)
        self.assertEqual(bench_shapes.attention_flops(chunk, True), 4.0 * 12 * 64)
        self.assertEqual(bench_shapes.attention_flops(chunk, False), 4.0 * 15 * 64)
        # Equal lengths, top-left: 1 + 2 + 3 + 4.
        self.assertEqual(bench_shapes.visible_pairs(bench_shapes.Shape(1, 1, 4, 64), True), 10)
        # Decode: the one row sees every key, causal or not; FLOPs count query heads, not KV heads.
        decode = bench_shapes.parse_shape("16x32x1x4096x128:kv8")
        self.assertEqual(bench_shapes.attention_flops(decode, True), bench_shapes.attention_flops(decode, False))
        self.assertEqual(bench_shapes.attention_flops(decode, False), 4.0 * 16 * 32 * 1 * 4096 * 128)
        # The 512-over-4096 chunk: 512 rows see all 3584 older keys plus 1..512 of their own.
        big = bench_shapes.parse_shape("1x32x512x4096x128:kv8")
        self.assertEqual(bench_shapes.visible_pairs(big, True), 512 * 3584 + 512 * 513 // 2)

    def test_bytes_count_kv_heads_once(self):
        decode = bench_shapes.parse_shape("1x32x1x4096x128:kv8")
        q_and_o = 2 * 32 * 1 * 128 * 2          # Q read and O written: 32 heads, one row, bf16
        k_and_v = 2 * 8 * 4096 * 128 * 2        # K and V read once: 8 heads of 4096 rows
        self.assertEqual(bench_shapes.attention_bytes(decode), q_and_o + k_and_v)
        f = bench_shapes.floors_us(decode, False, matmul_tflops=500.0, copy_gbps=4000.0)
        self.assertAlmostEqual(f["memory_us"], (q_and_o + k_and_v) / 4000e9 * 1e6)
        self.assertEqual(f["floor_us"], f["memory_us"])     # decode is judged against the memory floor
        self.assertEqual(bench_shapes.attention_bytes(bench_shapes.parse_shape("1x32x1x4096x128")),
                         q_and_o + 4 * k_and_v)

    def test_packed_batch_sums_its_sequences(self):
        # 3 queries over 5 keys (bottom-right: 3 + 4 + 5 seen) and 4 over 4 (1 + 2 + 3 + 4).
        small = bench_shapes.parse_shape("3/5+4x1x64")
        self.assertEqual(bench_shapes.visible_pairs(small, True), 12 + 10)
        self.assertEqual(bench_shapes.visible_pairs(small, False), 15 + 16)
        self.assertEqual(bench_shapes.attention_flops(small, True), 4.0 * 1 * 64 * 22)
        self.assertEqual(bench_shapes.attention_flops(small, False), 4.0 * 1 * 64 * 31)
        self.assertEqual(bench_shapes.attention_bytes(small), 2.0 * 64 * (2 * 1 * 7 + 2 * 1 * 9))
        # The packed prompts cost what the same prompts as dense batches of one cost, added up.
        packed = bench_shapes.parse_shape("17+250+600+1100+1500+2000+2500+3000x32x128:kv8")
        dense = [bench_shapes.Shape(1, 32, n, 128, heads_kv=8) for n in packed.seqlens_q]
        for causal in (False, True):
            self.assertEqual(bench_shapes.attention_flops(packed, causal),
                             sum(bench_shapes.attention_flops(d, causal) for d in dense))
        self.assertEqual(bench_shapes.attention_flops(packed, True),
                         4.0 * 32 * 128 * sum(n * (n + 1) // 2 for n in packed.seqlens_q))
        self.assertEqual(bench_shapes.attention_bytes(packed), sum(bench_shapes.attention_bytes(d) for d in dense))
        self.assertEqual(bench_shapes.attention_bytes(packed), 2.0 * 128 * (2 * 32 * 10967 + 2 * 8 * 10967))
        f = bench_shapes.floors_us(packed, True, matmul_tflops=500.0, copy_gbps=4000.0)
        self.assertAlmostEqual(f["compute_us"], bench_shapes.attention_flops(packed, True) / 500e12 * 1e6)
        self.assertEqual(f["floor_us"], max(f["compute_us"], f["memory_us"]))
        with self.assertRaisesRegex(bench_shapes.ShapeError, "is refused"):
            bench_shapes.attention_flops(bench_shapes.parse_shape("4/3x1x64"), True)

    def test_e4m3_moves_one_byte_inputs_and_a_bf16_output(self):
        # Q and K and V read at 1 byte an element, O written in bf16 at 2.
        self.assertEqual(bench_shapes.attention_bytes(self.shape, "e4m3"), 64 * (3 * 8 * 512 + 2 * 8 * 512))
        decode = bench_shapes.parse_shape("1x32x1x4096x128:kv8")
        self.assertEqual(bench_shapes.attention_bytes(decode, "e4m3"), 128 * (3 * 32 * 1 + 2 * 8 * 4096))
        self.assertEqual(bench_shapes.attention_bytes(decode, "bf16"), bench_shapes.attention_bytes(decode))
        f = bench_shapes.floors_us(self.shape, True, matmul_tflops=1400.0, copy_gbps=4000.0, dtype="e4m3")
        self.assertAlmostEqual(f["compute_us"], bench_shapes.attention_flops(self.shape, True) / 1400e12 * 1e6)
        self.assertAlmostEqual(f["memory_us"], bench_shapes.attention_bytes(self.shape, "e4m3") / 4000e9 * 1e6)

    def test_floor_is_the_larger_bound(self):
        f = bench_shapes.floors_us(self.shape, False, matmul_tflops=500.0, copy_gbps=4000.0)
        self.assertAlmostEqual(f["compute_us"], 536870912.0 / 500e12 * 1e6)
        self.assertAlmostEqual(f["memory_us"], 2 * 2 ** 20 / 4000e9 * 1e6)
        self.assertEqual(f["floor_us"], max(f["compute_us"], f["memory_us"]))
        self.assertTrue(math.isnan(bench_shapes.floors_us(self.shape, False, 0.0, 1.0)["compute_us"]))


class Dispatch(unittest.TestCase):
    def test_resolves_relative_paths_and_looks_up(self):
        doc = {"shapes": [{"shape": "1x8x512x64", "causal": False, "lib": "a.so", "genome": "g1"},
                          {"shape": "1,8,512,64", "causal": 1, "cu": "/abs/b.cu"}]}
        table = bench_dispatch.parse_dispatch(doc, "/base")
        hit = table.lookup(bench_shapes.Shape(1, 8, 512, 64), False)
        self.assertEqual((hit.path, hit.genome, hit.needs_build), ("/base/a.so", "g1", False))
        self.assertTrue(table.lookup(bench_shapes.Shape(1, 8, 512, 64), True).needs_build)
        self.assertIsNone(table.lookup(bench_shapes.Shape(2, 8, 512, 64), False))

    def test_keys_on_dtype_with_fp16_the_default(self):
        doc = {"shapes": [{"shape": "1x8x512x64", "lib": "a.so"},
                          {"shape": "1x8x512x64", "dtype": "bf16", "lib": "b.so"}]}
        table = bench_dispatch.parse_dispatch(doc, "/base")
        shape = bench_shapes.Shape(1, 8, 512, 64)
        self.assertEqual(table.lookup(shape, False).path, "/base/a.so")
        self.assertEqual(table.lookup(shape, False, "fp16").dtype, "fp16")
        self.assertEqual(table.lookup(shape, False, "bf16").path, "/base/b.so")
        self.assertIsNone(table.lookup(shape, True, "bf16"))

    def test_e4m3_entries_are_their_own_bucket(self):
        doc = {"shapes": [{"shape": "2x16x4096x128:causal:e4m3", "lib": "fp8.so"},
                          {"shape": "2x16x4096x128", "causal": True, "lib": "fp16.so"}]}
        table = bench_dispatch.parse_dispatch(doc, "/base")
        shape = bench_shapes.parse_shape("2x16x4096x128")
        fp8 = table.lookup(shape, True, "e4m3")
        self.assertEqual((fp8.path, fp8.causal, fp8.dtype), ("/base/fp8.so", True, "e4m3"))
        self.assertEqual(table.lookup(shape, True).path, "/base/fp16.so")
        self.assertIsNone(table.lookup(shape, False, "e4m3"))
        with self.assertRaisesRegex(bench_dispatch.DispatchError, "says e4m3, its 'dtype' field bf16"):
            bench_dispatch.parse_dispatch({"shapes": [{"shape": "1x8x512x64:e4m3", "dtype": "bf16", "lib": "a.so"}]},
                                          "/base")
        with self.assertRaisesRegex(bench_dispatch.DispatchError, "unknown dtype 'fp8': expected fp16, bf16 or e4m3"):
            bench_dispatch.parse_dispatch({"shapes": [{"shape": "1x8x512x64", "dtype": "fp8", "lib": "a.so"}]},
                                          "/base")

    def test_grouped_and_unequal_length_entries(self):
        doc = {"shapes": [{"shape": "1x32x512x4096x128:kv8", "causal": True, "dtype": "bf16", "lib": "chunk.so"},
                          {"shape": "16x32x1x4096x128:kv8", "causal": False, "dtype": "bf16", "lib": "decode.so"},
                          {"shape": "1x32x2048x128:kv8:causal:bf16", "lib": "prefill.so"},
                          {"shape": "1x8x512x64", "lib": "old.so"}]}
        table = bench_dispatch.parse_dispatch(doc, "/base")
        parse = bench_shapes.parse_shape
        self.assertEqual(table.lookup(parse("1,32,512,4096,128:kv8"), True, "bf16").path, "/base/chunk.so")
        self.assertIsNone(table.lookup(parse("1x32x512x4096x128"), True, "bf16"))   # 32 KV heads: another shape
        self.assertIsNone(table.lookup(parse("1x32x512x4096x128:kv8"), False, "bf16"))
        self.assertEqual(table.lookup(parse("16x32x1x4096x128:kv8"), False, "bf16").path, "/base/decode.so")
        prefill = table.lookup(parse("1x32x2048x128:kv8"), True, "bf16")       # suffixes stand for the fields
        self.assertEqual((prefill.path, prefill.causal, prefill.dtype), ("/base/prefill.so", True, "bf16"))
        # An entry written before grouped-query heads means heads_kv = heads, seq_k = seq.
        self.assertEqual(table.lookup(bench_shapes.Shape(1, 8, 512, 64, 8, 512), False).path, "/base/old.so")

    def test_packed_batch_entries(self):
        doc = {"shapes": [{"shape": "17+250+3000x32x128:kv8:causal:bf16", "lib": "packed.so"},
                          {"shape": "1x32x3000x128:kv8", "causal": True, "dtype": "bf16", "lib": "dense.so"}]}
        table = bench_dispatch.parse_dispatch(doc, "/base")
        packed = table.lookup(bench_shapes.parse_shape("17+250+3000x32x128:kv8"), True, "bf16")
        self.assertEqual((packed.path, packed.causal, packed.dtype), ("/base/packed.so", True, "bf16"))
        self.assertIsNone(table.lookup(bench_shapes.parse_shape("3000/3000x32x128:kv8"), True, "bf16"))
        self.assertEqual(table.lookup(bench_shapes.parse_shape("1x32x3000x128:kv8"), True, "bf16").path,
                         "/base/dense.so")
        with self.assertRaisesRegex(bench_dispatch.DispatchError, "is refused"):
            bench_dispatch.parse_dispatch({"shapes": [{"shape": "17+30/10x8x64", "causal": True, "lib": "a.so"}]},
                                          "/base")

    def test_rejects_disagreeing_or_refused_entries(self):
        cases = {
            "says causal": {"shape": "1x32x2048x128:kv8:causal", "causal": False, "lib": "a.so"},
            "says bf16": {"shape": "1x32x2048x128:kv8:bf16", "dtype": "fp16", "lib": "a.so"},
            "is refused": {"shape": "1x8x1024x512x64", "causal": True, "lib": "a.so"},
            "do not divide": {"shape": "1x32x2048x128:kv5", "lib": "a.so"},
            "listed twice": [{"shape": "1x32x2048x128:kv8", "lib": "a.so"},
                             {"shape": "1x32x2048x2048x128:kv8", "lib": "b.so"}],
        }
        for why, entries in cases.items():
            doc = {"shapes": entries if isinstance(entries, list) else [entries]}
            with self.assertRaisesRegex(bench_dispatch.DispatchError, why, msg=why):
                bench_dispatch.parse_dispatch(doc, "/base")

    def test_rejects_bad_entries(self):
        cases = {
            "dtype": {"shapes": [{"shape": "1x8x512x64", "lib": "a.so", "dtype": "fp8"}]},
            "no shapes": {"entries": []},
            "shape": {"shapes": [{"shape": "1x8x512", "lib": "a.so"}]},
            "lib": {"shapes": [{"shape": "1x8x512x64"}]},
            "causal": {"shapes": [{"shape": "1x8x512x64", "lib": "a.so", "causal": "yes"}]},
            "twice": {"shapes": [{"shape": "1x8x512x64", "lib": "a.so"}, {"shape": "1,8,512,64", "lib": "b.so"}]},
        }
        for what, doc in cases.items():
            with self.assertRaises(bench_dispatch.DispatchError, msg=what) as ctx:
                bench_dispatch.parse_dispatch(doc, "/base")
            self.assertIn("dispatch", str(ctx.exception))

    def test_load_errors_name_the_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "d.json")
            with open(path, "w") as f:
                f.write("{not json")
            with self.assertRaisesRegex(bench_dispatch.DispatchError, "not valid JSON"):
                bench_dispatch.load_dispatch(path)
            with open(path, "w") as f:
                json.dump({"shapes": [{"shape": "1x8x512x64", "lib": "k.so"}]}, f)
            entry = bench_dispatch.load_dispatch(path).entries()[0]
            self.assertEqual(entry.path, os.path.join(tmp, "k.so"))
        with self.assertRaisesRegex(bench_dispatch.DispatchError, "not found"):
            bench_dispatch.load_dispatch(os.path.join(HERE, "no-such-dispatch.json"))


class Arguments(unittest.TestCase):
    def parse_error(self, argv):
        with redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit) as ctx:
            bench_args.parse_args(argv)
        self.assertEqual(ctx.exception.code, 2)
        return err.getvalue()

    def test_defaults_are_the_issue_suite(self):
        args = bench_args.parse_args([])
        self.assertEqual([s.label for s in args.shape_list], list(bench_shapes.DEFAULT_SHAPES))
        self.assertEqual(args.causal_list, [False, True])
        self.assertEqual([(s.label, c) for s, c in args.problems],
                         [(label, [False, True]) for label in bench_shapes.DEFAULT_SHAPES])
        self.assertEqual(args.dtype, "fp16")
        self.assertIsNone(args.evolved)

    def test_llama3_8b_suite(self):
        args = bench_args.parse_args(["--suite", "llama3-8b"])
        self.assertEqual(args.dtype, "bf16")
        self.assertEqual([(shape.key, settings) for shape, settings in args.problems],
                         [("1x32x2048x128:kv8", [True]), ("4x32x4096x128:kv8", [True]),
                          ("17+250+600+1100+1500+2000+2500+3000x32x128:kv8", [True]),
                          ("1x32x512x4096x128:kv8", [True]), ("16x32x1x4096x128:kv8", [False]),
                          ("64x32x1x1024x128:kv8", [False]), ("1x32x1x32768x128:kv8", [False])])
        self.assertTrue(all((s.heads, s.heads_kv, s.head_dim) == (32, 8, 128) for s in args.shape_list))
        self.assertEqual(bench_args.parse_args(["--suite", "llama3-8b", "--dtype", "bf16"]).dtype, "bf16")
        self.assertIn("runs in bf16, not fp16", self.parse_error(["--suite", "llama3-8b", "--dtype", "fp16"]))
        self.assertIn("not both", self.parse_error(["--suite", "llama3-8b", "--shapes", "1,8,512,64"]))
        self.assertIn("not both", self.parse_error(["--suite", "llama3-8b", "--causal", "1"]))
        self.assertIn("unknown suite 'llama'", self.parse_error(["--suite", "llama"]))
        # The same workload by its path: the file `evoctl submit --workload` reads.
        path = str(bench_shapes.WORKLOADS_DIR / "llama3-8b.json")
        self.assertEqual(bench_args.parse_args(["--suite", path]).problems, args.problems)
        self.assertIn("cannot read it as a workload file", self.parse_error(["--suite", "/nonexistent/w.json"]))
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write('{"dtype": "bf16", "shapes": [{"shape": "1x8x512x64:fp16"}]}')
        try:
            self.assertIn("the bench runs one dtype (bf16)", self.parse_error(["--suite", f.name]))
        finally:
            os.unlink(f.name)

    def test_an_e4m3_workload_benches_its_fp16_twins_in_their_e4m3_rows(self):
        def problems_of(doc):
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                f.write(json.dumps(doc))
            try:
                return bench_shapes.read_workload(f.name)["problems"]
            finally:
                os.unlink(f.name)
        doc = {"dtype": "e4m3", "shapes": [{"shape": "2x16x4096x128"}, {"shape": "2x16x4096x128:causal"},
                                            {"shape": "2x16x4096x128:fp16"}, {"shape": "2x16x4096x128:causal:fp16"}]}
        self.assertEqual(problems_of(doc), (("2x16x4096x128", False), ("2x16x4096x128", True)))
        # A twin of no e4m3 shape, or another dtype beside e4m3, is refused.
        with self.assertRaisesRegex(bench_shapes.ShapeError, "twins no e4m3 shape"):
            problems_of({"dtype": "e4m3", "shapes": [{"shape": "2x16x4096x128"}, {"shape": "2x16x4096x128:causal:fp16"}]})
        with self.assertRaisesRegex(bench_shapes.ShapeError, "is bf16, the bench runs one dtype \\(e4m3\\), with fp16 twins"):
            problems_of({"dtype": "e4m3", "shapes": [{"shape": "1x8x512x64"}, {"shape": "1x8x512x64:bf16"}]})

    def test_llama3_8b_packed_suite(self):
        self.assertIn("llama3-8b-packed", bench_shapes.SUITES)
        args = bench_args.parse_args(["--suite", "llama3-8b-packed"])
        self.assertEqual(args.dtype, "bf16")
        self.assertEqual([(shape.key, settings) for shape, settings in args.problems],
                         [("17+250+600+1100+1500+2000+2500+3000x32x128:kv8", [True])])
        shape = args.shape_list[0]
        self.assertTrue(shape.is_varlen)
        self.assertEqual((shape.batch, shape.heads, shape.heads_kv, shape.head_dim), (8, 32, 8, 128))
        self.assertEqual((min(shape.seqlens_q), max(shape.seqlens_q)), (17, 3000))
        path = str(bench_shapes.WORKLOADS_DIR / "llama3-8b-packed.json")
        self.assertEqual(bench_args.parse_args(["--suite", path]).problems, args.problems)
        # The workload file follows llama3-8b.json's format.
        with open(path) as f:
            doc = json.load(f)
        self.assertEqual((doc["name"], doc["dtype"]), ("llama3-8b-packed", "bf16"))
        self.assertEqual([sorted(entry) for entry in doc["shapes"]], [["shape", "weight"]])
        # --shapes takes packed batches too, with every causal setting.
        args = bench_args.parse_args(["--shapes", "17+512/4096x32x128:kv8", "1,8,512,64"])
        self.assertEqual([(s.key, c) for s, c in args.problems],
                         [("17+512/4096x32x128:kv8", [False, True]), ("1x8x512x64", [False, True])])
        self.assertIn("sequence 0's seq_q 4096 > seq_k 512 is refused",
                      self.parse_error(["--shapes", "4096/512x32x128:kv8", "--causal", "1"]))

    def test_fp8_suite_runs_the_acceptance_shapes_in_e4m3(self):
        self.assertIn("fp8", bench_shapes.SUITES)
        args = bench_args.parse_args(["--suite", "fp8"])
        self.assertEqual(args.dtype, "e4m3")
        self.assertEqual([(shape.key, settings) for shape, settings in args.problems],
                         [("2x16x4096x128", [False, True]), ("4x16x2048x64", [False, True]), ("1x8x512x64", [False])])
        self.assertIn("runs in e4m3, not fp16", self.parse_error(["--suite", "fp8", "--dtype", "fp16"]))
        path = str(bench_shapes.WORKLOADS_DIR / "fp8.json")
        self.assertEqual(bench_args.parse_args(["--suite", path]).problems, args.problems)
        with open(path) as f:
            doc = json.load(f)       # llama3-8b.json's format, as `evoctl submit --workload` reads it
        self.assertEqual((doc["name"], doc["seed"], doc["dtype"]), ("fp8", "fa_s512_v3", "e4m3"))
        # Each shape names its measured best as a start (`evoctl submit --workload` reads them), and
        # each e4m3 shape has an fp16 twin, so one search gives the table its "ev fp16" column too.
        self.assertTrue(all(sorted(entry) == ["shape", "starts", "weight"] for entry in doc["shapes"]))
        e4m3 = [e["shape"] for e in doc["shapes"] if not e["shape"].endswith(":fp16")]
        self.assertEqual(sorted(e + ":fp16" for e in e4m3),
                         sorted(e["shape"] for e in doc["shapes"] if e["shape"].endswith(":fp16")))

    def test_e4m3_takes_dense_shapes_only(self):
        args = bench_args.parse_args(["--dtype", "e4m3", "--shapes", "1x32x512x4096x128:kv8"])
        self.assertEqual((args.dtype, args.causal_list), ("e4m3", [False, True]))
        self.assertIn("e4m3 runs dense shapes only", self.parse_error(["--dtype", "e4m3", "--shapes", "17+250x8x64"]))
        self.assertIn("invalid choice: 'fp8'", self.parse_error(["--dtype", "fp8"]))

    def test_shapes_run_every_causal_setting_unless_refused(self):
        args = bench_args.parse_args(["--shapes", "1x32x512x4096x128:kv8", "1,8,512,64", "--dtype", "bf16"])
        self.assertEqual([(s.key, c) for s, c in args.problems],
                         [("1x32x512x4096x128:kv8", [False, True]), ("1x8x512x64", [False, True])])
        self.assertIn("causal with seq_q 1024 > seq_k 512 is refused",
                      self.parse_error(["--shapes", "1,8,1024,512,64"]))
        self.assertEqual(bench_args.parse_args(["--shapes", "1,8,1024,512,64", "--causal", "0"]).problems,
                         [(bench_shapes.Shape(1, 8, 1024, 64, seq_k=512), [False])])
        self.assertIn("bad shape '1x32x512x128:kv5'", self.parse_error(["--shapes", "1x32x512x128:kv5"]))

    def test_bad_values_end_in_one_error_line(self):
        self.assertIn("bad shape '1,8,512,96'", self.parse_error(["--shapes", "1,8,512,96"]))
        self.assertIn("bad --causal", self.parse_error(["--causal", "2"]))
        self.assertIn("not both", self.parse_error(["--evolved", "a.so", "--build-from", "a.cu"]))
        self.assertIn(">= 3", self.parse_error(["--iters", "1"]))
        self.assertIn("--rounds must be >= 1", self.parse_error(["--rounds", "0"]))
        self.assertEqual(bench_args.parse_args(["--rounds", "4"]).rounds, 4)
        self.assertIn("invalid choice: 'fp8'", self.parse_error(["--dtype", "fp8"]))
        self.assertEqual(bench_args.parse_args([]).dtype, "fp16")
        self.assertEqual(bench_args.parse_args(["--dtype", "bf16"]).dtype, "bf16")


def sample_row(**figures):
    kernels = {name: {"graph_us": g, "launch_us": l, "rel_l2": e, "note": n, "config": c}
               for name, (g, l, e, n, c) in figures.items()}
    return {"shape": "1,8,512,64", "causal": False, "gflop": 0.537, "mib": 2.0,
            "floors": {"compute_us": 1.1, "memory_us": 0.7, "floor_us": 1.1}, "kernels": kernels}


class Report(unittest.TestCase):
    row = sample_row(evolved=(4.0, 6.0, 1e-4, "", "fa_s512_v3:BLOCK_M=16"),
                     cudnn=(8.0, 12.0, 2e-4, "", None),
                     flash=(None, None, None, "refused: No available kernel", None),
                     triton=(6.4, 9.0, 5e-3, "", "64x128, 4 warps, 3 stages"))

    def test_ratios_use_the_faster_sdpa_that_ran(self):
        r = bench_report.ratios(self.row, "graph_us")
        self.assertAlmostEqual(r["evolved_over_best_sdpa"], 0.5)
        self.assertAlmostEqual(r["evolved_over_triton"], 4.0 / 6.4)
        missing = sample_row(cudnn=(8.0, 12.0, 1e-4, "", None))
        self.assertEqual(bench_report.ratios(missing, "graph_us"),
                         {"evolved_over_best_sdpa": None, "evolved_over_triton": None,
                          "plain_over_best_sdpa": None, "plain_over_triton": None, "evolved_over_floor": None})

    def test_plain_launch_column_and_ratios(self):
        row = sample_row(evolved=(4.0, 6.0, 1e-4, "", "g"), evolved_plain=(5.0, 6.5, 1e-4, "", "g"),
                         cudnn=(8.0, 12.0, 2e-4, "", None), flash=(10.0, 13.0, 2e-4, "", None),
                         triton=(6.4, 9.0, 1e-4, "", None))
        r = bench_report.ratios(row, "graph_us")
        self.assertAlmostEqual(r["plain_over_best_sdpa"], 5.0 / 8.0)
        self.assertAlmostEqual(r["plain_over_triton"], 5.0 / 6.4)
        self.assertAlmostEqual(r["evolved_over_best_sdpa"], 0.5)
        self.assertAlmostEqual(bench_report.ratios(row, "launch_us")["plain_over_best_sdpa"], 6.5 / 12.0)
        text = bench_report.render_report({"gpu": "g"}, [row])
        timing = text.split("## per-call median by CUDA-graph replay (µs)\n")[1].split("\n\n")[0].splitlines()
        headers = [c.strip() for c in timing[0].strip("|").split("|")]
        cells = [c.strip() for c in timing[2].strip("|").split("|")]
        self.assertEqual(headers, ["B,H,S,D", "causal", "evolved µs", "ev plain µs", "cuDNN µs", "flash µs",
                                   "Triton µs", "ev/best SDPA", "ev/Triton", "plain/best SDPA", "floor µs",
                                   "ev/floor"])
        self.assertEqual(dict(zip(headers, cells)),
                         {"B,H,S,D": "1,8,512,64", "causal": "0", "evolved µs": "4.00", "ev plain µs": "5.00",
                          "cuDNN µs": "8.00", "flash µs": "10.00", "Triton µs": "6.40", "ev/best SDPA": "0.50x",
                          "ev/Triton": "0.62x", "plain/best SDPA": "0.62x", "floor µs": "1.10",
                          "ev/floor": "3.64x"})
        self.assertIn("rel-L2 ev plain", text)
        self.assertIn("ev plain MHz", text)
        doc = bench_report.json_document({"gpu": "g"}, [row])
        result = doc["results"][0]
        self.assertAlmostEqual(result["ratios"]["graph_us"]["plain_over_best_sdpa"], 0.625)
        self.assertAlmostEqual(result["ratios"]["launch_us"]["plain_over_triton"], 6.5 / 9.0)
        self.assertEqual(result["kernels"]["evolved_plain"]["graph_us"], 5.0)
        self.assertTrue(result["accuracy_ok"]["evolved_plain"])

    def test_an_unavailable_plain_launch_shows_its_reason(self):
        row = sample_row(evolved=(4.0, 6.0, 1e-4, "", "g"),
                         evolved_plain=(None, None, None, compare_sdpa.PLAIN_LAUNCH_MISSING, None),
                         cudnn=(8.0, 12.0, 2e-4, "", None))
        text = bench_report.render_report({"gpu": "g"}, [row])
        self.assertIn("ev plain: library exported before plain launches were selectable", text)
        graph_line = [ln for ln in text.splitlines() if ln.startswith("| 1,8,512,64")][0]
        self.assertEqual([c.strip() for c in graph_line.strip("|").split("|")][-3:], ["n/a", "1.10", "3.64x"])

    def test_decode_row_against_its_memory_floor(self):
        row = sample_row(evolved=(11.0, 12.0, 1e-3, "", "g"), cudnn=(20.0, 22.0, 2e-3, "", None))
        row["shape"] = "16,32,1,4096,128:kv8"
        row["floors"] = {"compute_us": 1.0, "memory_us": 10.0, "floor_us": 10.0}
        self.assertAlmostEqual(bench_report.ratios(row, "graph_us")["evolved_over_floor"], 1.1)
        self.assertAlmostEqual(bench_report.ratios(row, "launch_us")["evolved_over_floor"], 1.2)
        text = bench_report.render_report({"gpu": "g", "dtype": "bf16"}, [row])
        self.assertIn(":kvN = N K/V heads", text)                     # the new spellings are explained
        self.assertIn("| 16,32,1,4096,128:kv8 | 0 ", text)
        self.assertIn("| 1.10x ", text)
        self.assertIn("| 1.20x ", text)
        self.assertNotIn(":kvN", bench_report.render_report({"gpu": "g"}, [self.row]))
        row["floors"]["floor_us"] = float("nan")
        self.assertIsNone(bench_report.ratios(row, "graph_us")["evolved_over_floor"])

    def test_an_expanded_kv_peer_is_marked(self):
        note = "expanded kv: the enable_gqa call refused: x"
        row = sample_row(evolved=(4.0, 6.0, 1e-4, "", "g"), cudnn=(8.0, 12.0, 2e-4, note, None),
                         flash=(9.0, 13.0, 2e-4, "", None))
        row["kernels"]["cudnn"]["variant"] = bench_report.EXPANDED_KV
        text = bench_report.render_report({"gpu": "g"}, [row])
        graph_line = [ln for ln in text.splitlines() if ln.startswith("| 1,8,512,64")][0]
        cells = [c.strip() for c in graph_line.strip("|").split("|")]
        self.assertEqual(cells[4:6], ["8.00*", "9.00"])
        self.assertIn("* = not the backend's native path", text)
        self.assertIn("cuDNN: expanded kv: the enable_gqa call refused: x", text)
        self.assertNotIn("* = not", bench_report.render_report({"gpu": "g"}, [self.row]))
        merged = bench_rounds.merge_rounds([{"graph_us": 1.0, "rel_l2": 1e-4, "variant": bench_report.EXPANDED_KV},
                                            {"graph_us": 2.0, "rel_l2": 1e-4, "variant": bench_report.EXPANDED_KV}])
        self.assertEqual(merged["variant"], bench_report.EXPANDED_KV)
        self.assertIsNone(bench_rounds.merge_rounds([{"graph_us": 1.0, "rel_l2": 1e-4}])["variant"])

    def test_a_packed_row_explains_its_peers_and_flash_attn_gets_a_column_where_it_ran(self):
        row = sample_row(evolved=(40.0, 60.0, 1e-3, "", "g"), cudnn=(80.0, 90.0, 2e-3, compare_sdpa.SDPA_PADDED_CAUSAL,
                                                                      None),
                         flash=(70.0, 95.0, 2e-3, compare_sdpa.SDPA_PER_SEQUENCE, None),
                         triton=(64.0, 90.0, 1e-3, "", "64x64, 4 warps, 2 stages"),
                         flash_attn=(50.0, 70.0, 2e-3, "", None))
        row.update(shape="17+250+3000x32x128:kv8", causal=True, dtype="bf16",
                   varlen={"seq_q": [17, 250, 3000], "seq_k": [17, 250, 3000]})
        text = bench_report.render_report({"gpu": "g", "dtype": "bf16", "flash_attn": "2.8.3"}, [row])
        self.assertIn("flash_attn 2.8.3", text)
        self.assertIn("packed batches: L0+L1+...xHxD", text)
        self.assertNotIn(":kvN = N K/V heads", text)        # the dense spellings' legend is not this row's
        timing = text.split("## per-call median by CUDA-graph replay (µs)\n")[1].split("\n\n")[0].splitlines()
        headers = [c.strip() for c in timing[0].strip("|").split("|")]
        cells = [c.strip() for c in timing[2].strip("|").split("|")]
        self.assertEqual(headers[:8], ["B,H,S,D", "causal", "evolved µs", "ev plain µs", "cuDNN µs", "flash µs",
                                       "Triton µs", "flash_attn µs"])
        self.assertEqual(cells[:8], ["17+250+3000x32x128:kv8", "1", "40.00", "n/a", "80.00", "70.00", "64.00",
                                     "50.00"])
        self.assertEqual(dict(zip(headers, cells))["ev/best SDPA"], "0.57x")
        self.assertIn("cuDNN: padded: one SDPA call", text)
        self.assertIn("flash: per sequence: a Python loop", text)
        self.assertIn("rel-L2 flash_attn", text)
        self.assertIn("flash_attn MHz", text)
        doc = bench_report.json_document({"gpu": "g", "dtype": "bf16"}, [row])
        self.assertTrue(doc["results"][0]["accuracy_ok"]["flash_attn"])
        self.assertEqual(doc["results"][0]["varlen"]["seq_q"], [17, 250, 3000])
        # No flash_attn figures, no column: the dense reports are as they were.
        self.assertNotIn("flash_attn", bench_report.render_report({"gpu": "g"}, [self.row]))
        self.assertEqual(bench_report.columns([self.row]), bench_report.KERNELS)
        both = bench_report.render_report({"gpu": "g", "dtype": "bf16"}, [self.row, row])
        self.assertIn("| 1,8,512,64 ", both)
        self.assertIn("flash_attn µs", both)

    def test_rel_l2_flags(self):
        self.assertTrue(bench_report.rel_l2_ok(2e-3))
        self.assertFalse(bench_report.rel_l2_ok(2.1e-3))
        self.assertFalse(bench_report.rel_l2_ok(float("nan")))
        self.assertEqual(bench_report.fmt_rel_l2(float("nan")), "nan FAIL")
        self.assertEqual(bench_report.fmt_rel_l2(None), "n/a")
        # bf16 is held to its own, looser limit.
        self.assertTrue(bench_report.rel_l2_ok(1e-2, "bf16"))
        self.assertFalse(bench_report.rel_l2_ok(1e-2, "fp16"))
        self.assertEqual(bench_report.fmt_rel_l2(1e-2, "bf16"), "1.0e-02")
        self.assertEqual(bench_report.fmt_rel_l2(2e-2, "bf16"), "2.0e-02 FAIL")

    def test_text_report(self):
        text = bench_report.render_report({"gpu": "NVIDIA H100", "sm_count": 132, "matmul_tflops": 700.0,
                                           "copy_gbps": 2900.0, "empty_graph_us": 0.68,
                                           "empty_launch_us": 2.1}, [self.row])
        self.assertIn("NVIDIA H100 (132 SMs)", text)
        graph_line = [ln for ln in text.splitlines() if ln.startswith("| 1,8,512,64")][0]
        self.assertIn("| 4.00 ", graph_line)
        self.assertIn("| n/a ", graph_line)
        self.assertIn("0.50x", graph_line)
        self.assertIn("5.0e-03 FAIL", text)
        self.assertIn("64x128, 4 warps, 3 stages", text)
        self.assertIn("flash: refused: No available kernel", text)
        self.assertIn("0.68 µs per call by graph replay", text)

    def test_table_columns_line_up(self):
        table = bench_report.render_table(["a", "long header"], [["wide cell here", "x"], ["y", "z"]])
        self.assertEqual(len({len(line) for line in table.splitlines()}), 1)

    def test_json_has_every_figure_and_no_nan(self):
        row = sample_row(evolved=(4.0, float("nan"), float("nan"), "", None), cudnn=(8.0, 12.0, 2e-4, "", None))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "out.json")
            bench_report.write_json(path, {"gpu": "g"}, [row])
            with open(path) as f:
                doc = json.load(f)   # strict JSON: NaN would not round-trip through other readers
        result = doc["results"][0]
        self.assertEqual(result["kernels"]["evolved"]["graph_us"], 4.0)
        self.assertIsNone(result["kernels"]["evolved"]["launch_us"])
        self.assertEqual(result["ratios"]["graph_us"]["evolved_over_best_sdpa"], 0.5)
        self.assertEqual(result["accuracy_ok"], {"evolved": False, "cudnn": True})
        self.assertEqual(doc["rel_l2_limit"], 2e-3)


def fp8_row():
    """An FP8 row as compare_sdpa makes it: FP8 kernels and 16-bit baselines, each with both errors."""
    def kernel(graph, dtype, own, quantized, fp16, config=None):
        return {"graph_us": graph, "launch_us": graph * 1.2, "rel_l2": own, "rel_l2_quantized": quantized,
                "rel_l2_fp16": fp16, "dtype": dtype, "note": "", "config": config}
    return {"shape": "2,16,4096,128", "causal": True, "dtype": "e4m3", "gflop": 1100.0, "mib": 80.0,
            "floors": {"compute_us": 500.0, "memory_us": 20.0, "floor_us": 500.0},
            "fp8_quantizer": {"lib": "table.so", "bytes_differ": 0, "bytes": 50331648, "scales_differ": 0,
                              "scales": 96},
            "kernels": {"evolved": kernel(1000.0, "e4m3", 2.0e-2, 2.0e-2, 3.0e-2, "g8"),
                        "evolved_plain": kernel(1010.0, "e4m3", 2.0e-2, 2.0e-2, 3.0e-2, "g8"),
                        "triton": kernel(1250.0, "e4m3", 2.2e-2, 2.2e-2, 3.1e-2, "128x128, 8 warps, 3 stages"),
                        "cudnn": kernel(1500.0, "fp16", 1.0e-3, 2.5e-2, 1.0e-3),
                        "flash": kernel(2000.0, "fp16", 1.0e-3, 2.5e-2, 1.0e-3),
                        "evolved_fp16": kernel(1400.0, "fp16", 1.5e-3, 2.5e-2, 1.5e-3, "g16")}}


class Fp8Report(unittest.TestCase):
    env = {"gpu": "g", "dtype": "e4m3", "matmul_tflops": 700.0, "fp8_matmul_tflops": 1400.0, "copy_gbps": 4000.0}

    def test_each_peer_has_its_time_rate_floor_ratio_and_both_errors(self):
        figures = {f["kernel"]: f for f in bench_report.fp8_peer_figures(fp8_row())}
        self.assertEqual(list(figures), ["evolved", "evolved_plain", "triton", "cudnn", "flash", "evolved_fp16"])
        triton = figures["triton"]
        self.assertEqual((triton["inputs"], triton["graph_us"], triton["fp8_floor_us"]), ("e4m3", 1250.0, 500.0))
        self.assertAlmostEqual(triton["tflops"], 1100.0 * 1e3 / 1250.0)
        self.assertAlmostEqual(triton["evolved_fp8_over_peer"], 0.8)
        self.assertEqual((figures["cudnn"]["inputs"], figures["cudnn"]["rel_l2_quantized"],
                          figures["cudnn"]["rel_l2_fp16"]), ("fp16", 2.5e-2, 1.0e-3))
        self.assertAlmostEqual(figures["evolved"]["evolved_fp8_over_peer"], 1.0)

    def test_the_report_holds_an_fp8_table_and_judges_each_kernel_by_its_own_inputs(self):
        row = fp8_row()
        row["kernels"]["evolved_fp16"].update(rel_l2=1e-2, rel_l2_fp16=1e-2)   # over fp16's limit: its own inputs
        text = bench_report.render_report(self.env, [row])
        self.assertIn("e4m3 matmul 1400.0 TFLOP/s (torch._scaled_mm)", text)
        self.assertIn("inputs and outputs: e4m3 Q, K, V with a float scale per (batch, head)", text)
        table = text.split("## FP8 rows per peer")[1].split("\n\n")[0].splitlines()[1:]
        headers = [c.strip() for c in table[0].strip("|").split("|")]
        self.assertEqual(headers, ["B,H,S,D", "causal", "peer", "inputs", "graph µs", "TFLOP/s", "FP8 floor µs",
                                   "ev FP8/peer", "rel-L2 vs dequantized", "rel-L2 vs fp16"])
        cells = {c[2]: c for c in ([x.strip() for x in line.strip("|").split("|")] for line in table[2:])}
        self.assertEqual(cells["Triton"], ["2,16,4096,128", "1", "Triton", "e4m3", "1250.0", "880", "500.0", "0.80x",
                                           "2.2e-02", "3.1e-02"])
        self.assertEqual(cells["cuDNN"][3:], ["fp16", "1500.0", "733", "500.0", "0.67x", "2.5e-02", "1.0e-03"])
        self.assertEqual(cells["ev fp16"][-2:], ["2.5e-02", "1.0e-02 FAIL"])
        self.assertIn("- 2,16,4096,128: table.so: 0 of 50331648 bytes and 0 of 96 scales differ", text)
        # The usual tables: the evolved fp16 kernel is a column; each error is judged by its own dtype.
        timing = text.split("## per-call median by CUDA-graph replay (µs)\n")[1].split("\n\n")[0].splitlines()
        self.assertIn("ev fp16 µs", timing[0])
        accuracy = text.split("and Triton autotune winner\n")[1].split("\n\n")[0].splitlines()
        cells = [c.strip() for c in accuracy[2].strip("|").split("|")]
        self.assertEqual(cells[2:8], ["2.0e-02", "2.0e-02", "1.0e-03", "1.0e-03", "2.2e-02", "1.0e-02 FAIL"])
        self.assertIn("each kernel against its own inputs'", text)
        # An fp16 run's report has neither.
        plain = bench_report.render_report({"gpu": "g"}, [Report.row])
        self.assertNotIn("FP8 rows", plain)
        self.assertNotIn("e4m3 matmul", plain)

    def test_json_has_the_fp8_figures_and_per_kernel_verdicts(self):
        doc = bench_report.json_document(self.env, [fp8_row()])
        self.assertEqual(doc["rel_l2_limit"], 0.0625)
        result = doc["results"][0]
        self.assertEqual([f["kernel"] for f in result["fp8_peers"]][:3], ["evolved", "evolved_plain", "triton"])
        self.assertEqual(result["fp8_quantizer"]["bytes_differ"], 0)
        self.assertTrue(all(result["accuracy_ok"].values()))
        self.assertAlmostEqual(result["ratios"]["graph_us"]["evolved_over_triton"], 0.8)
        self.assertNotIn("fp8_peers", bench_report.json_document({"gpu": "g"}, [Report.row])["results"][0])

    def test_rounds_keep_both_errors_and_the_inputs(self):
        merged = bench_rounds.merge_rounds([
            {"graph_us": 1.0, "rel_l2": 2e-2, "rel_l2_quantized": 2e-2, "rel_l2_fp16": 3e-2, "dtype": "e4m3"},
            {"graph_us": 3.0, "rel_l2": 2.5e-2, "rel_l2_quantized": 2.5e-2, "rel_l2_fp16": float("nan"),
             "dtype": "e4m3"}])
        self.assertEqual((merged["graph_us"], merged["rel_l2"], merged["rel_l2_quantized"], merged["dtype"]),
                         (2.0, 2.5e-2, 2.5e-2, "e4m3"))
        self.assertTrue(math.isnan(merged["rel_l2_fp16"]))
        self.assertNotIn("dtype", bench_rounds.merge_rounds([{"graph_us": 1.0, "rel_l2": 1e-4}]))

    def test_a_measured_fp8_candidate_gets_both_errors_and_its_own_as_rel_l2(self):
        timing = types.SimpleNamespace(rel_l2=lambda out, ref: ref,
                                       per_launch_us=lambda fn, iters, flusher, report=None: (fn(), 5.0)[1],
                                       graph_replay_us=lambda fn, calls, replays: (fn(), 4.0)[1])
        refs = {"quantized": 2e-2, "fp16": 3e-2}     # the stand-in rel_l2 returns the reference itself
        fp8 = compare_sdpa.Candidate("triton", lambda: "out", dtype="e4m3", reference="quantized")
        res = compare_sdpa.measure(Fallback.torch, timing, fp8, refs, Fallback.args, None)
        self.assertEqual((res["rel_l2"], res["rel_l2_quantized"], res["rel_l2_fp16"], res["dtype"]),
                         (2e-2, 2e-2, 3e-2, "e4m3"))
        sdpa = compare_sdpa.fp16_peer(compare_sdpa.Candidate("cudnn", lambda: "out"))
        self.assertEqual(compare_sdpa.measure(Fallback.torch, timing, sdpa, refs, Fallback.args, None)["rel_l2"], 3e-2)
        self.assertEqual(compare_sdpa.error_text(res, "e4m3"),
                         "rel-L2 2.0e-02 (e4m3; vs dequantized 2.0e-02, vs fp16 3.0e-02)")
        self.assertEqual(compare_sdpa.error_text({"rel_l2": 3e-3}, "fp16"), "rel-L2 3.0e-03 FAIL")
        self.assertEqual(compare_sdpa.floor_rate(self.env, "e4m3"), 1400.0)
        self.assertEqual(compare_sdpa.floor_rate(self.env, "bf16"), 700.0)


class Fp8KeyOrder(unittest.TestCase):
    """The library's V^T key order as the bench writes it (no torch needed)."""

    def test_each_sixteen_keys_are_a_permutation_in_the_scores_order(self):
        order = bench_fp8.EVO_KEY_OF_COLUMN
        self.assertEqual(sorted(order), list(range(16)))
        self.assertEqual(order[:8], (0, 1, 8, 9, 2, 3, 10, 11))
        # fp8.h's e4m3_vt_column, the column of a key, is its inverse.
        column = lambda k: 4 * ((k & 7) >> 1) + 2 * (k >> 3) + (k & 1)
        self.assertEqual([column(order[c]) for c in range(16)], list(range(16)))


@unittest.skipUnless(importlib.util.find_spec("torch") is not None, "PyTorch is not installed here")
class Fp8Quantization(unittest.TestCase):
    """bench_fp8's torch rule on the CPU: scales, rounding, saturation, V's transposed layout."""

    def setUp(self):
        import torch
        self.torch = torch

    def bytes_of(self, x8):
        return x8.view(self.torch.uint8).flatten().tolist()

    def test_scales_follow_the_exported_rule(self):
        torch = self.torch
        x = torch.zeros(1, 5, 3, 4)
        x[0, 1, 2, 3] = -896.0                  # largest magnitude 896: scale 2
        x[0, 2, 0, 0] = float("nan")
        x[0, 3, 1, 1] = float("inf")
        x[0, 4, 0, 1] = 2.0 ** -140             # below 448 * 2^-126: the smallest scale
        scales = bench_fp8.head_scales(torch, x)
        self.assertEqual(scales[:2].tolist(), [1.0, 2.0])
        self.assertTrue(math.isnan(scales[2].item()) and math.isnan(scales[3].item()))
        self.assertEqual(scales[4].item(), 2.0 ** -126)
        self.assertEqual(scales.dtype, torch.float32)
        # Each scale is the correctly rounded quotient (a float32 quotient of float32s, rounded once from
        # the double one), not absmax times a rounded 1/448.
        absmax = torch.rand(4096, generator=torch.Generator().manual_seed(5)) * 1000 + 1
        want = torch.tensor([a / 448.0 for a in absmax.double().tolist()], dtype=torch.float64).float()
        got = bench_fp8.head_scales(torch, absmax.view(1, -1, 1, 1))
        self.assertEqual(bench_fp8.differing(torch, got, want), 0)

    def test_bytes_round_to_nearest_even_and_saturate(self):
        torch = self.torch
        # A head whose largest magnitude is 448 has scale 1: the bytes are the values' own e4m3 codes.
        values = [448.0, -448.0, 1.0, 1.0625, 1.1875, 2.0 ** -9, 2.0 ** -10, 0.0]
        x8, scales = bench_fp8.quantize(torch, torch.tensor(values, dtype=torch.float16).view(1, 1, 2, 4))
        self.assertEqual(scales.tolist(), [1.0])
        # 1.0625 lies halfway between 1.0 and 1.125 (even: 1.0), 1.1875 between 1.125 and 1.25 (even: 1.25);
        # 2^-9 is the smallest subnormal, 2^-10 halfway to zero (even: zero).
        self.assertEqual(self.bytes_of(x8), [0x7E, 0xFE, 0x38, 0x38, 0x3A, 0x01, 0x00, 0x00])
        gen = torch.Generator().manual_seed(3)
        # Heads of magnitudes 1e-4 to 1e4: inside fp16's range, from its subnormals to near its largest.
        x = torch.randn(4, 64, 8, 16, generator=gen) * torch.logspace(-4, 4, 64).view(1, 64, 1, 1)
        x8, scales = bench_fp8.quantize(torch, x.to(torch.float16))
        codes = x8.view(torch.uint8)
        self.assertFalse(bool(((codes & 0x7F) == 0x7F).any()), "a finite head's byte became NaN")
        self.assertTrue(bool(((codes & 0x7F) == 0x7E).any(dim=(2, 3)).all()), "each head's largest is 448")
        # Dequantized, each element is within e4m3's half step (2^-4 of itself, or 2^-10 of the scale).
        values = bench_fp8.dequantize(torch, x8, scales)
        x16 = x.to(torch.float16).float()
        bound = torch.maximum(x16.abs() * 2.0 ** -4, bench_fp8.per_head(scales, x) * 2.0 ** -10)
        self.assertTrue(bool(((values - x16).abs() <= bound * 1.0001).all()))

    def test_v_goes_transposed_with_its_rows_padded_and_the_pad_zeroed(self):
        torch = self.torch
        x8, _ = bench_fp8.quantize(torch, torch.randn(2, 3, 17, 64).to(torch.float16))
        vt8 = bench_fp8.transpose_padded(torch, x8)
        self.assertEqual((tuple(vt8.shape), vt8.dtype), ((2, 3, 64, 32), torch.float8_e4m3fn))
        self.assertTrue(vt8.is_contiguous())
        raw = vt8.view(torch.uint8)
        self.assertTrue(torch.equal(raw[..., :17], x8.view(torch.uint8).transpose(2, 3)))
        self.assertEqual(int(raw[..., 17:].count_nonzero()), 0)
        self.assertEqual(bench_fp8.differing(torch, vt8, vt8.clone()), 0)
        changed = raw.clone()
        changed[0, 0, 0, :3] ^= 1
        self.assertEqual(bench_fp8.differing(torch, changed, vt8), 3)

    def test_the_librarys_v_keeps_each_sixteen_keys_in_its_fragments_order(self):
        torch = self.torch
        x8, _ = bench_fp8.quantize(torch, torch.randn(1, 2, 17, 64).to(torch.float16))
        vt8 = bench_fp8.transpose_padded(torch, x8)
        evo = bench_fp8.evo_key_order(torch, vt8).view(torch.uint8)
        raw = vt8.view(torch.uint8)
        self.assertEqual(tuple(evo.shape), tuple(raw.shape))
        for col, key in ((0, 0), (2, 8), (4, 2), (15, 15), (16, 16), (18, 24), (31, 31)):
            self.assertTrue(torch.equal(evo[..., col], raw[..., key]), (col, key))
        self.assertEqual(int(evo[..., 17:].count_nonzero()), int(raw[..., 17:].count_nonzero()))


class Clocks(unittest.TestCase):
    LINES = ["2026/11/26 17:18:15.000, 1980, 300.50, 0x0000000000000000",
             "2026/11/26 17:18:15.100, 1650, 690.00, 0x0000000000000004",
             "2026/11/26 17:18:15.200, 1965, 650.00, 0x0000000000000000",
             "2026/11/26 17:18:16.000, 1500, 500.00, 0x0000000000000020"]

    def samples(self):
        return [bench_clocks.parse_sample(line) for line in self.LINES]

    def test_parses_nvidia_smi_lines_and_nothing_else(self):
        s = self.samples()[1]
        self.assertEqual((s.clock_mhz, s.power_w, s.reasons), (1650.0, 690.0, 4))
        self.assertAlmostEqual(self.samples()[2].t - self.samples()[0].t, 0.2, places=3)
        for junk in ["", "[N/A], 1980, 300, 0x0", "2026/11/26 17:18:15.000, [N/A], 300, 0x0", "1980, 300, 0x0"]:
            self.assertIsNone(bench_clocks.parse_sample(junk), junk)

    def test_a_window_reports_its_lowest_clock_and_the_power_cap(self):
        samples = self.samples()
        t0 = samples[0].t
        capped = bench_clocks.summarize(samples, t0 + 0.01, t0 + 0.2)
        self.assertEqual((capped["clock_mhz_min"], capped["clock_mhz_median"], capped["power_w_max"]),
                         (1650.0, 1965.0, 690.0))
        self.assertTrue(capped["power_capped"])
        self.assertFalse(capped["slowdown"])
        self.assertEqual(capped["samples"], 3)
        free = bench_clocks.summarize(samples, t0 - 1, t0 + 0.04)
        self.assertFalse(free["power_capped"])
        self.assertEqual(free["samples"], 1)
        self.assertTrue(bench_clocks.summarize(samples, t0 + 0.5, t0 + 2)["slowdown"])
        # A window between samples meets the nearest within the margin, and none beyond it.
        self.assertEqual(bench_clocks.summarize(samples, t0 + 0.22, t0 + 0.23)["clock_mhz_min"], 1965.0)
        self.assertIsNone(bench_clocks.summarize(samples, t0 + 0.3, t0 + 0.4))

    def test_windows_become_clock_columns(self):
        samples = self.samples()
        t0 = samples[0].t
        row = sample_row(evolved=(4.0, 6.0, 1e-4, "", None), cudnn=(8.0, 12.0, 2e-4, "", None))
        row["kernels"]["evolved"]["windows"] = {"graph": (t0 + 0.01, t0 + 0.2), "launch": (t0 + 0.3, t0 + 0.4)}
        row["kernels"]["cudnn"]["windows"] = {"graph": (t0 - 1, t0 + 0.04)}
        bench_clocks.attach_clocks(row["kernels"].values(), lambda a, b: bench_clocks.summarize(samples, a, b))
        evolved = row["kernels"]["evolved"]
        self.assertNotIn("windows", evolved)
        self.assertIsNone(evolved["launch_clock"])
        text = bench_report.render_report({"gpu": "g"}, [row])
        clock_line = [ln for ln in text.split("## SM clock")[1].splitlines() if ln.startswith("| 1,8,512,64")][0]
        self.assertIn("| 1650/1965 cap ", clock_line)
        self.assertIn("| 1980/1980 ", clock_line)
        self.assertIn("| n/a ", clock_line)

    def test_a_fake_nvidia_smi_is_sampled_and_none_means_no_figures(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake = os.path.join(tmp, "nvidia-smi")
            with open(fake, "w") as f:
                # Like the real one, it samples until it is stopped.
                f.write("#!/bin/sh\n" + "".join(f"echo '{line}'\n" for line in self.LINES) + "exec sleep 30\n")
            os.chmod(fake, 0o755)
            t0 = bench_clocks.parse_sample(self.LINES[0]).t
            old_path = os.environ["PATH"]
            try:
                os.environ["PATH"] = tmp
                with bench_clocks.ClockWatch("GPU-0") as watch:
                    deadline = time.time() + 10
                    while (watch.summary(t0 - 1, t0 + 10) or {}).get("samples", 0) < 4 and time.time() < deadline:
                        time.sleep(0.01)
                os.environ["PATH"] = os.path.join(tmp, "empty")
                with bench_clocks.ClockWatch("GPU-0") as blind:
                    pass
            finally:
                os.environ["PATH"] = old_path
        self.assertEqual(watch.summary(t0 - 1, t0 + 10)["samples"], 4)
        self.assertIsNone(blind.summary(t0 - 1, t0 + 10))


class Rounds(unittest.TestCase):
    def test_each_kernel_takes_every_position_and_round_0_keeps_evolved_last(self):
        names = ["cudnn", "flash", "triton", "evolved_plain", "evolved"]
        orders = [bench_rounds.round_order(names, r) for r in range(5)]
        self.assertEqual(orders[0], names)
        for name in names:
            self.assertEqual(sorted(order.index(name) for order in orders), [0, 1, 2, 3, 4])
        self.assertEqual(bench_rounds.round_order([], 2), [])

    def test_the_second_n_rounds_reverse_the_order_so_each_kernel_follows_both_neighbours(self):
        names = ["cudnn", "flash", "triton", "evolved_plain", "evolved"]
        orders = [bench_rounds.round_order(names, r) for r in range(10)]
        self.assertEqual(orders[5], names[::-1])
        for name in names:
            self.assertEqual(sorted(order.index(name) for order in orders[5:]), [0, 1, 2, 3, 4])
        before_evolved = {order[order.index("evolved") - 1] for order in orders if order[0] != "evolved"}
        self.assertEqual(before_evolved, {"evolved_plain", "cudnn"})
        self.assertEqual(bench_rounds.round_order(names, 11), orders[1])

    def test_rounds_merge_into_medians_the_worst_error_and_one_clock(self):
        def res(graph, launch, err, clock=None, note=None):
            return {"graph_us": graph, "launch_us": launch, "rel_l2": err, "note": note, "config": "cfg",
                    "graph_clock": clock, "launch_clock": None}
        capped = {"clock_mhz_min": 1650.0, "clock_mhz_median": 1700.0, "power_w_max": 700.0,
                  "power_capped": True, "slowdown": False, "samples": 3}
        free = {"clock_mhz_min": 1980.0, "clock_mhz_median": 1980.0, "power_w_max": 400.0,
                "power_capped": False, "slowdown": False, "samples": 2}
        merged = bench_rounds.merge_rounds([res(600.0, 550.0, 2e-4, capped), res(540.0, None, 3e-4, free),
                                            res(560.0, 530.0, 1e-4, None, "graph replay failed: x")])
        self.assertEqual((merged["graph_us"], merged["launch_us"], merged["rel_l2"]), (560.0, 540.0, 3e-4))
        self.assertEqual(merged["note"], "graph replay failed: x")
        self.assertEqual(merged["graph_clock"]["clock_mhz_min"], 1650.0)
        self.assertTrue(merged["graph_clock"]["power_capped"])
        self.assertEqual(merged["graph_clock"]["samples"], 5)
        self.assertIsNone(merged["launch_clock"])
        self.assertEqual([r["graph_us"] for r in merged["rounds"]], [600.0, 540.0, 560.0])
        nan = bench_rounds.merge_rounds([res(1.0, 1.0, 1e-4), res(1.0, 1.0, float("nan"))])
        self.assertTrue(math.isnan(nan["rel_l2"]))
        unmeasured = bench_rounds.merge_rounds([res(None, None, None, note="refused: no kernel")])
        self.assertEqual((unmeasured["graph_us"], unmeasured["rel_l2"]), (None, None))
        self.assertEqual(unmeasured["note"], "refused: no kernel")


class LaunchCover(unittest.TestCase):
    def test_the_spin_outlasts_three_host_enqueues_and_never_shortens(self):
        self.assertEqual(launch_cover.spin_cycles(10.0, 0.5), launch_cover.BUSY_CYCLES)
        self.assertEqual(launch_cover.spin_cycles(80.0, 0.5), 480_000)   # 3 x 80 us at 2 GHz
        self.assertEqual(launch_cover.spin_cycles(80.0, 0.0), launch_cover.BUSY_CYCLES)   # no spin kernel

    def test_samples_whose_enqueue_outlasted_the_spin_are_dropped(self):
        self.assertEqual(launch_cover.covered_samples([10.0, 11.0, 40.0, 9.0], [20.0, 60.0, 90.0, 50.0], 50.0),
                         [10.0, 9.0])
        self.assertEqual(launch_cover.covered_samples([], [], 50.0), [])

    def test_the_progress_line_names_a_widened_spin_or_dropped_samples_only(self):
        plain = {"spin_us": 50.5, "host_us": 9.0, "dropped": 0, "widened": False}
        self.assertEqual(compare_sdpa.cover_text(plain), "")
        self.assertEqual(compare_sdpa.cover_text(None), "")
        widened = {"spin_us": 242.0, "host_us": 80.4, "dropped": 3, "widened": True}
        self.assertEqual(compare_sdpa.cover_text(widened), "  (spin 242 µs, host 80 µs, 3 dropped)")

    def test_each_rounds_cover_is_kept_in_the_merged_result(self):
        cover = {"spin_us": 242.0, "host_us": 80.4, "dropped": 3, "widened": True}
        merged = bench_rounds.merge_rounds([{"graph_us": 1.0, "launch_us": 2.0, "rel_l2": 1e-4,
                                             "launch_cover": cover}])
        self.assertEqual(merged["rounds"][0]["launch_cover"], cover)


class TritonSpace(unittest.TestCase):
    def test_space_covers_the_issue(self):
        full = triton_fa_space.full_space()
        self.assertEqual(len(full), 72)
        self.assertEqual({c.block_m for c in full}, {16, 32, 64, 128})
        self.assertEqual({c.stages for c in full}, {2, 3})

    def test_prunes_only_what_cannot_fit(self):
        d64 = triton_fa_space.pruned_space(64)
        self.assertIn(triton_fa_space.TileConfig(16, 128, 2, 2), d64)     # issue's causal winner
        self.assertIn(triton_fa_space.TileConfig(64, 128, 4, 3), d64)     # issue's non-causal winner
        self.assertNotIn(triton_fa_space.TileConfig(128, 128, 2, 2), d64)  # 384 fp32 per thread
        self.assertGreaterEqual(len(d64), 48)
        self.assertEqual(triton_fa_space.smem_bytes(triton_fa_space.TileConfig(64, 64, 4, 2), 64),
                         2 * (64 * 64 + 4 * 64 * 64))
        small = triton_fa_space.pruned_space(128, smem_limit=48 * 1024)
        self.assertTrue(all(triton_fa_space.smem_bytes(c, 128) <= 48 * 1024 for c in small))
        with self.assertRaises(ValueError):
            triton_fa_space.pruned_space(128, smem_limit=1024)


    def test_decode_keeps_only_the_smallest_row_block(self):
        decode = triton_fa_space.pruned_space(128, seq_q=1)
        self.assertEqual({c.block_m for c in decode}, {16})
        self.assertEqual(len(decode), 18)                        # every BLOCK_N, warps and stages of 16 rows
        self.assertIn(triton_fa_space.TileConfig(16, 128, 4, 3), decode)
        self.assertEqual({c.block_m for c in triton_fa_space.pruned_space(128, seq_q=17)}, {16, 32})
        self.assertEqual({c.block_m for c in triton_fa_space.pruned_space(128, seq_q=64)}, {16, 32, 64})
        for head_dim in (64, 128):   # the old shapes (seq >= 512) keep the whole space
            self.assertEqual(triton_fa_space.pruned_space(head_dim, seq_q=512), triton_fa_space.pruned_space(head_dim))

    def test_key_ranges_split_at_the_shifted_diagonal(self):
        """Keys below full_end are in bounds and seen by every row of the block (no mask needed); no row
        of the block sees a key at or past hi; bottom-right: row i sees keys 0 .. i + Sk - Sq."""
        checked = 0
        lengths = [(1, 1), (1, 4096), (5, 5), (64, 64), (100, 100), (128, 1000), (200, 200), (512, 4096),
                   (300, 299), (50, 10)]
        lengths += [(seq_q, seq_q + shift) for seq_q in (1, 17, 40) for shift in range(260)]   # every diagonal shift
        for seq_q, seq_k in lengths:
            for block_m in (16, 32, 64, 128):
                for block_n in (32, 64, 128):
                    for causal in (False, True):
                        if causal and seq_q > seq_k:
                            continue
                        for pid_m in range(-(-seq_q // block_m)):
                            full_end, hi = triton_fa_space.key_ranges(pid_m, block_m, block_n, seq_q, seq_k, causal)
                            rows = range(pid_m * block_m, min(seq_q, (pid_m + 1) * block_m))
                            last_seen = [seq_k - 1 if not causal else min(seq_k - 1, i + seq_k - seq_q) for i in rows]
                            where = (seq_q, seq_k, block_m, block_n, causal, pid_m)
                            self.assertEqual(full_end % block_n, 0, where)
                            self.assertTrue(0 <= full_end <= hi <= seq_k, where)
                            self.assertLessEqual(full_end, min(last_seen) + 1, where)   # unmasked: seen by all
                            self.assertGreaterEqual(hi, max(last_seen) + 1, where)      # nothing seen is skipped
                            checked += 1
        self.assertGreater(checked, 1000)
        # Equal lengths: the top-left bounds the kernel always had.
        self.assertEqual(triton_fa_space.key_ranges(2, 64, 64, 512, 512, True), (128, 192))
        # 512 over 4096: row block 0 sees every key below 3584 + 64 unmasked up to the block boundary.
        self.assertEqual(triton_fa_space.key_ranges(0, 64, 128, 512, 4096, True), (3584, 3648))


class TritonFp8Space(unittest.TestCase):
    def test_fp8_space_keeps_hoppers_fp8_mma_rows_and_a_dozen_configs(self):
        space = triton_fa_space.fp8_space()
        self.assertGreaterEqual(len(space), 12)
        self.assertEqual({c.block_m for c in space}, {64, 128})      # a warp group's 64 rows at least
        self.assertTrue(all(c.block_n % 32 == 0 for c in space))     # P @ V's K: FP8 MMA takes 32 at a time
        self.assertGreater(len({(c.warps, c.stages) for c in space}), 3)
        for head_dim in (64, 128):
            kept = triton_fa_space.pruned_fp8_space(head_dim)
            self.assertGreaterEqual(len(kept), 12)
            self.assertTrue(all(triton_fa_space.runnable(c, head_dim, element_bytes=1) for c in kept))

    def test_one_byte_elements_halve_the_pipeline_and_decode_keeps_64_rows(self):
        cfg = triton_fa_space.TileConfig(128, 128, 8, 4)
        self.assertEqual(triton_fa_space.smem_bytes(cfg, 128, element_bytes=1), 128 * 128 + 2 * 4 * 128 * 128)
        self.assertEqual(triton_fa_space.smem_bytes(cfg, 128, element_bytes=1) * 2,
                         triton_fa_space.smem_bytes(cfg, 128))
        small = triton_fa_space.pruned_fp8_space(128, smem_limit=100 * 1024)
        self.assertIn(cfg, triton_fa_space.pruned_fp8_space(128))
        self.assertNotIn(cfg, small)
        self.assertEqual({c.block_m for c in triton_fa_space.pruned_fp8_space(64, seq_q=1)}, {64})
        self.assertEqual({c.block_m for c in triton_fa_space.pruned_fp8_space(64, seq_q=777)}, {64, 128})
        with self.assertRaises(ValueError):
            triton_fa_space.pruned_fp8_space(128, smem_limit=1024)


class TritonVarlenSpace(unittest.TestCase):
    def test_row_blocks_of_a_packed_batch_cover_each_sequence_once(self):
        for seqlens in ((17, 250, 600, 1100, 1500, 2000, 2500, 3000), (1,), (64, 1, 65), (128, 128)):
            for block_m in (16, 32, 64, 128):
                blocks = triton_fa_space.varlen_row_blocks(seqlens, block_m)
                for b, seq_q in enumerate(seqlens):
                    rows = [r for bb, pid_m in blocks if bb == b
                            for r in range(pid_m * block_m, min(seq_q, (pid_m + 1) * block_m))]
                    self.assertEqual(rows, list(range(seq_q)), (seqlens, block_m, b))
                grid = -(-max(seqlens) // block_m) * len(seqlens)
                self.assertLessEqual(len(blocks), grid)
        # 8 prompts of 17 to 3000 tokens, 64-row blocks: 47 blocks per sequence in the grid, 181 working.
        blocks = triton_fa_space.varlen_row_blocks((17, 250, 600, 1100, 1500, 2000, 2500, 3000), 64)
        self.assertEqual(len(blocks), 1 + 4 + 10 + 18 + 24 + 32 + 40 + 47)


STUB_KERNEL = r"""
#include <cuda_runtime.h>
extern "C" int evo_attention_forward(const void* q, const void* k, const void* v, void* o, int batch,
    int heads, int seq_q, int seq_k, int head_dim, float softmax_scale, int causal, cudaStream_t stream) {
  // Checks arguments only: enough to prove the build flags and the ctypes calling convention.
  if (head_dim != 64 && head_dim != 128) return (int)cudaErrorInvalidValue;
  return (softmax_scale > 0.124f && softmax_scale < 0.126f && causal == 1 && seq_k == 512) ? 0 : 99;
}
"""


class BuildAndLoad(unittest.TestCase):
    def test_command_is_the_documented_build(self):
        cmd = bench_build.nvcc_command("nvcc", "best.cu", "best.so")
        for flag in ("-shared", "-fPIC", "-arch=sm_90a", "-O3"):
            self.assertIn(flag, cmd)
        self.assertEqual(cmd[-3:], ["-o", "best.so", "best.cu"])

    def test_missing_source(self):
        with self.assertRaisesRegex(bench_build.BuildError, "no such kernel source"):
            bench_build.build_shared(os.path.join(HERE, "absent.cu"), "/tmp/absent.so")

    def test_missing_library(self):
        with self.assertRaisesRegex(EvolvedError, "not found"):
            EvolvedLib(os.path.join(HERE, "absent.so"))

    @unittest.skipUnless(shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc"), "nvcc not installed")
    def test_builds_loads_and_calls_through_ctypes(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, lib = os.path.join(tmp, "stub.cu"), os.path.join(tmp, "stub.so")
            with open(src, "w") as f:
                f.write(STUB_KERNEL)
            bench_build.build_shared(src, lib)
            fn = EvolvedLib(lib)._fn   # the same argtypes compare_sdpa uses, no GPU needed for this stub
            self.assertEqual(fn(None, None, None, None, 1, 8, 512, 512, 64, ctypes.c_float(0.125), 1, None), 0)
            self.assertEqual(fn(None, None, None, None, 1, 8, 512, 512, 96, ctypes.c_float(0.125), 1, None), 1)
            with open(src, "w") as f:
                f.write('extern "C" int some_other_entry() { return 0; }\n')
            bench_build.build_shared(src, os.path.join(tmp, "other.so"))
            with self.assertRaisesRegex(EvolvedError, "does not export evo_attention_forward"):
                EvolvedLib(os.path.join(tmp, "other.so"))
            with open(src, "w") as f:
                f.write("this is not CUDA")
            with self.assertRaisesRegex(bench_build.BuildError, "nvcc failed"):
                bench_build.build_shared(src, os.path.join(tmp, "bad.so"))


FAKE_LIBRARY = r"""
/* The exported entry points with void* for cudaStream_t: records which one ran, and how. */
int last_entry = 0, last_programmatic = -1, last_head_dim = 0, last_dtype = -1;
long long bound_ptr = 0, bound_at_call = -1;   /* the workspace bound when the last forward ran */
int evo_attention_forward(const void* q, const void* k, const void* v, void* o, int batch, int heads,
    int seq_q, int seq_k, int head_dim, float softmax_scale, int causal, void* stream) {
  last_entry = 1; last_programmatic = -1; last_head_dim = head_dim; bound_at_call = bound_ptr;
  return head_dim == 96 ? 7 : 0;
}
#ifdef WITH_WORKSPACE
long long bound_bytes = -1;
int binds = 0, unbinds = 0;
long long evo_attention_workspace_bytes(int batch, int heads, int heads_kv, int seq_q, int seq_k, int head_dim,
    int causal, int dtype, int varlen) {
  return head_dim == 96 ? -1 : seq_k >= 1024 ? 4096 : 0;   /* a split bucket from 1024 keys on */
}
int evo_attention_bind_workspace(void* stream, void* workspace, long long bytes) {
  if (workspace) { binds++; bound_ptr = (long long)workspace; bound_bytes = bytes; }
  else { unbinds++; bound_ptr = 0; bound_bytes = -1; }
  return 0;
}
#endif
#ifdef WITH_EX
int evo_attention_forward_ex(const void* q, const void* k, const void* v, void* o, int batch, int heads,
    int seq_q, int seq_k, int head_dim, float softmax_scale, int causal, void* stream, int programmatic) {
  last_entry = 2; last_programmatic = programmatic; last_head_dim = head_dim;
  return head_dim == 96 ? 8 : 0;
}
#endif
#ifdef WITH_GQA
int last_heads_kv = -1, last_seq_q = -1, last_seq_k = -1, last_causal = -1;
int evo_attention_forward_gqa(const void* q, const void* k, const void* v, void* o, int batch, int heads,
    int heads_kv, int seq_q, int seq_k, int head_dim, float softmax_scale, int causal, int dtype, void* stream,
    int programmatic) {
  last_entry = 4; last_programmatic = programmatic; last_head_dim = head_dim; last_heads_kv = heads_kv;
  last_seq_q = seq_q; last_seq_k = seq_k; last_causal = causal; last_dtype = dtype;
  return (head_dim == 96 || heads % heads_kv) ? 1 : 0;   /* cudaErrorInvalidValue: a call it cannot serve */
}
#endif
#ifdef WITH_VARLEN
int last_batch = -1, last_heads = -1, last_max_q = -1, last_max_k = -1, last_total_q = -1, last_total_k = -1;
int evo_attention_forward_varlen(const void* q, const void* k, const void* v, void* o, const int* cu_seqlens_q,
    const int* cu_seqlens_k, int batch, int heads, int heads_kv, int max_seq_q, int max_seq_k, int total_q,
    int total_k, int head_dim, float softmax_scale, int causal, int dtype, void* stream, int programmatic) {
  last_entry = 5; last_programmatic = programmatic; last_head_dim = head_dim; last_heads_kv = heads_kv;
  last_batch = batch; last_heads = heads; last_max_q = max_seq_q; last_max_k = max_seq_k; last_total_q = total_q;
  last_total_k = total_k; last_causal = causal; last_dtype = dtype;
  return (head_dim == 96 || heads % heads_kv) ? 1 : 0;
}
#endif
#ifdef WITH_FP8
/* Needs WITH_GQA and WITH_VARLEN (their last_* variables). */
long long last_ptrs[7];
int last_x_dtype = -1, last_transpose = -1, last_seq = -1;
int evo_attention_forward_fp8(const void* q, const void* k, const void* v_t, void* o, const float* q_scale,
    const float* k_scale, const float* v_scale, int batch, int heads, int heads_kv, int seq_q, int seq_k,
    int head_dim, float softmax_scale, int causal, void* stream, int programmatic) {
  const void* ptrs[7] = {q, k, v_t, o, q_scale, k_scale, v_scale};
  for (int i = 0; i < 7; ++i) last_ptrs[i] = (long long)ptrs[i];
  last_entry = 6; last_programmatic = programmatic; last_head_dim = head_dim; last_heads_kv = heads_kv;
  last_batch = batch; last_heads = heads; last_seq_q = seq_q; last_seq_k = seq_k; last_causal = causal;
  return head_dim == 96 ? 1 : 0;   /* cudaErrorInvalidValue: no e4m3 genome serves it */
}
int evo_attention_quantize_fp8(const void* x, int x_dtype, void* out, float* scales, int batch, int heads,
    int seq, int head_dim, int transpose, void* stream) {
  const void* ptrs[3] = {x, out, scales};
  for (int i = 0; i < 3; ++i) last_ptrs[i] = (long long)ptrs[i];
  last_entry = 7; last_x_dtype = x_dtype; last_batch = batch; last_heads = heads; last_seq = seq;
  last_head_dim = head_dim; last_transpose = transpose;
  return head_dim == 96 ? 1 : 0;
}
#endif
#ifdef WITH_DTYPE
int evo_attention_forward_dtype(const void* q, const void* k, const void* v, void* o, int batch, int heads,
    int seq_q, int seq_k, int head_dim, float softmax_scale, int causal, int dtype, void* stream,
    int programmatic) {
  last_entry = 3; last_programmatic = programmatic; last_head_dim = head_dim; last_dtype = dtype;
  return head_dim == 96 ? 9 : 0;
}
#endif
"""


class FakeTensor:
    def __init__(self, shape, ptr=0, dtype="torch.float16"):
        self.shape, self.filled, self.device, self.ptr, self.dtype = tuple(shape), None, "cuda:0", ptr, dtype

    def repeat_interleave(self, repeats, dim):
        return FakeTensor(self.shape[:dim] + (self.shape[dim] * repeats,) + self.shape[dim + 1:])

    def data_ptr(self):
        return self.ptr

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def fill_(self, value):
        self.filled = value
        return self


def fake_torch():
    """Just what evolved_lib.forward and compare_sdpa.make_candidates touch, as modules for sys.modules."""
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(current_stream=lambda: types.SimpleNamespace(cuda_stream=0))
    torch.empty_like = lambda t: FakeTensor(t.shape)
    torch.empty = lambda shape, dtype=None, device=None: FakeTensor(shape, dtype=dtype)
    torch.bfloat16 = "torch.bfloat16"
    torch.bool = "bool"
    # ones(sq, sk).tril(d): a dense mask, as ("dense_mask", sq, sk, d).
    torch.ones = lambda sq, sk, **_: types.SimpleNamespace(tril=lambda d: ("dense_mask", sq, sk, d))
    nn, functional, attention, bias = (types.ModuleType(n) for n in ("torch.nn", "torch.nn.functional",
                                                                     "torch.nn.attention", "torch.nn.attention.bias"))
    functional.sdpa_calls = []   # (q, k, v, kwargs) of each scaled_dot_product_attention call

    def sdpa(q, k, v, **kwargs):
        functional.sdpa_calls.append((q, k, v, kwargs))
    functional.scaled_dot_product_attention = sdpa
    attention.SDPBackend = types.SimpleNamespace(CUDNN_ATTENTION="cudnn", FLASH_ATTENTION="flash")
    attention.sdpa_kernel = lambda backends: None
    bias.causal_lower_right = lambda *size: ("causal_lower_right",) + size
    torch.nn, nn.functional, nn.attention, attention.bias = nn, functional, attention, bias
    return {"torch": torch, "torch.nn": nn, "torch.nn.functional": functional, "torch.nn.attention": attention,
            "torch.nn.attention.bias": bias}


@unittest.skipUnless(shutil.which("cc"), "no C compiler")
class PlainLaunch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.old_lib, cls.new_lib = (os.path.join(cls.tmp, n) for n in ("old.so", "new.so"))
        src = os.path.join(cls.tmp, "fake.c")
        with open(src, "w") as f:
            f.write(FAKE_LIBRARY)
        subprocess.run(["cc", "-shared", "-fPIC", "-o", cls.old_lib, src], check=True)
        subprocess.run(["cc", "-shared", "-fPIC", "-DWITH_EX", "-o", cls.new_lib, src], check=True)
        cls.bf16_lib = os.path.join(cls.tmp, "bf16.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-DWITH_EX", "-DWITH_DTYPE", "-o", cls.bf16_lib, src], check=True)
        cls.gqa_lib = os.path.join(cls.tmp, "gqa.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-DWITH_EX", "-DWITH_DTYPE", "-DWITH_GQA", "-o", cls.gqa_lib, src],
                       check=True)
        cls.varlen_lib = os.path.join(cls.tmp, "varlen.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-DWITH_EX", "-DWITH_DTYPE", "-DWITH_GQA", "-DWITH_VARLEN", "-o",
                        cls.varlen_lib, src], check=True)
        cls.ws_lib = os.path.join(cls.tmp, "ws.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-DWITH_EX", "-DWITH_WORKSPACE", "-o", cls.ws_lib, src], check=True)
        cls.fp8_lib = os.path.join(cls.tmp, "fp8.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-DWITH_EX", "-DWITH_DTYPE", "-DWITH_GQA", "-DWITH_VARLEN",
                        "-DWITH_FP8", "-o", cls.fp8_lib, src], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    @staticmethod
    def last_call(lib):
        """(1: evo_attention_forward or 2: evo_attention_forward_ex, its programmatic_launch or -1)."""
        return tuple(ctypes.c_int.in_dll(lib._lib, n).value for n in ("last_entry", "last_programmatic"))

    def call(self, lib, head_dim=64, **kwargs):
        q = FakeTensor((1, 8, 512, head_dim))
        with mock.patch.dict(sys.modules, fake_torch()):
            lib.forward(q, q, q, FakeTensor(q.shape), False, 0.125, **kwargs)
        return self.last_call(lib)

    def test_a_workspace_is_bound_to_the_stream_for_the_call_alone(self):
        lib = EvolvedLib(self.ws_lib)
        short, long_ = FakeTensor((1, 8, 512, 64)), FakeTensor((1, 8, 1024, 64))
        self.assertEqual(lib.workspace_bytes(short, short, False), 0)
        self.assertEqual(lib.workspace_bytes(long_, long_, False), 4096)
        self.assertEqual(lib.workspace_bytes(FakeTensor((1, 8, 512, 96)), short, False), 0, "refused: forward says why")

        def counter(name):   # the fake's pointers are long long, its counts int
            kind = ctypes.c_longlong if name in ("bound_ptr", "bound_at_call") else ctypes.c_int
            return kind.in_dll(lib._lib, name).value
        workspace = FakeTensor((4096,), ptr=0x1000)
        self.call(lib, workspace=workspace)
        self.assertEqual(counter("bound_at_call"), 0x1000, "bound while the call ran")
        self.assertEqual((counter("binds"), counter("unbinds"), counter("bound_ptr")), (1, 1, 0), "unbound after")
        with self.assertRaisesRegex(EvolvedError, "evo_attention_forward returned 7"):
            self.call(lib, head_dim=96, workspace=workspace)
        self.assertEqual((counter("binds"), counter("unbinds"), counter("bound_ptr")), (2, 2, 0),
                         "unbound after a refused call too")
        self.call(lib)
        self.assertEqual(counter("bound_at_call"), 0, "no workspace: the library's own")

    def test_a_library_without_workspace_binding_sizes_none_and_refuses_one(self):
        lib = EvolvedLib(self.new_lib)
        q = FakeTensor((1, 8, 1024, 64))
        self.assertEqual(lib.workspace_bytes(q, q, False), 0)
        with self.assertRaisesRegex(EvolvedError, "does not export evo_attention_bind_workspace"):
            self.call(lib, workspace=FakeTensor((4096,), ptr=0x1000))

    def test_a_library_without_the_ex_entry_runs_only_the_pdl_launch(self):
        lib = EvolvedLib(self.old_lib)
        self.assertFalse(lib.has_plain_launch)
        self.assertEqual(self.call(lib), (1, -1))
        with self.assertRaisesRegex(EvolvedError, "does not export evo_attention_forward_ex"):
            self.call(lib, programmatic=False)

    def test_the_ex_entry_is_called_with_0_for_a_plain_launch(self):
        lib = EvolvedLib(self.new_lib)
        self.assertTrue(lib.has_plain_launch)
        self.assertEqual(self.call(lib), (1, -1))                        # as exported: the PDL entry
        self.assertEqual(self.call(lib, programmatic=False), (2, 0))
        with self.assertRaisesRegex(EvolvedError, "evo_attention_forward_ex returned 8"):
            self.call(lib, head_dim=96, programmatic=False)
        with self.assertRaisesRegex(EvolvedError, "evo_attention_forward returned 7"):
            self.call(lib, head_dim=96)

    def test_bf16_calls_go_through_the_dtype_entry_and_need_it(self):
        lib = EvolvedLib(self.bf16_lib)
        self.assertTrue(lib.has_dtype_entry)
        self.assertEqual(self.call(lib, dtype="bf16"), (3, 1))
        self.assertEqual(ctypes.c_int.in_dll(lib._lib, "last_dtype").value, 1)
        self.assertEqual(self.call(lib, dtype="bf16", programmatic=False), (3, 0))
        self.assertEqual(self.call(lib), (1, -1), "fp16 keeps the entry point it always had")
        with self.assertRaisesRegex(EvolvedError, "evo_attention_forward_dtype returned 9"):
            self.call(lib, head_dim=96, dtype="bf16")
        with self.assertRaisesRegex(EvolvedError, "unknown dtype 'fp8'"):
            self.call(lib, dtype="fp8")
        old = EvolvedLib(self.new_lib)
        self.assertFalse(old.has_dtype_entry)
        with self.assertRaisesRegex(EvolvedError, "exported before bf16"):
            self.call(old, dtype="bf16")
        with mock.patch.dict(sys.modules, fake_torch()):
            q = FakeTensor((1, 8, 512, 64))
            cands = compare_sdpa.make_candidates(sys.modules["torch"], q, q, q, False, 0.125, (old, "", ""), None,
                                                 "bf16")
            self.assertEqual([c.unavailable for c in cands[3:]], [compare_sdpa.DTYPE_ENTRY_MISSING] * 2)

    def gqa_call(self, lib, q_shape, k_shape, causal=True, **kwargs):
        q, k = FakeTensor(q_shape), FakeTensor(k_shape)
        with mock.patch.dict(sys.modules, fake_torch()):
            lib.forward(q, k, k, FakeTensor(q.shape), causal, 0.088, **kwargs)
        names = ("last_entry", "last_programmatic", "last_heads_kv", "last_seq_q", "last_seq_k", "last_causal",
                 "last_dtype")
        return tuple(ctypes.c_int.in_dll(lib._lib, n).value for n in names)

    def test_grouped_heads_and_unequal_lengths_go_through_the_gqa_entry_and_need_it(self):
        lib = EvolvedLib(self.gqa_lib)
        self.assertTrue(lib.has_gqa_entry)
        chunk_q, chunk_kv = (1, 32, 512, 128), (1, 8, 4096, 128)
        self.assertEqual(self.gqa_call(lib, chunk_q, chunk_kv, dtype="bf16"), (4, 1, 8, 512, 4096, 1, 1))
        self.assertEqual(self.gqa_call(lib, chunk_q, chunk_kv, dtype="bf16", programmatic=False),
                         (4, 0, 8, 512, 4096, 1, 1))
        self.assertEqual(self.gqa_call(lib, (16, 32, 1, 128), (16, 8, 4096, 128), causal=False),   # fp16 decode
                         (4, 1, 8, 1, 4096, 0, 0))
        self.assertEqual(self.gqa_call(lib, (1, 8, 512, 64), (1, 8, 1024, 64))[:5], (4, 1, 8, 512, 1024))
        self.assertEqual(self.call(lib), (1, -1), "equal heads and lengths keep the entry points they had")
        self.assertEqual(self.call(lib, dtype="bf16"), (3, 1))
        with self.assertRaisesRegex(EvolvedError, r"evo_attention_forward_gqa returned 1 for q \(1, 32, 512, 96\)"):
            self.gqa_call(lib, (1, 32, 512, 96), (1, 8, 4096, 96))
        old = EvolvedLib(self.bf16_lib)
        self.assertFalse(old.has_gqa_entry)
        with self.assertRaisesRegex(EvolvedError, "does not export evo_attention_forward_gqa"):
            self.gqa_call(old, chunk_q, chunk_kv, dtype="bf16")
        with mock.patch.dict(sys.modules, fake_torch()):
            torch = sys.modules["torch"]
            q, k = FakeTensor(chunk_q), FakeTensor(chunk_kv)
            cands = compare_sdpa.make_candidates(torch, q, k, k, True, 0.088, (old, "", ""), None, "bf16")
            self.assertEqual([(c.name, c.call, c.unavailable) for c in cands[3:]],
                             [("evolved_plain", None, compare_sdpa.GQA_ENTRY_MISSING),
                              ("evolved", None, compare_sdpa.GQA_ENTRY_MISSING)])
            plain, pdl = compare_sdpa.make_candidates(torch, q, k, k, True, 0.088, (lib, "", ""), None, "bf16")[3:]
            self.assertEqual((plain.unavailable, pdl.unavailable), ("", ""))
            plain.call()
            self.assertEqual(self.last_call(lib), (4, 0))
            pdl.call()
            self.assertEqual(self.last_call(lib), (4, 1))

    def test_packed_batches_go_through_the_varlen_entry_and_need_it(self):
        lib = EvolvedLib(self.varlen_lib)
        self.assertTrue(lib.has_varlen_entry)
        self.assertFalse(EvolvedLib(self.gqa_lib).has_varlen_entry)
        names = ("last_entry", "last_programmatic", "last_batch", "last_heads", "last_heads_kv", "last_max_q",
                 "last_max_k", "last_total_q", "last_total_k", "last_head_dim", "last_causal", "last_dtype")

        def varlen_call(lib, head_dim=128, **kwargs):
            q, k = FakeTensor((10967, 32, head_dim)), FakeTensor((11479, 8, head_dim))
            with mock.patch.dict(sys.modules, fake_torch()):
                lib.forward_varlen(q, k, k, FakeTensor(q.shape), FakeTensor((9,)), FakeTensor((9,)), 3000, 3512, True,
                                   0.088, **kwargs)
            return tuple(ctypes.c_int.in_dll(lib._lib, n).value for n in names)
        self.assertEqual(varlen_call(lib, dtype="bf16"), (5, 1, 8, 32, 8, 3000, 3512, 10967, 11479, 128, 1, 1))
        self.assertEqual(varlen_call(lib, programmatic=False)[:2], (5, 0))
        self.assertEqual(varlen_call(lib)[-1], 0)                                  # fp16
        with self.assertRaisesRegex(EvolvedError, r"evo_attention_forward_varlen returned 1 for q \(10967, 32, 96\)"):
            varlen_call(lib, head_dim=96)
        with self.assertRaisesRegex(EvolvedError, "unknown dtype 'fp8'"):
            varlen_call(lib, dtype="fp8")
        old = EvolvedLib(self.gqa_lib)
        with self.assertRaisesRegex(EvolvedError, "does not export evo_attention_forward_varlen"):
            varlen_call(old)
        with mock.patch.dict(sys.modules, fake_torch()):
            torch = sys.modules["torch"]
            q, k, cu = FakeTensor((267, 32, 128)), FakeTensor((267, 8, 128)), FakeTensor((3,))
            data = compare_sdpa.VarlenInputs(q, k, k, cu, cu, (17, 250), (17, 250))
            self.assertEqual((data.max_seq_q, data.max_seq_k), (250, 250))
            cands = compare_sdpa.varlen_evolved_candidates(torch, data, True, 0.088, (old, "", ""), "bf16")
            self.assertEqual([(c.name, c.call, c.unavailable) for c in cands],
                             [("evolved_plain", None, compare_sdpa.VARLEN_ENTRY_MISSING),
                              ("evolved", None, compare_sdpa.VARLEN_ENTRY_MISSING)])
            none = compare_sdpa.varlen_evolved_candidates(torch, data, True, 0.088, (None, "", "no --evolved library"))
            self.assertEqual([c.unavailable for c in none], ["no --evolved library"] * 2)
            plain, pdl = compare_sdpa.varlen_evolved_candidates(torch, data, True, 0.088, (lib, "g1", ""), "bf16")
            self.assertEqual((plain.name, pdl.name, plain.config()), ("evolved_plain", "evolved", "g1"))
            plain.poison()
            out = plain.call()
            self.assertTrue(math.isnan(out.filled))                     # poisoned, its own packed output
            self.assertEqual(out.shape, (267, 32, 128))
            self.assertEqual(self.last_call(lib), (5, 0))
            self.assertEqual(ctypes.c_int.in_dll(lib._lib, "last_batch").value, 2)
            self.assertIsNot(pdl.call(), out)
            self.assertEqual(self.last_call(lib), (5, 1))

    @staticmethod
    def fp8_data(q_shape=(2, 16, 4096, 128), kv_shape=(2, 16, 4096, 128)):
        """Fp8Inputs of FakeTensors whose data_ptr()s name them: 1 q, 2 k, 3 v, 11 q8, 12 k8, 13 v8, 14 vt8,
        15 vt8_evo, 21 q_scale, 22 k_scale, 23 v_scale."""
        b, h_kv, s_k, d = kv_shape
        vt_shape = (b, h_kv, d, bench_shapes.fp8_pitch(s_k))
        shapes = (q_shape, kv_shape, kv_shape, q_shape, kv_shape, kv_shape, vt_shape, vt_shape,
                  (q_shape[0] * q_shape[1],), (b * h_kv,), (b * h_kv,))
        ptrs = (1, 2, 3, 11, 12, 13, 14, 15, 21, 22, 23)
        return compare_sdpa.Fp8Inputs(*(FakeTensor(shape, ptr) for shape, ptr in zip(shapes, ptrs)))

    def test_fp8_calls_pass_bytes_scales_and_transposed_v_in_the_entry_points_order(self):
        lib = EvolvedLib(self.fp8_lib)
        self.assertTrue((lib.has_fp8_entry, lib.has_fp8_quantizer) == (True, True))
        old = EvolvedLib(self.varlen_lib)
        self.assertEqual((old.has_fp8_entry, old.has_fp8_quantizer), (False, False))
        data = self.fp8_data((1, 32, 512, 128), (1, 8, 4096, 128))
        names = ("last_entry", "last_programmatic", "last_batch", "last_heads", "last_heads_kv", "last_seq_q",
                 "last_seq_k", "last_head_dim", "last_causal")

        def fp8_call(lib, data, **kwargs):
            o = FakeTensor(data.q.shape, ptr=31, dtype="torch.bfloat16")
            with mock.patch.dict(sys.modules, fake_torch()):
                lib.forward_fp8(data.q8, data.k8, data.vt8, o, data.q_scale, data.k_scale, data.v_scale, True, 0.088,
                                **kwargs)
            return (tuple(ctypes.c_int.in_dll(lib._lib, n).value for n in names),
                    list((ctypes.c_longlong * 7).in_dll(lib._lib, "last_ptrs")))
        ints, ptrs = fp8_call(lib, data)
        self.assertEqual(ints, (6, 1, 1, 32, 8, 512, 4096, 128, 1))
        self.assertEqual(ptrs, [11, 12, 14, 31, 21, 22, 23])          # V goes transposed; scales after o
        self.assertEqual(fp8_call(lib, data, programmatic=False)[0][:2], (6, 0))
        with self.assertRaisesRegex(EvolvedError, r"forward_fp8 returned 1 for q \(1, 32, 512, 96\)") as ctx:
            fp8_call(lib, self.fp8_data((1, 32, 512, 96), (1, 8, 4096, 96)))
        self.assertEqual(ctx.exception.code, 1)
        with self.assertRaisesRegex(EvolvedError, "does not export evo_attention_forward_fp8"):
            fp8_call(old, data)

        def quantize_call(lib, x, transpose, head_dim=128):
            with mock.patch.dict(sys.modules, fake_torch()):
                lib.quantize_fp8(x, FakeTensor((1,), ptr=41), FakeTensor((16,), ptr=42), transpose)
            ints = ("last_entry", "last_x_dtype", "last_batch", "last_heads", "last_seq", "last_head_dim",
                    "last_transpose")
            return (tuple(ctypes.c_int.in_dll(lib._lib, n).value for n in ints),
                    list((ctypes.c_longlong * 7).in_dll(lib._lib, "last_ptrs"))[:3])
        self.assertEqual(quantize_call(lib, FakeTensor((2, 8, 777, 128), ptr=40), True),
                         ((7, 0, 2, 8, 777, 128, 1), [40, 41, 42]))
        self.assertEqual(quantize_call(lib, FakeTensor((2, 8, 17, 64), ptr=40, dtype="torch.bfloat16"), False)[0],
                         (7, 1, 2, 8, 17, 64, 0))
        with self.assertRaisesRegex(EvolvedError, "takes fp16 or bf16 input, not torch.float32"):
            quantize_call(lib, FakeTensor((2, 8, 17, 64), dtype="torch.float32"), False)
        with self.assertRaisesRegex(EvolvedError, "evo_attention_quantize_fp8 returned 1"):
            quantize_call(lib, FakeTensor((2, 8, 17, 96)), False)
        with self.assertRaisesRegex(EvolvedError, "does not export evo_attention_quantize_fp8"):
            quantize_call(old, FakeTensor((2, 8, 17, 64)), False)

    def test_fp8_rows_time_the_fp8_kernels_and_16_bit_baselines(self):
        lib = EvolvedLib(self.fp8_lib)
        with mock.patch.dict(sys.modules, fake_torch()):
            torch = sys.modules["torch"]
            data = self.fp8_data((1, 32, 512, 128), (1, 8, 4096, 128))
            cands = compare_sdpa.make_fp8_candidates(torch, data, True, 0.088, (lib, "g8", ""), (lib, "g16", ""), None)
            self.assertEqual([(c.name, c.dtype, c.reference) for c in cands],
                             [("cudnn", "fp16", "fp16"), ("flash", "fp16", "fp16"), ("triton", "e4m3", ""),
                              ("evolved_fp16", "fp16", "fp16"), ("evolved_plain", "e4m3", "quantized"),
                              ("evolved", "e4m3", "quantized")])
            self.assertEqual(cands[2].unavailable, "Triton not available")
            # The 16-bit baselines run the fp16 draws; so does an SDPA fallback on expanded K/V.
            cands[0].call()
            q, k, v, _ = sys.modules["torch.nn.functional"].sdpa_calls[-1]
            self.assertEqual((q.ptr, k.ptr, v.ptr), (1, 2, 3))
            expanded = cands[0].fallback()
            self.assertEqual((expanded.dtype, expanded.reference, expanded.variant),
                             ("fp16", "fp16", bench_report.EXPANDED_KV))
            self.assertEqual(self.last_call(lib), (4, 1))      # the fp16 probe: the gqa entry, as exported
            plain, pdl = cands[4:]
            self.assertEqual((plain.config(), pdl.config()), ("g8", "g8"))
            pdl.poison()
            out = pdl.call()
            self.assertTrue(math.isnan(out.filled))
            self.assertEqual((out.shape, out.dtype), ((1, 32, 512, 128), "torch.bfloat16"))
            self.assertEqual(list((ctypes.c_longlong * 7).in_dll(lib._lib, "last_ptrs"))[2], 15,
                             "the library gets V^T in its own key order")
            self.assertEqual(self.last_call(lib), (6, 1))
            plain.call()
            self.assertEqual(self.last_call(lib), (6, 0))
            # A library that refuses fp16 for the shape (1: no genome serves it) or cannot take it is left out.
            refused = self.fp8_data((1, 32, 512, 96), (1, 8, 4096, 96))
            names = [c.name for c in compare_sdpa.make_fp8_candidates(torch, refused, True, 0.088, (lib, "", ""),
                                                                        (lib, "", ""), None)]
            self.assertEqual(names, ["cudnn", "flash", "triton", "evolved_plain", "evolved"])
            older = EvolvedLib(self.bf16_lib)    # no gqa entry, no fp8 entry
            cands = compare_sdpa.make_fp8_candidates(torch, data, True, 0.088, (older, "", ""), (older, "", ""), None)
            self.assertEqual([(c.name, c.unavailable) for c in cands[3:]],
                             [("evolved_plain", compare_sdpa.FP8_ENTRY_MISSING),
                              ("evolved", compare_sdpa.FP8_ENTRY_MISSING)])
            none = compare_sdpa.make_fp8_candidates(torch, data, True, 0.088, (None, "", "no dispatch entry"),
                                                    (None, "", "no dispatch entry"), None)
            self.assertEqual([(c.name, c.unavailable) for c in none[3:]],
                             [("evolved_plain", "no dispatch entry"), ("evolved", "no dispatch entry")])
            # A library that serves fp16 for an equal-head shape: its fp16 kernel joins, PDL allowed.
            dense = self.fp8_data()
            cands = compare_sdpa.make_fp8_candidates(torch, dense, False, 0.088, (lib, "", ""), (lib, "g16", ""),
                                                     None)
            self.assertEqual([c.name for c in cands][3], "evolved_fp16")
            self.assertEqual(cands[3].config(), "g16")
            cands[3].call()
            self.assertEqual(self.last_call(lib), (1, -1))
            self.assertEqual(compare_sdpa.quantizer_check(torch, None, dense), {})
            self.assertEqual(compare_sdpa.quantizer_check(torch, older, dense),
                             {"lib": "bf16.so", "note": compare_sdpa.QUANTIZER_MISSING})

    def test_sdpa_gets_native_gqa_and_bottom_right_causal(self):
        with mock.patch.dict(sys.modules, fake_torch()):
            torch, F = sys.modules["torch"], sys.modules["torch.nn.functional"]

            def sdpa_kwargs(q_shape, k_shape, causal):
                q, k = FakeTensor(q_shape), FakeTensor(k_shape)
                cands = compare_sdpa.make_candidates(torch, q, k, k, causal, 0.088, (None, "", "none"), None, "bf16")
                for cand in cands[:2]:
                    cand.call()
                (_, k0, _, cudnn), (_, k1, _, flash) = F.sdpa_calls[-2:]
                self.assertEqual((k0, k1), (k, k))
                if "attn_mask" in flash:  # cuDNN's mask is built once, dense, as torch would per call
                    self.assertEqual(cudnn["attn_mask"], ("dense_mask", q_shape[2], k_shape[2], k_shape[2] - q_shape[2]))
                    self.assertEqual({**cudnn, "attn_mask": flash["attn_mask"]}, flash)
                else:
                    self.assertEqual(cudnn, flash)
                return cands, flash
            # Chunked prefill: lower-right causal as a CausalBias, never is_causal (top-left in SDPA).
            cands, kwargs = sdpa_kwargs((1, 32, 512, 128), (1, 8, 4096, 128), True)
            self.assertEqual(kwargs, {"scale": 0.088, "attn_mask": ("causal_lower_right", 512, 4096),
                                      "is_causal": False, "enable_gqa": True})
            self.assertEqual((cands[0].how, cands[1].how), (compare_sdpa.CUDNN_LOWER_RIGHT, ""))
            # Equal lengths: is_causal as always; GQA only where the heads differ.
            self.assertEqual(sdpa_kwargs((1, 32, 2048, 128), (1, 8, 2048, 128), True)[1],
                             {"scale": 0.088, "is_causal": True, "enable_gqa": True})
            cands, kwargs = sdpa_kwargs((1, 8, 512, 64), (1, 8, 512, 64), True)
            self.assertEqual(kwargs, {"scale": 0.088, "is_causal": True})       # the call it always was
            self.assertIsNone(cands[0].fallback)
            self.assertEqual(cands[0].how, "")
            # Decode runs non-causal.
            cands, kwargs = sdpa_kwargs((16, 32, 1, 128), (16, 8, 4096, 128), False)
            self.assertEqual(kwargs, {"scale": 0.088, "is_causal": False, "enable_gqa": True})
            # The labelled fallback: K and V expanded to every query head once, no enable_gqa.
            expanded = cands[0].fallback()
            self.assertIs(cands[0].fallback(), expanded)
            self.assertEqual((expanded.name, expanded.variant), ("cudnn", bench_report.EXPANDED_KV))
            expanded.call()
            _, k_all, v_all, kwargs = F.sdpa_calls[-1]
            self.assertEqual((k_all.shape, v_all.shape), ((16, 32, 4096, 128), (16, 32, 4096, 128)))
            self.assertEqual(kwargs, {"scale": 0.088, "is_causal": False})

    def test_candidates_keep_the_evolved_kernels_last_and_say_why_one_cannot_run(self):
        with mock.patch.dict(sys.modules, fake_torch()):
            torch = sys.modules["torch"]
            q = FakeTensor((1, 8, 512, 64))

            def make(evolved):
                return compare_sdpa.make_candidates(torch, q, q, q, False, 0.125, evolved, None)
            old_lib = EvolvedLib(self.old_lib)
            old = make((old_lib, "g1", ""))
            self.assertEqual([c.name for c in old], ["cudnn", "flash", "triton", "evolved_plain", "evolved"])
            self.assertIn("plain launches were selectable", old[3].unavailable)
            self.assertIsNone(old[3].call)
            self.assertEqual((old[4].unavailable, old[4].config()), ("", "g1"))
            old[4].call()
            self.assertEqual(self.last_call(old_lib), (1, -1))

            none = make((None, "", "no --evolved library given"))
            self.assertEqual([(c.name, c.call, c.unavailable) for c in none[3:]],
                             [("evolved_plain", None, "no --evolved library given"),
                              ("evolved", None, "no --evolved library given")])

            lib = EvolvedLib(self.new_lib)
            plain, pdl = make((lib, "", ""))[3:]
            self.assertEqual((plain.name, plain.unavailable, plain.config()), ("evolved_plain", "", "new.so"))
            plain.poison()
            out = plain.call()
            self.assertTrue(math.isnan(out.filled))                        # poisoned, its own output
            self.assertEqual(self.last_call(lib), (2, 0))
            pdl.poison()
            self.assertIsNot(pdl.call(), out)
            self.assertEqual(self.last_call(lib), (1, -1))


class Fallback(unittest.TestCase):
    """compare_sdpa.measure with stand-ins for torch and the timing module."""
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None))
    timing = types.SimpleNamespace(rel_l2=lambda out, ref: 3e-3,
                                   per_launch_us=lambda fn, iters, flusher, report=None: (fn(), 5.0)[1],
                                   graph_replay_us=lambda fn, calls, replays: (fn(), 4.0)[1])
    args = types.SimpleNamespace(iters=3, graph_calls=1, graph_replays=3)

    def measure(self, cand):
        return compare_sdpa.measure(self.torch, self.timing, cand, None, self.args, None)

    @staticmethod
    def refused():
        raise RuntimeError("No available kernel. Aborting execution.\nsecond line")

    def test_a_refused_native_gqa_call_runs_on_expanded_kv_and_says_so(self):
        built = []

        def expanded():
            built.append(1)
            return compare_sdpa.Candidate("cudnn", lambda: "out", variant=bench_report.EXPANDED_KV)
        res = self.measure(compare_sdpa.Candidate("cudnn", self.refused, fallback=expanded))
        self.assertEqual(built, [1])
        self.assertEqual((res["variant"], res["rel_l2"], res["graph_us"], res["launch_us"]),
                         (bench_report.EXPANDED_KV, 3e-3, 4.0, 5.0))
        self.assertEqual(res["note"],
                         "expanded kv: the enable_gqa call refused: No available kernel. Aborting execution.")
        # Bottom-right causal too: the cuDNN note on how it got the mask appears once.
        res = self.measure(compare_sdpa.Candidate("cudnn", self.refused, how=compare_sdpa.CUDNN_LOWER_RIGHT,
                                                  fallback=lambda: compare_sdpa.Candidate(
                                                      "cudnn", lambda: "out", how=compare_sdpa.CUDNN_LOWER_RIGHT,
                                                      variant=bench_report.EXPANDED_KV)))
        self.assertEqual(res["note"], "expanded kv: the enable_gqa call refused: No available kernel. Aborting "
                                      "execution.; " + compare_sdpa.CUDNN_LOWER_RIGHT)

    def test_no_fallback_where_the_native_call_runs_or_none_exists(self):
        def never():
            raise AssertionError("the fallback ran although the native call was not refused")
        res = self.measure(compare_sdpa.Candidate("flash", lambda: "out", fallback=never))
        self.assertEqual((res["rel_l2"], res["note"]), (3e-3, ""))
        self.assertNotIn("variant", res)
        res = self.measure(compare_sdpa.Candidate("cudnn", self.refused, how=compare_sdpa.CUDNN_LOWER_RIGHT))
        self.assertEqual(res["note"], "refused: No available kernel. Aborting execution.; "
                                      + compare_sdpa.CUDNN_LOWER_RIGHT)
        self.assertIsNone(res["rel_l2"])
        res = self.measure(compare_sdpa.Candidate("cudnn", lambda: "out", how=compare_sdpa.CUDNN_LOWER_RIGHT))
        self.assertEqual((res["note"], res["rel_l2"]), (compare_sdpa.CUDNN_LOWER_RIGHT, 3e-3))

    def test_a_fallback_that_cannot_be_built_leaves_the_refusal(self):
        def no_memory():
            raise RuntimeError("CUDA out of memory")
        res = self.measure(compare_sdpa.Candidate("cudnn", self.refused, fallback=no_memory))
        self.assertEqual(res["note"], "refused: No available kernel. Aborting execution.; "
                                      "expanded kv not built: CUDA out of memory")


def _torch_at_least(major: int, minor: int) -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch
    return tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (major, minor)


@unittest.skipUnless(importlib.util.find_spec("torch") is not None, "PyTorch is not installed here")
class VarlenReference(unittest.TestCase):
    """The packed batch's reference and the SDPA peers' padding, on the CPU in float32."""

    def setUp(self):
        import torch
        import bench_timing
        self.torch, self.timing = torch, bench_timing
        gen = torch.Generator().manual_seed(7)
        # Two sequences: 2 queries over 3 keys (bottom-right causal: row 0 sees keys 0..1) and 3 over 3;
        # 4 query heads over 2 K/V heads, head dim 8.
        self.seqlens_q, self.seqlens_k = (2, 3), (3, 3)
        self.q = torch.randn(5, 4, 8, generator=gen)
        self.k = torch.randn(6, 2, 8, generator=gen)
        self.v = torch.randn(6, 2, 8, generator=gen)

    def reference(self, causal, k=None, v=None):
        return self.timing.reference_attention_varlen(self.q, self.k if k is None else k, self.v if v is None else v,
                                                      self.seqlens_q, self.seqlens_k, causal, 0.35)

    def naive(self, causal):
        """Row by row: sequence b's query row i of head h over keys j of KV head h // 2 that it sees."""
        torch = self.torch
        out = torch.zeros(5, 4, 8)
        q_at = k_at = 0
        for seq_q, seq_k in zip(self.seqlens_q, self.seqlens_k):
            for i in range(seq_q):
                seen = [j for j in range(seq_k) if not causal or j <= i + seq_k - seq_q]
                for h in range(4):
                    keys = self.k[[k_at + j for j in seen], h // 2]
                    weights = torch.softmax(keys @ self.q[q_at + i, h] * 0.35, dim=0)
                    out[q_at + i, h] = weights @ self.v[[k_at + j for j in seen], h // 2]
            q_at += seq_q
            k_at += seq_k
        return out

    def test_each_sequence_sees_its_own_keys_bottom_right(self):
        for causal in (False, True):
            ref = self.reference(causal)
            self.assertEqual((tuple(ref.shape), ref.dtype), ((5, 4, 8), self.torch.float32))
            self.assertTrue(self.torch.allclose(ref, self.naive(causal), atol=1e-5), causal)
        # Causal row 0 of the 3-over-3 sequence (packed row 2) sees its own key 0 alone: V row 3 exactly.
        ref = self.reference(True)
        for h in range(4):
            self.assertTrue(self.torch.allclose(ref[2, h], self.v[3, h // 2]))
        # Changing the second sequence's keys and values leaves the first one's output alone.
        k, v = self.k.clone(), self.v.clone()
        k[3:], v[3:] = 5.0, -5.0
        changed = self.reference(True, k, v)
        self.assertTrue(self.torch.equal(changed[:2], ref[:2]))
        self.assertFalse(self.torch.allclose(changed[2:], ref[2:]))
        with self.assertRaisesRegex(ValueError, "lengths sum to"):
            self.timing.reference_attention_varlen(self.q, self.k, self.v, (2, 2), (3, 3), False, 0.35)

    def test_padded_mask_pads_and_unpads(self):
        torch = self.torch
        mask = compare_sdpa.padded_mask(torch, self.seqlens_q, self.seqlens_k, True, "cpu")
        self.assertEqual(tuple(mask.shape), (2, 1, 3, 3))
        self.assertEqual(mask[:, 0].tolist(), [[[True, True, False], [True, True, True], [True, True, True]],
                                               [[True, False, False], [True, True, False], [True, True, True]]])
        short = compare_sdpa.padded_mask(torch, (1, 2), (1, 2), False, "cpu")   # key padding alone
        self.assertEqual(short[:, 0].tolist(), [[[True, False], [True, False]], [[True, True], [True, True]]])
        data = compare_sdpa.VarlenInputs(self.q, self.k, self.v, None, None, self.seqlens_q, self.seqlens_k)
        q_pad, k_pad, v_pad = compare_sdpa.padded_inputs(torch, data)
        self.assertIs(compare_sdpa.padded_inputs(torch, data)[0], q_pad)            # built once
        self.assertEqual((tuple(q_pad.shape), tuple(k_pad.shape)), ((2, 4, 3, 8), (2, 2, 3, 8)))
        self.assertTrue(q_pad.is_contiguous())
        self.assertTrue(torch.equal(q_pad[0, :, 2], torch.zeros(4, 8)))          # padding rows are zeros
        self.assertTrue(torch.equal(compare_sdpa.unpad(torch, q_pad, self.seqlens_q), self.q))
        # Masked attention on the padded batch, unpadded: the packed reference.
        for causal in (False, True):
            mask = compare_sdpa.padded_mask(torch, self.seqlens_q, self.seqlens_k, causal, "cpu")
            k_all, v_all = k_pad.repeat_interleave(2, dim=1), v_pad.repeat_interleave(2, dim=1)
            scores = (q_pad @ k_all.transpose(-1, -2) * 0.35).masked_fill(~mask, float("-inf"))
            out = compare_sdpa.unpad(torch, torch.softmax(scores, dim=-1) @ v_all, self.seqlens_q)
            self.assertTrue(torch.allclose(out, self.reference(causal), atol=1e-5), causal)
        views = compare_sdpa.sequence_views(data)
        self.assertEqual([tuple(t.shape) for t in views[0]], [(1, 4, 2, 8), (1, 2, 3, 8), (1, 2, 3, 8)])
        self.assertTrue(torch.equal(views[1][0][0, :, 0], self.q[2]))             # views, not copies
        self.assertEqual(views[1][0].data_ptr(), self.q[2].data_ptr())

    @unittest.skipUnless(_torch_at_least(2, 5), "SDPA's enable_gqa needs torch 2.5")
    def test_the_sdpa_peers_calls_match_the_reference(self):
        torch = self.torch
        data = compare_sdpa.VarlenInputs(self.q, self.k, self.v, None, None, self.seqlens_q, self.seqlens_k)
        for causal in (False, True):
            ref = self.reference(causal)
            padded = compare_sdpa.sdpa_padded_candidate(torch, "cudnn", None, data, causal, 0.35)
            looped = compare_sdpa.sdpa_per_sequence_candidate(torch, "flash", None, data, causal, 0.35)
            self.assertEqual((padded.how, looped.how),
                             (compare_sdpa.SDPA_PADDED_CAUSAL if causal else compare_sdpa.SDPA_PADDED,
                              compare_sdpa.SDPA_PER_SEQUENCE))
            for cand in (padded, looped, padded.fallback(), looped.fallback()):
                out = cand.unpack(cand.call())      # the CPU's math backend: no sdpa_kernel context here
                self.assertEqual(tuple(out.shape), (5, 4, 8))
                self.assertTrue(torch.allclose(out, ref, atol=1e-5), (cand.name, cand.variant, causal))
            self.assertEqual(padded.fallback().variant, bench_report.EXPANDED_KV)


class NoGpuExit(unittest.TestCase):
    @unittest.skipIf(importlib.util.find_spec("torch") is not None,
                     "PyTorch is installed here: the run would start instead of stopping at the no-GPU line")
    def test_one_line_and_status_2_without_torch_or_gpu(self):
        proc = subprocess.run([sys.executable, os.path.join(HERE, "compare_sdpa.py"), "--shapes", "1,8,512,64"],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertEqual(len(proc.stdout.strip().splitlines()), 1)
        self.assertTrue(proc.stdout.startswith("no GPU: compare_sdpa needs a CUDA device"))

    def test_bad_dispatch_is_one_error_line(self):
        proc = subprocess.run([sys.executable, os.path.join(HERE, "compare_sdpa.py"), "--dispatch",
                               os.path.join(HERE, "no-such-dispatch.json")], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr.strip().splitlines(), [f"error: dispatch file not found: "
                                                            f"{os.path.join(HERE, 'no-such-dispatch.json')}"])


@unittest.skipUnless(shutil.which("protoc"), "protoc is not installed")
class MeasuredFitnessCsv(unittest.TestCase):
    """bench/measured_fitness_csv.py on a small database written here."""

    GENOME = "fa_s512_v3:BLOCK_M=32,BLOCK_N=256"

    def evaluation(self, median_us, registers=123, gpu="NVIDIA H200", causal=False):
        text = (f'status: OK resources {{ registers: {registers} static_smem_bytes: 16 }} '
                f'shapes {{ shape {{ batch: 1 heads: 8 seq_q: 512 seq_k: 512 head_dim: 64 causal: {str(causal).lower()} }} '
                f'median_us: {median_us} }} device {{ gpu_name: "{gpu}" }}')
        return subprocess.run(["protoc", "--encode=evo.v1.Evaluation", "-I", os.path.join(HERE, "..", "proto"),
                               "evo.proto"], input=text.encode(), capture_output=True, check=True).stdout

    def database(self, evaluations):
        """evaluations: (genome, blob, status, estimated)."""
        import sqlite3
        path = os.path.join(self.tmp, "evo.db")
        db = sqlite3.connect(path)
        db.execute("create table candidates (id text primary key, genome text)")
        db.execute("create table evaluations (id integer primary key, candidate_id text, blob blob, "
                   "status integer, estimated integer)")
        for i, (genome, blob, status, estimated) in enumerate(evaluations):
            db.execute("insert into candidates values (?, ?)", (f"c{i}", genome))
            db.execute("insert into evaluations (candidate_id, blob, status, estimated) values (?, ?, ?, ?)",
                       (f"c{i}", blob, status, estimated))
        db.commit()
        db.close()
        return path

    def run_script(self, db):
        return subprocess.run([sys.executable, os.path.join(HERE, "measured_fitness_csv.py"), db],
                              capture_output=True, text=True)

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_one_row_per_shape_and_genome_measured_ok(self):
        other = "fa_s512_v3:BLOCK_M=64,BLOCK_N=128"
        db = self.database([
            (self.GENOME, self.evaluation(5.0), 1, 0),
            (self.GENOME, self.evaluation(4.0), 1, 0),   # a confirmation: the median of the two
            (self.GENOME, self.evaluation(6.0, causal=True), 1, 0),
            (other, self.evaluation(3.0), 1, 1),         # estimated by the model: left out
            (other, self.evaluation(2.0), 4, 0),         # failed a gate: left out
        ])
        out = self.run_script(db)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.splitlines(), [
            "shape,genome,registers,static_smem_bytes,median_us",
            '1x8x512x64,"BLOCK_M=32,BLOCK_N=256",123,16,4.500',
            '1x8x512x64:causal,"BLOCK_M=32,BLOCK_N=256",123,16,6.000',
        ])
        self.assertIn("2 rows from 3 evaluations on NVIDIA H200", out.stderr)

    def test_refuses_measurements_of_two_cards(self):
        db = self.database([(self.GENOME, self.evaluation(5.0), 1, 0),
                            (self.GENOME, self.evaluation(5.0, gpu="NVIDIA H100 80GB HBM3"), 1, 0)])
        out = self.run_script(db)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("measurements from 2 cards", out.stderr)
        self.assertEqual(out.stdout, "")

    def test_missing_database_is_one_line(self):
        out = self.run_script(os.path.join(self.tmp, "none.db"))
        self.assertNotEqual(out.returncode, 0)
        self.assertEqual(out.stderr.strip(), f"measured_fitness_csv: no database at {os.path.join(self.tmp, 'none.db')}")


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""The Triton FP8 kernel (triton_fa.fa_fp8_kernel) on a GPU: every config of its space, and the autotuned
call, at ragged lengths, causal and not, equal and grouped heads.

Two checks per case, on inputs quantized as the bench quantizes them (bench_fp8):
  masks     Q all zero, so every score is 0 and every probability exactly 1 (no rounding of P): each
            output row is the mean of the V rows it sees, to bf16's rounding. An extra or a missing
            key moves a row by about 1/sqrt(keys it sees) of itself, so the worst row's relative
            error, against MASK_TOLERANCE, finds any key masked wrongly (tails, the shifted causal
            diagonal), a wrong K/V head or a wrong V pitch.
  values    random Q, K, V: the relative L2 error against the float32 reference of the dequantized
            inputs, held to e4m3's limit (bench_report.REL_L2_LIMITS): a scale applied wrongly or
            not at all errs by far more.
Configs compile first in parallel (triton_fa.precompile). One line per case and check, with its
worst config; a FAIL line for each config that fails; exit status 1 if any did.

    python3 bench/triton_fp8_check.py [--jobs N]
"""
from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import triton  # noqa: E402

import bench_timing as timing  # noqa: E402
import triton_fa  # noqa: E402
import triton_fa_space as space  # noqa: E402
from bench_fp8 import dequantize  # noqa: E402
from bench_report import REL_L2_LIMITS  # noqa: E402
from compare_sdpa import fp8_inputs  # noqa: E402

# (batch, heads, heads_kv, seq_q, seq_k, head_dim): lengths of one row, of less than a block, of many
# blocks with a ragged tail, decode and a chunk over a longer cache, equal and grouped heads.
CASES = ((1, 2, 2, 1, 1, 64), (1, 4, 2, 17, 17, 128), (1, 2, 2, 1, 777, 64), (2, 2, 2, 777, 777, 64),
         (1, 4, 2, 17, 4097, 128), (1, 2, 2, 4097, 4097, 128))
# bf16's rounding of a row is about 2^-9 of it; a wrongly masked key moves a row of n keys by about
# 1/sqrt(n) (n = 4097: 1.6%).
MASK_TOLERANCE = 1e-2


def worst_row_error(out, ref) -> float:
    """The largest relative L2 error of one output row (NaN where a row holds NaN)."""
    return ((out.float() - ref).norm(dim=-1) / ref.norm(dim=-1)).max().item()


def draw(case, gen, zero_q: bool):
    batch, heads, heads_kv, seq_q, seq_k, head_dim = case
    q = torch.randn((batch, heads, seq_q, head_dim), generator=gen, device="cuda", dtype=torch.float16)
    k, v = (torch.randn((batch, heads_kv, seq_k, head_dim), generator=gen, device="cuda", dtype=torch.float16)
            for _ in range(2))
    return fp8_inputs(torch, q.zero_() if zero_q else q, k, v)


def run_config(data, causal: bool, scale: float, tile):
    """One config of fa_fp8_kernel, bypassing the autotuner."""
    batch, heads, seq_q, head_dim = data.q8.shape
    out = torch.empty(data.q8.shape, dtype=torch.bfloat16, device="cuda")
    grid = (triton.cdiv(seq_q, tile.block_m), batch * heads)
    triton_fa.fa_fp8_kernel.fn[grid](data.q8, data.k8, data.vt8, out, data.q_scale, data.k_scale, data.v_scale,
                                     scale * triton_fa.LOG2E, batch * heads, seq_q, data.k8.shape[2],
                                     data.vt8.shape[3], heads // data.k8.shape[1], HEAD_DIM=head_dim,
                                     CAUSAL=causal, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n,
                                     num_warps=tile.warps, num_stages=tile.stages)
    return out


def check_case(case, causal: bool, check: str, gen) -> int:
    """Every config and the autotuned call on one case; returns the failures."""
    data = draw(case, gen, zero_q=check == "masks")
    scale = 1.0 / math.sqrt(case[-1])
    values = [dequantize(torch, x8, s) for x8, s in ((data.q8, data.q_scale), (data.k8, data.k_scale),
                                                     (data.v8, data.v_scale))]
    ref = timing.reference_attention(*values, causal, scale)
    error, limit = (worst_row_error, MASK_TOLERANCE) if check == "masks" else (timing.rel_l2, REL_L2_LIMITS["e4m3"])
    results = []
    for tile in space.pruned_fp8_space(case[-1], triton_fa._SMEM_LIMIT[0], case[3]):
        try:
            results.append((error(run_config(data, causal, scale, tile), ref), tile.label()))
        except Exception as err:  # a config that does not compile or launch is a failure here
            results.append((math.nan, f"{tile.label()}: {str(err).splitlines()[0] if str(err) else err}"))
    tuned = triton_fa.triton_fp8_attention(data.q8, data.k8, data.vt8, data.q_scale, data.k_scale, data.v_scale,
                                           causal, scale)
    results.append((error(tuned, ref), f"autotuned ({triton_fa.winning_fp8_config()})"))
    failed = [(e, label) for e, label in results if not e <= limit]
    worst = max(results, key=lambda r: -1.0 if math.isnan(r[0]) else r[0])
    print(f"{'FAIL' if failed else 'PASS'} {check:6s} {case} causal={int(causal)}: {len(results)} runs, worst "
          f"{worst[0]:.2e} ({worst[1]}), limit {limit:.0e}", flush=True)
    for e, label in failed:
        print(f"FAIL   {label}: {e:.2e}", flush=True)
    return len(failed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=max(1, min(14, (os.cpu_count() or 4) - 2)),
                        help="processes that compile the configs first (0: compile as they run)")
    args = parser.parse_args()
    props = torch.cuda.get_device_properties(0)
    triton_fa.set_smem_limit(getattr(props, "shared_memory_per_block_optin", 0) or space.DEFAULT_SMEM_LIMIT)
    torch.backends.cuda.matmul.allow_tf32 = False
    problems = [(d, causal, sq, sk, h // hkv) for _, h, hkv, sq, sk, d in CASES for causal in (False, True)]
    count, failures = triton_fa.precompile(problems, args.jobs, triton_fa.FP8_DTYPE)
    print(f"pre-compiled {count} configs ({len(failures)} did not compile)", flush=True)
    for failure in failures:
        print(f"FAIL   compile {failure}", flush=True)
    gen = torch.Generator(device="cuda").manual_seed(0)
    failed = len(failures)
    for case in CASES:
        for causal in (False, True):
            for check in ("masks", "values"):
                failed += check_case(case, causal, check, gen)
    print(f"{'all checks passed' if not failed else f'{failed} failure(s)'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

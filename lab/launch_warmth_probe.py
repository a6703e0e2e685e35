#!/usr/bin/env python3
"""Where a single launch's extra time goes: cold code or cold data.

    python3 lab/launch_warmth_probe.py --dispatch table.dispatch.json --shapes 1,8,512,64 2,8,512,64
                                         [--causal both] [--iters 100] [--rounds 2]

compare_sdpa.py's per-launch figure flushes the L2 before every call, so each kernel starts with
both its instructions and its inputs out of the cache. This times every kernel of that table
(cuDNN, flash, Triton autotuned, the evolved kernel with PDL) per launch four ways, each sample
preceded by the same spin kernel (bench_timing.py, per launch):

    cold       L2 flushed                                    (compare_sdpa's per-launch figure)
    warm code  L2 flushed, then the same kernel once on other inputs of the same shape
    warm data  L2 flushed, then Q, K and V read by a copy kernel
    warm       nothing flushed (the previous launch was this kernel on these inputs)

"cold - warm code" is what fetching the kernel's instructions costs, "cold - warm data" what
fetching its inputs costs. Medians over --iters samples; --rounds repeats in a rotated order.
"""
from __future__ import annotations

import math
import os
import statistics
import sys

# The product benchmark's modules (bench/), which this probe times with.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))

from bench_args import parse_args  # noqa: E402
from bench_dispatch import DispatchError, load_dispatch  # noqa: E402
from bench_rounds import round_order  # noqa: E402
from compare_sdpa import EvolvedSet, first_line, make_candidates  # noqa: E402

WARMTHS = ("cold", "warm code", "warm data", "warm")
KERNELS = ("cudnn", "flash", "triton", "evolved")


def main(argv=None) -> int:
    args = parse_args(argv)
    if not args.dispatch:
        print("error: --dispatch JSON is required (the table whose kernels are probed)", file=sys.stderr)
        return 2
    try:
        dispatch = load_dispatch(args.dispatch)
    except DispatchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("no GPU: launch_warmth_probe needs a CUDA device (and PyTorch is not installed here)")
        return 2
    if not torch.cuda.is_available():
        print("no GPU: launch_warmth_probe needs a CUDA device")
        return 2
    import bench_timing as timing
    import triton_fa
    device = torch.device("cuda", 0)
    props = torch.cuda.get_device_properties(device)
    triton_fa.set_smem_limit(getattr(props, "shared_memory_per_block_optin", 0) or 227 * 1024)
    problems = [(s.head_dim, c, s.seq) for s in args.shape_list for c in args.causal_list]
    count, failures = triton_fa.precompile(problems, args.triton_precompile_jobs)
    print(f"gpu: {props.name}; Triton: pre-compiled {count} configs ({len(failures)} failed)", flush=True)
    evolved = EvolvedSet(args, dispatch)
    flusher = timing.L2Flusher(device)

    print("| B,H,S,D | causal | kernel | " + " | ".join(f"{w} µs" for w in WARMTHS) + " | code share | data share |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in WARMTHS) + " | --- | --- |")
    for index, shape in enumerate(args.shape_list):
        gen = torch.Generator(device=device).manual_seed(args.seed + index)
        dims = (shape.batch, shape.heads, shape.seq, shape.head_dim)
        q, k, v, q2, k2, v2 = (torch.randn(dims, generator=gen, device=device, dtype=torch.float16)
                               for _ in range(6))
        sink = torch.empty((3,) + dims, device=device, dtype=torch.float16)
        scale = 1.0 / math.sqrt(shape.head_dim)
        for causal in args.causal_list:
            lookup = evolved.lookup(shape, causal)
            real = {c.name: c for c in make_candidates(torch, q, k, v, causal, scale, lookup, triton_fa)}
            decoy = {c.name: c for c in make_candidates(torch, q2, k2, v2, causal, scale, lookup, triton_fa)}

            def read_inputs():
                flusher.evict()
                sink[0].copy_(q)
                sink[1].copy_(k)
                sink[2].copy_(v)

            figures = {name: {w: [] for w in WARMTHS} for name in KERNELS}
            for r in range(args.rounds):
                for name in round_order(list(KERNELS), r):
                    cand, other = real[name], decoy[name]
                    if cand.call is None:
                        continue
                    try:
                        with cand.context():
                            befores = {"cold": None,
                                       "warm code": lambda: (flusher.evict(), other.call()),
                                       "warm data": read_inputs,
                                       "warm": lambda: None}
                            for warmth in WARMTHS:
                                figures[name][warmth].append(timing.per_launch_us(
                                    cand.call, args.iters, flusher, prepare=befores[warmth]))
                    except Exception as err:
                        print(f"{shape.label} causal={int(causal)} {name}: {first_line(err)}", flush=True)
            for name in KERNELS:
                cells = {w: statistics.median(x) for w, x in figures[name].items() if x}
                if len(cells) < len(WARMTHS):
                    continue
                extra = cells["cold"] - cells["warm"]
                code = (cells["cold"] - cells["warm code"]) / extra if extra > 0 else float("nan")
                data = (cells["cold"] - cells["warm data"]) / extra if extra > 0 else float("nan")
                print(f"| {shape.label} | {int(causal)} | {name} | "
                      + " | ".join(f"{cells[w]:.2f}" for w in WARMTHS) + f" | {code:.2f} | {data:.2f} |",
                      flush=True)
        del q, k, v, q2, k2, v2, sink
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())

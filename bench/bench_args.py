"""Command line of compare_sdpa.py, kept free of torch so that it is testable anywhere."""
from __future__ import annotations

import argparse
import os

from bench_shapes import (DEFAULT_SHAPES, DTYPES, SUITES, Shape, ShapeError, group_problems, parse_causal,
                          parse_shape, suite_of, suite_problems)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compare_sdpa.py",
        description="Evolved attention kernel vs PyTorch SDPA (cuDNN, flash) and an autotuned Triton kernel.")
    parser.add_argument("--evolved", metavar="LIB.so", help="shared library exporting evo_attention_forward")
    parser.add_argument("--build-from", metavar="BEST.cu", help="build this exported .cu with nvcc and use it")
    parser.add_argument("--dispatch", metavar="JSON", help="per-shape libraries (shape bucket -> lib)")
    parser.add_argument("--build-dir", default="bench-build", help="where --build-from/.cu entries are built")
    parser.add_argument("--arch", default=None, help="nvcc -arch for builds (default sm_90a)")
    parser.add_argument("--shapes", nargs="+", default=None, metavar="B,H,S,D",
                        help="shapes to run (default: the issue-5 suite): B,H,S,D or B,H,Sq,Sk,D (x for the "
                             "commas works too), or a packed variable-length batch L0+L1+...xHxD (each L a length "
                             "or Lq/Lk), then :kvN for N K/V heads, e.g. 1x32x512x4096x128:kv8 or "
                             "17+250+3000x32x128:kv8")
    parser.add_argument("--suite", default=None, metavar="NAME|FILE",
                        help="a workload's served-model shapes, each with its own causal setting, in the "
                             "workload's dtype: a file (the one `evoctl submit --workload` takes) or the name of "
                             f"one in bench/workloads/ ({', '.join(sorted(SUITES))}); not with --shapes/--causal")
    parser.add_argument("--causal", default=None, help="both, 0 or 1 (default both)")
    parser.add_argument("--dtype", default=None, choices=list(DTYPES),
                        help="element type of Q, K, V and O for every kernel (default fp16; a --suite's own); "
                             "e4m3: the FP8 rows (evolved and Triton on e4m3 Q, K, V quantized per head from "
                             "fp16 draws, bf16 O; SDPA and the evolved fp16 kernel on the fp16 draws)")
    parser.add_argument("--json", metavar="OUT.json", help="write every figure here")
    parser.add_argument("--iters", type=int, default=50, help="per-launch samples per kernel")
    parser.add_argument("--graph-calls", type=int, default=20, help="calls captured in one CUDA graph")
    parser.add_argument("--graph-replays", type=int, default=15, help="timed replays of that graph")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every kernel this many times, each round in a rotated order (reversed "
                             "after as many rounds as there are kernels), and report the medians (the "
                             "order matters where the card hits its power cap)")
    parser.add_argument("--no-triton", action="store_true", help="skip the Triton baseline")
    parser.add_argument("--triton-precompile-jobs", type=int, default=max(1, min(12, (os.cpu_count() or 4) - 2)),
                        help="processes that compile Triton configs ahead of autotuning (0: compile serially)")
    parser.add_argument("--seed", type=int, default=0, help="input RNG seed (inputs are fresh per shape)")
    return parser


def check_dtype_serves(dtype: str, problems) -> None:
    """e4m3 runs dense shapes only: evo_attention_forward_fp8 takes no packed batch."""
    if dtype != "e4m3":
        return
    packed = [shape.key for shape, _ in problems if shape.is_varlen]
    if packed:
        raise ShapeError(f"e4m3 runs dense shapes only (the FP8 entry point takes no packed batch): "
                         f"{', '.join(packed)}")


def parse_args(argv: list[str] | None = None):
    """Parses and validates; bad values end in one argparse error line and exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.suite:
            if args.shapes is not None or args.causal is not None:
                raise ShapeError(f"--suite {args.suite} fixes the shapes and their causal settings: "
                                 f"give --suite or --shapes/--causal, not both")
            suite = suite_of(args.suite)
            suite_dtype = suite["dtype"]
            if args.dtype not in (None, suite_dtype):
                raise ShapeError(f"--suite {args.suite} runs in {suite_dtype}, not {args.dtype}")
            args.dtype = suite_dtype
            # (shape, [causal settings]) in order: the bench makes inputs once per shape.
            args.problems = suite_problems(suite)
        else:
            shapes = [parse_shape(s) for s in (args.shapes if args.shapes is not None else DEFAULT_SHAPES)]
            causal_list = parse_causal(args.causal if args.causal is not None else "both")
            args.dtype = args.dtype or "fp16"
            args.problems = group_problems([(s, c) for s in shapes for c in causal_list])
        check_dtype_serves(args.dtype, args.problems)
        args.shape_list: list[Shape] = [shape for shape, _ in args.problems]
        args.causal_list: list[bool] = sorted({c for _, settings in args.problems for c in settings})
    except ValueError as err:
        parser.error(str(err))
    if args.iters < 3 or args.graph_calls < 1 or args.graph_replays < 3:
        parser.error("--iters and --graph-replays must be >= 3 and --graph-calls >= 1")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.evolved and args.build_from:
        parser.error("give --evolved or --build-from, not both")
    return args

"""Command line of compare_sdpa.py, kept free of torch so that it is testable anywhere."""
from __future__ import annotations

import argparse
import os

from bench_shapes import DEFAULT_SHAPES, Shape, parse_causal, parse_shape


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compare_sdpa.py",
        description="Evolved attention kernel vs PyTorch SDPA (cuDNN, flash) and an autotuned Triton kernel.")
    parser.add_argument("--evolved", metavar="LIB.so", help="shared library exporting evo_attention_forward")
    parser.add_argument("--build-from", metavar="BEST.cu", help="build this exported .cu with nvcc and use it")
    parser.add_argument("--dispatch", metavar="JSON", help="per-shape libraries (shape bucket -> lib)")
    parser.add_argument("--build-dir", default="bench-build", help="where --build-from/.cu entries are built")
    parser.add_argument("--arch", default=None, help="nvcc -arch for builds (default sm_90a)")
    parser.add_argument("--shapes", nargs="+", default=list(DEFAULT_SHAPES), metavar="B,H,S,D")
    parser.add_argument("--causal", default="both", help="both, 0 or 1")
    parser.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"],
                        help="element type of Q, K, V and O for every kernel (default fp16)")
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


def parse_args(argv: list[str] | None = None):
    """Parses and validates; bad values end in one argparse error line and exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.shape_list: list[Shape] = [parse_shape(s) for s in args.shapes]
        args.causal_list: list[bool] = parse_causal(args.causal)
    except ValueError as err:
        parser.error(str(err))
    if args.iters < 3 or args.graph_calls < 1 or args.graph_replays < 3:
        parser.error("--iters and --graph-replays must be >= 3 and --graph-calls >= 1")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.evolved and args.build_from:
        parser.error("give --evolved or --build-from, not both")
    return args

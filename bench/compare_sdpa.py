#!/usr/bin/env python3
"""Side-by-side: the evolved kernel (as exported, with PDL, and with a plain launch) vs SDPA's cuDNN
and flash backends vs autotuned Triton.

    python3 bench/compare_sdpa.py --evolved LIB.so [--dispatch dispatch.json] [--shapes 1,8,512,64 ...]
                                  [--causal both] [--dtype fp16|bf16] [--json out.json] [--iters N]

Every kernel gets the same fresh random inputs per shape, is checked against a float32 reference by
relative L2 error, and is timed by CUDA-graph replay and per launch (see bench_timing.py and NOTES.md).
--dtype bf16 runs every kernel on torch.bfloat16 inputs (the evolved one through
evo_attention_forward_dtype) and holds them to bf16's tolerance.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_args import parse_args  # noqa: E402
from bench_clocks import ClockWatch, attach_clocks  # noqa: E402
from bench_rounds import merge_rounds, round_order  # noqa: E402
from bench_dispatch import DispatchError, DispatchTable, load_dispatch  # noqa: E402
from bench_report import KERNELS, fmt_rel_l2, fmt_us, header_lines, render_report, write_json  # noqa: E402
from bench_shapes import Shape, attention_bytes, attention_flops, floors_us  # noqa: E402

NO_GPU = "no GPU: compare_sdpa needs a CUDA device"
PLAIN_LAUNCH_MISSING = "library exported before plain launches were selectable (no evo_attention_forward_ex)"
DTYPE_ENTRY_MISSING = "library exported before bf16 (no evo_attention_forward_dtype)"


# torch's names of the --dtype choices.
TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__


@dataclass
class Candidate:
    """One kernel under test for one problem: how to call it and what to check around the call."""
    name: str
    call: Callable | None
    context: Callable = contextlib.nullcontext
    poison: Callable | None = None         # fills the output with NaN so unwritten elements show
    config: Callable | None = None         # describes the variant that ran (Triton's autotune winner)
    unavailable: str = ""                  # why it cannot run at all for this problem
    extra: dict = field(default_factory=dict)


class EvolvedSet:
    """Resolves the evolved library for a (shape, causal, dtype): dispatch entry first, then --evolved."""

    def __init__(self, args, dispatch: DispatchTable | None):
        from bench_build import DEFAULT_ARCH, BuildError, build_shared
        from evolved_lib import EvolvedLib
        self._libs: dict[str, EvolvedLib] = {}
        self._dispatch = dispatch
        arch = args.arch or DEFAULT_ARCH

        def built(source: str) -> str:
            if not os.path.isfile(source):
                raise BuildError(f"no such kernel source: {source}")
            digest = hashlib.sha256(open(source, "rb").read()).hexdigest()[:10]
            stem = os.path.splitext(os.path.basename(source))[0]
            output = os.path.join(args.build_dir, f"{stem}-{digest}-{arch}.so")
            if not os.path.exists(output):
                print(f"building {source} -> {output} (nvcc -arch={arch})", flush=True)
                build_shared(source, output, arch)
            return output

        self._default = None
        if args.build_from:
            self._default = EvolvedLib(built(args.build_from))
        elif args.evolved:
            self._default = EvolvedLib(args.evolved)
        self._paths = {}
        if dispatch is not None:
            for entry in dispatch.entries():
                path = built(entry.path) if entry.needs_build else entry.path
                if path not in self._libs:
                    self._libs[path] = EvolvedLib(path)
                self._paths[(entry.shape, entry.causal, entry.dtype)] = (path, entry.genome)

    def lookup(self, shape: Shape, causal: bool, dtype: str = "fp16"):
        """(library, genome, why-not)."""
        if (shape, causal, dtype) in self._paths:
            path, genome = self._paths[(shape, causal, dtype)]
            return self._libs[path], genome, ""
        if self._default is not None:
            return self._default, "", ""
        if self._dispatch is not None:
            return None, "", "no dispatch entry for this shape"
        return None, "", "no --evolved library given"


def environment(torch, triton_version: str) -> dict:
    props = torch.cuda.get_device_properties(0)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"gpu": props.name, "sm_count": props.multi_processor_count, "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": cudnn, "triton": triton_version}


def make_candidates(torch, q, k, v, causal, scale, evolved, triton_mod, dtype: str = "fp16") -> list[Candidate]:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def sdpa(backend):
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    cands = [Candidate("cudnn", sdpa(SDPBackend.CUDNN_ATTENTION),
                       context=lambda: sdpa_kernel([SDPBackend.CUDNN_ATTENTION])),
             Candidate("flash", sdpa(SDPBackend.FLASH_ATTENTION),
                       context=lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION]))]
    if triton_mod is None:
        cands.append(Candidate("triton", None, unavailable="Triton not available"))
    else:
        out = torch.empty_like(q)
        cands.append(Candidate("triton", lambda: triton_mod.triton_attention(q, k, v, causal, scale, out),
                               config=triton_mod.winning_config))
    lib, genome, why_not = evolved
    # The same library twice: with a plain launch, then with PDL allowed as exported (NOTES.md, Method).
    for name, programmatic in (("evolved_plain", False), ("evolved", True)):
        if lib is None:
            cands.append(Candidate(name, None, unavailable=why_not))
        elif dtype != "fp16" and not lib.has_dtype_entry:
            cands.append(Candidate(name, None, unavailable=DTYPE_ENTRY_MISSING))
        elif not programmatic and not lib.has_plain_launch:
            cands.append(Candidate(name, None, unavailable=PLAIN_LAUNCH_MISSING))
        else:
            cands.append(evolved_candidate(torch, name, lib, genome, q, k, v, causal, scale, programmatic, dtype))
    return cands   # evolved kernels last: if one kills the CUDA context, the baselines of this shape are in


def evolved_candidate(torch, name, lib, genome, q, k, v, causal, scale, programmatic, dtype="fp16") -> Candidate:
    o = torch.empty_like(q)   # its own output, NaN-poisoned before the checked call

    def run_evolved():
        lib.forward(q, k, v, o, causal, scale, programmatic=programmatic, dtype=dtype)
        return o
    return Candidate(name, run_evolved, poison=lambda: o.fill_(float("nan")),
                     config=lambda: genome or os.path.basename(lib.path))


def cover_text(cover: dict | None) -> str:
    """The per-launch spin, on the progress line where it was widened or samples were dropped."""
    if not cover or not (cover["widened"] or cover["dropped"]):
        return ""
    return f"  (spin {cover['spin_us']:.0f} µs, host {cover['host_us']:.0f} µs, {cover['dropped']} dropped)"


class ContextLost(RuntimeError):
    pass


def measure(torch, timing, cand: Candidate, ref, args, flusher) -> dict:
    # "windows": when each figure was timed, for the clock samples (bench_clocks.attach_clocks).
    res = {"graph_us": None, "launch_us": None, "rel_l2": None, "note": cand.unavailable, "config": None,
           "windows": {}}
    if cand.call is None:
        return res
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with cand.context():
                if cand.poison:
                    cand.poison()
                out = cand.call()
                torch.cuda.synchronize()
                res["rel_l2"] = timing.rel_l2(out, ref)
                if cand.config:
                    res["config"] = cand.config()
                t0 = time.time()
                res["launch_cover"] = {}
                res["launch_us"] = timing.per_launch_us(cand.call, args.iters, flusher, report=res["launch_cover"])
                res["windows"]["launch"] = (t0, time.time())
                try:
                    t0 = time.time()
                    res["graph_us"] = timing.graph_replay_us(cand.call, args.graph_calls, args.graph_replays)
                    res["windows"]["graph"] = (t0, time.time())
                except Exception as err:  # capture refused (e.g. a host sync inside): keep the other figures
                    res["note"] = f"graph replay failed: {first_line(err)}"
        except Exception as err:
            reason = next((str(w.message).splitlines()[0][:160] for w in caught), "")
            res["note"] = f"refused: {first_line(err)}" + (f" ({reason})" if reason else "")
    try:
        torch.cuda.synchronize()
    except Exception as err:
        raise ContextLost(f"CUDA context lost after {cand.name}: {first_line(err)}") from None
    return res


def measure_floor_inputs(torch, timing, device, args) -> dict:
    env = {"matmul_tflops": timing.matmul_tflops(device), "copy_gbps": timing.copy_gbps(device)}
    tiny = torch.zeros(1, device=device)
    bump = lambda: tiny.add_(1)  # noqa: E731  one trivial kernel: the cost of a launch that does nothing
    flusher = timing.L2Flusher(device)
    env["empty_graph_us"] = timing.graph_replay_us(bump, args.graph_calls, args.graph_replays)
    env["empty_launch_us"] = timing.per_launch_us(bump, args.iters, flusher)
    return env


def run(args, dispatch) -> int:
    import torch
    import bench_timing as timing
    try:
        import triton
        import triton_fa
        triton_version = triton.__version__
    except Exception as err:  # the baselines still run; the table says Triton is missing
        print(f"warning: Triton baseline disabled: {first_line(err)}", flush=True)
        triton_fa, triton_version = None, "n/a"
    if args.no_triton:
        triton_fa = None
    torch.backends.cuda.matmul.allow_tf32 = False   # the float32 reference must be float32
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda", 0)

    from bench_build import BuildError
    from evolved_lib import EvolvedError
    try:
        evolved = EvolvedSet(args, dispatch)
    except (BuildError, EvolvedError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1

    env = environment(torch, triton_version)
    env.update({"dtype": args.dtype, "iters": args.iters, "graph_calls": args.graph_calls, "graph_replays": args.graph_replays,
                "seed": args.seed, "argv": sys.argv[1:]})
    props = torch.cuda.get_device_properties(device)
    if triton_fa is not None:
        triton_fa.set_smem_limit(getattr(props, "shared_memory_per_block_optin", 0) or 227 * 1024)
        if args.triton_precompile_jobs > 0:
            t0 = time.time()
            problems = [(s.head_dim, c, s.seq) for s in args.shape_list for c in args.causal_list]
            try:
                count, failures = triton_fa.precompile(problems, args.triton_precompile_jobs,
                                                       TORCH_DTYPES[args.dtype])
                env["triton_precompile"] = {"configs": count, "failed": failures, "seconds": time.time() - t0}
                print(f"Triton: pre-compiled {count} configs in {time.time() - t0:.1f} s with "
                      f"{args.triton_precompile_jobs} processes ({len(failures)} did not compile)", flush=True)
            except Exception as err:  # only a speed-up: the autotuner compiles whatever is missing
                print(f"warning: Triton pre-compilation failed, autotuning compiles serially: {first_line(err)}",
                      flush=True)
    env.update(measure_floor_inputs(torch, timing, device, args))
    flusher = timing.L2Flusher(device)
    env["l2_flush_bytes"] = flusher.nbytes
    print("\n".join(header_lines(env)), flush=True)

    results, status = [], 0
    measured = []   # (row, {kernel: [one measure() result per round]}), merged once the clocks are in
    uuid = str(getattr(props, "uuid", "") or "")  # nvidia-smi names the same card by its UUID
    clocks = ClockWatch(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}" if uuid else "0")
    try:
        clocks.start()
        for index, shape in enumerate(args.shape_list):
            gen = torch.Generator(device=device).manual_seed(args.seed + index)
            dims = (shape.batch, shape.heads, shape.seq, shape.head_dim)
            elem = getattr(torch, TORCH_DTYPES[args.dtype])
            q, k, v = (torch.randn(dims, generator=gen, device=device, dtype=elem) for _ in range(3))
            scale = 1.0 / math.sqrt(shape.head_dim)
            for causal in args.causal_list:
                ref = timing.reference_attention(q, k, v, causal, scale)
                row = {"shape": shape.label, "causal": causal, "dtype": args.dtype,
                       "gflop": attention_flops(shape, causal) / 1e9, "mib": attention_bytes(shape) / 2 ** 20,
                       "floors": floors_us(shape, causal, env["matmul_tflops"], env["copy_gbps"]),
                       "kernels": {}}
                results.append(row)
                t0 = time.time()
                cands = {c.name: c for c in make_candidates(torch, q, k, v, causal, scale,
                                                            evolved.lookup(shape, causal, args.dtype), triton_fa,
                                                            args.dtype)}
                rounds = {name: [] for name in cands}
                measured.append((row, rounds))
                for r in range(args.rounds):
                    for name in round_order(list(cands), r):
                        res = measure(torch, timing, cands[name], ref, args, flusher)
                        rounds[name].append(res)
                        label = f"[{shape.label} causal={int(causal)}" + (f" round {r}]" if args.rounds > 1 else "]")
                        print(f"{label} {name:13s} graph {fmt_us(res['graph_us']):>7s} µs"
                              f"  launch {fmt_us(res['launch_us']):>7s} µs  rel-L2 {fmt_rel_l2(res['rel_l2'], args.dtype)}"
                              f"{cover_text(res.get('launch_cover'))}"
                              f"{'  ' + res['config'] if res['config'] else ''}"
                              f"{'  ' + res['note'] if res['note'] else ''}", flush=True)
                row["seconds"] = time.time() - t0
                del ref
            del q, k, v
            torch.cuda.empty_cache()
    except ContextLost as err:
        print(f"fatal: {err}; the figures so far are reported below", flush=True)
        status = 1
    finally:
        clocks.stop()
    attach_clocks((res for _, rounds in measured for per_kernel in rounds.values() for res in per_kernel),
                  clocks.summary)
    for row, rounds in measured:   # the table's column order, whatever ran
        row["kernels"] = {k: merge_rounds(rounds[k]) for k in KERNELS if rounds.get(k)}
    print("\n" + render_report(env, results), flush=True)
    if args.json:
        write_json(args.json, env, results)
        print(f"wrote {args.json}", flush=True)
    return status


def main(argv=None) -> int:
    args = parse_args(argv)
    dispatch = None
    if args.dispatch:
        try:
            dispatch = load_dispatch(args.dispatch)
        except DispatchError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    try:
        import torch
    except ImportError:
        print(NO_GPU + " (and PyTorch is not installed here)")
        return 2
    if not torch.cuda.is_available():
        print(NO_GPU)
        return 2
    return run(args, dispatch)


if __name__ == "__main__":
    sys.exit(main())

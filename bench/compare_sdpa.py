#!/usr/bin/env python3
"""Side-by-side: the evolved kernel (as exported, with PDL, and with a plain launch) vs SDPA's cuDNN
and flash backends vs autotuned Triton.

    python3 bench/compare_sdpa.py --evolved LIB.so [--dispatch dispatch.json] [--shapes 1,8,512,64 ...]
                                  [--causal both] [--dtype fp16|bf16|e4m3] [--json out.json] [--iters N]
    python3 bench/compare_sdpa.py --evolved LIB.so --suite llama3-8b      # served-model shapes, bf16
    python3 bench/compare_sdpa.py --evolved LIB.so --suite llama3-8b-packed   # one packed varlen batch
    python3 bench/compare_sdpa.py --evolved LIB.so --suite fp8        # the FP8 (e4m3) acceptance shapes

Every kernel gets the same fresh random inputs per shape, is checked against a float32 reference by
relative L2 error, and is timed by CUDA-graph replay and per launch (see bench_timing.py and NOTES.md).
--dtype bf16 runs every kernel on torch.bfloat16 inputs (the evolved one through
evo_attention_forward_dtype) and holds them to bf16's tolerance.

Shapes may have fewer K/V heads than query heads (":kvN", grouped-query attention) and a key length
apart from the query length ("B,H,Sq,Sk,D"); causal is then bottom-right aligned. SDPA gets GQA as
enable_gqa=True and bottom-right causal as attn_mask=causal_lower_right(Sq, Sk); a backend that
refuses enable_gqa is run once more on K/V expanded to every query head, and its figures are marked
so (bench_report.EXPANDED_KV). The evolved kernel runs those shapes through evo_attention_forward_gqa.

A packed variable-length batch ("17+250+600+1100+1500+2000+2500+3000x32x128:kv8", bench_shapes.VarlenShape;
--suite llama3-8b-packed) gets packed inputs, Q [total_q, H, D] and K, V [total_k, Hkv, D] with int32
cu_seqlens, and every peer runs on them (make_varlen_candidates):
    evolved     evo_attention_forward_varlen on the packed tensors (both launches);
    Triton      triton_fa.triton_varlen_attention on the packed tensors;
    flash_attn  flash_attn_varlen_func on the packed tensors, only where the package imports;
    cuDNN       one SDPA call on the batch padded to its longest sequence, [B, H, Lmax, D], with a boolean
                attn_mask that gives each sequence only its own keys (bottom-right causal per sequence);
    flash       SDPA's flash backend takes no attn_mask: one SDPA call per sequence in a Python loop, on
                views of the packed tensors, all of them inside the timed call (and the captured graph).
The padded inputs and the mask are built once, outside the timed calls; the padded output's valid rows
are gathered back into the packed layout (untimed) before the check. Each output is checked against a
float32 reference computed sequence by sequence (bench_timing.reference_attention_varlen) by relative L2
over the whole packed output.

--dtype e4m3 (or an e4m3 workload: --suite fp8) runs the FP8 rows (make_fp8_candidates). Each shape's
inputs are drawn in fp16 as above, then quantized per (batch, head) by the exported library's rule in
torch (bench_fp8.py), V also transposed and padded; the same inputs serve every peer:
    evolved     evo_attention_forward_fp8 on the e4m3 bytes and scales (both launches), bf16 output;
    Triton      triton_fa.triton_fp8_attention on the same bytes, scales and transposed V;
    cuDNN/flash SDPA on the fp16 draws (16-bit baselines, as for --dtype fp16);
    ev fp16     the evolved library's fp16 kernel on the fp16 draws, where the library serves fp16 for
                the shape (a library that refuses it with cudaErrorInvalidValue is left out silently).
Every output is checked against two float32 references, of the dequantized inputs (byte * scale) and of
the fp16 draws; each kernel's "rel_l2" is the one of its own inputs, held to its dtype's limit. The floors
use a measured e4m3 matmul rate (torch._scaled_mm) and 1-byte inputs. Where the library exports
evo_attention_quantize_fp8, its bytes and scales are compared with the torch rule's, bit for bit, and the
differences counted in the row.
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

import bench_fp8  # noqa: E402
from bench_args import parse_args  # noqa: E402
from bench_clocks import ClockWatch, attach_clocks  # noqa: E402
from bench_rounds import merge_rounds, round_order  # noqa: E402
from bench_dispatch import DispatchError, DispatchTable, load_dispatch  # noqa: E402
from bench_report import (EXPANDED_KV, EXTRA_KERNELS, KERNELS, fmt_rel_l2, fmt_us, header_lines,  # noqa: E402
                          quantizer_text, render_report, write_json)
from bench_shapes import Shape, attention_bytes, attention_flops, floors_us  # noqa: E402

NO_GPU = "no GPU: compare_sdpa needs a CUDA device"
PLAIN_LAUNCH_MISSING = "library exported before plain launches were selectable (no evo_attention_forward_ex)"
DTYPE_ENTRY_MISSING = "library exported before bf16 (no evo_attention_forward_dtype)"
GQA_ENTRY_MISSING = ("library exported before grouped-query heads and unequal lengths "
                     "(no evo_attention_forward_gqa)")
# What the cuDNN column runs at bottom-right causal (seq_q != seq_k): with flash and efficient switched
# off, torch's CausalBias builds the boolean mask on every call and hands it to SDPA as attn_mask.
CUDNN_LOWER_RIGHT = "bottom-right causal as a dense boolean attn_mask, built once outside the timed calls"
VARLEN_ENTRY_MISSING = ("library exported before packed variable-length batches "
                        "(no evo_attention_forward_varlen)")
# What an SDPA peer runs for a packed batch (SDPA has no packed call): its note in the report.
SDPA_PADDED = ("padded: one SDPA call on the batch padded to its longest sequence [B, H, Lmax, D] with a "
               "boolean attn_mask giving each sequence its own keys; padding, mask and unpadding not timed")
SDPA_PADDED_CAUSAL = SDPA_PADDED.replace("its own keys", "its own keys, bottom-right causal per sequence")
SDPA_PER_SEQUENCE = ("per sequence: a Python loop of one SDPA call per sequence on views of the packed tensors, "
                     "every call timed (and captured in the graph)")
FP8_ENTRY_MISSING = "library exported before FP8 (no evo_attention_forward_fp8)"
QUANTIZER_MISSING = "library exported before FP8's quantizer (no evo_attention_quantize_fp8): not compared"


# torch's names of the --dtype choices.
TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "e4m3": "float8_e4m3fn"}
# The element type a dtype's inputs are drawn in where it is not the dtype itself: FP8 rows quantize
# fp16 draws (and their 16-bit peers run those).
DRAWN_DTYPES = {"e4m3": "fp16"}


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__


@dataclass
class Candidate:
    """One kernel under test for one problem: how to call it and what to check around the call."""
    name: str
    call: Callable | None
    context: Callable = contextlib.nullcontext
    unpack: Callable | None = None         # the checked call's output -> the reference's layout (not timed)
    poison: Callable | None = None         # fills the output with NaN so unwritten elements show
    config: Callable | None = None         # describes the variant that ran (Triton's autotune winner)
    unavailable: str = ""                  # why it cannot run at all for this problem
    extra: dict = field(default_factory=dict)
    how: str = ""                          # how it was given the problem, where that needs saying (notes)
    variant: str = ""                      # not the peer's native path (EXPANDED_KV): marked in the tables
    fallback: Callable | None = None       # -> the Candidate to run where this one is refused
    dtype: str = ""                        # the inputs it runs on, where the row has peers of two (FP8 rows)
    reference: str = ""                    # which of the row's references checks it (FP8 rows: "quantized", "fp16")


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


def sdpa_arguments(q, k, causal: bool, scale: float, native_gqa: bool) -> dict:
    """F.scaled_dot_product_attention's keywords for one problem. Equal lengths: is_causal, as always.
    seq_q != seq_k causal: attn_mask=causal_lower_right(Sq, Sk), is_causal=False (bottom-right, the
    semantics of evo and the reference). Grouped-query heads: enable_gqa=True where native_gqa."""
    kwargs = {"scale": scale}
    seq_q, seq_k = q.shape[2], k.shape[2]
    if causal and seq_q != seq_k:
        from torch.nn.attention.bias import causal_lower_right
        kwargs["attn_mask"] = causal_lower_right(seq_q, seq_k)
        kwargs["is_causal"] = False
    else:
        kwargs["is_causal"] = causal
    if native_gqa and q.shape[1] != k.shape[1]:
        kwargs["enable_gqa"] = True
    return kwargs


def sdpa_candidate(torch, name, backend, q, k, v, causal, scale) -> Candidate:
    """One SDPA backend, forced with sdpa_kernel. With grouped-query heads it runs natively
    (enable_gqa=True); where the backend refuses that, measure() runs the fallback: K and V expanded
    to every query head with repeat_interleave once, before any timed call, marked EXPANDED_KV."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    def context():
        return sdpa_kernel([backend])
    kwargs = sdpa_arguments(q, k, causal, scale, native_gqa=True)
    how = CUDNN_LOWER_RIGHT if name == "cudnn" and "attn_mask" in kwargs else ""
    if how:
        # Under sdpa_kernel([CUDNN_ATTENTION]) torch would build this mask from the CausalBias on
        # every call: built once here, so that cuDNN's time is its own.
        seq_q, seq_k = q.shape[2], k.shape[2]
        kwargs["attn_mask"] = torch.ones(seq_q, seq_k, dtype=torch.bool, device=q.device).tril(seq_k - seq_q)
    cand = Candidate(name, lambda: F.scaled_dot_product_attention(q, k, v, **kwargs), context=context, how=how)
    if q.shape[1] != k.shape[1]:
        built = {}

        def expanded() -> Candidate:
            if "cand" not in built:
                group = q.shape[1] // k.shape[1]
                k_all, v_all = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
                plain = sdpa_arguments(q, k_all, causal, scale, native_gqa=False)
                if how:
                    plain["attn_mask"] = kwargs["attn_mask"]
                built["cand"] = Candidate(name, lambda: F.scaled_dot_product_attention(q, k_all, v_all, **plain),
                                          context=context, how=how, variant=EXPANDED_KV)
            return built["cand"]
        cand.fallback = expanded
    return cand


def make_candidates(torch, q, k, v, causal, scale, evolved, triton_mod, dtype: str = "fp16") -> list[Candidate]:
    from torch.nn.attention import SDPBackend

    cands = [sdpa_candidate(torch, "cudnn", SDPBackend.CUDNN_ATTENTION, q, k, v, causal, scale),
             sdpa_candidate(torch, "flash", SDPBackend.FLASH_ATTENTION, q, k, v, causal, scale)]
    if triton_mod is None:
        cands.append(Candidate("triton", None, unavailable="Triton not available"))
    else:
        out = torch.empty_like(q)
        cands.append(Candidate("triton", lambda: triton_mod.triton_attention(q, k, v, causal, scale, out),
                               config=triton_mod.winning_config))
    lib, genome, why_not = evolved
    # Grouped-query heads or seq_q != seq_k: only evo_attention_forward_gqa serves them (both launches).
    needs_gqa = tuple(q.shape[1:3]) != tuple(k.shape[1:3])
    # The same library twice: with a plain launch, then with PDL allowed as exported (NOTES.md, Method).
    for name, programmatic in (("evolved_plain", False), ("evolved", True)):
        if lib is None:
            cands.append(Candidate(name, None, unavailable=why_not))
        elif needs_gqa and not lib.has_gqa_entry:
            cands.append(Candidate(name, None, unavailable=GQA_ENTRY_MISSING))
        elif not needs_gqa and dtype != "fp16" and not lib.has_dtype_entry:
            cands.append(Candidate(name, None, unavailable=DTYPE_ENTRY_MISSING))
        elif not needs_gqa and not programmatic and not lib.has_plain_launch:
            cands.append(Candidate(name, None, unavailable=PLAIN_LAUNCH_MISSING))
        else:
            cands.append(evolved_candidate(torch, name, lib, genome, q, k, v, causal, scale, programmatic, dtype))
    return cands   # evolved kernels last: if one kills the CUDA context, the baselines of this shape are in


def evolved_candidate(torch, name, lib, genome, q, k, v, causal, scale, programmatic, dtype="fp16") -> Candidate:
    o = torch.empty_like(q)   # its own output, NaN-poisoned before the checked call
    # A call whose genome merges split keys in a workspace gets one of the bench's, zeroed once and
    # bound to the stream around each call, as a caller that captures graphs binds one (NOTES.md,
    # Method): the captured call is then its kernel alone.
    workspace_bytes = lib.workspace_bytes(q, k, causal, dtype)
    workspace = torch.zeros(workspace_bytes, dtype=torch.uint8, device=q.device) if workspace_bytes > 0 else None

    def run_evolved():
        lib.forward(q, k, v, o, causal, scale, programmatic=programmatic, dtype=dtype, workspace=workspace)
        return o
    return Candidate(name, run_evolved, poison=lambda: o.fill_(float("nan")),
                     config=lambda: genome or os.path.basename(lib.path))


@dataclass
class VarlenInputs:
    """One packed batch's inputs, shared by every peer and both causal settings: q [total_q, H, D], k and v
    [total_k, Hkv, D], cu_q and cu_k int32 device tensors of batch + 1 offsets, the lengths as host ints.
    The padded copies and per-sequence views the SDPA peers need are built once, on first use."""
    q: object
    k: object
    v: object
    cu_q: object
    cu_k: object
    seqlens_q: tuple
    seqlens_k: tuple
    cache: dict = field(default_factory=dict)

    @property
    def max_seq_q(self) -> int:
        return max(self.seqlens_q)

    @property
    def max_seq_k(self) -> int:
        return max(self.seqlens_k)


def varlen_inputs(torch, shape, gen, device, elem) -> VarlenInputs:
    """Fresh random packed inputs of a VarlenShape, drawn q, k, v in that order."""
    q = torch.randn((shape.total_q, shape.heads, shape.head_dim), generator=gen, device=device, dtype=elem)
    k, v = (torch.randn((shape.total_k, shape.heads_kv, shape.head_dim), generator=gen, device=device, dtype=elem)
            for _ in range(2))
    cu_q, cu_k = (torch.tensor(cu, dtype=torch.int32, device=device) for cu in (shape.cu_seqlens_q, shape.cu_seqlens_k))
    return VarlenInputs(q, k, v, cu_q, cu_k, tuple(shape.seqlens_q), tuple(shape.seqlens_k))


def pad_packed(packed, seqlens, max_len: int):
    """[total, heads, D] -> [B, heads, max_len, D] contiguous, sequence b's rows first, zeros after."""
    _, heads, head_dim = packed.shape
    padded = packed.new_zeros((len(seqlens), max_len, heads, head_dim))
    at = 0
    for b, n in enumerate(seqlens):
        padded[b, :n] = packed[at:at + n]
        at += n
    return padded.transpose(1, 2).contiguous()


def unpad(torch, padded, seqlens):
    """[B, heads, Lmax, D] -> [total, heads, D]: the valid rows of each sequence, packed again."""
    return torch.cat([padded[b, :, :n].transpose(0, 1) for b, n in enumerate(seqlens)], dim=0)


def padded_mask(torch, seqlens_q, seqlens_k, causal: bool, device):
    """SDPA's boolean attn_mask for a padded batch, [B, 1, Lmax_q, Lmax_k], True where a query may attend:
    key j of sequence b is seen where j < Lk_b and, causal, j <= i + Lk_b - Lq_b (bottom-right per
    sequence). A padding row (i >= Lq_b) sees every valid key of its sequence, so that no row is wholly
    masked (a row of nothing is NaN in some backends); those rows are never compared."""
    lq = torch.tensor(list(seqlens_q), device=device).view(-1, 1, 1)
    lk = torch.tensor(list(seqlens_k), device=device).view(-1, 1, 1)
    rows = torch.arange(max(seqlens_q), device=device).view(1, -1, 1)
    cols = torch.arange(max(seqlens_k), device=device).view(1, 1, -1)
    mask = (cols < lk).expand(len(seqlens_q), max(seqlens_q), max(seqlens_k))
    if causal:
        mask = mask & (cols <= rows + (lk - lq))
    return mask.contiguous().unsqueeze(1)


def padded_inputs(torch, data: VarlenInputs):
    """(q, k, v) padded to the longest sequence, [B, H, Lmax_q, D] and [B, Hkv, Lmax_k, D], built once."""
    if "padded" not in data.cache:
        data.cache["padded"] = (pad_packed(data.q, data.seqlens_q, data.max_seq_q),
                                pad_packed(data.k, data.seqlens_k, data.max_seq_k),
                                pad_packed(data.v, data.seqlens_k, data.max_seq_k))
    return data.cache["padded"]


def sequence_views(data: VarlenInputs) -> list:
    """Per sequence (q, k, v) as [1, heads, L, D] views of the packed tensors (no copy: a packed row block
    [L, heads, D] is SDPA's [1, heads, L, D] with the heads and rows strides swapped)."""
    views, q_at, k_at = [], 0, 0
    for seq_q, seq_k in zip(data.seqlens_q, data.seqlens_k):
        views.append(tuple(t[at:at + n].unsqueeze(0).transpose(1, 2)
                           for t, at, n in ((data.q, q_at, seq_q), (data.k, k_at, seq_k), (data.v, k_at, seq_k))))
        q_at += seq_q
        k_at += seq_k
    return views


def sdpa_padded_candidate(torch, name, backend, data: VarlenInputs, causal, scale) -> Candidate:
    """One SDPA call on the padded batch with padded_mask; grouped-query heads natively (enable_gqa), or,
    where the backend refuses that, on padded K/V expanded to every query head (EXPANDED_KV). The padded
    output's valid rows are packed again after the checked call, untimed."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    def context():
        return sdpa_kernel([backend])
    q_pad, k_pad, v_pad = padded_inputs(torch, data)
    mask = padded_mask(torch, data.seqlens_q, data.seqlens_k, causal, q_pad.device)
    kwargs = {"scale": scale, "attn_mask": mask, "is_causal": False}
    grouped = q_pad.shape[1] != k_pad.shape[1]
    if grouped:
        kwargs["enable_gqa"] = True
    how = SDPA_PADDED_CAUSAL if causal else SDPA_PADDED

    def unpack(out):
        return unpad(torch, out, data.seqlens_q)
    cand = Candidate(name, lambda: F.scaled_dot_product_attention(q_pad, k_pad, v_pad, **kwargs), context=context,
                     how=how, unpack=unpack)
    if grouped:
        built = {}

        def expanded() -> Candidate:
            if "cand" not in built:
                group = q_pad.shape[1] // k_pad.shape[1]
                k_all, v_all = k_pad.repeat_interleave(group, dim=1), v_pad.repeat_interleave(group, dim=1)
                plain = {key: value for key, value in kwargs.items() if key != "enable_gqa"}
                built["cand"] = Candidate(name, lambda: F.scaled_dot_product_attention(q_pad, k_all, v_all, **plain),
                                          context=context, how=how, unpack=unpack, variant=EXPANDED_KV)
            return built["cand"]
        cand.fallback = expanded
    return cand


def sdpa_per_sequence_candidate(torch, name, backend, data: VarlenInputs, causal, scale) -> Candidate:
    """A Python loop of one SDPA call per sequence, each on its views of the packed tensors, with the dense
    shapes' arguments (sdpa_arguments: is_causal, or causal_lower_right where Lq != Lk, and enable_gqa).
    Where the backend refuses enable_gqa, the fallback runs on each sequence's K/V expanded to every
    query head (EXPANDED_KV), built once. The outputs are packed again after the checked call, untimed."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    def context():
        return sdpa_kernel([backend])
    views = sequence_views(data)
    calls = [(q_b, k_b, v_b, sdpa_arguments(q_b, k_b, causal, scale, native_gqa=True)) for q_b, k_b, v_b in views]

    def loop(items):
        return lambda: [F.scaled_dot_product_attention(q_b, k_b, v_b, **kw) for q_b, k_b, v_b, kw in items]

    def unpack(outs):
        return torch.cat([out[0].transpose(0, 1) for out in outs], dim=0)
    cand = Candidate(name, loop(calls), context=context, how=SDPA_PER_SEQUENCE, unpack=unpack)
    if data.q.shape[1] != data.k.shape[1]:
        built = {}

        def expanded() -> Candidate:
            if "cand" not in built:
                group = data.q.shape[1] // data.k.shape[1]
                items = []
                for q_b, k_b, v_b in views:
                    k_all, v_all = k_b.repeat_interleave(group, dim=1), v_b.repeat_interleave(group, dim=1)
                    items.append((q_b, k_all, v_all, sdpa_arguments(q_b, k_all, causal, scale, native_gqa=False)))
                built["cand"] = Candidate(name, loop(items), context=context, how=SDPA_PER_SEQUENCE, unpack=unpack,
                                          variant=EXPANDED_KV)
            return built["cand"]
        cand.fallback = expanded
    return cand


def varlen_evolved_candidates(torch, data: VarlenInputs, causal, scale, evolved,
                              dtype: str = "fp16") -> list[Candidate]:
    """The evolved library on the packed batch through evo_attention_forward_varlen, with a plain launch
    and as exported (PDL allowed), each writing its own NaN-poisoned output."""
    lib, genome, why_not = evolved
    cands = []
    for name, programmatic in (("evolved_plain", False), ("evolved", True)):
        if lib is None:
            cands.append(Candidate(name, None, unavailable=why_not))
        elif not lib.has_varlen_entry:
            cands.append(Candidate(name, None, unavailable=VARLEN_ENTRY_MISSING))
        else:
            o = torch.empty_like(data.q)

            def run_evolved(o=o, programmatic=programmatic):
                lib.forward_varlen(data.q, data.k, data.v, o, data.cu_q, data.cu_k, data.max_seq_q, data.max_seq_k,
                                   causal, scale, programmatic=programmatic, dtype=dtype)
                return o
            cands.append(Candidate(name, run_evolved, poison=lambda o=o: o.fill_(float("nan")),
                                   config=lambda: genome or os.path.basename(lib.path)))
    return cands


def make_varlen_candidates(torch, data: VarlenInputs, causal, scale, evolved, triton_mod, dtype: str = "fp16",
                           flash_attn=None) -> list[Candidate]:
    """Every peer on one packed batch (the module's docstring says what each runs), in the dense order:
    SDPA cuDNN, SDPA flash, Triton, flash_attn (where given), then the evolved kernel, last."""
    from torch.nn.attention import SDPBackend

    cands = [sdpa_padded_candidate(torch, "cudnn", SDPBackend.CUDNN_ATTENTION, data, causal, scale),
             sdpa_per_sequence_candidate(torch, "flash", SDPBackend.FLASH_ATTENTION, data, causal, scale)]
    if triton_mod is None:
        cands.append(Candidate("triton", None, unavailable="Triton not available"))
    else:
        out = torch.empty_like(data.q)
        cands.append(Candidate("triton", lambda: triton_mod.triton_varlen_attention(
            data.q, data.k, data.v, data.cu_q, data.cu_k, data.max_seq_q, data.max_seq_k, causal, scale, out),
            config=triton_mod.winning_varlen_config))
    if flash_attn is not None:
        # FlashAttention 2.1 and later align causal bottom-right where Lq != Lk, as evo does.
        cands.append(Candidate("flash_attn", lambda: flash_attn.flash_attn_varlen_func(
            data.q, data.k, data.v, data.cu_q, data.cu_k, data.max_seq_q, data.max_seq_k, dropout_p=0.0,
            softmax_scale=scale, causal=causal)))
    return cands + varlen_evolved_candidates(torch, data, causal, scale, evolved, dtype)


@dataclass
class Fp8Inputs:
    """One shape's FP8 inputs, shared by every peer and both causal settings: the fp16 draws q [B, H, Sq, D],
    k and v [B, Hkv, Sk, D]; their e4m3 bytes q8, k8, v8 (torch.float8_e4m3fn, the same shapes) and V
    transposed, vt8 [B, Hkv, D, fp8_pitch(Sk)] with the pad zeroed (Triton's), and the same bytes with
    each 16 keys in the exported library's order, vt8_evo; the float32 scales, q_scale [B * H], k_scale
    and v_scale [B * Hkv] (value = byte * scale)."""
    q: object
    k: object
    v: object
    q8: object
    k8: object
    v8: object
    vt8: object
    vt8_evo: object
    q_scale: object
    k_scale: object
    v_scale: object


def fp8_inputs(torch, q, k, v) -> Fp8Inputs:
    """The fp16 draws quantized by the exported library's rule (bench_fp8), V also transposed."""
    (q8, q_scale), (k8, k_scale), (v8, v_scale) = (bench_fp8.quantize(torch, t) for t in (q, k, v))
    vt8 = bench_fp8.transpose_padded(torch, v8)
    return Fp8Inputs(q, k, v, q8, k8, v8, vt8, bench_fp8.evo_key_order(torch, vt8), q_scale, k_scale, v_scale)


def bf16_output(torch, q):
    """An FP8 kernel's output: bf16, Q's shape."""
    return torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)


def fp16_peer(cand: Candidate) -> Candidate:
    """A 16-bit baseline of an FP8 row: runs the fp16 draws and is checked against their reference; its
    fallback (SDPA on expanded K/V), where it has one, likewise."""
    cand.dtype, cand.reference = "fp16", "fp16"
    if cand.fallback is not None:
        build = cand.fallback
        cand.fallback = lambda: fp16_peer(build())
    return cand


def serves(cand: Candidate) -> bool:
    """One call of an evolved candidate: False where the library refuses it as a problem it cannot serve
    (cudaErrorInvalidValue: none of its genomes serves it); any other failure is measure()'s to report."""
    from evolved_lib import INVALID_VALUE, EvolvedError
    try:
        cand.call()
    except EvolvedError as err:
        return err.code != INVALID_VALUE
    except Exception:  # measure() reports any other failure
        pass
    return True


def evolved_fp16_candidates(torch, data: Fp8Inputs, causal, scale, evolved) -> list[Candidate]:
    """The evolved library's fp16 kernel on an FP8 row's fp16 draws, as exported (PDL allowed): one
    candidate where a library serves fp16 for the shape, none (silently) where none does."""
    lib, genome, _ = evolved
    if lib is None or (lib.needs_gqa_entry(data.q, data.k) and not lib.has_gqa_entry):
        return []
    cand = evolved_candidate(torch, "evolved_fp16", lib, genome, data.q, data.k, data.v, causal, scale, True)
    return [fp16_peer(cand)] if serves(cand) else []


def fp8_evolved_candidates(torch, data: Fp8Inputs, causal, scale, evolved) -> list[Candidate]:
    """The evolved library's FP8 kernel through evo_attention_forward_fp8, with a plain launch and as
    exported (PDL allowed), each writing its own NaN-poisoned bf16 output."""
    lib, genome, why_not = evolved
    cands = []
    for name, programmatic in (("evolved_plain", False), ("evolved", True)):
        if lib is None:
            cands.append(Candidate(name, None, unavailable=why_not, dtype="e4m3"))
        elif not lib.has_fp8_entry:
            cands.append(Candidate(name, None, unavailable=FP8_ENTRY_MISSING, dtype="e4m3"))
        else:
            o = bf16_output(torch, data.q)

            def run_evolved(o=o, programmatic=programmatic):
                lib.forward_fp8(data.q8, data.k8, data.vt8_evo, o, data.q_scale, data.k_scale, data.v_scale, causal, scale,
                                programmatic=programmatic)
                return o
            cands.append(Candidate(name, run_evolved, poison=lambda o=o: o.fill_(float("nan")),
                                   config=lambda: genome or os.path.basename(lib.path), dtype="e4m3",
                                   reference="quantized"))
    return cands


def triton_fp8_candidate(torch, data: Fp8Inputs, causal, scale, triton_mod) -> Candidate:
    """triton_fa.triton_fp8_attention on the row's bytes, scales and transposed V."""
    if triton_mod is None:
        return Candidate("triton", None, unavailable="Triton not available", dtype="e4m3")
    out = bf16_output(torch, data.q)
    return Candidate("triton", lambda: triton_mod.triton_fp8_attention(
        data.q8, data.k8, data.vt8, data.q_scale, data.k_scale, data.v_scale, causal, scale, out),
        config=triton_mod.winning_fp8_config, dtype="e4m3", reference="quantized")


def make_fp8_candidates(torch, data: Fp8Inputs, causal, scale, evolved_fp8, evolved_fp16,
                        triton_mod) -> list[Candidate]:
    """Every peer of an FP8 row (the module's docstring says what each runs), in the dense order: SDPA
    cuDNN and flash on the fp16 draws, Triton FP8, the evolved fp16 kernel where the library serves
    the shape, then the evolved FP8 kernel, last. evolved_fp8 and evolved_fp16 are EvolvedSet.lookup's
    answers for e4m3 and for fp16."""
    from torch.nn.attention import SDPBackend

    cands = [fp16_peer(sdpa_candidate(torch, name, backend, data.q, data.k, data.v, causal, scale))
             for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION))]
    cands.append(triton_fp8_candidate(torch, data, causal, scale, triton_mod))
    return (cands + evolved_fp16_candidates(torch, data, causal, scale, evolved_fp16)
            + fp8_evolved_candidates(torch, data, causal, scale, evolved_fp8))


# e4m3's NaN byte: the quantizer check's poison, so that a byte the library leaves unwritten differs.
E4M3_NAN_BYTE = 0x7F


def quantizer_check(torch, lib, data: Fp8Inputs) -> dict:
    """The library's evo_attention_quantize_fp8 on the fp16 draws against the torch rule's bytes and
    scales (fp8_inputs): how many of each differ, bit for bit, over Q, K and V (V transposed, its pad
    included). {} where no library serves the row; a note where the library cannot be compared."""
    if lib is None:
        return {}
    if not lib.has_fp8_quantizer:
        return {"lib": os.path.basename(lib.path), "note": QUANTIZER_MISSING}
    from evolved_lib import EvolvedError
    check = {"lib": os.path.basename(lib.path), "bytes_differ": 0, "bytes": 0, "scales_differ": 0, "scales": 0}
    tensors = ((data.q, data.q8, data.q_scale, False), (data.k, data.k8, data.k_scale, False),
               (data.v, data.vt8_evo, data.v_scale, True))
    try:
        for x, want, want_scales, transpose in tensors:
            got = torch.full(tuple(want.shape), E4M3_NAN_BYTE, dtype=torch.uint8, device=want.device)
            got_scales = torch.full_like(want_scales, float("nan"))
            lib.quantize_fp8(x, got, got_scales, transpose)
            check["bytes_differ"] += bench_fp8.differing(torch, got, want)
            check["scales_differ"] += bench_fp8.differing(torch, got_scales, want_scales)
            check["bytes"] += want.numel()
            check["scales"] += want_scales.numel()
    except EvolvedError as err:
        return {"lib": check["lib"], "note": f"refused: {first_line(err)}"}
    return check


def cover_text(cover: dict | None) -> str:
    """The per-launch spin, on the progress line where it was widened or samples were dropped."""
    if not cover or not (cover["widened"] or cover["dropped"]):
        return ""
    return f"  (spin {cover['spin_us']:.0f} µs, host {cover['host_us']:.0f} µs, {cover['dropped']} dropped)"


class ContextLost(RuntimeError):
    pass


def output_errors(timing, cand: Candidate, out, ref) -> dict:
    """"rel_l2" of the output against the problem's reference. An FP8 row has several, by name
    ({"quantized": ..., "fp16": ...}): the error against each is "rel_l2_<name>", and "rel_l2" the one
    against the candidate's own reference."""
    if not isinstance(ref, dict):
        return {"rel_l2": timing.rel_l2(out, ref)}
    errors = {f"rel_l2_{name}": timing.rel_l2(out, r) for name, r in ref.items()}
    errors["rel_l2"] = errors[f"rel_l2_{cand.reference}"]
    return errors


def _measure_one(torch, timing, cand: Candidate, ref, args, flusher) -> dict:
    # "windows": when each figure was timed, for the clock samples (bench_clocks.attach_clocks).
    res = {"graph_us": None, "launch_us": None, "rel_l2": None, "note": cand.unavailable, "config": None,
           "windows": {}}
    if cand.call is None:
        return res
    res["note"] = res["note"] or cand.how
    if cand.variant:
        res["variant"] = cand.variant
    if cand.dtype:
        res["dtype"] = cand.dtype
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with cand.context():
                if cand.poison:
                    cand.poison()
                out = cand.call()
                if cand.unpack:
                    out = cand.unpack(out)
                torch.cuda.synchronize()
                res.update(output_errors(timing, cand, out, ref))
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
                    res["note"] = "; ".join(x for x in (cand.how, f"graph replay failed: {first_line(err)}") if x)
        except Exception as err:
            reason = next((str(w.message).splitlines()[0][:160] for w in caught), "")
            res["note"] = (f"refused: {first_line(err)}" + (f" ({reason})" if reason else "")
                           + (f"; {cand.how}" if cand.how else ""))
    try:
        torch.cuda.synchronize()
    except Exception as err:
        raise ContextLost(f"CUDA context lost after {cand.name}: {first_line(err)}") from None
    return res


def measure(torch, timing, cand: Candidate, ref, args, flusher) -> dict:
    """One kernel's figures; where it is refused outright and has a fallback (SDPA on expanded K/V),
    the fallback's figures, marked with its variant, the refusal kept in the note."""
    res = _measure_one(torch, timing, cand, ref, args, flusher)
    if cand.fallback is None or res["rel_l2"] is not None or not (res["note"] or "").startswith("refused:"):
        return res
    try:
        alt = cand.fallback()
    except Exception as err:   # e.g. no memory for the expanded K/V: the refusal stands
        res["note"] += f"; {EXPANDED_KV} not built: {first_line(err)}"
        return res
    refusal = res["note"].replace(f"; {cand.how}", "") if cand.how else res["note"]
    alt_res = _measure_one(torch, timing, alt, ref, args, flusher)
    alt_res["note"] = "; ".join(x for x in (f"{alt.variant}: the enable_gqa call {refusal}", alt_res["note"]) if x)
    return alt_res


def measure_floor_inputs(torch, timing, device, args) -> dict:
    env = {"matmul_tflops": timing.matmul_tflops(device), "copy_gbps": timing.copy_gbps(device)}
    if args.dtype == "e4m3":
        env["fp8_matmul_tflops"] = timing.fp8_matmul_tflops(device)
    tiny = torch.zeros(1, device=device)
    bump = lambda: tiny.add_(1)  # noqa: E731  one trivial kernel: the cost of a launch that does nothing
    flusher = timing.L2Flusher(device)
    env["empty_graph_us"] = timing.graph_replay_us(bump, args.graph_calls, args.graph_replays)
    env["empty_launch_us"] = timing.per_launch_us(bump, args.iters, flusher)
    return env


@dataclass
class ProblemRunner:
    """One shape's fresh inputs behind what each causal setting needs of them: reference(causal), the
    float32 reference (an FP8 row's two, by name: output_errors); candidates(causal), the peers;
    extras(causal), what the row records besides (an FP8 row's quantizer check)."""
    reference: Callable
    candidates: Callable
    extras: Callable = lambda causal: {}


def dense_inputs(torch, shape, gen, device, elem):
    """Fresh random dense inputs, drawn q, k, v in that order ([B, H, Sq, D], [B, Hkv, Sk, D]:
    equal-head, equal-length shapes get the inputs they always had)."""
    q_dims = (shape.batch, shape.heads, shape.seq, shape.head_dim)
    kv_dims = (shape.batch, shape.heads_kv, shape.seq_k, shape.head_dim)
    return tuple(torch.randn(dims, generator=gen, device=device, dtype=elem) for dims in (q_dims, kv_dims, kv_dims))


def problem_runner(torch, timing, shape, gen, device, elem, scale, evolved, triton_mod, dtype,
                   flash_attn=None) -> ProblemRunner:
    """One shape's fresh inputs and the peers for each causal setting, on the same inputs: a dense
    shape's drawn by dense_inputs, a packed batch's packed (varlen_inputs), an FP8 row's drawn in fp16
    and quantized (fp8_problem_runner)."""
    if dtype == "e4m3":
        return fp8_problem_runner(torch, timing, shape, gen, device, elem, scale, evolved, triton_mod)
    if shape.is_varlen:
        data = varlen_inputs(torch, shape, gen, device, elem)

        def reference(causal):
            return timing.reference_attention_varlen(data.q, data.k, data.v, data.seqlens_q, data.seqlens_k, causal,
                                                     scale)

        def candidates(causal):
            return make_varlen_candidates(torch, data, causal, scale, evolved.lookup(shape, causal, dtype),
                                          triton_mod, dtype, flash_attn)
        return ProblemRunner(reference, candidates)
    q, k, v = dense_inputs(torch, shape, gen, device, elem)

    def reference(causal):
        return timing.reference_attention(q, k, v, causal, scale)

    def candidates(causal):
        return make_candidates(torch, q, k, v, causal, scale, evolved.lookup(shape, causal, dtype), triton_mod, dtype)
    return ProblemRunner(reference, candidates)


def fp8_problem_runner(torch, timing, shape, gen, device, elem, scale, evolved, triton_mod) -> ProblemRunner:
    """An FP8 row's shape: draws of elem (DRAWN_DTYPES: fp16) as dense_inputs makes an fp16 row's,
    quantized once (fp8_inputs); the float32 references of the dequantized inputs and of the draws; the
    FP8 row's peers; the library's quantizer against the torch rule."""
    q, k, v = dense_inputs(torch, shape, gen, device, elem)
    data = fp8_inputs(torch, q, k, v)
    values = [bench_fp8.dequantize(torch, x8, scales)
              for x8, scales in ((data.q8, data.q_scale), (data.k8, data.k_scale), (data.v8, data.v_scale))]

    def reference(causal):
        return {"quantized": timing.reference_attention(*values, causal, scale),
                "fp16": timing.reference_attention(q, k, v, causal, scale)}

    def candidates(causal):
        return make_fp8_candidates(torch, data, causal, scale, evolved.lookup(shape, causal, "e4m3"),
                                   evolved.lookup(shape, causal, "fp16"), triton_mod)

    def extras(causal):
        check = quantizer_check(torch, evolved.lookup(shape, causal, "e4m3")[0], data)
        return {"fp8_quantizer": check} if check else {}
    return ProblemRunner(reference, candidates, extras)


def floor_rate(env: dict, dtype: str) -> float:
    """The matmul rate behind a row's compute floor: the e4m3 one for FP8 rows."""
    return env["fp8_matmul_tflops"] if dtype == "e4m3" else env["matmul_tflops"]


def error_text(res: dict, dtype: str) -> str:
    """The progress line's errors: against the kernel's own reference, and an FP8 row's both."""
    own = f"rel-L2 {fmt_rel_l2(res['rel_l2'], res.get('dtype') or dtype)}"
    if res.get("rel_l2_quantized") is None:
        return own
    return (f"{own} ({res['dtype']}; vs dequantized {res['rel_l2_quantized']:.1e}, "
            f"vs fp16 {res['rel_l2_fp16']:.1e})")


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

    flash_attn = None
    if any(shape.is_varlen for shape, _ in args.problems):
        try:   # an extra peer for packed batches where FlashAttention's package is installed; none otherwise
            import flash_attn
        except Exception:
            flash_attn = None

    env = environment(torch, triton_version)
    if flash_attn is not None:
        env["flash_attn"] = getattr(flash_attn, "__version__", "?")
    env.update({"dtype": args.dtype, "iters": args.iters, "graph_calls": args.graph_calls, "graph_replays": args.graph_replays,
                "seed": args.seed, "argv": sys.argv[1:]})
    props = torch.cuda.get_device_properties(device)
    if triton_fa is not None:
        triton_fa.set_smem_limit(getattr(props, "shared_memory_per_block_optin", 0) or 227 * 1024)
        if args.triton_precompile_jobs > 0:
            t0 = time.time()
            problems = [(s.head_dim, c, s.seq, s.seq_k, s.group) for s, settings in args.problems for c in settings
                        if not s.is_varlen]
            packed = [(s.head_dim, c, s.heads, s.heads_kv, s.max_seq_q) for s, settings in args.problems
                      for c in settings if s.is_varlen]
            try:
                count, failures = triton_fa.precompile(problems, args.triton_precompile_jobs,
                                                       TORCH_DTYPES[args.dtype], varlen=packed)
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
        for index, (shape, causal_settings) in enumerate(args.problems):
            gen = torch.Generator(device=device).manual_seed(args.seed + index)
            elem = getattr(torch, TORCH_DTYPES[DRAWN_DTYPES.get(args.dtype, args.dtype)])
            scale = 1.0 / math.sqrt(shape.head_dim)
            runner = problem_runner(torch, timing, shape, gen, device, elem, scale, evolved, triton_fa, args.dtype,
                                    flash_attn)
            for causal in causal_settings:
                ref = runner.reference(causal)
                row = {"shape": shape.label, "key": shape.key, "causal": causal, "dtype": args.dtype,
                       "gflop": attention_flops(shape, causal) / 1e9,
                       "mib": attention_bytes(shape, args.dtype) / 2 ** 20,
                       "floors": floors_us(shape, causal, floor_rate(env, args.dtype), env["copy_gbps"], args.dtype),
                       "kernels": {}}
                row.update(runner.extras(causal))
                if row.get("fp8_quantizer"):
                    print(f"[{shape.label} causal={int(causal)}] quantizer {quantizer_text(row['fp8_quantizer'])}",
                          flush=True)
                if shape.is_varlen:
                    row["varlen"] = {"seq_q": list(shape.seqlens_q), "seq_k": list(shape.seqlens_k)}
                results.append(row)
                t0 = time.time()
                cands = {c.name: c for c in runner.candidates(causal)}
                rounds = {name: [] for name in cands}
                measured.append((row, rounds))
                for r in range(args.rounds):
                    for name in round_order(list(cands), r):
                        res = measure(torch, timing, cands[name], ref, args, flusher)
                        rounds[name].append(res)
                        label = f"[{shape.label} causal={int(causal)}" + (f" round {r}]" if args.rounds > 1 else "]")
                        print(f"{label} {name:13s} graph {fmt_us(res['graph_us']):>7s} µs"
                              f"  launch {fmt_us(res['launch_us']):>7s} µs  {error_text(res, args.dtype)}"
                              f"{cover_text(res.get('launch_cover'))}"
                              f"{'  ' + res['config'] if res['config'] else ''}"
                              f"{'  ' + res['note'] if res['note'] else ''}", flush=True)
                row["seconds"] = time.time() - t0
                del ref, cands   # the candidates hold the inputs (and any expanded K/V) of this shape
            del runner   # and this the inputs themselves (and a packed batch's padded copies, an FP8 row's bytes)
            torch.cuda.empty_cache()
    except ContextLost as err:
        print(f"fatal: {err}; the figures so far are reported below", flush=True)
        status = 1
    finally:
        clocks.stop()
    attach_clocks((res for _, rounds in measured for per_kernel in rounds.values() for res in per_kernel),
                  clocks.summary)
    for row, rounds in measured:   # the table's column order, whatever ran
        row["kernels"] = {k: merge_rounds(rounds[k]) for k in KERNELS + EXTRA_KERNELS if rounds.get(k)}
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

"""The evolved kernel as `evoctl export` ships it: a shared library called through ctypes.

extern "C" int evo_attention_forward(const void* q, const void* k, const void* v, void* o,
    int batch, int heads, int seq_q, int seq_k, int head_dim, float softmax_scale, int causal,
    cudaStream_t stream);     // 0 on success; launches with programmatic dependent launch (PDL) allowed
extern "C" int evo_attention_forward_ex(... the same 12 arguments ..., int programmatic_launch);
    // programmatic_launch 1: as evo_attention_forward; 0: a plain launch, without PDL
extern "C" int evo_attention_forward_dtype(... the first 11 arguments ..., int dtype,
    cudaStream_t stream, int programmatic_launch);   // dtype 0 fp16, 1 bf16: the bf16 entry point
extern "C" int evo_attention_forward_gqa(const void* q, const void* k, const void* v, void* o,
    int batch, int heads, int heads_kv, int seq_q, int seq_k, int head_dim, float softmax_scale,
    int causal, int dtype, cudaStream_t stream, int programmatic_launch);
    // grouped-query heads (K and V have heads_kv heads; query head h reads KV head
    // h / (heads / heads_kv)) and seq_q != seq_k (causal bottom-right aligned); 1 = a call it cannot serve
extern "C" int evo_attention_forward_varlen(const void* q, const void* k, const void* v, void* o,
    const int* cu_seqlens_q, const int* cu_seqlens_k, int batch, int heads, int heads_kv,
    int max_seq_q, int max_seq_k, int total_q, int total_k, int head_dim, float softmax_scale,
    int causal, int dtype, cudaStream_t stream, int programmatic_launch);
    // a packed variable-length batch (FlashAttention's varlen layout): q and o [total_q, heads,
    // head_dim], k and v [total_k, heads_kv, head_dim], cu_seqlens_* int32 device arrays of batch + 1
    // offsets; causal bottom-right aligned per sequence
extern "C" int evo_attention_forward_fp8(const void* q, const void* k, const void* v_t, void* o,
    const float* q_scale, const float* k_scale, const float* v_scale, int batch, int heads, int heads_kv,
    int seq_q, int seq_k, int head_dim, float softmax_scale, int causal, cudaStream_t stream,
    int programmatic_launch);
    // e4m3 bytes: q [batch, heads, seq_q, head_dim], k [batch, heads_kv, seq_k, head_dim], v_t
    // transposed [batch, heads_kv, head_dim, pitch] (pitch = seq_k rounded up to 16, each 16 keys
    // in the order 0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15: bench_fp8.evo_key_order);
    // the scales are float device arrays of batch * heads (q) and batch * heads_kv (k, v): value =
    // byte * scale; o bf16 [batch, heads, seq_q, head_dim]; 1 = a call it cannot serve (a file with
    // no e4m3 genome refuses every call)
extern "C" int evo_attention_quantize_fp8(const void* x, int x_dtype, void* out, float* scales,
    int batch, int heads, int seq, int head_dim, int transpose, cudaStream_t stream);
    // x fp16 (x_dtype 0) or bf16 (1) [batch, heads, seq, head_dim] -> e4m3 bytes in that layout
    // (transpose 0) or V's transposed, padded one (transpose 1, the pad zeroed), and one scale per
    // (batch, head): its largest magnitude / 448 (1 for an all-zero head, at least 2^-126, NaN for
    // a head holding NaN or an infinity); out = round_to_nearest_e4m3(x / scale), saturating at 448

With PDL a launch may start while the previous kernel in the stream is finishing. The benchmark
times both launches (bench/NOTES.md). `evo_attention_forward_ex` is optional: libraries exported
before it existed lack it, and then `has_plain_launch` is False and only the PDL launch can run.
fp16 calls go through those two; a bf16 call needs `evo_attention_forward_dtype`, which libraries
exported before bf16 lack (`has_dtype_entry`). A problem with heads_kv != heads or seq_q != seq_k
goes through `evo_attention_forward_gqa` (both launches, either dtype), which libraries exported before
grouped-query heads lack (`has_gqa_entry`); equal-head, equal-length problems keep the entry points
above, as before. A packed variable-length batch goes through `evo_attention_forward_varlen`
(`forward_varlen`, both launches, either dtype), which libraries exported before varlen lack
(`has_varlen_entry`). FP8 (e4m3) problems go through `evo_attention_forward_fp8` (`forward_fp8`, both
launches) and their inputs can be made by `evo_attention_quantize_fp8` (`quantize_fp8`); libraries
exported before FP8 lack both (`has_fp8_entry`, `has_fp8_quantizer`).
"""
from __future__ import annotations

import contextlib
import ctypes
import os

_ARGTYPES = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 5 + [ctypes.c_float, ctypes.c_int, ctypes.c_void_p]
# evo_attention_forward_dtype: the arguments up to causal, then dtype, stream and programmatic_launch.
_DTYPE_ARGTYPES = _ARGTYPES[:-1] + [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
# evo_attention_forward_gqa: q, k, v, o, batch, heads, heads_kv, seq_q, seq_k, head_dim, scale, causal,
# dtype, stream, programmatic_launch.
_GQA_ARGTYPES = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_int, ctypes.c_int,
                                                              ctypes.c_void_p, ctypes.c_int]
# evo_attention_forward_varlen: q, k, v, o, cu_seqlens_q, cu_seqlens_k, batch, heads, heads_kv, max_seq_q,
# max_seq_k, total_q, total_k, head_dim, scale, causal, dtype, stream, programmatic_launch.
_VARLEN_ARGTYPES = [ctypes.c_void_p] * 6 + [ctypes.c_int] * 8 + [ctypes.c_float, ctypes.c_int, ctypes.c_int,
                                                                  ctypes.c_void_p, ctypes.c_int]
# evo_attention_forward_fp8: q, k, v_t, o, q_scale, k_scale, v_scale, batch, heads, heads_kv, seq_q, seq_k,
# head_dim, scale, causal, stream, programmatic_launch.
_FP8_ARGTYPES = [ctypes.c_void_p] * 7 + [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_int, ctypes.c_void_p,
                                                              ctypes.c_int]
# evo_attention_quantize_fp8: x, x_dtype, out, scales, batch, heads, seq, head_dim, transpose, stream.
_QUANTIZE_ARGTYPES = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 5 + \
                     [ctypes.c_void_p]
# The exported entry point's dtype argument (the values of evo::DType).
# evo_attention_workspace_bytes(batch, heads, heads_kv, seq_q, seq_k, head_dim, causal, dtype, varlen) -> long long
_WORKSPACE_BYTES_ARGTYPES = [ctypes.c_int] * 9
# evo_attention_bind_workspace(stream, workspace, bytes)
_BIND_ARGTYPES = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong]
DTYPE_CODES = {"fp16": 0, "bf16": 1}
# evo_attention_quantize_fp8's x_dtype, by torch's name of the input's element type.
QUANTIZE_INPUT_CODES = {"torch.float16": 0, "torch.bfloat16": 1}
# cudaErrorInvalidValue: what an entry point returns for a call it cannot serve.
INVALID_VALUE = 1


class EvolvedError(RuntimeError):
    """The library cannot be loaded, lacks the entry point, or the call returned an error code (`code`,
    None where no call was made)."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class EvolvedLib:
    def __init__(self, path: str):
        if not os.path.isfile(path):
            raise EvolvedError(f"evolved library not found: {path}")
        try:
            self._lib = ctypes.CDLL(os.path.abspath(path))
        except OSError as err:
            raise EvolvedError(f"cannot load {path}: {err}") from None
        try:
            fn = self._lib.evo_attention_forward
        except AttributeError:
            raise EvolvedError(f"{path} does not export evo_attention_forward") from None
        fn.argtypes = _ARGTYPES
        fn.restype = ctypes.c_int
        self._fn = fn
        try:
            fn_ex = self._lib.evo_attention_forward_ex
        except AttributeError:
            fn_ex = None
        else:
            fn_ex.argtypes = _ARGTYPES + [ctypes.c_int]
            fn_ex.restype = ctypes.c_int
        self._fn_ex = fn_ex
        try:
            fn_dtype = self._lib.evo_attention_forward_dtype
        except AttributeError:
            fn_dtype = None
        else:
            fn_dtype.argtypes = _DTYPE_ARGTYPES
            fn_dtype.restype = ctypes.c_int
        self._fn_dtype = fn_dtype
        try:
            fn_gqa = self._lib.evo_attention_forward_gqa
        except AttributeError:
            fn_gqa = None
        else:
            fn_gqa.argtypes = _GQA_ARGTYPES
            fn_gqa.restype = ctypes.c_int
        self._fn_gqa = fn_gqa
        try:
            fn_varlen = self._lib.evo_attention_forward_varlen
        except AttributeError:
            fn_varlen = None
        else:
            fn_varlen.argtypes = _VARLEN_ARGTYPES
            fn_varlen.restype = ctypes.c_int
        self._fn_varlen = fn_varlen
        self._fn_fp8 = self._optional("evo_attention_forward_fp8", _FP8_ARGTYPES)
        self._fn_quantize = self._optional("evo_attention_quantize_fp8", _QUANTIZE_ARGTYPES)
        self._fn_workspace_bytes = self._optional("evo_attention_workspace_bytes", _WORKSPACE_BYTES_ARGTYPES,
                                                  ctypes.c_longlong)
        self._fn_bind = self._optional("evo_attention_bind_workspace", _BIND_ARGTYPES)
        self.path = path

    def _optional(self, name: str, argtypes: list, restype=ctypes.c_int):
        """An entry point that libraries exported before it lack: None there."""
        fn = getattr(self._lib, name, None)
        if fn is not None:
            fn.argtypes = argtypes
            fn.restype = restype
        return fn

    def workspace_bytes(self, q, k, causal: bool, dtype: str = "fp16") -> int:
        """The bytes of workspace a dense call takes (evo_attention_workspace_bytes): 0 where it takes
        none, where the library refuses the call (forward says why), or where the library was exported
        before callers could bind a workspace."""
        if self._fn_workspace_bytes is None or self._fn_bind is None or dtype not in DTYPE_CODES:
            return 0
        batch, heads, seq_q, head_dim = q.shape
        n = self._fn_workspace_bytes(batch, heads, k.shape[1], seq_q, k.shape[2], head_dim, int(causal),
                                     DTYPE_CODES[dtype], 0)
        return max(int(n), 0)

    @contextlib.contextmanager
    def _bound(self, workspace, stream: int):
        """The caller's workspace (a zeroed uint8 device tensor of workspace_bytes, or None: the
        library's own) bound to `stream` for one call: a call captured into a graph is then its
        kernel alone (evo_attention_bind_workspace)."""
        if workspace is None:
            yield
            return
        if self._fn_bind is None:
            raise EvolvedError(f"{self.path} does not export evo_attention_bind_workspace (exported before callers "
                               f"could bind a workspace)")
        rc = self._fn_bind(ctypes.c_void_p(stream), ctypes.c_void_p(workspace.data_ptr()), workspace.numel())
        if rc != 0:
            raise EvolvedError(f"evo_attention_bind_workspace returned {rc}", rc)
        try:
            yield
        finally:
            self._fn_bind(ctypes.c_void_p(stream), None, 0)

    @property
    def has_plain_launch(self) -> bool:
        """Whether the library exports evo_attention_forward_ex, so that forward(programmatic=False) can run."""
        return self._fn_ex is not None

    @property
    def has_dtype_entry(self) -> bool:
        """Whether the library exports evo_attention_forward_dtype, so that forward(dtype="bf16") can run."""
        return self._fn_dtype is not None

    @property
    def has_gqa_entry(self) -> bool:
        """Whether the library exports evo_attention_forward_gqa, so that problems with heads_kv != heads
        or seq_q != seq_k can run."""
        return self._fn_gqa is not None

    @property
    def has_varlen_entry(self) -> bool:
        """Whether the library exports evo_attention_forward_varlen, so that packed variable-length
        batches (forward_varlen) can run."""
        return self._fn_varlen is not None

    @property
    def has_fp8_entry(self) -> bool:
        """Whether the library exports evo_attention_forward_fp8, so that forward_fp8 can run."""
        return self._fn_fp8 is not None

    @property
    def has_fp8_quantizer(self) -> bool:
        """Whether the library exports evo_attention_quantize_fp8, so that quantize_fp8 can run."""
        return self._fn_quantize is not None

    @staticmethod
    def needs_gqa_entry(q, k) -> bool:
        """Q [B, H, Sq, D] and K [B, Hkv, Sk, D] differ in heads or length: only the _gqa entry serves it."""
        return tuple(q.shape[1:3]) != tuple(k.shape[1:3])

    def forward(self, q, k, v, o, causal: bool, scale: float, programmatic: bool = True,
                dtype: str = "fp16", workspace=None) -> None:
        """Launches on torch's current stream (the capture stream inside a graph capture): with PDL
        allowed (evo_attention_forward, as exported) or, with programmatic=False, as a plain launch
        (evo_attention_forward_ex(..., 0)). dtype "bf16" calls evo_attention_forward_dtype; grouped-query
        heads or seq_q != seq_k call evo_attention_forward_gqa. workspace: the caller's, bound to the
        stream for the call (see _bound), or None."""
        if self.needs_gqa_entry(q, k):
            self._forward_gqa(q, k, v, o, causal, scale, programmatic, dtype, workspace)
            return
        if dtype != "fp16":
            self._forward_dtype(q, k, v, o, causal, scale, programmatic, dtype, workspace)
            return
        if not programmatic and self._fn_ex is None:
            raise EvolvedError(f"{self.path} does not export evo_attention_forward_ex (exported before plain "
                               f"launches were selectable): only the PDL launch can run")
        import torch  # here, not at the top, so that loading and symbol checks work without torch
        batch, heads, seq_q, head_dim = q.shape
        stream = torch.cuda.current_stream().cuda_stream
        args = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), batch, heads, seq_q, k.shape[2],
                head_dim, ctypes.c_float(scale), int(causal), ctypes.c_void_p(stream))
        with self._bound(workspace, stream):
            if programmatic:
                name, rc = "evo_attention_forward", self._fn(*args)
            else:
                name, rc = "evo_attention_forward_ex", self._fn_ex(*args, 0)
        if rc != 0:
            raise EvolvedError(f"{name} returned {rc} for shape {tuple(q.shape)} causal={int(causal)}", rc)

    # The typed entry points: what a library without one was exported before, and what it can still run.
    _TYPED_MISSING = {
        "evo_attention_forward_dtype": "exported before bf16): only fp16 calls can run",
        "evo_attention_forward_gqa": "exported before grouped-query heads): only heads_kv == heads, seq_q == seq_k "
                                     "calls can run",
    }

    def _forward_dtype(self, q, k, v, o, causal: bool, scale: float, programmatic: bool, dtype: str,
                       workspace=None) -> None:
        self._forward_typed("evo_attention_forward_dtype", self._fn_dtype, (), q, k, v, o, causal, scale,
                            programmatic, dtype, workspace)

    def _forward_gqa(self, q, k, v, o, causal: bool, scale: float, programmatic: bool, dtype: str,
                     workspace=None) -> None:
        self._forward_typed("evo_attention_forward_gqa", self._fn_gqa, (k.shape[1],), q, k, v, o, causal, scale,
                            programmatic, dtype, workspace)

    def _forward_typed(self, name, fn, heads_kv, q, k, v, o, causal, scale, programmatic, dtype,
                       workspace=None) -> None:
        """One call of a typed entry point: q, k, v, o, batch, heads, [heads_kv,] seq_q, seq_k, head_dim,
        scale, causal, dtype, stream, programmatic_launch."""
        if dtype not in DTYPE_CODES:
            raise EvolvedError(f"unknown dtype '{dtype}': expected {' or '.join(DTYPE_CODES)}")
        if fn is None:
            raise EvolvedError(f"{self.path} does not export {name} ({self._TYPED_MISSING[name]}")
        import torch
        batch, heads, seq_q, head_dim = q.shape
        stream = torch.cuda.current_stream().cuda_stream
        with self._bound(workspace, stream):
            rc = fn(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), batch, heads, *heads_kv, seq_q,
                    k.shape[2], head_dim, ctypes.c_float(scale), int(causal), DTYPE_CODES[dtype],
                    ctypes.c_void_p(stream), int(programmatic))
        if rc != 0:
            raise EvolvedError(f"{name} returned {rc} for q {tuple(q.shape)} k {tuple(k.shape)} "
                               f"causal={int(causal)} dtype={dtype}", rc)

    def forward_varlen(self, q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seq_q: int, max_seq_k: int, causal: bool,
                       scale: float, programmatic: bool = True, dtype: str = "fp16") -> None:
        """One packed variable-length batch through evo_attention_forward_varlen, on torch's current
        stream: q and o [total_q, heads, head_dim], k and v [total_k, heads_kv, head_dim], cu_seqlens_q
        and cu_seqlens_k int32 device tensors of batch + 1 offsets; max_seq_q and max_seq_k the longest
        sequence's lengths (host ints, so that the call needs no device read and graph capture works)."""
        if dtype not in DTYPE_CODES:
            raise EvolvedError(f"unknown dtype '{dtype}': expected {' or '.join(DTYPE_CODES)}")
        if self._fn_varlen is None:
            raise EvolvedError(f"{self.path} does not export evo_attention_forward_varlen (exported before packed "
                               f"variable-length batches)")
        import torch
        total_q, heads, head_dim = q.shape
        total_k, heads_kv = k.shape[0], k.shape[1]
        batch = cu_seqlens_q.shape[0] - 1
        stream = torch.cuda.current_stream().cuda_stream
        rc = self._fn_varlen(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), cu_seqlens_q.data_ptr(),
                             cu_seqlens_k.data_ptr(), batch, heads, heads_kv, max_seq_q, max_seq_k, total_q, total_k,
                             head_dim, ctypes.c_float(scale), int(causal), DTYPE_CODES[dtype],
                             ctypes.c_void_p(stream), int(programmatic))
        if rc != 0:
            raise EvolvedError(f"evo_attention_forward_varlen returned {rc} for q {tuple(q.shape)} k {tuple(k.shape)} "
                               f"batch {batch} causal={int(causal)} dtype={dtype}", rc)

    def forward_fp8(self, q8, k8, vt8, o, q_scale, k_scale, v_scale, causal: bool, scale: float,
                    programmatic: bool = True) -> None:
        """One FP8 call of evo_attention_forward_fp8 on torch's current stream: q8 [B, H, Sq, D] and k8
        [B, Hkv, Sk, D] e4m3 bytes (torch.float8_e4m3fn or uint8 storage), vt8 V transposed [B, Hkv, D,
        pitch] (bench_shapes.fp8_pitch(Sk)) in the library's key order (bench_fp8.evo_key_order),
        q_scale (B * H floats), k_scale and v_scale (B * Hkv) on the device, o bf16 [B, H, Sq, D];
        with PDL allowed (programmatic) or as a plain launch."""
        if self._fn_fp8 is None:
            raise EvolvedError(f"{self.path} does not export evo_attention_forward_fp8 (exported before FP8)")
        import torch
        batch, heads, seq_q, head_dim = q8.shape
        heads_kv, seq_k = k8.shape[1], k8.shape[2]
        stream = torch.cuda.current_stream().cuda_stream
        rc = self._fn_fp8(q8.data_ptr(), k8.data_ptr(), vt8.data_ptr(), o.data_ptr(), q_scale.data_ptr(),
                          k_scale.data_ptr(), v_scale.data_ptr(), batch, heads, heads_kv, seq_q, seq_k, head_dim,
                          ctypes.c_float(scale), int(causal), ctypes.c_void_p(stream), int(programmatic))
        if rc != 0:
            raise EvolvedError(f"evo_attention_forward_fp8 returned {rc} for q {tuple(q8.shape)} k {tuple(k8.shape)} "
                               f"causal={int(causal)}", rc)

    def quantize_fp8(self, x, out, scales, transpose: bool) -> None:
        """evo_attention_quantize_fp8 on torch's current stream: x fp16 or bf16 [B, H, S, D] -> out, e4m3
        bytes [B, H, S, D] (transpose False: Q, K) or [B, H, D, pitch] with the pad zeroed (transpose
        True: V), and scales (B * H floats), all on the device."""
        if self._fn_quantize is None:
            raise EvolvedError(f"{self.path} does not export evo_attention_quantize_fp8 (exported before FP8)")
        x_dtype = QUANTIZE_INPUT_CODES.get(str(x.dtype))
        if x_dtype is None:
            raise EvolvedError(f"evo_attention_quantize_fp8 takes fp16 or bf16 input, not {x.dtype}")
        import torch
        batch, heads, seq, head_dim = x.shape
        stream = torch.cuda.current_stream().cuda_stream
        rc = self._fn_quantize(x.data_ptr(), x_dtype, out.data_ptr(), scales.data_ptr(), batch, heads, seq, head_dim,
                               int(transpose), ctypes.c_void_p(stream))
        if rc != 0:
            raise EvolvedError(f"evo_attention_quantize_fp8 returned {rc} for x {tuple(x.shape)} "
                               f"transpose={int(transpose)}", rc)

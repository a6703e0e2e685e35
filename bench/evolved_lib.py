"""The evolved kernel as `evoctl export` ships it: a shared library called through ctypes.

extern "C" int evo_attention_forward(const void* q, const void* k, const void* v, void* o,
    int batch, int heads, int seq_q, int seq_k, int head_dim, float softmax_scale, int causal,
    cudaStream_t stream);     // 0 on success; launches with programmatic dependent launch (PDL) allowed
extern "C" int evo_attention_forward_ex(... the same 12 arguments ..., int programmatic_launch);
    // programmatic_launch 1: as evo_attention_forward; 0: a plain launch, without PDL

With PDL a launch may start while the previous kernel in the stream is finishing. The benchmark
times both launches (bench/NOTES.md). `evo_attention_forward_ex` is optional: libraries exported
before it existed lack it, and then `has_plain_launch` is False and only the PDL launch can run.
"""
from __future__ import annotations

import ctypes
import os

_ARGTYPES = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 5 + [ctypes.c_float, ctypes.c_int, ctypes.c_void_p]


class EvolvedError(RuntimeError):
    """The library cannot be loaded, lacks the entry point, or the call returned an error code."""


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
        self.path = path

    @property
    def has_plain_launch(self) -> bool:
        """Whether the library exports evo_attention_forward_ex, so that forward(programmatic=False) can run."""
        return self._fn_ex is not None

    def forward(self, q, k, v, o, causal: bool, scale: float, programmatic: bool = True) -> None:
        """Launches on torch's current stream (the capture stream inside a graph capture): with PDL
        allowed (evo_attention_forward, as exported) or, with programmatic=False, as a plain launch
        (evo_attention_forward_ex(..., 0))."""
        if not programmatic and self._fn_ex is None:
            raise EvolvedError(f"{self.path} does not export evo_attention_forward_ex (exported before plain "
                               f"launches were selectable): only the PDL launch can run")
        import torch  # here, not at the top, so that loading and symbol checks work without torch
        batch, heads, seq_q, head_dim = q.shape
        stream = torch.cuda.current_stream().cuda_stream
        args = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), batch, heads, seq_q, k.shape[2],
                head_dim, ctypes.c_float(scale), int(causal), ctypes.c_void_p(stream))
        if programmatic:
            name, rc = "evo_attention_forward", self._fn(*args)
        else:
            name, rc = "evo_attention_forward_ex", self._fn_ex(*args, 0)
        if rc != 0:
            raise EvolvedError(f"{name} returned {rc} for shape {tuple(q.shape)} causal={int(causal)}")

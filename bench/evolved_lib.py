"""The evolved kernel as `evoctl export` ships it: a shared library called through ctypes.

extern "C" int evo_attention_forward(const void* q, const void* k, const void* v, void* o,
    int batch, int heads, int seq_q, int seq_k, int head_dim, float softmax_scale, int causal,
    cudaStream_t stream);     // 0 on success
"""
from __future__ import annotations

import ctypes
import os


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
        fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 5 + [ctypes.c_float, ctypes.c_int, ctypes.c_void_p]
        fn.restype = ctypes.c_int
        self._fn = fn
        self.path = path

    def forward(self, q, k, v, o, causal: bool, scale: float) -> None:
        """Launches on torch's current stream (the capture stream inside a graph capture)."""
        import torch  # here, not at the top, so that loading and symbol checks work without torch
        batch, heads, seq_q, head_dim = q.shape
        stream = torch.cuda.current_stream().cuda_stream
        rc = self._fn(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), batch, heads, seq_q, k.shape[2],
                      head_dim, ctypes.c_float(scale), int(causal), ctypes.c_void_p(stream))
        if rc != 0:
            raise EvolvedError(f"evo_attention_forward returned {rc} for shape {tuple(q.shape)} causal={int(causal)}")

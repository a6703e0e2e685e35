"""torch.ops.evo.attention and attention_varlen: loads the compiled ops, binds each GPU to the library built for its
architecture, and gives the op its fake (meta) implementation for torch.compile.

The op itself is C++ (csrc/evo_op.cpp: TORCH_LIBRARY, a CUDA kernel calling the exported entry
point on the current stream), since a Python call path would cost more than the op's budget of
2 µs over the raw entry point.
"""
import logging
import os

import torch

from . import _C  # noqa: F401  registers torch.ops.evo.* (the import runs its TORCH_LIBRARY)
from . import routing

_log = logging.getLogger("evo_kernels")
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

MANIFEST = routing.load_manifest(_PACKAGE_DIR)

# Per device index: the served kinds of the library bound to it (routing.served_kinds), or None
# where none runs. Filled once at import; read by scaled_dot_product_attention on every call.
SERVED_BY_DEVICE = {}
# Per device index: (arch or None, the line saying why), as logged at import.
CHOICE_BY_DEVICE = {}


def library_path(library):
    """Where setup.py put the library built for one manifest entry."""
    return os.path.join(_PACKAGE_DIR, os.path.dirname(library["source"]), routing.LIBRARY_NAME)


def _bind_devices():
    by_arch = {lib["arch"]: lib for lib in MANIFEST["libraries"]}
    built = [arch for arch, lib in by_arch.items() if os.path.exists(library_path(lib))]
    if not torch.cuda.is_available():
        return
    for index in range(torch.cuda.device_count()):
        capability = torch.cuda.get_device_capability(index)
        arch, note = routing.pick_library(built, capability)
        CHOICE_BY_DEVICE[index] = (arch, note)
        if arch is None:
            SERVED_BY_DEVICE[index] = None
            _log.warning("evo_kernels: cuda:%d %s", index, note)
            continue
        torch.ops.evo._bind_library(index, library_path(by_arch[arch]))
        SERVED_BY_DEVICE[index] = routing.library_served(by_arch[arch])
        _log.info("evo_kernels: cuda:%d %s", index, note)


@torch.library.register_fake("evo::attention")
def _attention_fake(query, key, value, scale=None, is_causal=False):
    """What torch.compile and FakeTensor see: a contiguous tensor shaped like query (key and value
    may have fewer heads and another sequence length; the output is query's shape either way)."""
    torch._check(query.dim() == 4, lambda: "evo::attention: query must be 4-D")
    return torch.empty_like(query, memory_format=torch.contiguous_format)


def attention(query, key, value, scale=None, is_causal=False):
    """evo's kernel on [batch, heads, seq, head_dim] contiguous fp16/bf16 CUDA tensors, key and
    value with heads_kv heads (heads % heads_kv == 0: query head h reads key/value head
    h // (heads // heads_kv)); raises (one line) for anything it cannot serve. scale None:
    1/sqrt(head_dim). is_causal: the mask aligned bottom-right (query row i sees keys
    0 .. i + seq_k - seq_q; needs seq_q <= seq_k), SDPA's is_causal only when seq_q == seq_k."""
    return torch.ops.evo.attention.default(query, key, value, scale, is_causal)


@torch.library.register_fake("evo::attention_varlen")
def _attention_varlen_fake(query, key, value, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale=None,
                           is_causal=False):
    """A contiguous tensor shaped like query ([tokens, heads, head_dim])."""
    torch._check(query.dim() == 3, lambda: "evo::attention_varlen: query must be 3-D")
    return torch.empty_like(query, memory_format=torch.contiguous_format)


def attention_varlen(query, key, value, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale=None,
                     is_causal=False):
    """evo's kernel on a packed batch, as FlashAttention's flash_attn_varlen_func takes one: query
    [total_q, heads, head_dim], key and value [total_k, heads_kv, head_dim], contiguous fp16/bf16
    CUDA tensors; sequence b is rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of query and
    cu_seqlens_k[b] .. cu_seqlens_k[b + 1] of key and value (int32 CUDA tensors of batch + 1);
    max_seqlen_q and max_seqlen_k are the longest lengths. is_causal: bottom-right within each
    sequence (a sequence with more queries than keys gets zeros in rows that see no key). The
    library must have been exported from a run of a packed shape; raises (one line) otherwise."""
    return torch.ops.evo.attention_varlen.default(query, key, value, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                                  max_seqlen_k, scale, is_causal)


_bind_devices()

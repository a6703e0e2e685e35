"""evo's tuned attention kernels for PyTorch (written by `evoctl export --python`).

    import evo_kernels
    out = torch.ops.evo.attention(q, k, v, None, True)          # the op, strict
    out = evo_kernels.scaled_dot_product_attention(q, k, v)     # SDPA's signature, falls back
    out = evo_kernels.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k)  # a packed batch
    with evo_kernels.sdpa_routing():                             # a model's SDPA calls, unedited
        logits = model(ids).logits

`routing` holds the pure rules and imports without torch, so tools and tests without torch can
still read them; everything else needs torch and the built op.
"""
from . import routing

try:
    import torch  # noqa: F401
except ImportError:  # only the rules, then
    torch = None

if torch is not None:
    from ._ops import CHOICE_BY_DEVICE, MANIFEST, attention, attention_varlen
    from .sdpa import reset_stats, scaled_dot_product_attention, sdpa_routing, stats

__all__ = ["routing", "attention", "attention_varlen", "scaled_dot_product_attention", "sdpa_routing", "stats", "reset_stats",
           "CHOICE_BY_DEVICE", "MANIFEST"]

"""scaled_dot_product_attention with SDPA's signature, served by evo's op where a bucket fits and
by torch's SDPA elsewhere, and sdpa_routing(), which routes a model's SDPA calls through it.

Written to be traced by torch.compile(fullgraph=True): the routing is plain Python over shapes
and dtypes (routing.route), the mask's kind is read with an isinstance and attribute reads of
torch.nn.attention.bias.CausalBias (which dynamo traces), the op is a custom op with a fake
implementation, and logging and counting happen only in eager calls (dynamo would graph-break on
them), so a compiled model routes exactly as its eager calls say, logs included.
"""
import contextlib
import logging

import torch

from . import _ops, routing

_log = logging.getLogger("evo_kernels")

# torch's own SDPA, held before any routing replaces the module attribute.
_torch_sdpa = torch.nn.functional.scaled_dot_product_attention
_calls = routing.CallLog()
_is_compiling = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling

try:  # torch without torch.nn.attention.bias: every attn_mask is some other mask
    from torch.nn.attention.bias import CausalBias as _CausalBias, CausalVariant as _CausalVariant
except ImportError:
    _CausalBias = _CausalVariant = None


def _dtype_name(t):
    if t.dtype == torch.float16:
        return "fp16"
    if t.dtype == torch.bfloat16:
        return "bf16"
    return str(t.dtype)


def _mask_facts(attn_mask):
    """(mask_kind, mask_lengths) for routing.route: None for no mask; a CausalBias's variant
    (routing.LOWER_RIGHT or routing.UPPER_LEFT) and its (seq_len_q, seq_len_kv); else
    routing.OTHER_MASK."""
    if attn_mask is None:
        return None, None
    if _CausalBias is not None and isinstance(attn_mask, _CausalBias):
        lengths = (attn_mask.seq_len_q, attn_mask.seq_len_kv)
        if attn_mask.variant == _CausalVariant.LOWER_RIGHT:
            return routing.LOWER_RIGHT, lengths
        if attn_mask.variant == _CausalVariant.UPPER_LEFT:
            return routing.UPPER_LEFT, lengths
    return routing.OTHER_MASK, None


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention's contract; evo's kernel serves the call
    when routing.route says so, torch's SDPA otherwise, each new (reason, shape class) logged once.

    evo is called with the tensors made contiguous (a copy for transposed inputs); grouped-query
    key and value keep their own, fewer heads (the op reads them in place). A causal_lower_right
    attn_mask, or a causal_upper_left one or is_causal=True at seq_q == seq_k, reaches the op as
    is_causal=True and no mask (its causal mask is bottom-right aligned); is_causal=True at
    seq_q != seq_k is SDPA's top-left mask and stays with SDPA.
    """
    dtypes = (_dtype_name(query), _dtype_name(key), _dtype_name(value))
    needs_grad = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad)
    served = _ops.SERVED_BY_DEVICE.get(query.device.index) if query.is_cuda else None
    mask_kind, mask_lengths = _mask_facts(attn_mask)
    reason, evo_causal = routing.route(dtypes, tuple(query.shape), tuple(key.shape), tuple(value.shape),
                                       query.is_cuda, mask_kind, mask_lengths, dropout_p, is_causal, enable_gqa,
                                       needs_grad, served)
    if reason is not None:
        if not _is_compiling():
            klass = routing.shape_class(dtypes[0], tuple(query.shape), tuple(key.shape), is_causal, mask_kind)
            if _calls.note_fallback(reason, klass):
                _log.warning("evo_kernels: torch SDPA serves %s: %s", klass, reason)
        extra = {"enable_gqa": True} if enable_gqa else {}  # older torch has no such argument
        return _torch_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                           scale=scale, **extra)
    if not _is_compiling():
        _calls.note_served()
    return torch.ops.evo.attention.default(query.contiguous(), key.contiguous(), value.contiguous(), scale,
                                           evo_causal)


def stats():
    """Eager calls so far: {'served': n, 'fell_back': {reason: n}, 'fell_back_total': n}."""
    return _calls.snapshot()


def reset_stats():
    """Forget the counts and which fallbacks were logged."""
    global _calls
    _calls = routing.CallLog()


@contextlib.contextmanager
def sdpa_routing():
    """Inside it, torch.nn.functional.scaled_dot_product_attention is evo's, so models that call
    it by that name (Hugging Face's attn_implementation="sdpa") use evo's kernel unedited.

    torch.compile traces the replacement like any Python function. Compile inside the block what
    should be routed: a graph compiled outside it holds torch's SDPA.
    """
    previous = torch.nn.functional.scaled_dot_product_attention
    torch.nn.functional.scaled_dot_product_attention = scaled_dot_product_attention
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = previous

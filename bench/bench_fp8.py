"""The FP8 (e4m3) inputs of the bench's e4m3 rows, made in torch by the exported library's rule.

Per (batch, head) of x [B, H, S, D]: scale = the head's largest magnitude / 448 (1 for an all-zero
head, at least 2^-126, NaN for a head holding NaN or an infinity); byte = x / scale rounded to the
nearest e4m3 value, saturating at +-448. torch's cast to float8_e4m3fn rounds to nearest (ties to
even) but turns values past the format's range into NaN rather than saturating, so the quotient is
clamped to +-448 first. V also goes transposed, [B, H, D, pitch] with pitch = S rounded up to 16 and
the pad zeroed: what the Triton FP8 kernel reads; evo_attention_forward_fp8 reads the same with each
16 keys in the order of its P fragment (evo_key_order). value = byte * scale.

Functions take the torch module as an argument (compare_sdpa's style), so that importing this file
needs no torch.
"""
from __future__ import annotations

import math

from bench_shapes import fp8_pitch

E4M3_MAX = 448.0            # the largest finite e4m3fn value
MIN_SCALE = 2.0 ** -126     # the smallest normal float: a scale never goes below it


def head_scales(torch, x):
    """float32 [B * H]: one scale per (batch, head) of x [B, H, S, D], by the rule above."""
    absmax = x.float().abs().amax(dim=(2, 3)).reshape(-1)
    # torch divides by a Python number as a multiply by its reciprocal, which can differ from the
    # rule's division in the last bit: divide by a tensor.
    quotient = absmax / torch.full_like(absmax, E4M3_MAX)
    scale = torch.where(absmax == 0, torch.ones_like(absmax), quotient).clamp_min(MIN_SCALE)
    # amax propagates NaN, and an infinity's quotient is infinite: both heads get NaN.
    return torch.where(torch.isfinite(absmax), scale, torch.full_like(scale, math.nan))


def per_head(scales, x):
    """scales [B * H] as [B, H, 1, 1], to broadcast over x [B, H, ...]."""
    return scales.view(x.shape[0], x.shape[1], 1, 1)


def quantize(torch, x):
    """(bytes torch.float8_e4m3fn [B, H, S, D], scales float32 [B * H]) of fp16 or bf16 x [B, H, S, D]."""
    scales = head_scales(torch, x)
    quotient = (x.float() / per_head(scales, x)).clamp(-E4M3_MAX, E4M3_MAX)
    return quotient.to(torch.float8_e4m3fn), scales


def transpose_padded(torch, x8):
    """e4m3 x8 [B, H, S, D] -> [B, H, D, fp8_pitch(S)], each row's pad zeroed (copied as bytes)."""
    batch, heads, seq, head_dim = x8.shape
    out = torch.zeros((batch, heads, head_dim, fp8_pitch(seq)), dtype=torch.uint8, device=x8.device)
    out[..., :seq] = x8.view(torch.uint8).transpose(2, 3)
    return out.view(torch.float8_e4m3fn)


# The key that column c of each 16 of the exported library's V^T holds (its fp8.h, e4m3_vt_column,
# is the inverse): column 4q + i holds key 2q + (i & 1) + 8 (i >> 1).
EVO_KEY_OF_COLUMN = tuple(2 * (c // 4) + c % 2 + 8 * ((c // 2) % 2) for c in range(16))


def evo_key_order(torch, vt8):
    """V^T [..., pitch] (pitch a multiple of 16) with each 16 keys in the exported library's order."""
    pitch = vt8.shape[-1]
    keys = torch.tensor([c - c % 16 + EVO_KEY_OF_COLUMN[c % 16] for c in range(pitch)], device=vt8.device)
    return vt8.view(torch.uint8).index_select(-1, keys).view(torch.float8_e4m3fn)


def dequantize(torch, x8, scales):
    """float32 values the bytes stand for: byte * its head's scale."""
    return x8.float() * per_head(scales, x8)


def differing(torch, got, want) -> int:
    """Elements whose bits differ (NaN equals NaN of the same bits), for tensors of one element size."""
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[want.element_size()]
    return int((got.view(bits) != want.view(bits)).sum().item())

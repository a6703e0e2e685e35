"""Attention problem shapes for the side-by-side bench, and the work each one does.

Pure Python (no torch) so that parsing and the floor arithmetic are testable anywhere.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

# The suite of issue 5: two launch-bound shapes, one mid-size, two long-sequence shapes.
DEFAULT_SHAPES = ("1,8,512,64", "2,8,512,64", "16,16,512,64", "4,16,2048,64", "2,16,4096,128")

SUPPORTED_HEAD_DIMS = (64, 128)


class ShapeError(ValueError):
    """A shape or causal flag given on the command line or in a dispatch file is malformed."""


@dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    seq: int
    head_dim: int

    @property
    def label(self) -> str:
        return f"{self.batch},{self.heads},{self.seq},{self.head_dim}"

    @property
    def key(self) -> str:
        """The BxHxSxD spelling that evoctl and the dispatch table use."""
        return f"{self.batch}x{self.heads}x{self.seq}x{self.head_dim}"


def parse_shape(text: str) -> Shape:
    """Accepts "B,H,S,D" or "BxHxSxD" with positive integers and a supported head_dim."""
    parts = [p for p in re.split(r"[,x]", text.strip().lower())]
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        raise ShapeError(f"bad shape '{text}': expected B,H,S,D (or BxHxSxD) with four positive integers")
    batch, heads, seq, head_dim = (int(p) for p in parts)
    if min(batch, heads, seq, head_dim) <= 0:
        raise ShapeError(f"bad shape '{text}': every dimension must be positive")
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ShapeError(f"bad shape '{text}': head_dim {head_dim} is not one of {SUPPORTED_HEAD_DIMS}")
    return Shape(batch, heads, seq, head_dim)


def parse_causal(text: str) -> list[bool]:
    """--causal both|0|1|true|false -> the causal settings to run, non-causal first."""
    value = text.strip().lower()
    if value == "both":
        return [False, True]
    if value in ("0", "false", "no"):
        return [False]
    if value in ("1", "true", "yes"):
        return [True]
    raise ShapeError(f"bad --causal '{text}': expected both, 0 or 1")


def attention_flops(shape: Shape, causal: bool) -> float:
    """Matrix FLOPs of the forward: QK^T and PV, 2*S*S*D each per head.

    Causal keeps only the (S+1)/(2S) of score entries on or below the diagonal.
    """
    full = 4.0 * shape.batch * shape.heads * shape.seq * shape.seq * shape.head_dim
    if not causal:
        return full
    return full * (shape.seq + 1) / (2.0 * shape.seq)


def attention_bytes(shape: Shape) -> float:
    """Compulsory DRAM traffic: read Q, K, V and write O once, fp16."""
    return 4.0 * shape.batch * shape.heads * shape.seq * shape.head_dim * 2


def floors_us(shape: Shape, causal: bool, matmul_tflops: float, copy_gbps: float) -> dict:
    """The two lower bounds on one call, in microseconds, from measured device rates."""
    compute = attention_flops(shape, causal) / (matmul_tflops * 1e12) * 1e6 if matmul_tflops > 0 else math.nan
    memory = attention_bytes(shape) / (copy_gbps * 1e9) * 1e6 if copy_gbps > 0 else math.nan
    return {"compute_us": compute, "memory_us": memory, "floor_us": max(compute, memory)}

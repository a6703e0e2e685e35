"""The autotune space of the Triton baseline and the rule that prunes configs that cannot run.

Kept apart from triton_fa.py (which needs triton) so that the space is testable with the standard library.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

# At least the space of issue 5: BLOCK_M 16-128, BLOCK_N 32-128, 2-8 warps, 2-3 stages (72 points).
BLOCK_MS = (16, 32, 64, 128)
BLOCK_NS = (32, 64, 128)
WARPS = (2, 4, 8)
STAGES = (2, 3)

# Hopper's opt-in shared memory per block; the bench passes the device's own figure when it has it.
DEFAULT_SMEM_LIMIT = 227 * 1024
# A thread holds at most 255 registers; beyond 256 live fp32 values in tiles alone it must spill
# heavily, and such configs only cost compile time in the autotuner without any chance to win.
MAX_TILE_FP32_PER_THREAD = 256


@dataclass(frozen=True)
class TileConfig:
    block_m: int
    block_n: int
    warps: int
    stages: int

    def label(self) -> str:
        return f"{self.block_m}x{self.block_n}, {self.warps} warps, {self.stages} stages"


def full_space() -> list[TileConfig]:
    return [TileConfig(m, n, w, s) for m, n, w, s in product(BLOCK_MS, BLOCK_NS, WARPS, STAGES)]


def smem_bytes(cfg: TileConfig, head_dim: int) -> int:
    """Q tile once, K and V tiles per pipeline stage, fp16."""
    return 2 * (cfg.block_m * head_dim + 2 * cfg.stages * cfg.block_n * head_dim)


def tile_fp32_per_thread(cfg: TileConfig, head_dim: int) -> float:
    """Output accumulator (BLOCK_M x D) plus the score tile (BLOCK_M x BLOCK_N), per thread."""
    return (cfg.block_m * head_dim + cfg.block_m * cfg.block_n) / (32.0 * cfg.warps)


def runnable(cfg: TileConfig, head_dim: int, smem_limit: int = DEFAULT_SMEM_LIMIT) -> bool:
    return (smem_bytes(cfg, head_dim) <= smem_limit
            and tile_fp32_per_thread(cfg, head_dim) <= MAX_TILE_FP32_PER_THREAD)


def pruned_space(head_dim: int, smem_limit: int = DEFAULT_SMEM_LIMIT) -> list[TileConfig]:
    kept = [c for c in full_space() if runnable(c, head_dim, smem_limit)]
    if not kept:
        raise ValueError(f"no Triton config fits head_dim {head_dim} in {smem_limit} bytes of shared memory")
    return kept


def describe(block_m: int, block_n: int, warps: int, stages: int) -> str:
    return TileConfig(block_m, block_n, warps, stages).label()

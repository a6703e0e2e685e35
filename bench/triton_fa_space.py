"""The autotune space of the Triton baseline and the rule that prunes configs that cannot run.

Kept apart from triton_fa.py (which needs triton) so that the space is testable with the standard library.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

# At least the space of issue 5: BLOCK_M 16-128, BLOCK_N 32-128, 2-8 warps, 2-3 stages (72 points).
# BLOCK_M 16 is tl.dot's smallest M: the tile that serves decode (one query row) with least waste.
BLOCK_MS = (16, 32, 64, 128)
BLOCK_NS = (32, 64, 128)
WARPS = (2, 4, 8)
STAGES = (2, 3)

# The FP8 kernel's space (triton_fa.fa_fp8_kernel): Hopper's FP8 MMA (wgmma) takes 64 rows a warp
# group, so smaller row blocks would fall back to slower paths or fail to compile; its K is 32
# bytes, which every BLOCK_N here (P @ V's K) and head dim is a multiple of. One byte an element
# leaves room for deeper pipelines than fp16's.
FP8_BLOCK_MS = (64, 128)
FP8_BLOCK_NS = (64, 128)
FP8_WARPS = (4, 8)
FP8_STAGES = (2, 3, 4)

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


def fp8_space() -> list[TileConfig]:
    return [TileConfig(m, n, w, s) for m, n, w, s in product(FP8_BLOCK_MS, FP8_BLOCK_NS, FP8_WARPS, FP8_STAGES)]


def smem_bytes(cfg: TileConfig, head_dim: int, element_bytes: int = 2) -> int:
    """Q tile once, K and V tiles per pipeline stage, of element_bytes each (fp16: 2, e4m3: 1)."""
    return element_bytes * (cfg.block_m * head_dim + 2 * cfg.stages * cfg.block_n * head_dim)


def tile_fp32_per_thread(cfg: TileConfig, head_dim: int) -> float:
    """Output accumulator (BLOCK_M x D) plus the score tile (BLOCK_M x BLOCK_N), per thread."""
    return (cfg.block_m * head_dim + cfg.block_m * cfg.block_n) / (32.0 * cfg.warps)


def runnable(cfg: TileConfig, head_dim: int, smem_limit: int = DEFAULT_SMEM_LIMIT, element_bytes: int = 2) -> bool:
    return (smem_bytes(cfg, head_dim, element_bytes) <= smem_limit
            and tile_fp32_per_thread(cfg, head_dim) <= MAX_TILE_FP32_PER_THREAD)


def useful(cfg: TileConfig, seq_q: int | None, smallest_block_m: int = min(BLOCK_MS)) -> bool:
    """A BLOCK_M past the next power of two of seq_q (and past the space's smallest) only adds masked
    rows: at decode (seq_q = 1) every BLOCK_M above 16 does the same work as 16 with more of it wasted,
    and would only cost the autotuner compile and bench time. None (length unknown) keeps every config."""
    if seq_q is None:
        return True
    return cfg.block_m <= max(smallest_block_m, 1 << max(0, int(seq_q) - 1).bit_length())


def pruned_space(head_dim: int, smem_limit: int = DEFAULT_SMEM_LIMIT, seq_q: int | None = None) -> list[TileConfig]:
    kept = [c for c in full_space() if runnable(c, head_dim, smem_limit) and useful(c, seq_q)]
    if not kept:
        raise ValueError(f"no Triton config fits head_dim {head_dim} in {smem_limit} bytes of shared memory")
    return kept


def pruned_fp8_space(head_dim: int, smem_limit: int = DEFAULT_SMEM_LIMIT, seq_q: int | None = None) -> list[TileConfig]:
    """The FP8 kernel's configs that fit (one byte an element) and are useful for seq_q."""
    kept = [c for c in fp8_space() if fp8_config_kept(c, head_dim, smem_limit, seq_q)]
    if not kept:
        raise ValueError(f"no Triton FP8 config fits head_dim {head_dim} in {smem_limit} bytes of shared memory")
    return kept


def fp8_config_kept(cfg: TileConfig, head_dim: int, smem_limit: int, seq_q: int | None) -> bool:
    return runnable(cfg, head_dim, smem_limit, element_bytes=1) and useful(cfg, seq_q, min(FP8_BLOCK_MS))


def describe(block_m: int, block_n: int, warps: int, stages: int) -> str:
    return TileConfig(block_m, block_n, warps, stages).label()


def key_ranges(pid_m: int, block_m: int, block_n: int, seq_q: int, seq_k: int, causal: bool) -> tuple[int, int]:
    """(full_end, hi) of triton_fa.fa_fwd_kernel's row block pid_m, the same arithmetic in plain Python:
    key blocks [0, full_end) run unmasked, [full_end, hi) masked, keys from hi on are skipped. Causal is
    bottom-right aligned: row i sees keys 0 .. i + seq_k - seq_q."""
    diag = seq_k - seq_q
    if causal:
        hi = min(seq_k, (pid_m + 1) * block_m + diag)
        full_end = (min(pid_m * block_m + diag, seq_k) // block_n) * block_n
    else:
        hi = seq_k
        full_end = (seq_k // block_n) * block_n
    return full_end, hi


def varlen_row_blocks(seqlens_q, block_m: int) -> list[tuple[int, int]]:
    """The (sequence, row block) programs of triton_fa.fa_varlen_kernel's grid that do work, per head: the
    grid has cdiv(max(seqlens_q), block_m) row blocks for every sequence, and a block whose first row is
    at or past its own sequence's length exits at once. Row block pid_m of sequence b covers rows
    pid_m * block_m .. min(seq_q, (pid_m + 1) * block_m) - 1, its keys as key_ranges gives them."""
    blocks = -(-max(seqlens_q) // block_m)
    return [(b, pid_m) for b, seq_q in enumerate(seqlens_q) for pid_m in range(blocks) if pid_m * block_m < seq_q]

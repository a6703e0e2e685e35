"""A FlashAttention-2-style forward in Triton, autotuned: the baseline a user would write instead of evo.

fp16 or bf16 Q, K, V, O (one dtype for all four) laid out [B, H, S, D] contiguous; fp32 accumulation; online softmax in base 2 with the
softmax scale folded into the exponent; causal is top-left aligned (row i sees keys 0..i), as in
torch's scaled_dot_product_attention(is_causal=True). Any S works: tail rows and columns are masked.
Key blocks wholly below the diagonal (and, without causal, all full key blocks) run without masks;
only the diagonal and tail blocks pay for them.
"""
from __future__ import annotations

import math
import multiprocessing
import os

import torch
import triton
import triton.language as tl
import triton.testing

import triton_fa_space as space

LOG2E = 1.4426950408889634
_SMEM_LIMIT = [space.DEFAULT_SMEM_LIMIT]


def set_smem_limit(limit_bytes: int) -> None:
    """The device's opt-in shared memory per block, used by the pruning rule."""
    _SMEM_LIMIT[0] = int(limit_bytes)


def _configs() -> list:
    return [triton.Config({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n}, num_warps=c.warps, num_stages=c.stages)
            for c in space.full_space()]


def _prune(configs, named_args, **kwargs):
    head_dim = {**named_args, **kwargs}["HEAD_DIM"]
    kept = []
    for cfg in configs:
        tile = space.TileConfig(cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.num_warps, cfg.num_stages)
        if space.runnable(tile, head_dim, _SMEM_LIMIT[0]):
            kept.append(cfg)
    return kept


def _quick_bench(kernel_call, quantiles):
    # Triton's default spends 125 ms per config; 5 + 20 ms ranks configs just as well at these sizes and
    # keeps autotuning the whole suite inside the bench's time budget.
    return triton.testing.do_bench(kernel_call, warmup=5, rep=20, quantiles=quantiles)


@triton.jit
def _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_n, offs_d, lo, hi, seq_k, qk_scale,
            HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MASKED: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        kv_offs = cols[:, None] * HEAD_DIM + offs_d[None, :]
        if MASKED:
            col_ok = cols < seq_k
            k = tl.load(k_base + kv_offs, mask=col_ok[:, None], other=0.0)
            v = tl.load(v_base + kv_offs, mask=col_ok[:, None], other=0.0)
        else:
            k = tl.load(k_base + kv_offs)
            v = tl.load(v_base + kv_offs)
        s = tl.dot(q, tl.trans(k))
        if MASKED:
            keep = col_ok[None, :]
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            s = tl.where(keep, s * qk_scale, float("-inf"))
        else:
            s = s * qk_scale
        # Every row sees key 0 in the first block it processes, so m_new is finite from then on.
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(configs=_configs(), key=["BH", "SEQ_Q", "SEQ_K", "HEAD_DIM", "CAUSAL"],
                 prune_configs_by={"early_config_prune": _prune}, do_bench=_quick_bench, cache_results=True)
@triton.jit(do_not_specialize=["BH"])
def fa_fwd_kernel(Q, K, V, O, qk_scale, BH, SEQ_Q, SEQ_K,
                  HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # BH (= batch * heads) is only an autotune key; the grid's second axis walks it.
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    q_base = Q + bh * SEQ_Q * HEAD_DIM
    k_base = K + bh * SEQ_K * HEAD_DIM
    v_base = V + bh * SEQ_K * HEAD_DIM
    o_base = O + bh * SEQ_Q * HEAD_DIM

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < SEQ_Q
    q_offs = offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(q_base + q_offs, mask=row_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

    if CAUSAL:
        hi = tl.minimum(SEQ_K, (pid_m + 1) * BLOCK_M)
        full_end = (tl.minimum(pid_m * BLOCK_M, SEQ_K) // BLOCK_N) * BLOCK_N
    else:
        hi = SEQ_K
        full_end = (SEQ_K // BLOCK_N) * BLOCK_N
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_n, offs_d, 0, full_end, SEQ_K,
                            qk_scale, HEAD_DIM, BLOCK_N, CAUSAL, False)
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_n, offs_d, full_end, hi, SEQ_K,
                            qk_scale, HEAD_DIM, BLOCK_N, CAUSAL, True)
    acc = acc / l_i[:, None]
    tl.store(o_base + q_offs, acc.to(O.dtype.element_ty), mask=row_ok[:, None])


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype not in (torch.float16, torch.bfloat16) or not t.is_cuda or not t.is_contiguous() or t.dim() != 4:
            raise ValueError(f"triton_attention: {name} must be a contiguous 4-D fp16 or bf16 CUDA tensor [B,H,S,D]")
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"triton_attention: q, k and v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] not in (64, 128) or k.shape != v.shape or q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(f"triton_attention: unsupported shapes q{tuple(q.shape)} k{tuple(k.shape)} v{tuple(v.shape)}")


def triton_attention(q, k, v, causal: bool, softmax_scale: float | None = None, out=None):
    """O = softmax(Q K^T * scale [+ causal mask]) V. Autotunes on the first call of each key."""
    _check(q, k, v)
    batch, heads, seq_q, head_dim = q.shape
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    o = out if out is not None else torch.empty_like(q)
    grid = lambda meta: (triton.cdiv(seq_q, meta["BLOCK_M"]), batch * heads)  # noqa: E731
    fa_fwd_kernel[grid](q, k, v, o, scale * LOG2E, batch * heads, seq_q, k.shape[2],
                        HEAD_DIM=head_dim, CAUSAL=bool(causal))
    return o


def winning_config() -> str:
    """The config the autotuner chose for the most recent call."""
    cfg = getattr(fa_fwd_kernel, "best_config", None)
    if cfg is None:
        return "n/a"
    return space.describe(cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.num_warps, cfg.num_stages)


# --- parallel pre-compilation ---------------------------------------------------------------------------
# The autotuner compiles its configs one after another (about a second each). Compiling them first in
# several processes fills Triton's on-disk cache, so the autotuner's own compiles become cache hits.

def _specialization(seq: int) -> tuple:
    # Triton specializes integer arguments on ==1 and on divisibility by 16; nothing else in the
    # signature varies between the bench's shapes of one head_dim.
    return (seq == 1, seq % 16 == 0)


def _precompile_one(task) -> str:
    head_dim, causal, seq, dtype, block_m, block_n, warps, stages = task
    try:
        q = torch.empty((1, 1, seq, head_dim), dtype=getattr(torch, dtype), device="cuda")
        fa_fwd_kernel.fn.warmup(q, q, q, q, 1.0, 1, seq, seq, HEAD_DIM=head_dim, CAUSAL=causal,
                                BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=stages, grid=(1,))
        return ""
    except Exception as err:  # a config that does not compile is the autotuner's business, not ours
        return f"{space.describe(block_m, block_n, warps, stages)}: {str(err).splitlines()[0] if str(err) else err}"


def precompile(problems, jobs: int, dtype: str = "float16") -> tuple[int, list[str]]:
    """problems: iterable of (head_dim, causal, seq); dtype: torch's name of the inputs' element type
    ("float16", "bfloat16"), which Triton compiles for. Returns (configs compiled, failures)."""
    variants = {}
    for head_dim, causal, seq in problems:
        variants.setdefault((head_dim, bool(causal), _specialization(seq)), seq)
    tasks = [(d, c, seq, dtype, t.block_m, t.block_n, t.warps, t.stages)
             for (d, c, _), seq in variants.items() for t in space.pruned_space(d, _SMEM_LIMIT[0])]
    if jobs <= 0 or not tasks:
        return 0, []
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(processes=min(jobs, len(tasks), os.cpu_count() or 1)) as pool:
        failures = [f for f in pool.map(_precompile_one, tasks, chunksize=1) if f]
    return len(tasks), failures

"""A FlashAttention-2-style forward in Triton, autotuned: the baseline a user would write instead of evo.

fp16 or bf16 Q, K, V, O (one dtype for all four) laid out [B, H, S, D] contiguous; fp32 accumulation; online softmax in base 2 with the
softmax scale folded into the exponent. Q and O have H heads of Sq rows, K and V Hkv heads of Sk rows
(grouped-query attention: query head h reads KV head h // (H // Hkv)). Causal is bottom-right
aligned: row i sees keys 0 .. Sk - Sq + i, which for Sq == Sk is top-left (row i sees keys 0..i), as in
torch's scaled_dot_product_attention(is_causal=True); causal with Sq > Sk is refused. Any Sq and Sk
work: tail rows and columns are masked. Key blocks wholly below the (shifted) diagonal (and, without
causal, all full key blocks) run without masks; only the diagonal and tail blocks pay for them
(triton_fa_space.key_ranges is the same arithmetic in plain Python, tested without a GPU).
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
    args = {**named_args, **kwargs}
    head_dim, seq_q = args["HEAD_DIM"], args.get("SEQ_Q")
    kept = []
    for cfg in configs:
        tile = space.TileConfig(cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.num_warps, cfg.num_stages)
        if space.runnable(tile, head_dim, _SMEM_LIMIT[0]) and space.useful(tile, seq_q):
            kept.append(cfg)
    return kept


def _quick_bench(kernel_call, quantiles):
    # Triton's default spends 125 ms per config; 5 + 20 ms ranks configs just as well at these sizes and
    # keeps autotuning the whole suite inside the bench's time budget.
    return triton.testing.do_bench(kernel_call, warmup=5, rep=20, quantiles=quantiles)


@triton.jit
def _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_n, offs_d, lo, hi, seq_k, diag, qk_scale,
            HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MASKED: tl.constexpr):
    # diag = seq_k - seq_q: row i sees keys 0 .. i + diag under causal (bottom-right aligned).
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
                keep = keep & (offs_m[:, None] + diag >= cols[None, :])
            s = tl.where(keep, s * qk_scale, float("-inf"))
        else:
            s = s * qk_scale
        # Every row sees key 0 (diag >= 0) in the first block it processes, so m_new is finite from then on.
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


# The best config depends on the query and key lengths apart (decode: Sq = 1), the head dim, causality
# and the GQA group (query heads per KV head: how many programs read the same K/V tiles).
@triton.autotune(configs=_configs(), key=["BH", "SEQ_Q", "SEQ_K", "GROUP", "HEAD_DIM", "CAUSAL"],
                 prune_configs_by={"early_config_prune": _prune}, do_bench=_quick_bench, cache_results=True)
@triton.jit(do_not_specialize=["BH"])
def fa_fwd_kernel(Q, K, V, O, qk_scale, BH, SEQ_Q, SEQ_K, GROUP,
                  HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # BH (= batch * heads, query heads) is only an autotune key; the grid's second axis walks it.
    # Query head bh = b * H + h reads KV head b * Hkv + h // GROUP = bh // GROUP (H = Hkv * GROUP).
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    kv_bh = bh // GROUP
    q_base = Q + bh * SEQ_Q * HEAD_DIM
    k_base = K + kv_bh * SEQ_K * HEAD_DIM
    v_base = V + kv_bh * SEQ_K * HEAD_DIM
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

    # The diagonal's shift (bottom-right causal; 0 for equal lengths, as before). Keys below
    # pid_m * BLOCK_M + diag are seen by every row of this block; none sees a key at or past
    # (pid_m + 1) * BLOCK_M + diag. triton_fa_space.key_ranges computes the same bounds.
    diag = SEQ_K - SEQ_Q
    if CAUSAL:
        hi = tl.minimum(SEQ_K, (pid_m + 1) * BLOCK_M + diag)
        full_end = (tl.minimum(pid_m * BLOCK_M + diag, SEQ_K) // BLOCK_N) * BLOCK_N
    else:
        hi = SEQ_K
        full_end = (SEQ_K // BLOCK_N) * BLOCK_N
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_n, offs_d, 0, full_end, SEQ_K, diag,
                            qk_scale, HEAD_DIM, BLOCK_N, CAUSAL, False)
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_n, offs_d, full_end, hi, SEQ_K, diag,
                            qk_scale, HEAD_DIM, BLOCK_N, CAUSAL, True)
    acc = acc / l_i[:, None]
    tl.store(o_base + q_offs, acc.to(O.dtype.element_ty), mask=row_ok[:, None])


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype not in (torch.float16, torch.bfloat16) or not t.is_cuda or not t.is_contiguous() or t.dim() != 4:
            raise ValueError(f"triton_attention: {name} must be a contiguous 4-D fp16 or bf16 CUDA tensor [B,H,S,D]")
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"triton_attention: q, k and v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if (q.shape[-1] not in (64, 128) or k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]
            or q.shape[1] % k.shape[1] != 0):
        raise ValueError(f"triton_attention: unsupported shapes q{tuple(q.shape)} k{tuple(k.shape)} v{tuple(v.shape)}")
    if causal and q.shape[2] > k.shape[2]:
        raise ValueError(f"triton_attention: causal with seq_q {q.shape[2]} > seq_k {k.shape[2]} is refused")


def triton_attention(q, k, v, causal: bool, softmax_scale: float | None = None, out=None):
    """O = softmax(Q K^T * scale [+ bottom-right causal mask]) V, K and V with heads_kv heads dividing
    Q's. Autotunes on the first call of each key."""
    _check(q, k, v, causal)
    batch, heads, seq_q, head_dim = q.shape
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    o = out if out is not None else torch.empty_like(q)
    grid = lambda meta: (triton.cdiv(seq_q, meta["BLOCK_M"]), batch * heads)  # noqa: E731
    fa_fwd_kernel[grid](q, k, v, o, scale * LOG2E, batch * heads, seq_q, k.shape[2], heads // k.shape[1],
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

def _specialization(value: int) -> tuple:
    # Triton specializes integer arguments on ==1 and on divisibility by 16; nothing else in the
    # signature varies between the bench's shapes of one head_dim.
    return (value == 1, value % 16 == 0)


def _precompile_one(task) -> str:
    head_dim, causal, seq_q, seq_k, group, dtype, block_m, block_n, warps, stages = task
    try:
        q = torch.empty((1, 1, max(seq_q, seq_k), head_dim), dtype=getattr(torch, dtype), device="cuda")
        fa_fwd_kernel.fn.warmup(q, q, q, q, 1.0, 1, seq_q, seq_k, group, HEAD_DIM=head_dim, CAUSAL=causal,
                                BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=stages, grid=(1,))
        return ""
    except Exception as err:  # a config that does not compile is the autotuner's business, not ours
        return f"{space.describe(block_m, block_n, warps, stages)}: {str(err).splitlines()[0] if str(err) else err}"


def precompile(problems, jobs: int, dtype: str = "float16") -> tuple[int, list[str]]:
    """problems: iterable of (head_dim, causal, seq_q, seq_k, group), group = query heads per KV head
    (the old (head_dim, causal, seq) means seq_q = seq_k = seq, group 1); dtype: torch's name of the
    inputs' element type ("float16", "bfloat16"), which Triton compiles for. Returns (configs
    compiled, failures)."""
    tasks = {}
    for problem in problems:
        if len(problem) == 3:
            (head_dim, causal, seq_q), seq_k, group = problem, problem[2], 1
        else:
            head_dim, causal, seq_q, seq_k, group = problem
        variant = (head_dim, bool(causal), _specialization(seq_q), _specialization(seq_k), _specialization(group))
        for t in space.pruned_space(head_dim, _SMEM_LIMIT[0], seq_q):
            tasks.setdefault(variant + (t,), (head_dim, bool(causal), seq_q, seq_k, group, dtype,
                                              t.block_m, t.block_n, t.warps, t.stages))
    tasks = list(tasks.values())
    if jobs <= 0 or not tasks:
        return 0, []
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(processes=min(jobs, len(tasks), os.cpu_count() or 1)) as pool:
        failures = [f for f in pool.map(_precompile_one, tasks, chunksize=1) if f]
    return len(tasks), failures

"""A FlashAttention-2-style forward in Triton, autotuned: the baseline a user would write instead of evo.

fp16 or bf16 Q, K, V, O (one dtype for all four) laid out [B, H, S, D] contiguous; fp32 accumulation; online softmax in base 2 with the
softmax scale folded into the exponent. Q and O have H heads of Sq rows, K and V Hkv heads of Sk rows
(grouped-query attention: query head h reads KV head h // (H // Hkv)). Causal is bottom-right
aligned: row i sees keys 0 .. Sk - Sq + i, which for Sq == Sk is top-left (row i sees keys 0..i), as in
torch's scaled_dot_product_attention(is_causal=True); causal with Sq > Sk is refused. Any Sq and Sk
work: tail rows and columns are masked. Key blocks wholly below the (shifted) diagonal (and, without
causal, all full key blocks) run without masks; only the diagonal and tail blocks pay for them
(triton_fa_space.key_ranges is the same arithmetic in plain Python, tested without a GPU).

triton_varlen_attention runs a packed variable-length batch (FlashAttention's varlen layout): Q and O
[total_q, H, D], K and V [total_k, Hkv, D], int32 cu_seqlens_q / cu_seqlens_k of batch + 1 offsets. One
program per (row block of the longest sequence, batch * H); a program whose row block starts past its
own sequence's end exits at once. Within a sequence the arithmetic is the dense kernel's (the same
loop, its rows H * D or Hkv * D elements apart): bottom-right causal per sequence, GQA, fp16 or bf16.

triton_fp8_attention is the FP8 forward as FP8 attention kernels do it on Hopper: e4m3
(torch.float8_e4m3fn) Q [B, H, Sq, D] and K [B, Hkv, Sk, D], and V TRANSPOSED, [B, Hkv, D, pitch]
with pitch >= Sk (bench_shapes.fp8_pitch(Sk), the pad ignored; keys in order, where the exported
library permutes each 16: bench_fp8.evo_key_order). FP8
MMA on Hopper reads both operands K-major, and P @ V's K is the key index, so V's keys must be its
contiguous axis; Q and K are K-major as they stand. Each (batch, head) has a float32 scale (Q per
query head, K and V per K/V head; value = byte * scale). The scales apply once: Q's and K's fold into
the softmax scale of the scores, V's multiplies the output. P is rounded to e4m3 before P @ V (the
FP8 recipe: both products on FP8 tensor cores); the softmax's running sum adds the unrounded
probabilities. fp32 accumulation, bf16 O [B, H, Sq, D], bottom-right causal, GQA, any Sq and Sk (the
dense kernel's masking and key ranges).
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
from bench_shapes import fp8_pitch

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
    # The varlen kernel prunes by its longest sequence: no row block is taller than that one needs.
    head_dim, seq_q = args["HEAD_DIM"], args.get("SEQ_Q", args.get("MAX_SEQ_Q"))
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
def _scaled_scores(s, offs_m, cols, seq_k, diag, qk_scale, CAUSAL: tl.constexpr, MASKED: tl.constexpr):
    # diag = seq_k - seq_q: row i sees keys 0 .. i + diag under causal (bottom-right aligned).
    if MASKED:
        keep = (cols < seq_k)[None, :]
        if CAUSAL:
            keep = keep & (offs_m[:, None] + diag >= cols[None, :])
        s = tl.where(keep, s * qk_scale, float("-inf"))
    else:
        s = s * qk_scale
    return s


@triton.jit
def _softmax_step(s, m_i, l_i):
    # Every row sees key 0 (diag >= 0) in the first block it processes, so m_new is finite from then on.
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    return p, alpha, l_i, m_new


@triton.jit
def _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_n, offs_d, lo, hi, seq_k, diag, qk_scale,
            KV_ROW: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MASKED: tl.constexpr):
    # KV_ROW: elements from one key row to the next (HEAD_DIM in [B, Hkv, S, D]; Hkv * HEAD_DIM packed).
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        kv_offs = cols[:, None] * KV_ROW + offs_d[None, :]
        if MASKED:
            col_ok = cols < seq_k
            k = tl.load(k_base + kv_offs, mask=col_ok[:, None], other=0.0)
            v = tl.load(v_base + kv_offs, mask=col_ok[:, None], other=0.0)
        else:
            k = tl.load(k_base + kv_offs)
            v = tl.load(v_base + kv_offs)
        s = _scaled_scores(tl.dot(q, tl.trans(k)), offs_m, cols, seq_k, diag, qk_scale, CAUSAL, MASKED)
        p, alpha, l_i, m_i = _softmax_step(s, m_i, l_i)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_i


@triton.jit
def _attend_fp8(acc, l_i, m_i, q, k_base, vt_base, offs_m, offs_n, offs_d, lo, hi, seq_k, v_pitch, diag, qk_scale,
                HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MASKED: tl.constexpr):
    # _attend with V transposed: its tile is read [HEAD_DIM, BLOCK_N], keys contiguous, and handed to
    # the second product as its transpose, K-major as FP8 MMA needs (as K's tile is for the first).
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        k_offs = cols[:, None] * HEAD_DIM + offs_d[None, :]
        vt_offs = offs_d[:, None] * v_pitch + cols[None, :]
        if MASKED:
            col_ok = cols < seq_k
            k = tl.load(k_base + k_offs, mask=col_ok[:, None], other=0.0)
            vt = tl.load(vt_base + vt_offs, mask=col_ok[None, :], other=0.0)
        else:
            k = tl.load(k_base + k_offs)
            vt = tl.load(vt_base + vt_offs)
        s = _scaled_scores(tl.dot(q, tl.trans(k)), offs_m, cols, seq_k, diag, qk_scale, CAUSAL, MASKED)
        p, alpha, l_i, m_i = _softmax_step(s, m_i, l_i)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(vt.dtype), tl.trans(vt), acc)
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


# A packed batch: the autotune key is the batch's extent (its longest sequence and totals), the heads
# (they set the row strides) and the dense key's head dim and causality.
@triton.autotune(configs=_configs(), key=["BATCH", "MAX_SEQ_Q", "MAX_SEQ_K", "TOTAL_Q", "TOTAL_K", "HEADS", "HEADS_KV",
                                          "HEAD_DIM", "CAUSAL"],
                 prune_configs_by={"early_config_prune": _prune}, do_bench=_quick_bench, cache_results=True)
@triton.jit(do_not_specialize=["BATCH", "MAX_SEQ_Q", "MAX_SEQ_K", "TOTAL_Q", "TOTAL_K"])
def fa_varlen_kernel(Q, K, V, O, CU_Q, CU_K, qk_scale, BATCH, MAX_SEQ_Q, MAX_SEQ_K, TOTAL_Q, TOTAL_K,
                     HEADS: tl.constexpr, HEADS_KV: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # BATCH, MAX_SEQ_* and TOTAL_* are only autotune keys: the grid is (row blocks of the longest
    # sequence, BATCH * HEADS), and each program reads its sequence's bounds from CU_Q and CU_K.
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // HEADS
    h = pid_bh % HEADS
    q_start = tl.load(CU_Q + b)
    seq_q = tl.load(CU_Q + b + 1) - q_start
    if pid_m * BLOCK_M >= seq_q:
        return   # this row block lies past the end of a shorter sequence
    k_start = tl.load(CU_K + b)
    seq_k = tl.load(CU_K + b + 1) - k_start
    kv_h = h // (HEADS // HEADS_KV)
    # Row r of head h of sequence b: element ((start + r) * heads + h) * HEAD_DIM of the packed tensor.
    q_base = Q + (q_start.to(tl.int64) * HEADS + h) * HEAD_DIM
    o_base = O + (q_start.to(tl.int64) * HEADS + h) * HEAD_DIM
    k_base = K + (k_start.to(tl.int64) * HEADS_KV + kv_h) * HEAD_DIM
    v_base = V + (k_start.to(tl.int64) * HEADS_KV + kv_h) * HEAD_DIM

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seq_q
    q_offs = offs_m[:, None] * (HEADS * HEAD_DIM) + offs_d[None, :]
    q = tl.load(q_base + q_offs, mask=row_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

    # The dense kernel's bounds with this sequence's lengths (triton_fa_space.key_ranges).
    diag = seq_k - seq_q
    if CAUSAL:
        hi = tl.minimum(seq_k, (pid_m + 1) * BLOCK_M + diag)
        full_end = (tl.minimum(pid_m * BLOCK_M + diag, seq_k) // BLOCK_N) * BLOCK_N
    else:
        hi = seq_k
        full_end = (seq_k // BLOCK_N) * BLOCK_N
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_n, offs_d, 0, full_end, seq_k, diag,
                            qk_scale, HEADS_KV * HEAD_DIM, BLOCK_N, CAUSAL, False)
    acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_n, offs_d, full_end, hi, seq_k, diag,
                            qk_scale, HEADS_KV * HEAD_DIM, BLOCK_N, CAUSAL, True)
    acc = acc / l_i[:, None]
    tl.store(o_base + q_offs, acc.to(O.dtype.element_ty), mask=row_ok[:, None])


def _fp8_configs() -> list:
    return [triton.Config({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n}, num_warps=c.warps, num_stages=c.stages)
            for c in space.fp8_space()]


def _prune_fp8(configs, named_args, **kwargs):
    args = {**named_args, **kwargs}
    kept = []
    for cfg in configs:
        tile = space.TileConfig(cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.num_warps, cfg.num_stages)
        if space.fp8_config_kept(tile, args["HEAD_DIM"], _SMEM_LIMIT[0], args["SEQ_Q"]):
            kept.append(cfg)
    return kept


# The dense kernel's autotune key: the best tile depends on the same things in FP8.
@triton.autotune(configs=_fp8_configs(), key=["BH", "SEQ_Q", "SEQ_K", "GROUP", "HEAD_DIM", "CAUSAL"],
                 prune_configs_by={"early_config_prune": _prune_fp8}, do_bench=_quick_bench, cache_results=True)
@triton.jit(do_not_specialize=["BH"])
def fa_fp8_kernel(Q, K, VT, O, Q_SCALE, K_SCALE, V_SCALE, sm_scale_log2, BH, SEQ_Q, SEQ_K, V_PITCH, GROUP,
                  HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # fa_fwd_kernel's grid and heads; VT is [B * Hkv, HEAD_DIM, V_PITCH] (keys contiguous).
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    kv_bh = bh // GROUP
    q_base = Q + bh * SEQ_Q * HEAD_DIM
    k_base = K + kv_bh * SEQ_K * HEAD_DIM
    vt_base = VT + kv_bh * HEAD_DIM * V_PITCH
    o_base = O + bh * SEQ_Q * HEAD_DIM
    # Q's and K's scales fold into the exponent's factor: the scores cost one multiply each, as unscaled.
    qk_scale = sm_scale_log2 * tl.load(Q_SCALE + bh) * tl.load(K_SCALE + kv_bh)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < SEQ_Q
    q_offs = offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(q_base + q_offs, mask=row_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

    # The dense kernel's key ranges (triton_fa_space.key_ranges).
    diag = SEQ_K - SEQ_Q
    if CAUSAL:
        hi = tl.minimum(SEQ_K, (pid_m + 1) * BLOCK_M + diag)
        full_end = (tl.minimum(pid_m * BLOCK_M + diag, SEQ_K) // BLOCK_N) * BLOCK_N
    else:
        hi = SEQ_K
        full_end = (SEQ_K // BLOCK_N) * BLOCK_N
    acc, l_i, m_i = _attend_fp8(acc, l_i, m_i, q, k_base, vt_base, offs_m, offs_n, offs_d, 0, full_end, SEQ_K,
                                V_PITCH, diag, qk_scale, HEAD_DIM, BLOCK_N, CAUSAL, False)
    acc, l_i, m_i = _attend_fp8(acc, l_i, m_i, q, k_base, vt_base, offs_m, offs_n, offs_d, full_end, hi, SEQ_K,
                                V_PITCH, diag, qk_scale, HEAD_DIM, BLOCK_N, CAUSAL, True)
    # V's scale once, on the output.
    acc = acc * (tl.load(V_SCALE + kv_bh) / l_i)[:, None]
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


def _check_fp8(q8, k8, vt8, q_scale, k_scale, v_scale, causal: bool) -> None:
    for name, t in (("q8", q8), ("k8", k8), ("vt8", vt8)):
        if t.dtype != torch.float8_e4m3fn or not t.is_cuda or not t.is_contiguous() or t.dim() != 4:
            raise ValueError(f"triton_fp8_attention: {name} must be a contiguous 4-D float8_e4m3fn CUDA tensor")
    batch, heads, seq_q, head_dim = q8.shape
    heads_kv, seq_k = k8.shape[1], k8.shape[2]
    if (head_dim not in (64, 128) or k8.shape[0] != batch or k8.shape[3] != head_dim or heads % heads_kv != 0
            or tuple(vt8.shape[:3]) != (batch, heads_kv, head_dim) or vt8.shape[3] < seq_k):
        raise ValueError(f"triton_fp8_attention: unsupported shapes q{tuple(q8.shape)} k{tuple(k8.shape)} "
                         f"vt{tuple(vt8.shape)} (vt is V transposed, [B, Hkv, D, pitch >= Sk])")
    for name, t, count in (("q_scale", q_scale, batch * heads), ("k_scale", k_scale, batch * heads_kv),
                           ("v_scale", v_scale, batch * heads_kv)):
        if t.dtype != torch.float32 or not t.is_cuda or not t.is_contiguous() or t.numel() != count:
            raise ValueError(f"triton_fp8_attention: {name} must be {count} contiguous float32 CUDA values "
                             f"(one per (batch, head))")
    if causal and seq_q > seq_k:
        raise ValueError(f"triton_fp8_attention: causal with seq_q {seq_q} > seq_k {seq_k} is refused")


def triton_fp8_attention(q8, k8, vt8, q_scale, k_scale, v_scale, causal: bool, softmax_scale: float | None = None,
                         out=None):
    """O (bf16 [B, H, Sq, D]) = softmax(Q K^T * scale [+ bottom-right causal mask]) V on e4m3 inputs: q8
    [B, H, Sq, D], k8 [B, Hkv, Sk, D], vt8 V transposed [B, Hkv, D, pitch >= Sk], all
    torch.float8_e4m3fn; q_scale (B * H), k_scale and v_scale (B * Hkv) float32 with Q = q8 * q_scale
    per (batch, head), likewise K and V. Hkv divides H. Autotunes on the first call of each key."""
    _check_fp8(q8, k8, vt8, q_scale, k_scale, v_scale, causal)
    batch, heads, seq_q, head_dim = q8.shape
    heads_kv, seq_k = k8.shape[1], k8.shape[2]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    o = out if out is not None else torch.empty(q8.shape, dtype=torch.bfloat16, device=q8.device)
    grid = lambda meta: (triton.cdiv(seq_q, meta["BLOCK_M"]), batch * heads)  # noqa: E731
    fa_fp8_kernel[grid](q8, k8, vt8, o, q_scale, k_scale, v_scale, scale * LOG2E, batch * heads, seq_q, seq_k,
                        vt8.shape[3], heads // heads_kv, HEAD_DIM=head_dim, CAUSAL=bool(causal))
    return o


def _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype not in (torch.float16, torch.bfloat16) or not t.is_cuda or not t.is_contiguous() or t.dim() != 3:
            raise ValueError(f"triton_varlen_attention: {name} must be a contiguous 3-D fp16 or bf16 CUDA tensor "
                             f"[total, heads, D]")
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"triton_varlen_attention: q, k and v must share one dtype, got {q.dtype}, {k.dtype}, "
                         f"{v.dtype}")
    if q.shape[-1] not in (64, 128) or k.shape != v.shape or q.shape[2] != k.shape[2] or q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"triton_varlen_attention: unsupported shapes q{tuple(q.shape)} k{tuple(k.shape)} "
                         f"v{tuple(v.shape)}")
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if cu.dtype != torch.int32 or not cu.is_cuda or cu.dim() != 1 or cu.shape[0] < 2:
            raise ValueError(f"triton_varlen_attention: {name} must be a 1-D int32 CUDA tensor of batch + 1 offsets")
    if cu_seqlens_q.shape != cu_seqlens_k.shape:
        raise ValueError("triton_varlen_attention: cu_seqlens_q and cu_seqlens_k must have batch + 1 entries each")


def triton_varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seq_q: int, max_seq_k: int, causal: bool,
                            softmax_scale: float | None = None, out=None):
    """A packed variable-length batch: O [total_q, H, D] = per sequence softmax(Q K^T * scale [+ its
    bottom-right causal mask]) V, K and V [total_k, Hkv, D] with Hkv dividing H. max_seq_q and max_seq_k
    are host ints (no device read: the call can be captured in a graph); a causal batch must give
    every sequence at least as many keys as queries, which is the caller's to check (bench_shapes
    does). Autotunes on the first call of each key."""
    _check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k)
    total_q, heads, head_dim = q.shape
    total_k, heads_kv = k.shape[0], k.shape[1]
    batch = cu_seqlens_q.shape[0] - 1
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    o = out if out is not None else torch.empty_like(q)
    grid = lambda meta: (triton.cdiv(max_seq_q, meta["BLOCK_M"]), batch * heads)  # noqa: E731
    fa_varlen_kernel[grid](q, k, v, o, cu_seqlens_q, cu_seqlens_k, scale * LOG2E, batch, max_seq_q, max_seq_k,
                           total_q, total_k, HEADS=heads, HEADS_KV=heads_kv, HEAD_DIM=head_dim, CAUSAL=bool(causal))
    return o


def _describe_best(kernel) -> str:
    cfg = getattr(kernel, "best_config", None)
    if cfg is None:
        return "n/a"
    return space.describe(cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.num_warps, cfg.num_stages)


def winning_config() -> str:
    """The config the autotuner chose for the most recent call."""
    return _describe_best(fa_fwd_kernel)


def winning_varlen_config() -> str:
    """The config the autotuner chose for the most recent packed-batch call."""
    return _describe_best(fa_varlen_kernel)


def winning_fp8_config() -> str:
    """The config the autotuner chose for the most recent FP8 call."""
    return _describe_best(fa_fp8_kernel)


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


def _precompile_varlen_one(task) -> str:
    head_dim, causal, heads, heads_kv, dtype, block_m, block_n, warps, stages = task
    try:
        elem = getattr(torch, dtype)
        q = torch.empty((1, heads, head_dim), dtype=elem, device="cuda")
        kv = torch.empty((1, heads_kv, head_dim), dtype=elem, device="cuda")
        cu = torch.zeros(2, dtype=torch.int32, device="cuda")
        fa_varlen_kernel.fn.warmup(q, kv, kv, q, cu, cu, 1.0, 1, 1, 1, 1, 1, HEADS=heads, HEADS_KV=heads_kv,
                                   HEAD_DIM=head_dim, CAUSAL=causal, BLOCK_M=block_m, BLOCK_N=block_n,
                                   num_warps=warps, num_stages=stages, grid=(1,))
        return ""
    except Exception as err:  # as above: the autotuner's business
        first = str(err).splitlines()[0] if str(err) else err
        return f"varlen {space.describe(block_m, block_n, warps, stages)}: {first}"


def _precompile_fp8_one(task) -> str:
    head_dim, causal, seq_q, seq_k, group, block_m, block_n, warps, stages = task
    try:
        fp8 = torch.float8_e4m3fn
        pitch = fp8_pitch(seq_k)    # the bench's V pitch: Triton specializes its divisibility by 16
        qk = torch.empty((1, 1, max(seq_q, seq_k), head_dim), dtype=fp8, device="cuda")
        vt = torch.empty((1, 1, head_dim, pitch), dtype=fp8, device="cuda")
        o = torch.empty((1, 1, seq_q, head_dim), dtype=torch.bfloat16, device="cuda")
        scales = torch.ones(1, dtype=torch.float32, device="cuda")
        fa_fp8_kernel.fn.warmup(qk, qk, vt, o, scales, scales, scales, 1.0, 1, seq_q, seq_k, pitch, group,
                                HEAD_DIM=head_dim, CAUSAL=causal, BLOCK_M=block_m, BLOCK_N=block_n,
                                num_warps=warps, num_stages=stages, grid=(1,))
        return ""
    except Exception as err:  # as above: the autotuner's business
        first = str(err).splitlines()[0] if str(err) else err
        return f"fp8 {space.describe(block_m, block_n, warps, stages)}: {first}"


_PRECOMPILERS = {"dense": _precompile_one, "varlen": _precompile_varlen_one, "fp8": _precompile_fp8_one}


def _precompile_task(item) -> str:
    kind, task = item
    return _PRECOMPILERS[kind](task)


# torch's name of e4m3: precompile()'s dtype that selects the FP8 kernel for the dense problems.
FP8_DTYPE = "float8_e4m3fn"


def precompile(problems, jobs: int, dtype: str = "float16", varlen=()) -> tuple[int, list[str]]:
    """problems: iterable of (head_dim, causal, seq_q, seq_k, group), group = query heads per KV head
    (the old (head_dim, causal, seq) means seq_q = seq_k = seq, group 1); varlen: iterable of
    (head_dim, causal, heads, heads_kv, max_seq_q) of packed batches (fa_varlen_kernel); dtype: torch's
    name of the inputs' element type ("float16", "bfloat16", or FP8_DTYPE: the dense problems then
    compile fa_fp8_kernel), which Triton compiles for. Returns (configs compiled, failures)."""
    tasks = {}
    for problem in problems:
        if len(problem) == 3:
            (head_dim, causal, seq_q), seq_k, group = problem, problem[2], 1
        else:
            head_dim, causal, seq_q, seq_k, group = problem
        variant = (head_dim, bool(causal), _specialization(seq_q), _specialization(seq_k), _specialization(group))
        if dtype == FP8_DTYPE:
            for t in space.pruned_fp8_space(head_dim, _SMEM_LIMIT[0], seq_q):
                tasks.setdefault(("fp8",) + variant + (t,), ("fp8", (head_dim, bool(causal), seq_q, seq_k, group,
                                                                     t.block_m, t.block_n, t.warps, t.stages)))
            continue
        for t in space.pruned_space(head_dim, _SMEM_LIMIT[0], seq_q):
            tasks.setdefault(("dense",) + variant + (t,), ("dense", (head_dim, bool(causal), seq_q, seq_k, group,
                                                                     dtype, t.block_m, t.block_n, t.warps, t.stages)))
    for head_dim, causal, heads, heads_kv, max_seq_q in varlen:
        # The kernel's integers are not specialized: one compile per (heads, head dim, causal, tile).
        for t in space.pruned_space(head_dim, _SMEM_LIMIT[0], max_seq_q):
            tasks.setdefault(("varlen", head_dim, bool(causal), heads, heads_kv, t),
                             ("varlen", (head_dim, bool(causal), heads, heads_kv, dtype, t.block_m, t.block_n,
                                         t.warps, t.stages)))
    tasks = list(tasks.values())
    if jobs <= 0 or not tasks:
        return 0, []
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(processes=min(jobs, len(tasks), os.cpu_count() or 1)) as pool:
        failures = [f for f in pool.map(_precompile_task, tasks, chunksize=1) if f]
    return len(tasks), failures

"""The two timing methods of the bench, the device-rate probes behind the floors, and the reference.

(a) graph replay: `calls` back-to-back calls captured in one CUDA graph, the graph replayed `replays`
    times with an event pair around each replay; per-call figure = median(replay time) / calls.
    Inputs stay the same across the captured calls, so small shapes run from a warm L2 - this is the
    steady state of a model that calls attention layer after layer, minus the host.
(b) per launch: one call between two CUDA events, preceded by an L2 flush (a memset of twice the L2
    size) and a spin kernel. Those keep the GPU busy while the host enqueues the events and the call,
    so the figure is the GPU time of one launch from a cold L2, without host overhead; median over
    `iters` samples. The spin lasts at least ~50 us and three times the host's time to enqueue one
    sample, because that enqueue (30-108 us a sample on a GPU host, Triton's the longest) can
    outlast a fixed 50 us spin (NOTES.md); a sample whose enqueue outlasted its spin is dropped, and
    if half of them were, all are taken again with the spin doubled.
"""
from __future__ import annotations

import math
import statistics
import time

import torch

from launch_cover import BUSY_CYCLES, MAX_WIDENINGS, covered_samples, spin_cycles


class L2Flusher:
    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 0) or 50 * 1024 * 1024
        self.nbytes = 2 * l2
        self._buffer = torch.empty(self.nbytes, dtype=torch.uint8, device=device)
        self.ns_per_cycle = _spin_ns_per_cycle()

    def flush(self, busy_cycles: int = BUSY_CYCLES) -> None:
        self.evict()
        self.spin(busy_cycles)

    def evict(self) -> None:
        self._buffer.zero_()

    def spin(self, busy_cycles: int = BUSY_CYCLES) -> None:
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(busy_cycles)


def _elapsed_ms(work) -> float:
    """GPU time of what `work` queues, between one event pair, waited for."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    work()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def _spin_ns_per_cycle(reps: int = 5) -> float:
    """The spin's duration per cycle at the fastest clock seen: the shortest a spin will last."""
    if not hasattr(torch.cuda, "_sleep"):
        return 0.0
    cycles = 1_000_000
    best = math.inf
    for _ in range(reps):
        best = min(best, _elapsed_ms(lambda: torch.cuda._sleep(cycles)) * 1e6 / cycles)
    return best


def _events(n: int):
    return ([torch.cuda.Event(enable_timing=True) for _ in range(n)],
            [torch.cuda.Event(enable_timing=True) for _ in range(n)])


def per_launch_us(fn, iters: int, flusher: L2Flusher, warmup: int = 5, report: dict | None = None,
                  prepare=None) -> float:
    """See (b) above. `report`, if given, receives the spin's shortest duration, the median host
    enqueue time, how many samples were dropped and whether the spin was longer than ~50 us.
    `prepare`, if given, queues its GPU work before each sample's spin in place of the L2 flush."""
    host = []
    for _ in range(warmup):
        start, end = _events(1)
        t0 = time.perf_counter()
        start[0].record()
        fn()
        end[0].record()
        host.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    cycles = spin_cycles(statistics.median(host), flusher.ns_per_cycle)
    for _ in range(MAX_WIDENINGS + 1):
        starts, ends = _events(iters)
        host = []
        for i in range(iters):
            if prepare is None:
                flusher.flush(cycles)
            else:
                prepare()
                flusher.spin(cycles)
            t0 = time.perf_counter()
            starts[i].record()
            fn()
            ends[i].record()
            host.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        elapsed = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
        cover_us = cycles * flusher.ns_per_cycle / 1e3
        kept = covered_samples(elapsed, host, cover_us) if flusher.ns_per_cycle > 0 else elapsed
        if 2 * len(kept) >= iters:
            break
        cycles *= 2
    if report is not None:
        report.update(spin_us=cover_us, host_us=statistics.median(host), dropped=iters - len(kept),
                      widened=cycles > BUSY_CYCLES)
    return statistics.median(kept or elapsed)


def graph_replay_us(fn, calls: int, replays: int) -> float:
    # Warm up on a side stream first, as capture requires (lazy init, allocator, autotune all done).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    starts, ends = _events(replays)
    for i in range(replays):
        starts[i].record()
        graph.replay()
        ends[i].record()
    torch.cuda.synchronize()
    per_replay = statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))
    del graph
    return per_replay / calls


def matmul_tflops(device: torch.device, n: int = 8192, reps: int = 10) -> float:
    """Dense fp16 tensor-core rate as cuBLAS reaches it: the compute floor's denominator."""
    a = torch.randn(n, n, dtype=torch.float16, device=device)
    b = torch.randn(n, n, dtype=torch.float16, device=device)
    def work():
        for _ in range(reps):
            torch.matmul(a, b)

    for _ in range(3):
        torch.matmul(a, b)
    return 2.0 * n ** 3 * reps / (_elapsed_ms(work) * 1e-3) / 1e12


def fp8_matmul_tflops(device: torch.device, n: int = 8192, reps: int = 10) -> float:
    """Dense e4m3 tensor-core rate as cuBLAS reaches it through torch._scaled_mm (one scale per operand,
    bf16 out): the FP8 rows' compute floor's denominator. Fast accumulation, as an attention kernel
    accumulates each short product chain in its registers without extra promotion."""
    a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
    # _scaled_mm takes its second operand column-major.
    b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()
    one = torch.ones((), dtype=torch.float32, device=device)

    def product():
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)

    def work():
        for _ in range(reps):
            product()

    for _ in range(3):
        product()
    return 2.0 * n ** 3 * reps / (_elapsed_ms(work) * 1e-3) / 1e12


def copy_gbps(device: torch.device, nbytes: int = 1 << 30, reps: int = 10) -> float:
    """Device-to-device copy bandwidth, read plus write: the memory floor's denominator."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    def work():
        for _ in range(reps):
            dst.copy_(src)

    for _ in range(2):
        dst.copy_(src)
    return 2.0 * nbytes * reps / (_elapsed_ms(work) * 1e-3) / 1e9


def reference_attention(q, k, v, causal: bool, scale: float) -> torch.Tensor:
    """float32 math on fp16/bf16 upcasts, one batch at a time to bound the score matrix's memory.

    Grouped-query heads: K and V have heads_kv heads, query head h reads KV head h // (heads //
    heads_kv); the float32 K and V are expanded to every query head (repeat_interleave). Causal is
    bottom-right aligned: row i sees keys 0 .. seq_k - seq_q + i (top-left when seq_q == seq_k).
    """
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    heads, heads_kv = q.shape[1], k.shape[1]
    if heads % heads_kv:
        raise ValueError(f"reference_attention: {heads_kv} KV heads do not divide {heads} query heads")
    group = heads // heads_kv
    seq_q, seq_k = q.shape[2], k.shape[2]
    if causal and seq_q > seq_k:
        raise ValueError(f"reference_attention: causal with seq_q {seq_q} > seq_k {seq_k} is refused")
    # True where masked: key j > i + (seq_k - seq_q).
    mask = torch.ones(seq_q, seq_k, dtype=torch.bool, device=q.device).triu(1 + seq_k - seq_q) if causal else None
    for b in range(q.shape[0]):
        kb, vb = k[b].float(), v[b].float()
        if group > 1:
            kb, vb = kb.repeat_interleave(group, dim=0), vb.repeat_interleave(group, dim=0)
        scores = torch.matmul(q[b].float(), kb.transpose(-1, -2)) * scale
        if mask is not None:
            scores.masked_fill_(mask, float("-inf"))
        out[b] = torch.matmul(torch.softmax(scores, dim=-1), vb)
        del scores, kb, vb
    return out


def reference_attention_varlen(q, k, v, seqlens_q, seqlens_k, causal: bool, scale: float) -> torch.Tensor:
    """A packed variable-length batch's float32 reference, one sequence at a time.

    q [total_q, heads, head_dim], k and v [total_k, heads_kv, head_dim]; sequence b owns the next
    seqlens_q[b] query rows and seqlens_k[b] key rows (host ints: the offsets cu_seqlens holds). Each
    sequence goes through reference_attention on its own rows alone, so it sees only its own keys, and
    causal is bottom-right aligned per sequence (row i sees keys 0 .. i + Lk - Lq). Returns float32
    [total_q, heads, head_dim].
    """
    if len(seqlens_q) != len(seqlens_k):
        raise ValueError(f"reference_attention_varlen: {len(seqlens_q)} query lengths, {len(seqlens_k)} key lengths")
    if sum(seqlens_q) != q.shape[0] or sum(seqlens_k) != k.shape[0]:
        raise ValueError(f"reference_attention_varlen: lengths sum to {sum(seqlens_q)} queries and {sum(seqlens_k)} "
                         f"keys, the tensors hold {q.shape[0]} and {k.shape[0]}")
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    q_at = k_at = 0
    for seq_q, seq_k in zip(seqlens_q, seqlens_k):
        # [rows, heads, D] -> [1, heads, rows, D]: the dense reference's layout (views, no copy).
        q_b, k_b, v_b = (t[at:at + n].transpose(0, 1).unsqueeze(0)
                         for t, at, n in ((q, q_at, seq_q), (k, k_at, seq_k), (v, k_at, seq_k)))
        out[q_at:q_at + seq_q] = reference_attention(q_b, k_b, v_b, causal, scale)[0].transpose(0, 1)
        q_at += seq_q
        k_at += seq_k
    return out


def rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref||; NaN when out holds NaN (poisoned, unwritten elements)."""
    return ((out.float() - ref).norm() / ref.norm()).item()

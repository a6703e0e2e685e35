"""The two timing methods of the bench, the device-rate probes behind the floors, and the reference.

(a) graph replay: `calls` back-to-back calls captured in one CUDA graph, the graph replayed `replays`
    times with an event pair around each replay; per-call figure = median(replay time) / calls.
    Inputs stay the same across the captured calls, so small shapes run from a warm L2 - this is the
    steady state of a model that calls attention layer after layer, minus the host.
(b) per launch: one call between two CUDA events, preceded by an L2 flush (a memset of twice the L2
    size) and a ~50 us spin kernel. Those keep the GPU busy while the host enqueues the events and the
    call (Triton's and SDPA's Python dispatch take tens of microseconds), so the figure is the GPU time
    of one launch from a cold L2, without host overhead; median over `iters` samples.
"""
from __future__ import annotations

import statistics

import torch


# torch.cuda._sleep spins this many GPU clock cycles: about 50-70 us at Hopper's 1.5-2 GHz.
_BUSY_CYCLES = 100_000


class L2Flusher:
    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 0) or 50 * 1024 * 1024
        self.nbytes = 2 * l2
        self._buffer = torch.empty(self.nbytes, dtype=torch.uint8, device=device)

    def flush(self) -> None:
        self._buffer.zero_()
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(_BUSY_CYCLES)


def _events(n: int):
    return ([torch.cuda.Event(enable_timing=True) for _ in range(n)],
            [torch.cuda.Event(enable_timing=True) for _ in range(n)])


def per_launch_us(fn, iters: int, flusher: L2Flusher, warmup: int = 5) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts, ends = _events(iters)
    for i in range(iters):
        flusher.flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))


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
    for _ in range(3):
        torch.matmul(a, b)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        torch.matmul(a, b)
    end.record()
    torch.cuda.synchronize()
    return 2.0 * n ** 3 * reps / (start.elapsed_time(end) * 1e-3) / 1e12


def copy_gbps(device: torch.device, nbytes: int = 1 << 30, reps: int = 10) -> float:
    """Device-to-device copy bandwidth, read plus write: the memory floor's denominator."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    for _ in range(2):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        dst.copy_(src)
    end.record()
    torch.cuda.synchronize()
    return 2.0 * nbytes * reps / (start.elapsed_time(end) * 1e-3) / 1e9


def reference_attention(q, k, v, causal: bool, scale: float) -> torch.Tensor:
    """float32 math on fp16 upcasts, one batch at a time to bound the score matrix's memory."""
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    seq_q, seq_k = q.shape[2], k.shape[2]
    mask = torch.ones(seq_q, seq_k, dtype=torch.bool, device=q.device).triu(1) if causal else None
    for b in range(q.shape[0]):
        scores = torch.matmul(q[b].float(), k[b].float().transpose(-1, -2)) * scale
        if mask is not None:
            scores.masked_fill_(mask, float("-inf"))
        out[b] = torch.matmul(torch.softmax(scores, dim=-1), v[b].float())
        del scores
    return out


def rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref||; NaN when out holds NaN (poisoned, unwritten elements)."""
    return ((out.float() - ref).norm() / ref.norm()).item()

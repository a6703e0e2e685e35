"""How long the spin before each per-launch sample must last, and which samples it covered. No torch here.

The per-launch method (bench_timing.py) queues an L2 flush and a spin kernel ahead of each timed call,
so that the GPU is still busy while the host enqueues the start event, the call and the end event. If
the host takes longer than the spin, the GPU idles between the start event and the call, and the
sample measures the host.
"""
from __future__ import annotations

import math

# torch.cuda._sleep spins this many GPU clock cycles: about 50-70 us at Hopper's 1.5-2 GHz.
BUSY_CYCLES = 100_000
COVER_FACTOR = 3        # the spin lasts this many times the host's enqueue time of one sample
MAX_WIDENINGS = 4       # the spin doubles at most this many times before the figure is given as is


def spin_cycles(host_us: float, ns_per_cycle: float) -> int:
    """Cycles of spin that outlast `COVER_FACTOR` times a sample's host enqueue time, never fewer than
    `BUSY_CYCLES`."""
    if ns_per_cycle <= 0:
        return BUSY_CYCLES
    return max(BUSY_CYCLES, math.ceil(COVER_FACTOR * host_us * 1e3 / ns_per_cycle))


def covered_samples(elapsed_us: list[float], host_us: list[float], cover_us: float) -> list[float]:
    """The samples whose host enqueue (events and call) finished within the spin's shortest duration:
    in the others the GPU may have waited on the host between the start event and the call."""
    return [e for e, h in zip(elapsed_us, host_us) if h <= cover_us]

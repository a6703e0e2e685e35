"""The SM clock and power while each figure is timed, so that a figure taken under the power cap says so.

At the large shapes a replayed graph keeps the card at its power limit: an H100 at 700 W dropped its
SM clock from 1980 MHz to as low as 1485 MHz during a benchmark (bench/NOTES.md), and the same kernel's
graph time then moved by 10 % between calls. `ClockWatch` samples `nvidia-smi` every 50 ms in the
background; once it has stopped, `attach_clocks` turns each figure's timing window into what the clock
did in it. Samples carry nvidia-smi's own timestamps, since its output into a pipe arrives in bursts.
No torch here.
"""
from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
from dataclasses import dataclass
from datetime import datetime

# clocks_event_reasons bits (NVML's clocksEventReasons): the ones that lower the clock under load.
POWER_CAP_REASONS = 0x4 | 0x80        # software power cap, hardware power brake
SLOWDOWN_REASONS = 0x8 | 0x20 | 0x40   # hardware slowdown, software and hardware thermal slowdown

_QUERY = "timestamp,clocks.sm,power.draw,clocks_event_reasons.active"


@dataclass(frozen=True)
class Sample:
    t: float           # seconds since the epoch (time.time()'s clock)
    clock_mhz: float
    power_w: float
    reasons: int


def parse_sample(line: str) -> Sample | None:
    """One `--format=csv,noheader,nounits` line of _QUERY, whose timestamp is local time
    ("2026/11/26 17:18:15.123"); None for anything else ("[N/A]", noise)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 4:
        return None
    try:
        t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        return Sample(t, float(parts[1]), float(parts[2]), int(parts[3], 16))
    except ValueError:
        return None


def summarize(samples: list[Sample], t0: float, t1: float, margin: float = 0.05) -> dict | None:
    """The clock from t0 to t1, widened by `margin` seconds on each side so that a window shorter
    than the sampling period still meets its neighbours: lowest and median SM clock, highest power,
    and whether the power cap or a (thermal or hardware) slowdown held the clock down in any sample.
    None when no sample fell inside."""
    inside = [s for s in samples if t0 - margin <= s.t <= t1 + margin]
    if not inside:
        return None
    return {
        "clock_mhz_min": min(s.clock_mhz for s in inside),
        "clock_mhz_median": statistics.median(s.clock_mhz for s in inside),
        "power_w_max": max(s.power_w for s in inside),
        "power_capped": any(s.reasons & POWER_CAP_REASONS for s in inside),
        "slowdown": any(s.reasons & SLOWDOWN_REASONS for s in inside),
        "samples": len(inside),
    }


class ClockWatch:
    """`nvidia-smi -lms 50` for one GPU (by UUID when known) while the context is open. Without
    nvidia-smi it records nothing and every summary is None."""

    def __init__(self, gpu: str = "0", period_ms: int = 50):
        self._cmd = None
        exe = shutil.which("nvidia-smi")
        if exe:
            self._cmd = [exe, "-i", gpu, f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits",
                         "-lms", str(period_ms)]
        self._samples: list[Sample] = []
        self._lock = threading.Lock()
        self._proc = None
        self._reader = None

    def __enter__(self) -> "ClockWatch":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        if self._cmd:
            try:
                self._proc = subprocess.Popen(self._cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                              text=True)
            except OSError:
                self._proc = None
        if self._proc:
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()

    def _read(self) -> None:
        for line in self._proc.stdout:
            sample = parse_sample(line)
            if sample:
                with self._lock:
                    self._samples.append(sample)

    def stop(self) -> None:
        if self._proc:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        if self._reader:
            self._reader.join(timeout=5)
        if self._proc:
            self._proc.stdout.close()

    def summary(self, t0: float, t1: float) -> dict | None:
        with self._lock:
            return summarize(self._samples, t0, t1)


def attach_clocks(measurements, summary) -> None:
    """Replaces each measurement's "windows" ({"launch": (t0, t1), "graph": (t0, t1)}) by
    "launch_clock" and "graph_clock", what summary(t0, t1) says of them (None without samples)."""
    for res in measurements:
        windows = res.pop("windows", {})
        for method in ("launch", "graph"):
            span = windows.get(method)
            res[f"{method}_clock"] = summary(*span) if span else None

"""Rounds of one problem's measurements in rotated order, and the median over them. No torch here.

At the large shapes graph replay runs the card into its power cap (bench/NOTES.md), so the clock a
kernel gets depends on what ran just before it. With `--rounds N` every kernel is measured N times,
each round starting one kernel later, so that over as many rounds as there are kernels each takes
every position; the next as many rounds run the order reversed, so that over twice as many each
kernel has also followed each of its neighbours (what runs just before can matter as much as the
position: NOTES.md). The figures reported are the medians over the rounds, and the JSON keeps each
round's own. Round 0 is the fixed order, the evolved kernels (plain launch, then as exported) last:
if one breaks the CUDA context, the baselines of that problem are already measured.
"""
from __future__ import annotations

import math
import statistics

FIGURES = ("graph_us", "launch_us")
CLOCKS = ("graph_clock", "launch_clock")


def round_order(names: list[str], round_index: int) -> list[str]:
    """Rounds 0..n-1 (n kernels): round 0's order rotated left by the round's index, so each kernel
    takes every position, always after the same neighbour. Rounds n..2n-1: the reversed order,
    rotated likewise, so each kernel also follows the other neighbour; then again from round 0."""
    if not names:
        return []
    n = len(names)
    r = round_index % (2 * n)
    ordered = names if r < n else names[::-1]
    k = r % n
    return ordered[k:] + ordered[:k]


def _median(values):
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def merge_clocks(clocks: list) -> dict | None:
    """One account of several windows' clocks: the lowest, the median of medians, the highest power,
    and whether any window was held down."""
    present = [c for c in clocks if c]
    if not present:
        return None
    return {
        "clock_mhz_min": min(c["clock_mhz_min"] for c in present),
        "clock_mhz_median": statistics.median(c["clock_mhz_median"] for c in present),
        "power_w_max": max(c["power_w_max"] for c in present),
        "power_capped": any(c.get("power_capped") for c in present),
        "slowdown": any(c.get("slowdown") for c in present),
        "samples": sum(c.get("samples", 0) for c in present),
    }


def _worst(values):
    """The largest error, NaN if any is NaN, None if none was measured."""
    errors = [e for e in values if e is not None]
    if not errors:
        return None
    return math.nan if any(math.isnan(e) for e in errors) else max(errors)


def error_fields(rounds: list[dict]) -> list[str]:
    """"rel_l2" and any other relative error a round measured ("rel_l2_quantized", "rel_l2_fp16": the
    FP8 rows' two references)."""
    return ["rel_l2"] + sorted({k for r in rounds for k in r if k.startswith("rel_l2_")})


def merge_rounds(rounds: list[dict]) -> dict:
    """A kernel's rounds (measure()'s results, clocks attached) as one result: median figures, the
    worst relative error of each kind (NaN if any round wrote NaN), the first note, config, variant and
    input dtype, merged clocks, and "rounds" with each round's figures, clocks and per-launch spin
    (bench_timing.per_launch_us)."""
    merged = {
        **{f: _median(r.get(f) for r in rounds) for f in FIGURES},
        **{e: _worst(r.get(e) for r in rounds) for e in error_fields(rounds)},
        "note": next((r["note"] for r in rounds if r.get("note")), None),
        "config": next((r["config"] for r in rounds if r.get("config")), None),
        "variant": next((r["variant"] for r in rounds if r.get("variant")), None),
        **{c: merge_clocks([r.get(c) for r in rounds]) for c in CLOCKS},
    }
    dtype = next((r["dtype"] for r in rounds if r.get("dtype")), None)
    if dtype:
        merged["dtype"] = dtype
    merged["rounds"] = [{k: r.get(k) for k in FIGURES + CLOCKS + ("launch_cover",)} for r in rounds]
    return merged

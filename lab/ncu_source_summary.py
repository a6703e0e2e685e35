#!/usr/bin/env python3
"""Where a kernel's warps spend their time, from ncu's per-instruction warp-state samples.

    ncu --section SourceCounters --section WarpStateStats --warp-sampling-interval 0 -o rep ./prog
    ncu -i rep.ncu-rep --page source --csv --print-source sass > source.csv
    python3 lab/ncu_source_summary.py source.csv [--top 40]

Prints the samples by stall reason; by how often each warp executes an instruction (1.00: once,
the prologue, a peeled first step and the epilogue; 3.00: the loop body at sequence 512 with four
tiles; fractions: code run by some warps only, such as the one that issues the copies); by opcode
within the most executed region (the loop); and the instructions that hold the most samples.
A sample is one warp caught at one instruction, so the shares are of warp time, not wall time:
code that only a few warps run while the others have left (the last store) weighs less than the
time it takes. No torch here.
"""
from __future__ import annotations

import argparse
import collections
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


class SourceError(Exception):
    """The file is not ncu's source page as CSV."""


def read_source(path: str) -> list[dict]:
    """One dict per SASS instruction: address, text, samples, executions, {reason: samples}."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header_at = next((i for i, r in enumerate(rows) if "Address" in r and SAMPLES in r), None)
    if header_at is None:
        raise SourceError(f"{path}: no '{SAMPLES}' column (was it ncu --page source --csv?)")
    header = rows[header_at]
    col = {name: i for i, name in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    out = []
    for r in rows[header_at + 1:]:
        if len(r) != len(header):
            continue

        def num(name):
            v = r[col[name]].strip()
            return int(v) if v not in ("", "-") else 0

        out.append({
            "address": int(r[col["Address"]], 16),
            "text": r[col["Source"]].strip(),
            "samples": num(SAMPLES),
            "executed": num(EXECUTED) if EXECUTED in col else 0,
            "reasons": {h[len("stall_"):]: num(h) for h in reasons},
        })
    if not out:
        raise SourceError(f"{path}: no instruction rows")
    return out


def opcode(text: str) -> str:
    """The opcode without its modifiers or predicate: '@!P0 BRA 0x..' -> 'BRA'."""
    words = text.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def summarize(instrs: list[dict], warps: int | None = None, top: int = 40) -> str:
    total = sum(i["samples"] for i in instrs) or 1
    if warps is None:  # every warp runs the kernel's first instruction once
        warps = max(instrs[0]["executed"], 1)
    lines = [f"{len(instrs)} instructions, {total} samples, {warps} warps"]

    by_reason = collections.Counter()
    for i in instrs:
        by_reason.update(i["reasons"])
        # Reasons the CSV has no column for (HGMMA's waits, on sm_90) are left over.
        by_reason["(no column)"] += max(0, i["samples"] - sum(i["reasons"].values()))
    lines.append("\nby stall reason:")
    lines += [f"  {k:<20} {v:6d} {100 * v / total:5.1f}%" for k, v in by_reason.most_common() if v]

    by_rate = collections.defaultdict(lambda: [0, 0])
    for i in instrs:
        rate = round(i["executed"] / warps, 2)
        by_rate[rate][0] += 1
        by_rate[rate][1] += i["samples"]
    lines.append("\nby executions per warp:")
    lines += [f"  {rate:5.2f} x  {n:4d} instructions  {s:6d} samples {100 * s / total:5.1f}%"
              for rate, (n, s) in sorted(by_rate.items())]

    # The loop: of the code some warp runs more than once, the rate holding the most samples.
    repeated = [rate for rate in by_rate if rate > 1.5] or list(by_rate)
    loop_rate = max(repeated, key=lambda rate: by_rate[rate][1])
    by_op = collections.defaultdict(lambda: [0, 0])
    for i in instrs:
        if round(i["executed"] / warps, 2) == loop_rate:
            by_op[opcode(i["text"])][0] += 1
            by_op[opcode(i["text"])][1] += i["samples"]
    lines.append(f"\nthe most executed region ({loop_rate:.2f} x per warp) by opcode:")
    lines += [f"  {op:<12} {n:4d} instructions  {s:6d} samples {100 * s / total:5.1f}%"
              for op, (n, s) in sorted(by_op.items(), key=lambda kv: -kv[1][1])]

    base = instrs[0]["address"]
    lines.append(f"\nthe {top} instructions with the most samples (offset, executions per warp):")
    for i in sorted(instrs, key=lambda i: -i["samples"])[:top]:
        reasons = dict(i["reasons"], **{"(no column)": i["samples"] - sum(i["reasons"].values())})
        main = sorted(reasons.items(), key=lambda kv: -kv[1])[:2]
        why = " ".join(f"{k}:{v}" for k, v in main if v)
        lines.append(f"  {i['address'] - base:05x} {i['executed'] / warps:5.2f} {i['samples']:5d} "
                     f"{100 * i['samples'] / total:4.1f}%  {i['text'][:56]:<56} {why}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="ncu -i REPORT --page source --csv --print-source sass > this")
    ap.add_argument("--warps", type=int, help="warps in the grid (default: the first instruction's count)")
    ap.add_argument("--top", type=int, default=40, help="instructions to list (default 40)")
    args = ap.parse_args(argv)
    try:
        print(summarize(read_source(args.csv), args.warps, args.top))
    except (OSError, SourceError) as e:
        print(f"ncu_source_summary: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Turns a folder of `evo-worker eval --json` outputs into one markdown table.

    python3 bench/eval_table.py DIR

DIR holds N.json (the Evaluation), N.err (stderr) and N.genome (the genome text) per evaluation.
Columns: genome, registers, shared memory, spills, status, median µs (p10-p90), TFLOP/s, rel-L2.
"""
import json
import pathlib
import sys


def pick(d, *names, default=None):
    """Protobuf JSON uses lowerCamelCase unless told otherwise; accept both spellings."""
    for n in names:
        if n in d:
            return d[n]
    return default


def row(folder, stem):
    genome = (folder / f"{stem}.genome").read_text().strip()
    text = (folder / f"{stem}.json").read_text().strip()
    if not text:
        err = (folder / f"{stem}.err").read_text().strip().splitlines()
        return [genome, "", "", "", "error", (err[-1] if err else "no output")[:60], "", ""]
    e = json.loads(text)
    res = pick(e, "resources", default={})
    regs = pick(res, "registers", default="")
    smem = int(pick(res, "dynamicSmemBytes", "dynamic_smem_bytes", default=0)) + int(
        pick(res, "staticSmemBytes", "static_smem_bytes", default=0))
    spills = int(pick(res, "spillStoreBytes", "spill_store_bytes", default=0)) + int(
        pick(res, "stackFrameBytes", "stack_frame_bytes", default=0))
    status = pick(e, "status", default="?")
    shapes = pick(e, "shapes", default=[])
    if shapes:
        s = shapes[0]
        med = float(pick(s, "medianUs", "median_us", default=0))
        p10 = float(pick(s, "p10Us", "p10_us", default=0))
        p90 = float(pick(s, "p90Us", "p90_us", default=0))
        timing = f"{med:.2f} ({p10:.2f}-{p90:.2f})" if med else ""
        tflops = f"{float(pick(s, 'tflops', default=0)):.1f}" if med else ""
        err = pick(s, "relL2Error", "rel_l2_error", default="")
        err = f"{float(err):.1e}" if err != "" else ""
    else:
        timing = tflops = err = ""
    if status != "OK":
        msg = pick(e, "message", default="")
        timing = timing or msg[:60]
    return [genome, str(regs), f"{smem / 1024:.1f} KiB", str(spills), status, timing, tflops, err]


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    folder = pathlib.Path(sys.argv[1])
    stems = sorted((p.stem for p in folder.glob("*.genome")), key=lambda s: int(s) if s.isdigit() else s)
    header = ["genome", "regs", "smem", "spill+stack B", "status", "median µs (p10-p90)", "TFLOP/s",
              "rel-L2"]
    rows = [row(folder, s) for s in stems]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())

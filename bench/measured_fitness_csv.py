#!/usr/bin/env python3
"""Every measured genome of an evo.db as CSV: the model evaluator's calibration data.

    bench/measured_fitness_csv.py OUT_DIR/evo.db > tests/unit/worker/data/h200_measured_fitness.csv

One row per (shape, genome) that a GPU worker measured OK: the median µs per call with inputs
cycled past L2 (the median over repeated measurements, confirmations included), and the registers
and static shared memory ptxas gave the kernel. Estimated (model) results are left out. Rows of one
card only: the script refuses a database whose measurements come from more than one GPU, since
the model's constants are fitted to one. Needs protoc (a build dependency) to read the stored
evaluations.
"""
import argparse
import csv
import os
import re
import sqlite3
import statistics
import subprocess
import sys

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "proto")


def decode(blob):
    """The text form of one stored evo.v1.Evaluation."""
    out = subprocess.run(["protoc", "--decode=evo.v1.Evaluation", "-I", PROTO_DIR, "evo.proto"],
                         input=blob, capture_output=True, check=True)
    return out.stdout.decode()


def shape_text(block):
    field = lambda name: int(re.search(name + r": (\d+)", block).group(1))
    text = f"{field('batch')}x{field('heads')}x{field('seq_q')}x{field('head_dim')}"
    return text + (":causal" if "causal: true" in block else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("db", help="an evo.db with measured runs")
    args = parser.parse_args()
    if not os.path.isfile(args.db):
        sys.exit(f"measured_fitness_csv: no database at {args.db}")
    db = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    rows = db.execute("select c.genome, e.blob from evaluations e join candidates c on c.id = e.candidate_id "
                      "where e.status = 1 and e.estimated = 0").fetchall()
    times, resources, gpus = {}, {}, set()
    for genome, blob in rows:
        text = decode(blob)
        gpus.add(re.search(r'gpu_name: "([^"]*)"', text).group(1))
        registers = int(re.search(r"registers: (\d+)", text).group(1))
        static = re.search(r"static_smem_bytes: (\d+)", text)
        genes = genome.split(":", 1)[1]
        for m in re.finditer(r"shapes \{\s*shape \{(.*?)\}\s*median_us: ([0-9.e+-]+)", text, re.S):
            key = (shape_text(m.group(1)), genes)
            times.setdefault(key, []).append(float(m.group(2)))
            resources[key] = (registers, int(static.group(1)) if static else 0)
    if len(gpus) > 1:
        sys.exit(f"measured_fitness_csv: measurements from {len(gpus)} cards ({', '.join(sorted(gpus))}); "
                 "give a database of one")
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["shape", "genome", "registers", "static_smem_bytes", "median_us"])
    for key in sorted(times, key=lambda k: (k[0], statistics.median(times[k]), k[1])):
        out.writerow([key[0], key[1], *resources[key], f"{statistics.median(times[key]):.3f}"])
    print(f"measured_fitness_csv: {len(times)} rows from {len(rows)} evaluations on {', '.join(gpus) or 'no card'}",
          file=sys.stderr)


if __name__ == "__main__":
    main()

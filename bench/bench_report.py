"""Turns measured rows into the printed tables and the JSON document. No torch here.

A row is a plain dict:
    {"shape": "1,8,512,64", "causal": false, "floors": {"compute_us", "memory_us", "floor_us"},
     "kernels": {name: {"graph_us", "launch_us", "rel_l2", "note", "config"}}}
A figure that could not be measured is None and prints as "n/a"; "note" says why. "launch_clock" and
"graph_clock", where present, are bench_clocks.summarize's account of the SM clock while it was timed.
"variant", where present, says the kernel did not run its native path (EXPANDED_KV: an SDPA backend
that refused grouped-query heads, run on K/V expanded to every query head); its figures carry a "*".
A packed variable-length batch's row has "varlen": {"seq_q": [...], "seq_k": [...]}; its "shape" is evo's
varlen text. Kernels of EXTRA_KERNELS (flash_attn's varlen function) get columns only where a row has them.
"""
from __future__ import annotations

import json
import math

# "evolved" is the library as exported (PDL allowed), "evolved_plain" the same kernel launched plainly.
KERNELS = ("evolved", "evolved_plain", "cudnn", "flash", "triton")
# Peers that run only for some rows (flash_attn: packed batches, where the package is installed): a column
# after the others wherever any row has one.
EXTRA_KERNELS = ("flash_attn",)
KERNEL_TITLES = {"evolved": "evolved", "evolved_plain": "ev plain", "cudnn": "cuDNN", "flash": "flash",
                 "triton": "Triton", "flash_attn": "flash_attn"}
SDPA_KERNELS = ("cudnn", "flash")
METHODS = (("graph_us", "per-call median by CUDA-graph replay"),
           ("launch_us", "per-launch median of event-timed single calls, L2 flushed before each"))
# The correctness gate's relative-L2 bounds per dtype (worker/gate_thresholds.h says how bf16's
# follows from its 8 significant bits against fp16's 11).
REL_L2_LIMITS = {"fp16": 2e-3, "bf16": 1.6e-2}
REL_L2_LIMIT = REL_L2_LIMITS["fp16"]
# The variant of an SDPA peer that refused enable_gqa: K and V repeat_interleave'd to every query head
# once, before the timed calls (the expansion's own time is not in its figures).
EXPANDED_KV = "expanded kv"
VARIANT_MARK = "*"
# What the peers run on a packed variable-length batch (compare_sdpa.make_varlen_candidates; the notes
# column says it again per row).
VARLEN_LEGEND = ("packed batches: L0+L1+...xHxD (Lq/Lk where a sequence's query and key lengths differ), one "
                 "varlen batch; evolved, Triton and flash_attn run it packed (cu_seqlens), cuDNN once on the batch "
                 "padded to its longest sequence with a mask giving each sequence its own keys, flash one SDPA call "
                 "per sequence; padding is not timed and only the valid rows are checked")


def columns(results: list[dict]) -> tuple:
    """The kernels the tables show: KERNELS always, then each of EXTRA_KERNELS that some row measured."""
    extra = tuple(k for k in EXTRA_KERNELS if any(k in row.get("kernels", {}) for row in results))
    return KERNELS + extra


def rel_l2_ok(value, dtype: str = "fp16") -> bool:
    """Within the tolerance of the inputs' dtype; NaN (unwritten or poisoned output) is never ok."""
    return value is not None and not math.isnan(value) and value <= REL_L2_LIMITS[dtype]


def fmt_us(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.1f}" if value >= 100 else f"{value:.2f}"


def fmt_ratio(value) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def fmt_rel_l2(value, dtype: str = "fp16") -> str:
    if value is None:
        return "n/a"
    text = "nan" if math.isnan(value) else f"{value:.1e}"
    return text if rel_l2_ok(value, dtype) else text + " FAIL"


def _figure(row: dict, kernel: str, field: str):
    return row.get("kernels", {}).get(kernel, {}).get(field)


def ratios(row: dict, field: str) -> dict:
    """The evolved kernel, as exported and launched plainly, over the faster SDPA backend and over
    Triton, for one timing method (None when unmeasured)."""
    sdpa = [v for v in (_figure(row, k, field) for k in SDPA_KERNELS) if v is not None]
    best_sdpa = min(sdpa) if sdpa else None
    triton = _figure(row, "triton", field)

    def over(a, b):
        return a / b if a is not None and b is not None else None
    evolved, plain = _figure(row, "evolved", field), _figure(row, "evolved_plain", field)
    floor = row.get("floors", {}).get("floor_us")
    if floor is not None and (math.isnan(floor) or floor <= 0):
        floor = None
    return {
        "evolved_over_best_sdpa": over(evolved, best_sdpa),
        "evolved_over_triton": over(evolved, triton),
        "plain_over_best_sdpa": over(plain, best_sdpa),
        "plain_over_triton": over(plain, triton),
        # The evolved kernel against the larger of its floors (decode shapes: the memory floor).
        "evolved_over_floor": over(evolved, floor),
    }


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    """A pipe table (valid Markdown) with columns padded to their widest cell."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)] if rows else [len(h) for h in headers]
    def line(cells):
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    out = [line(headers), "| " + " | ".join("-" * w for w in widths) + " |"]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


def _timing_cell(row: dict, kernel: str, field: str) -> str:
    text = fmt_us(_figure(row, kernel, field))
    return text + VARIANT_MARK if _figure(row, kernel, "variant") and text != "n/a" else text


def timing_table(results: list[dict], field: str) -> str:
    kernels = columns(results)
    headers = ["B,H,S,D", "causal"] + [f"{KERNEL_TITLES[k]} µs" for k in kernels] + \
              ["ev/best SDPA", "ev/Triton", "plain/best SDPA", "floor µs", "ev/floor"]
    rows = []
    for row in results:
        r = ratios(row, field)
        rows.append([row["shape"], str(int(row["causal"]))] +
                    [_timing_cell(row, k, field) for k in kernels] +
                    [fmt_ratio(r["evolved_over_best_sdpa"]), fmt_ratio(r["evolved_over_triton"]),
                     fmt_ratio(r["plain_over_best_sdpa"]), fmt_us(row.get("floors", {}).get("floor_us")),
                     fmt_ratio(r["evolved_over_floor"])])
    return render_table(headers, rows)


def legend_lines(results: list[dict]) -> list[str]:
    """What the shape spellings and marks in the tables mean, where any row needs it."""
    lines = []
    dense = [row for row in results if not row.get("varlen")]
    if any(":kv" in row["shape"] or row["shape"].count(",") == 4 for row in dense):
        lines.append("shapes: B,H,S,D, or B,H,Sq,Sk,D where the query and key lengths differ; :kvN = N K/V heads "
                     "shared by the H query heads (grouped-query); causal with Sq < Sk is bottom-right aligned")
    if len(dense) < len(results):
        lines.append(VARLEN_LEGEND)
    if any(_figure(row, k, "variant") for row in results for k in columns(results)):
        lines.append(f"{VARIANT_MARK} = not the backend's native path: it refused enable_gqa and ran on K/V "
                     f"expanded to every query head ({EXPANDED_KV}; the expansion is not timed; see the notes)")
    return lines


def accuracy_table(results: list[dict]) -> str:
    kernels = columns(results)
    headers = ["B,H,S,D", "causal"] + [f"rel-L2 {KERNEL_TITLES[k]}" for k in kernels] + ["Triton winner", "notes"]
    rows = []
    for row in results:
        notes = "; ".join(f"{KERNEL_TITLES[k]}: {_figure(row, k, 'note')}"
                          for k in kernels if _figure(row, k, "note"))
        rows.append([row["shape"], str(int(row["causal"]))] +
                    [fmt_rel_l2(_figure(row, k, "rel_l2"), row.get("dtype", "fp16")) for k in kernels] +
                    [_figure(row, "triton", "config") or "n/a", notes])
    return render_table(headers, rows)


def fmt_clock(clock) -> str:
    """"lowest/median MHz", then "cap" where the power cap held the clock down and "slow" where a
    thermal or hardware slowdown did."""
    if not clock:
        return "n/a"
    text = f"{clock['clock_mhz_min']:.0f}/{clock['clock_mhz_median']:.0f}"
    if clock.get("power_capped"):
        text += " cap"
    if clock.get("slowdown"):
        text += " slow"
    return text


def clock_table(results: list[dict], field: str) -> str:
    kernels = columns(results)
    headers = ["B,H,S,D", "causal"] + [f"{KERNEL_TITLES[k]} MHz" for k in kernels]
    rows = [[row["shape"], str(int(row["causal"]))] + [fmt_clock(_figure(row, k, field)) for k in kernels]
            for row in results]
    return render_table(headers, rows)


def floors_table(results: list[dict]) -> str:
    headers = ["B,H,S,D", "causal", "GFLOP", "MiB moved", "compute floor µs", "memory floor µs"]
    rows = [[row["shape"], str(int(row["causal"])), f"{row['gflop']:.3f}", f"{row['mib']:.1f}",
             fmt_us(row["floors"]["compute_us"]), fmt_us(row["floors"]["memory_us"])] for row in results]
    return render_table(headers, rows)


def header_lines(env: dict) -> list[str]:
    return [
        f"GPU: {env.get('gpu', 'n/a')} ({env.get('sm_count', '?')} SMs)",
        f"torch {env.get('torch', 'n/a')} (CUDA {env.get('cuda', 'n/a')}), cuDNN {env.get('cudnn', 'n/a')}, "
        f"Triton {env.get('triton', 'n/a')}" + (f", flash_attn {env['flash_attn']}" if env.get("flash_attn") else ""),
        f"inputs and outputs: {env.get('dtype', 'fp16')}",
        f"measured rates: fp16 matmul {env.get('matmul_tflops', float('nan')):.1f} TFLOP/s, "
        f"device copy {env.get('copy_gbps', float('nan')):.0f} GB/s",
        f"empty kernel: {fmt_us(env.get('empty_graph_us'))} µs per call by graph replay, "
        f"{fmt_us(env.get('empty_launch_us'))} µs per plain launch (event-timed)",
    ]


def render_report(env: dict, results: list[dict]) -> str:
    parts = ["\n".join(header_lines(env)), ""]
    legend = legend_lines(results)
    if legend:
        parts += legend + [""]
    for field, title in METHODS:
        parts += [f"## {title} (µs)", timing_table(results, field), ""]
    parts += ["## SM clock while each graph replay ran (lowest/median sample; cap = held down by the power "
              "cap, slow = by a thermal or hardware slowdown)", clock_table(results, "graph_clock"), ""]
    dtype = env.get("dtype", "fp16")
    parts += ["## correctness vs float32 reference (%s: limit %.0e) and Triton autotune winner"
              % (dtype, REL_L2_LIMITS[dtype]),
              accuracy_table(results), "", "## floors per shape", floors_table(results)]
    return "\n".join(parts) + "\n"


def json_document(env: dict, results: list[dict]) -> dict:
    """Everything printed plus the ratios, with NaN spelled as null so that any JSON reader accepts it."""
    def clean(value):
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value
    rows = []
    for row in results:
        enriched = dict(row)
        enriched["ratios"] = {field: ratios(row, field) for field, _ in METHODS}
        enriched["accuracy_ok"] = {k: rel_l2_ok(_figure(row, k, "rel_l2"), row.get("dtype", "fp16"))
                                   for k in KERNELS + EXTRA_KERNELS if _figure(row, k, "rel_l2") is not None}
        rows.append(enriched)
    return clean({"environment": env, "rel_l2_limit": REL_L2_LIMITS[env.get("dtype", "fp16")],
                  "methods": {field: title for field, title in METHODS}, "results": rows})


def write_json(path: str, env: dict, results: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(json_document(env, results), handle, indent=2, ensure_ascii=False)
        handle.write("\n")

"""Turns measured rows into the printed tables and the JSON document. No torch here.

A row is a plain dict:
    {"shape": "1,8,512,64", "causal": false, "floors": {"compute_us", "memory_us", "floor_us"},
     "kernels": {name: {"graph_us", "launch_us", "rel_l2", "note", "config"}}}
A figure that could not be measured is None and prints as "n/a"; "note" says why. "launch_clock" and
"graph_clock", where present, are bench_clocks.summarize's account of the SM clock while it was timed.
"variant", where present, says the kernel did not run its native path (EXPANDED_KV: an SDPA backend
that refused grouped-query heads, run on K/V expanded to every query head); its figures carry a "*".
A packed variable-length batch's row has "varlen": {"seq_q": [...], "seq_k": [...]}; its "shape" is evo's
varlen text. Kernels of EXTRA_KERNELS (flash_attn's varlen function, the evolved fp16 kernel of FP8 rows)
get columns only where a row has them.

An FP8 row ("dtype": "e4m3") times the evolved kernel and Triton on e4m3 inputs and, as 16-bit
baselines, SDPA and the evolved fp16 kernel on the fp16 draws they were quantized from. Each of its
kernels has "dtype", the inputs it ran on, and two errors besides "rel_l2": "rel_l2_quantized" against
the float32 reference of the dequantized inputs (byte * scale) and "rel_l2_fp16" against that of the
fp16 draws; "rel_l2" is the one of its own inputs, held to its dtype's limit. Its "floors" use the
measured e4m3 matmul rate and 1-byte inputs; "fp8_quantizer", where present, counts the bytes and
scales in which the library's evo_attention_quantize_fp8 differs from the bench's torch rule.
"""
from __future__ import annotations

import json
import math

# "evolved" is the library as exported (PDL allowed), "evolved_plain" the same kernel launched plainly.
KERNELS = ("evolved", "evolved_plain", "cudnn", "flash", "triton")
# Peers that run only for some rows (flash_attn: packed batches, where the package is installed): a column
# after the others wherever any row has one.
EXTRA_KERNELS = ("flash_attn", "evolved_fp16")
KERNEL_TITLES = {"evolved": "evolved", "evolved_plain": "ev plain", "cudnn": "cuDNN", "flash": "flash",
                 "triton": "Triton", "flash_attn": "flash_attn", "evolved_fp16": "ev fp16"}
SDPA_KERNELS = ("cudnn", "flash")
METHODS = (("graph_us", "per-call median by CUDA-graph replay"),
           ("launch_us", "per-launch median of event-timed single calls, L2 flushed before each"))
# The correctness gate's relative-L2 bounds per dtype (worker/gate_thresholds.h says how bf16's
# follows from its 8 significant bits against fp16's 11).
# e4m3's is against the dequantized inputs' reference, and follows from P rounded to e4m3 before P @ V
# (kernel_templates/attention/tolerances.h).
REL_L2_LIMITS = {"fp16": 2e-3, "bf16": 1.6e-2, "e4m3": 0.0625}
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


def kernel_dtype(row: dict, kernel: str) -> str:
    """The inputs a kernel ran on: its own "dtype" where it has one (an FP8 row's 16-bit peers), else the row's."""
    return _figure(row, kernel, "dtype") or row.get("dtype", "fp16")


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
                    [fmt_rel_l2(_figure(row, k, "rel_l2"), kernel_dtype(row, k)) for k in kernels] +
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


# What an FP8 run's kernels get (compare_sdpa's e4m3 rows).
FP8_INPUTS = ("e4m3 Q, K, V with a float scale per (batch, head), quantized from fp16 draws, V transposed; bf16 "
              "output (evolved, ev plain, Triton); cuDNN, flash and ev fp16 run the fp16 draws")


def header_lines(env: dict) -> list[str]:
    dtype = env.get("dtype", "fp16")
    fp8_rate = (f"e4m3 matmul {env['fp8_matmul_tflops']:.1f} TFLOP/s (torch._scaled_mm), "
                if env.get("fp8_matmul_tflops") is not None else "")
    return [
        f"GPU: {env.get('gpu', 'n/a')} ({env.get('sm_count', '?')} SMs)",
        f"torch {env.get('torch', 'n/a')} (CUDA {env.get('cuda', 'n/a')}), cuDNN {env.get('cudnn', 'n/a')}, "
        f"Triton {env.get('triton', 'n/a')}" + (f", flash_attn {env['flash_attn']}" if env.get("flash_attn") else ""),
        f"inputs and outputs: {FP8_INPUTS if dtype == 'e4m3' else dtype}",
        f"measured rates: fp16 matmul {env.get('matmul_tflops', float('nan')):.1f} TFLOP/s, {fp8_rate}"
        f"device copy {env.get('copy_gbps', float('nan')):.0f} GB/s",
        f"empty kernel: {fmt_us(env.get('empty_graph_us'))} µs per call by graph replay, "
        f"{fmt_us(env.get('empty_launch_us'))} µs per plain launch (event-timed)",
    ]


# An FP8 row's peers in the FP8 table's order: the FP8 kernels, then the 16-bit baselines.
FP8_PEERS = ("evolved", "evolved_plain", "triton", "cudnn", "flash", "evolved_fp16")
# The reference each input dtype is checked against in an FP8 row (its "rel_l2").
OWN_REFERENCE = {"e4m3": "rel_l2_quantized", "fp16": "rel_l2_fp16"}


def _over(a, b):
    return a / b if a is not None and b else None


def fp8_peer_figures(row: dict) -> list[dict]:
    """Per kernel an FP8 row ran, in FP8_PEERS order, by graph replay: its time, its rate of the row's
    matrix FLOPs, the FP8 compute floor (those FLOPs at the measured e4m3 matmul rate), the evolved FP8
    kernel's time over its, and its two errors."""
    evolved = _figure(row, "evolved", "graph_us")
    figures = []
    for kernel in FP8_PEERS:
        if kernel not in row.get("kernels", {}):
            continue
        us = _figure(row, kernel, "graph_us")
        figures.append({"kernel": kernel, "inputs": kernel_dtype(row, kernel), "graph_us": us,
                        "tflops": _over(row["gflop"] * 1e3, us), "fp8_floor_us": row["floors"]["compute_us"],
                        "evolved_fp8_over_peer": _over(evolved, us),
                        "rel_l2_quantized": _figure(row, kernel, "rel_l2_quantized"),
                        "rel_l2_fp16": _figure(row, kernel, "rel_l2_fp16")})
    return figures


def _fp8_error_cell(figure: dict, field: str) -> str:
    """The error against the kernel's own reference is held to its dtype's limit; the other is shown plain."""
    if OWN_REFERENCE.get(figure["inputs"]) == field:
        return fmt_rel_l2(figure[field], figure["inputs"])
    value = figure[field]
    return "n/a" if value is None else ("nan" if math.isnan(value) else f"{value:.1e}")


def fp8_table(results: list[dict]) -> str:
    headers = ["B,H,S,D", "causal", "peer", "inputs", "graph µs", "TFLOP/s", "FP8 floor µs", "ev FP8/peer",
               "rel-L2 vs dequantized", "rel-L2 vs fp16"]
    rows = []
    for row in (r for r in results if r.get("dtype") == "e4m3"):
        for f in fp8_peer_figures(row):
            rows.append([row["shape"], str(int(row["causal"])), KERNEL_TITLES[f["kernel"]], f["inputs"],
                         fmt_us(f["graph_us"]), "n/a" if f["tflops"] is None else f"{f['tflops']:.0f}",
                         fmt_us(f["fp8_floor_us"]), fmt_ratio(f["evolved_fp8_over_peer"]),
                         _fp8_error_cell(f, "rel_l2_quantized"), _fp8_error_cell(f, "rel_l2_fp16")])
    return render_table(headers, rows)


def quantizer_text(check: dict) -> str:
    """An FP8 row's quantizer check in words: its counts, or why there are none."""
    if check.get("note"):
        return f"{check['lib']}: {check['note']}"
    return (f"{check['lib']}: {check['bytes_differ']} of {check['bytes']} bytes and {check['scales_differ']} of "
            f"{check['scales']} scales differ from the torch rule")


def quantizer_lines(results: list[dict]) -> list[str]:
    """Once per shape and library: how the library's quantizer compares with the bench's torch rule."""
    lines, seen = [], set()
    for row in results:
        check = row.get("fp8_quantizer")
        if not check or (row["shape"], check["lib"]) in seen:
            continue
        seen.add((row["shape"], check["lib"]))
        lines.append(f"- {row['shape']}: {quantizer_text(check)}")
    return lines


def fp8_section(results: list[dict]) -> list[str]:
    """The FP8 rows' own table, per peer, and the quantizer check; nothing where no row is FP8."""
    if not any(row.get("dtype") == "e4m3" for row in results):
        return []
    parts = ["## FP8 rows per peer, by CUDA-graph replay (rel-L2 vs dequantized: against the float32 reference of "
             "byte * scale, the e4m3 kernels' own, limit %.0e; vs fp16: against that of the fp16 draws, the 16-bit "
             "peers' own, limit %.0e)" % (REL_L2_LIMITS["e4m3"], REL_L2_LIMITS["fp16"]), fp8_table(results), ""]
    lines = quantizer_lines(results)
    if lines:
        parts += ["evo_attention_quantize_fp8 against the bench's torch quantization (bytes and scales compared bit "
                  "for bit):"] + lines + [""]
    return parts


def accuracy_title(dtype: str) -> str:
    if dtype == "e4m3":
        return ("## correctness vs float32 reference (each kernel against its own inputs': e4m3 vs the dequantized "
                "inputs, limit %.0e; fp16 vs the fp16 draws, limit %.0e) and Triton autotune winner"
                % (REL_L2_LIMITS["e4m3"], REL_L2_LIMITS["fp16"]))
    return ("## correctness vs float32 reference (%s: limit %.0e) and Triton autotune winner"
            % (dtype, REL_L2_LIMITS[dtype]))


def render_report(env: dict, results: list[dict]) -> str:
    parts = ["\n".join(header_lines(env)), ""]
    legend = legend_lines(results)
    if legend:
        parts += legend + [""]
    for field, title in METHODS:
        parts += [f"## {title} (µs)", timing_table(results, field), ""]
    parts += ["## SM clock while each graph replay ran (lowest/median sample; cap = held down by the power "
              "cap, slow = by a thermal or hardware slowdown)", clock_table(results, "graph_clock"), ""]
    parts += fp8_section(results)
    parts += [accuracy_title(env.get("dtype", "fp16")),
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
        enriched["accuracy_ok"] = {k: rel_l2_ok(_figure(row, k, "rel_l2"), kernel_dtype(row, k))
                                   for k in KERNELS + EXTRA_KERNELS if _figure(row, k, "rel_l2") is not None}
        if row.get("dtype") == "e4m3":
            enriched["fp8_peers"] = fp8_peer_figures(row)
        rows.append(enriched)
    return clean({"environment": env, "rel_l2_limit": REL_L2_LIMITS[env.get("dtype", "fp16")],
                  "methods": {field: title for field, title in METHODS}, "results": rows})


def write_json(path: str, env: dict, results: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(json_document(env, results), handle, indent=2, ensure_ascii=False)
        handle.write("\n")

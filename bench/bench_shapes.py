"""Attention problem shapes for the side-by-side bench, and the work each one does.

Pure Python (no torch) so that parsing and the floor arithmetic are testable anywhere.

A shape is [batch, heads, seq, head_dim] for Q and O and [batch, heads_kv, seq_k, head_dim] for K
and V; query head h reads KV head h // (heads // heads_kv). Spellings accepted (evo's grammar, with
commas allowed in place of the x's):
    BxHxSxD  or  B,H,S,D                 seq_k = seq, heads_kv = heads
    BxHxSqxSkxD  or  B,H,Sq,Sk,D         query and key lengths apart
    ... then ":kvN"                      N K/V heads (grouped-query attention; N divides H)
e.g. "1x32x512x4096x128:kv8". `Shape.key` prints evo's canonical spelling: the dims (Sq and Sk apart
only where they differ), then ":kvN" only where N != H. Causality and the element type are given
apart in the bench (--causal, --dtype; the "causal" and "dtype" fields of a dispatch entry); evo's
":causal" suffix and its dtype suffixes (":fp16", ":bf16", ":e4m3") are read only by parse_problem
(dispatch files, workload files).

e4m3 (FP8) problems have Q, K and V of one byte an element, each (batch, head) with a float scale
(value = byte * scale), V transposed and its rows padded to fp8_pitch(seq_k) bytes, and a bf16 O:
the layout of the exported library's evo_attention_forward_fp8.

A packed variable-length batch (FlashAttention's varlen layout) is a VarlenShape, spelled with three
'x'-separated fields, the first the per-sequence lengths joined by '+':
    L0+L1+...xHxD                        each item L (query and key length L) or Lq/Lk (Lq queries
                                         against Lk keys, a chunk over a cache); one sequence is L/L
    ... then ":kvN"                      as above
e.g. "17+250+600+1100+1500+2000+2500+3000x32x128:kv8"; the batch is the number of items. Q and O are
[total_q, heads, head_dim], K and V [total_k, heads_kv, head_dim], sequence b's rows at its offset in
cu_seqlens (0, L0, L0+L1, ...). A text with three 'x'-separated fields whose first holds a '+' or a
'/' is varlen; the dense spellings above have four or five (or none, in the comma forms).

Causal with seq_q == seq_k is top-left (row i sees keys 0..i); with seq_q < seq_k bottom-right (row i
sees keys 0..seq_k - seq_q + i, FlashAttention's convention); with seq_q > seq_k it is refused. A
varlen batch is causal per sequence, bottom-right aligned in each, and refused where any sequence
has more queries than keys.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

# The suite of issue 5: two launch-bound shapes, one mid-size, two long-sequence shapes.
DEFAULT_SHAPES = ("1,8,512,64", "2,8,512,64", "16,16,512,64", "4,16,2048,64", "2,16,4096,128")

SUPPORTED_HEAD_DIMS = (64, 128)
DTYPES = ("fp16", "bf16", "e4m3")
# Bytes of one element of Q, K and V, and the type of O, per dtype (e4m3 writes a bf16 O).
ELEMENT_BYTES = {"fp16": 2, "bf16": 2, "e4m3": 1}
OUTPUT_DTYPES = {"fp16": "fp16", "bf16": "bf16", "e4m3": "bf16"}
# The transposed FP8 V's rows (one per head_dim index) start 16 bytes apart, as TMA needs.
FP8_ROW_ALIGN = 16

# --suite NAME: the workload file bench/workloads/NAME.json, the one `evoctl submit --workload`
# tunes for (llama3-8b: bf16, 32 query heads sharing 8 KV heads, head dim 128; its decode shapes
# are non-causal, which for one query row is what bottom-right causal means; llama3-8b-packed: the
# same heads, one packed causal batch of 8 prompts of 17 to 3000 tokens; fp8: the FP8 acceptance
# shapes in e4m3). Each shape runs only with the causal setting the file gives it, in the file's dtype.
WORKLOADS_DIR = Path(__file__).resolve().parent / "workloads"


def read_workload(path) -> dict:
    """A workload file as {"dtype": ..., "problems": ((shape text without suffixes but :kvN,
    causal), ...)}; ShapeError for one the bench cannot run (a shape of another dtype).

    An e4m3 workload may hold fp16 twins of its shapes (the same dims and causal setting): the
    search tunes them so that the table has an fp16 kernel for the "ev fp16" column of each e4m3
    row, which is where the bench runs them; they are no rows of their own."""
    doc = json.loads(Path(path).read_text())
    dtype = doc.get("dtype", "fp16")
    default_causal = bool(doc.get("causal", False))
    problems, twins = [], []
    for entry in doc["shapes"]:
        dims, *suffixes = entry["shape"].split(":")
        causal, kept, twin = default_causal, [], False
        for s in suffixes:
            if s in ("causal", "nc"):
                causal = s == "causal"
            elif s in DTYPES:
                twin = (dtype, s) == ("e4m3", "fp16")
                if s != dtype and not twin:
                    raise ShapeError(f"workload {path}: '{entry['shape']}' is {s}, the bench runs one dtype ({dtype})"
                                     + (", with fp16 twins of its shapes where it is e4m3" if dtype == "e4m3" else ""))
            else:
                kept.append(s)
        (twins if twin else problems).append((":".join([dims] + kept), causal))
    for problem in twins:
        if problem not in problems:
            raise ShapeError(f"workload {path}: the fp16 '{problem[0]}'{' causal' if problem[1] else ''} "
                             f"twins no e4m3 shape of the file (the bench runs it in that shape's row)")
    return {"dtype": dtype, "problems": tuple(problems)}


class ShapeError(ValueError):
    """A shape or causal flag given on the command line or in a dispatch file is malformed."""


@dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    seq: int            # seq_q: the query (and output) length
    head_dim: int
    heads_kv: int | None = None   # None: heads (no grouping)
    seq_k: int | None = None      # None: seq

    def __post_init__(self):
        # Normalised so that Shape(1, 8, 512, 64) == Shape(1, 8, 512, 64, 8, 512) (dispatch lookups).
        if self.heads_kv is None:
            object.__setattr__(self, "heads_kv", self.heads)
        if self.seq_k is None:
            object.__setattr__(self, "seq_k", self.seq)

    @property
    def is_varlen(self) -> bool:
        """False: one length for every batch entry (VarlenShape is the packed kind)."""
        return False

    @property
    def seq_q(self) -> int:
        return self.seq

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.heads // self.heads_kv

    @property
    def is_gqa(self) -> bool:
        return self.heads_kv != self.heads

    @property
    def equal_lengths(self) -> bool:
        return self.seq == self.seq_k

    def _dims(self, sep: str) -> str:
        seqs = [self.seq] if self.equal_lengths else [self.seq, self.seq_k]
        text = sep.join(str(d) for d in [self.batch, self.heads, *seqs, self.head_dim])
        return text + (f":kv{self.heads_kv}" if self.is_gqa else "")

    @property
    def label(self) -> str:
        """The tables' spelling: B,H,S,D (or B,H,Sq,Sk,D), then :kvN where it applies."""
        return self._dims(",")

    @property
    def key(self) -> str:
        """evo's canonical spelling (BxHxSxD or BxHxSqxSkxD, then :kvN), as evoctl and dispatch files use."""
        return self._dims("x")


@dataclass(frozen=True)
class VarlenShape:
    """A packed batch of sequences of their own lengths: Q and O [total_q, heads, head_dim], K and V
    [total_k, heads_kv, head_dim], sequence b's (seq_q, seq_k) = seqs[b]."""
    seqs: tuple                   # ((seq_q, seq_k), ...) per sequence, in packing order
    heads: int
    head_dim: int
    heads_kv: int | None = None   # None: heads (no grouping)

    def __post_init__(self):
        object.__setattr__(self, "seqs", tuple((int(q), int(k)) for q, k in self.seqs))
        if self.heads_kv is None:
            object.__setattr__(self, "heads_kv", self.heads)

    @property
    def is_varlen(self) -> bool:
        return True

    @property
    def batch(self) -> int:
        return len(self.seqs)

    @property
    def seqlens_q(self) -> tuple:
        return tuple(q for q, _ in self.seqs)

    @property
    def seqlens_k(self) -> tuple:
        return tuple(k for _, k in self.seqs)

    @property
    def total_q(self) -> int:
        return sum(self.seqlens_q)

    @property
    def total_k(self) -> int:
        return sum(self.seqlens_k)

    @property
    def max_seq_q(self) -> int:
        return max(self.seqlens_q)

    @property
    def max_seq_k(self) -> int:
        return max(self.seqlens_k)

    @property
    def cu_seqlens_q(self) -> tuple:
        """batch + 1 offsets of the sequences' first query rows: 0, Lq0, Lq0 + Lq1, ..., total_q."""
        return _cumulative(self.seqlens_q)

    @property
    def cu_seqlens_k(self) -> tuple:
        return _cumulative(self.seqlens_k)

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.heads // self.heads_kv

    @property
    def is_gqa(self) -> bool:
        return self.heads_kv != self.heads

    @property
    def equal_lengths(self) -> bool:
        """Every sequence has as many queries as keys."""
        return all(q == k for q, k in self.seqs)

    @property
    def key(self) -> str:
        """evo's canonical spelling: the lengths (Lq/Lk only where they differ), heads, head_dim, then
        :kvN only where N != H."""
        items = "+".join(str(q) if q == k and len(self.seqs) > 1 else f"{q}/{k}" for q, k in self.seqs)
        return f"{items}x{self.heads}x{self.head_dim}" + (f":kv{self.heads_kv}" if self.is_gqa else "")

    @property
    def label(self) -> str:
        """The tables' spelling: the canonical one."""
        return self.key


def _cumulative(lengths) -> tuple:
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    return tuple(offsets)


_GRAMMAR = ("B,H,S,D or B,H,Sq,Sk,D (or BxHxSxD, BxHxSqxSkxD) with positive integers, or a packed batch "
            "L0+L1+...xHxD (each L a length or Lq/Lk), then optionally :kvN")


def _parse_suffixes(text: str, suffixes: list[str]) -> tuple[int | None, bool | None, str | None]:
    """(heads_kv, causal, dtype) that ":kvN", ":causal" and a dtype (":bf16", ":e4m3", ":fp16") name,
    None where absent."""
    heads_kv, causal, dtype = None, None, None
    for suffix in suffixes:
        match = re.fullmatch(r"kv(\d+)", suffix)
        if match and heads_kv is None:
            heads_kv = int(match.group(1))
        elif suffix == "causal" and causal is None:
            causal = True
        elif suffix in DTYPES and dtype is None:
            dtype = suffix
        elif match or suffix == "causal":
            raise ShapeError(f"bad shape '{text}': ':{suffix}' given twice")
        elif suffix in DTYPES:
            raise ShapeError(f"bad shape '{text}': two dtypes (':{dtype}', ':{suffix}')")
        else:
            raise ShapeError(f"bad shape '{text}': unknown suffix ':{suffix}' (expected :kvN, :causal or a dtype: "
                             f"{dtype_choices()})")
    return heads_kv, causal, dtype


def dtype_choices() -> str:
    """"fp16, bf16 or e4m3": the accepted dtypes, for error messages."""
    return ", ".join(DTYPES[:-1]) + " or " + DTYPES[-1]


def fp8_pitch(seq_k: int) -> int:
    """The transposed FP8 V's row length in bytes: seq_k rounded up to FP8_ROW_ALIGN."""
    return -(-seq_k // FP8_ROW_ALIGN) * FP8_ROW_ALIGN


def _check_heads(text: str, heads: int, heads_kv: int | None, head_dim: int) -> None:
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ShapeError(f"bad shape '{text}': head_dim {head_dim} is not one of {SUPPORTED_HEAD_DIMS}")
    if heads_kv is not None:
        if heads_kv <= 0:
            raise ShapeError(f"bad shape '{text}': the KV head count must be positive")
        if heads_kv > heads:
            raise ShapeError(f"bad shape '{text}': {heads_kv} KV heads for {heads} query heads (at most {heads})")
        if heads % heads_kv:
            raise ShapeError(f"bad shape '{text}': {heads_kv} KV heads do not divide {heads} query heads")


def _parse_varlen(text: str, fields: list[str], heads_kv: int | None) -> VarlenShape:
    """The three 'x'-separated fields of a packed batch: lengths, heads, head_dim."""
    lengths, heads_text, dim_text = fields
    if not heads_text.isdigit() or not dim_text.isdigit():
        raise ShapeError(f"bad shape '{text}': expected {_GRAMMAR}")
    seqs = []
    for item in lengths.split("+"):
        match = re.fullmatch(r"(\d+)(?:/(\d+))?", item)
        if not match:
            raise ShapeError(f"bad shape '{text}': sequence '{item}' is not a length L or Lq/Lk")
        seq_q = int(match.group(1))
        seq_k = int(match.group(2)) if match.group(2) is not None else seq_q
        seqs.append((seq_q, seq_k))
    heads, head_dim = int(heads_text), int(dim_text)
    if heads <= 0 or head_dim <= 0 or min(min(pair) for pair in seqs) <= 0:
        raise ShapeError(f"bad shape '{text}': every length and dimension must be positive")
    _check_heads(text, heads, heads_kv, head_dim)
    return VarlenShape(tuple(seqs), heads, head_dim, heads_kv)


def parse_problem(text: str) -> tuple[Shape | VarlenShape, bool | None, str | None]:
    """evo's problem text: a shape or a packed batch (see the module's docstring), then the suffixes
    ":kvN", ":causal" and a dtype (":bf16", ":e4m3", ":fp16") in any order, each at most once. Returns
    (shape, causal, dtype), causal and dtype None where the text does not say."""
    body, *suffixes = text.strip().lower().split(":")
    heads_kv, causal, dtype = _parse_suffixes(text, suffixes)
    fields = body.split("x")
    if len(fields) == 3 and ("+" in fields[0] or "/" in fields[0]):
        shape = _parse_varlen(text, fields, heads_kv)
    else:
        parts = re.split(r"[,x]", body)
        if len(parts) not in (4, 5) or not all(p.isdigit() for p in parts):
            raise ShapeError(f"bad shape '{text}': expected {_GRAMMAR}")
        numbers = [int(p) for p in parts]
        if len(numbers) == 4:
            batch, heads, seq_q, head_dim = numbers
            seq_k = seq_q
        else:
            batch, heads, seq_q, seq_k, head_dim = numbers
        if min(numbers) <= 0:
            raise ShapeError(f"bad shape '{text}': every dimension must be positive")
        _check_heads(text, heads, heads_kv, head_dim)
        shape = Shape(batch, heads, seq_q, head_dim, heads_kv, seq_k)
    if causal:
        check_causal(shape, True)
    return shape, causal, dtype


def parse_shape(text: str) -> Shape | VarlenShape:
    """A shape as --shapes takes it: dims and ":kvN"; causality and dtype come from --causal and --dtype."""
    shape, causal, dtype = parse_problem(text)
    if causal is not None or dtype is not None:
        raise ShapeError(f"bad shape '{text}': give causality with --causal and the element type with --dtype, "
                         f"not as ':causal' or ':bf16'")
    return shape


def check_causal(shape: Shape | VarlenShape, causal: bool) -> None:
    """Bottom-right causal with more queries than keys leaves the first rows no key: refused (for a
    packed batch, where any one sequence has more queries than keys)."""
    if not causal:
        return
    if shape.is_varlen:
        for index, (seq_q, seq_k) in enumerate(shape.seqs):
            if seq_q > seq_k:
                raise ShapeError(f"shape {shape.key}: causal with sequence {index}'s seq_q {seq_q} > seq_k {seq_k} "
                                 f"is refused (bottom-right aligned, its first {seq_q - seq_k} rows would see no key)")
        return
    if shape.seq > shape.seq_k:
        raise ShapeError(f"shape {shape.key}: causal with seq_q {shape.seq} > seq_k {shape.seq_k} is refused "
                         f"(bottom-right aligned, the first {shape.seq - shape.seq_k} rows would see no key)")


def parse_causal(text: str) -> list[bool]:
    """--causal both|0|1|true|false -> the causal settings to run, non-causal first."""
    value = text.strip().lower()
    if value == "both":
        return [False, True]
    if value in ("0", "false", "no"):
        return [False]
    if value in ("1", "true", "yes"):
        return [True]
    raise ShapeError(f"bad --causal '{text}': expected both, 0 or 1")


def suite_of(name_or_path: str) -> dict:
    """--suite's workload: a file's (a path, or a name ending in .json), else bench/workloads/NAME's."""
    if name_or_path.endswith(".json") or "/" in name_or_path:
        try:
            return read_workload(name_or_path)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ShapeError(f"--suite {name_or_path}: cannot read it as a workload file ({err})") from err
    if name_or_path not in SUITES:
        raise ShapeError(f"unknown suite '{name_or_path}': expected a workload file or one of {', '.join(SUITES)}")
    return SUITES[name_or_path]


def suite_problems(suite) -> list[tuple[Shape, list[bool]]]:
    """A suite (a name, a path or suite_of's dict) as (shape, [causal settings]) in its order."""
    if not isinstance(suite, dict):
        suite = suite_of(suite)
    return group_problems([(parse_shape(text), causal) for text, causal in suite["problems"]])


def group_problems(pairs) -> list[tuple[Shape, list[bool]]]:
    """(shape, causal) pairs -> one entry per shape (first-seen order) with its causal settings, each
    checked: the bench makes inputs once per shape and runs every causal setting on them."""
    grouped: dict[Shape, list[bool]] = {}
    for shape, causal in pairs:
        check_causal(shape, causal)
        settings = grouped.setdefault(shape, [])
        if causal not in settings:
            settings.append(causal)
    return list(grouped.items())


def _pairs(sq: int, sk: int, causal: bool) -> int:
    if not causal:
        return sq * sk
    return sq * (sk - sq) + sq * (sq + 1) // 2


def visible_pairs(shape: Shape | VarlenShape, causal: bool) -> int:
    """(query row, key) score entries one head computes: Sq*Sk, or under bottom-right causal the sum over
    rows i of min(Sk, Sk - Sq + i + 1), which for Sq <= Sk is Sq*(Sk - Sq) + Sq*(Sq + 1)/2. For a dense
    shape that is per batch entry; for a packed batch, summed over its sequences (one head's whole
    share of the batch)."""
    if causal:
        check_causal(shape, True)
    if shape.is_varlen:
        return sum(_pairs(sq, sk, causal) for sq, sk in shape.seqs)
    return _pairs(shape.seq, shape.seq_k, causal)


def attention_flops(shape: Shape | VarlenShape, causal: bool) -> float:
    """Matrix FLOPs of the forward: QK^T and PV, 2*D per visible (row, key) pair each, per query head.

    Non-causal 4*B*H*Sq*Sk*D; causal counts exactly the pairs on or below the (shifted) diagonal, which
    for Sq == Sk is the familiar (S+1)/(2S) of the full count. A packed batch: 4*H*D times the pairs
    summed over its sequences (each counted as a dense shape of batch 1 would be).
    """
    batch = 1 if shape.is_varlen else shape.batch
    return 4.0 * batch * shape.heads * visible_pairs(shape, causal) * shape.head_dim


def attention_bytes(shape: Shape | VarlenShape, dtype: str = "fp16") -> float:
    """Compulsory DRAM traffic: read Q and write O once (H heads of Sq rows), read K and V once
    (heads_kv heads of Sk rows): a KV head serves its whole group. Q, K and V have the dtype's element
    size, O its output type's (e4m3: 1-byte inputs, a 2-byte bf16 O; the scales' few bytes and V's
    row padding aside). A packed batch: the same of total_q query rows and total_k key rows
    (cu_seqlens' few bytes aside)."""
    element, output = ELEMENT_BYTES[dtype], ELEMENT_BYTES[OUTPUT_DTYPES[dtype]]
    rows_q, rows_k = (shape.total_q, shape.total_k) if shape.is_varlen else (shape.seq, shape.seq_k)
    batch = 1 if shape.is_varlen else shape.batch
    q_and_o = (element + output) * shape.heads * rows_q
    k_and_v = 2 * element * shape.heads_kv * rows_k
    return float(batch * shape.head_dim * (q_and_o + k_and_v))


def floors_us(shape: Shape | VarlenShape, causal: bool, matmul_tflops: float, copy_gbps: float,
              dtype: str = "fp16") -> dict:
    """The two lower bounds on one call, in microseconds, from measured device rates: matmul_tflops is
    the rate of the dtype's matrix products (e4m3: the FP8 one)."""
    compute = attention_flops(shape, causal) / (matmul_tflops * 1e12) * 1e6 if matmul_tflops > 0 else math.nan
    memory = attention_bytes(shape, dtype) / (copy_gbps * 1e9) * 1e6 if copy_gbps > 0 else math.nan
    return {"compute_us": compute, "memory_us": memory, "floor_us": max(compute, memory)}


# Read at import: every workload file the repository holds, by name.
SUITES = {p.stem: read_workload(p) for p in sorted(WORKLOADS_DIR.glob("*.json"))}

"""The dispatch table that maps a shape bucket to the evolved library that serves it.

File format (paths relative to the file's folder; "cu" entries are built with nvcc on first use):
    {"shapes": [{"shape": "1x8x512x64", "causal": false, "dtype": "fp16", "lib": "x.so",
                 "genome": "fa_s512_v3:..."}]}
"dtype" is "fp16" (the default, and what files written before bf16 mean), "bf16" or "e4m3" (FP8: the
library's evo_attention_forward_fp8 serves it).
"shape" is evo's shape text (bench_shapes.py): "BxHxSxD", or "BxHxSqxSkxD" with query and key lengths
apart, then ":kvN" for grouped-query heads, e.g. {"shape": "1x32x512x4096x128:kv8", "causal": true}.
evo's ":causal" and dtype suffixes (":bf16", ":e4m3") are read too, where they agree with the "causal"
and "dtype" fields (or stand for them); a disagreement is an error. Files written before grouped-query heads
(four dims, no suffix) mean heads_kv = heads and seq_k = seq, as they always did.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from bench_shapes import DTYPES, Shape, ShapeError, check_causal, dtype_choices, parse_problem


class DispatchError(ValueError):
    """The dispatch file is missing, not JSON, or an entry is malformed."""


@dataclass(frozen=True)
class DispatchEntry:
    shape: Shape
    causal: bool
    dtype: str         # "fp16", "bf16" or "e4m3"
    path: str          # absolute path of the .so (or of a .cu still to build)
    genome: str

    @property
    def needs_build(self) -> bool:
        return self.path.endswith(".cu")


class DispatchTable:
    def __init__(self, entries: list[DispatchEntry]):
        self._by_key = {}
        for entry in entries:
            key = (entry.shape, entry.causal, entry.dtype)
            if key in self._by_key:
                raise DispatchError(f"dispatch: shape {entry.shape.key} causal={int(entry.causal)} "
                                    f"dtype={entry.dtype} listed twice")
            self._by_key[key] = entry

    def lookup(self, shape: Shape, causal: bool, dtype: str = "fp16") -> DispatchEntry | None:
        return self._by_key.get((shape, causal, dtype))

    def entries(self) -> list[DispatchEntry]:
        return list(self._by_key.values())


def _parse_causal_field(value, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if value in (0, 1):
        return bool(value)
    raise DispatchError(f"{where}: 'causal' must be true/false, got {value!r}")


def _parse_dtype_field(value, where: str) -> str:
    if value in DTYPES:
        return value
    raise DispatchError(f"{where}: unknown dtype {value!r}: expected {dtype_choices()}")


def parse_dispatch(doc, base_dir: str) -> DispatchTable:
    """Validates a decoded dispatch document; base_dir anchors relative library paths."""
    if not isinstance(doc, dict) or not isinstance(doc.get("shapes"), list):
        raise DispatchError("dispatch: expected an object with a 'shapes' list")
    entries = []
    for index, item in enumerate(doc["shapes"]):
        where = f"dispatch entry {index}"
        if not isinstance(item, dict):
            raise DispatchError(f"{where}: expected an object")
        if "shape" not in item:
            raise DispatchError(f"{where}: missing 'shape'")
        try:
            shape, text_causal, text_dtype = parse_problem(str(item["shape"]))
        except ShapeError as err:
            raise DispatchError(f"{where}: {err}") from None
        causal = _parse_causal_field(item.get("causal", bool(text_causal)), where)
        dtype = _parse_dtype_field(item.get("dtype", text_dtype or "fp16"), where)
        if text_causal and not causal:
            raise DispatchError(f"{where}: shape '{item['shape']}' says causal, its 'causal' field says false")
        if text_dtype and dtype != text_dtype:
            raise DispatchError(f"{where}: shape '{item['shape']}' says {text_dtype}, its 'dtype' field {dtype}")
        try:
            check_causal(shape, causal)
        except ShapeError as err:
            raise DispatchError(f"{where}: {err}") from None
        lib = item.get("lib") or item.get("cu")
        if not isinstance(lib, str) or not lib:
            raise DispatchError(f"{where}: missing 'lib' (a .so) or 'cu' (an exported .cu)")
        path = lib if os.path.isabs(lib) else os.path.normpath(os.path.join(base_dir, lib))
        entries.append(DispatchEntry(shape, causal, dtype, path, str(item.get("genome", ""))))
    return DispatchTable(entries)


def load_dispatch(path: str) -> DispatchTable:
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    except FileNotFoundError:
        raise DispatchError(f"dispatch file not found: {path}") from None
    except json.JSONDecodeError as err:
        raise DispatchError(f"dispatch file {path} is not valid JSON: {err}") from None
    return parse_dispatch(doc, os.path.dirname(os.path.abspath(path)))

"""Which calls evo's exported kernels serve, and which built library serves a device.

Plain Python over ints and strings, with no torch import, so that the rules are tested where
there is neither torch nor a GPU, and so that torch.compile traces them inline when
`scaled_dot_product_attention` runs under dynamo (no dataclasses, no caches, no logging here).
"""
import json
import os

MANIFEST_NAME = "manifest.json"
LIBRARY_NAME = "libevo_attention.so"

# Why a call goes to torch's SDPA instead of evo: one home for each reason's text.
NOT_CUDA = "not a CUDA tensor"
NO_LIBRARY = "no evo library runs on this device"
MASK = "attn_mask given (evo takes none)"
DROPOUT = "dropout_p > 0 (evo has no dropout)"
GRAD = "inputs require grad (evo has no backward pass)"
NOT_4D = "not 4-D [batch, heads, seq, head_dim]"
MIXED_DTYPES = "query, key and value differ in dtype"
DTYPE = "dtype not tuned (evo serves float16 and bfloat16 buckets)"
SHAPES = "key and value differ in shape, or batch or head_dim differ from query's"
EMPTY = "an empty dimension"
HEADS = "query heads are not a multiple of key/value heads"
HEADS_NO_GQA = "fewer key/value heads than query heads without enable_gqa=True"
CAUSAL_LENGTHS = "is_causal with seq_q != seq_k (evo's causal mask needs equal lengths)"
NO_BUCKET = "no exported bucket of this dtype, head_dim and causality"
TOO_LARGE = "a tensor of 2^31 elements or more (the kernel indexes with 32-bit integers)"

_DTYPE_SUFFIXES = ("fp16", "bf16")


def parse_shape(text):
    """A bucket's canonical shape text as
    (batch, heads, heads_kv, seq_q, seq_k, head_dim, causal, dtype).

    The grammar is evoctl's: BxHxSxD or BxHxSqxSkxD, then in any order ':causal'/':nc',
    ':fp16'/':bf16' and ':kvN' (N key/value heads, a divisor of the query heads; evoctl prints it
    only when it differs from them); fp16, non-causal and heads_kv = heads when unsaid.
    """
    parts = text.split(":")
    dims = [int(d) for d in parts[0].split("x")]
    if len(dims) == 4:
        batch, heads, seq, head_dim = dims
        seq_q = seq_k = seq
    elif len(dims) == 5:
        batch, heads, seq_q, seq_k, head_dim = dims
    else:
        raise ValueError("shape '%s': expected BxHxSxD or BxHxSqxSkxD" % text)
    causal, dtype, heads_kv = False, "fp16", heads
    for suffix in parts[1:]:
        if suffix in ("causal", "nc"):
            causal = suffix == "causal"
        elif suffix in _DTYPE_SUFFIXES:
            dtype = suffix
        elif suffix.startswith("kv") and suffix[2:].isdigit():
            heads_kv = int(suffix[2:])
            if heads_kv < 1 or heads % heads_kv != 0:
                raise ValueError("shape '%s': %d key/value heads do not divide %d query heads" % (
                    text, heads_kv, heads))
        else:
            raise ValueError("shape '%s': unknown suffix '%s'" % (text, suffix))
    return (batch, heads, heads_kv, seq_q, seq_k, head_dim, causal, dtype)


def served_kinds(shape_texts):
    """The (dtype, head_dim, causal) kinds a table's buckets were tuned and checked on, sorted.

    The exported entry point would serve more (any head dim a genome allows), but only these
    passed evo's correctness gate with the table's genomes; other calls go to SDPA. Key/value
    heads and sequence lengths are not part of a kind: the kernel serves any group size
    (heads % heads_kv == 0) and, causal, any seq_q <= seq_k with the same code paths. A tuple,
    not a set, so that dynamo can trace `kind in served`.
    """
    kinds = set()
    for text in shape_texts:
        _, _, _, _, _, head_dim, causal, dtype = parse_shape(text)
        kinds.add((dtype, head_dim, causal))
    return tuple(sorted(kinds))


def route(dtypes, q_shape, k_shape, v_shape, is_cuda, has_mask, dropout_p, is_causal, enable_gqa,
          needs_grad, served):
    """(reason, kv_repeat): reason None when evo serves the call, else why SDPA does.

    dtypes: the three tensors' dtype names ('fp16', 'bf16' or anything else); served: the device's
    library's served_kinds, or None where no library runs on the device. kv_repeat: how many
    times each key/value head is repeated (repeat_interleave on dim 1) so that a grouped-query
    call (enable_gqa=True, query heads a multiple of key/value heads) meets evo's kernel, which
    needs equal heads; SDPA's enable_gqa means the same grouping.
    """
    if not is_cuda:
        return NOT_CUDA, 1
    if served is None:
        return NO_LIBRARY, 1
    if has_mask:
        return MASK, 1
    if dropout_p > 0.0:
        return DROPOUT, 1
    if needs_grad:
        return GRAD, 1
    if len(q_shape) != 4 or len(k_shape) != 4 or len(v_shape) != 4:
        return NOT_4D, 1
    if dtypes[0] != dtypes[1] or dtypes[0] != dtypes[2]:
        return MIXED_DTYPES, 1
    if dtypes[0] not in _DTYPE_SUFFIXES:
        return DTYPE, 1
    batch, q_heads, seq_q, head_dim = q_shape
    if tuple(k_shape) != tuple(v_shape) or k_shape[0] != batch or k_shape[3] != head_dim:
        return SHAPES, 1
    kv_heads, seq_k = k_shape[1], k_shape[2]
    if batch == 0 or q_heads == 0 or kv_heads == 0 or seq_q == 0 or seq_k == 0 or head_dim == 0:
        return EMPTY, 1
    if q_heads % kv_heads != 0:
        return HEADS, 1
    if q_heads != kv_heads and not enable_gqa:
        return HEADS_NO_GQA, 1
    if is_causal and seq_q != seq_k:
        return CAUSAL_LENGTHS, 1
    if batch * q_heads * max(seq_q, seq_k) * head_dim >= 2 ** 31:
        return TOO_LARGE, 1
    if (dtypes[0], head_dim, bool(is_causal)) not in served:
        return NO_BUCKET, 1
    return None, q_heads // kv_heads


def shape_class(dtype, q_shape, k_shape, is_causal):
    """The calls one fallback log line stands for: sequence lengths left out, so a decode loop
    (seq_k growing each step) logs once, not once per step."""
    if len(q_shape) != 4 or len(k_shape) != 4:
        return "%s %d-D" % (dtype, len(q_shape))
    return "%s head_dim=%d %s heads=%d/%d %s" % (
        dtype, q_shape[3], "causal" if is_causal else "non-causal", q_shape[1], k_shape[1],
        "decode (seq_q=1)" if q_shape[2] == 1 else "prefill (seq_q>1)")


class CallLog:
    """Counts the calls evo served and those SDPA served (by reason), and says which
    (reason, shape class) pairs are new, so that each is logged once."""

    def __init__(self):
        self.served = 0
        self.fell_back = {}
        self._seen = set()

    def note_served(self):
        self.served += 1

    def note_fallback(self, reason, klass):
        """Counts it; True the first time this reason meets this shape class."""
        self.fell_back[reason] = self.fell_back.get(reason, 0) + 1
        key = (reason, klass)
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def snapshot(self):
        return {"served": self.served, "fell_back": dict(self.fell_back),
                "fell_back_total": sum(self.fell_back.values())}


def parse_arch(arch):
    """'sm_90a' -> (9, 0, True): major, minor, and whether the code is architecture-specific
    (the 'a' suffix: it runs on that exact compute capability only)."""
    if not arch.startswith("sm_") or len(arch) < 5:
        raise ValueError("architecture '%s': expected sm_XY or sm_XYa" % arch)
    digits = arch[3:]
    specific = digits.endswith("a")
    if specific:
        digits = digits[:-1]
    if not digits.isdigit() or len(digits) < 2:
        raise ValueError("architecture '%s': expected sm_XY or sm_XYa" % arch)
    return int(digits[:-1]), int(digits[-1]), specific


def can_run(arch, capability):
    """Whether a library built for `arch` runs on a device of `capability` (major, minor).

    An 'a' (architecture-specific) build runs on its own capability only. Any other build
    carries its SASS and its PTX (nvcc_arch_flags), so it runs on its capability and, through
    the driver's JIT of the PTX, on every later one.
    """
    major, minor, specific = parse_arch(arch)
    if specific:
        return (major, minor) == tuple(capability)
    return (major, minor) <= tuple(capability)


def pick_library(archs, capability):
    """(arch, note): the library of `archs` for a device of `capability`, and a line saying why.

    Its own architecture first (the 'a' build before the generic one); else the nearest earlier
    architecture that can run there; else (None, note): every call on it goes to SDPA.
    """
    device = "sm_%d%d" % tuple(capability)
    runnable = [a for a in archs if can_run(a, capability)]
    if not runnable:
        return None, "%s: none of the package's architectures (%s) runs here; torch SDPA serves every call" % (
            device, ", ".join(archs) or "none")
    best = max(runnable, key=parse_arch)
    major, minor, _ = parse_arch(best)
    if (major, minor) == tuple(capability):
        return best, "%s: the %s library, tuned for this architecture" % (device, best)
    return best, "%s: the %s library, the nearest architecture that runs here (its winners were tuned on %s)" % (
        device, best, best)


def nvcc_arch_flags(arch):
    """nvcc's -gencode flags for `arch`: its SASS, plus its PTX unless it is architecture-specific
    (PTX of an 'a' target cannot run elsewhere), which lets can_run's later devices JIT it."""
    major, minor, specific = parse_arch(arch)
    number = "%d%d%s" % (major, minor, "a" if specific else "")
    flags = ["-gencode", "arch=compute_%s,code=sm_%s" % (number, number)]
    if not specific:
        flags += ["-gencode", "arch=compute_%s,code=compute_%s" % (number, number)]
    return flags


def archs_to_build(archs, selection):
    """The architectures to compile at install: all of the package's, or those named in
    `selection` (EVO_KERNELS_ARCHS, comma-separated) that it holds. ValueError names any it lacks."""
    if not selection:
        return list(archs)
    wanted = [a.strip() for a in selection.split(",") if a.strip()]
    missing = [a for a in wanted if a not in archs]
    if missing:
        raise ValueError("EVO_KERNELS_ARCHS names %s; the package holds %s" % (", ".join(missing), ", ".join(archs)))
    return [a for a in archs if a in wanted]


def load_manifest(package_dir):
    """The package's manifest (evoctl export --python writes it): its libraries, each with its
    arch, the source it is built from and its buckets."""
    with open(os.path.join(package_dir, MANIFEST_NAME)) as f:
        manifest = json.load(f)
    if manifest.get("format") != 1:
        raise ValueError("%s: format %r, expected 1" % (MANIFEST_NAME, manifest.get("format")))
    return manifest


def library_served(library):
    """served_kinds of one manifest library, over all its buckets' shapes."""
    return served_kinds([s for b in library["buckets"] for s in b["shapes"]])

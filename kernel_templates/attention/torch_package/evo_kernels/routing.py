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
CAUSAL_WITH_MASK = "is_causal=True with an attn_mask (torch's SDPA refuses the pair)"
MASK = "an attn_mask other than torch.nn.attention.bias's causal_lower_right/causal_upper_left (evo takes no mask)"
DROPOUT = "dropout_p > 0 (evo has no dropout)"
GRAD = "inputs require grad (evo has no backward pass)"
NOT_4D = "not 4-D [batch, heads, seq, head_dim]"
MIXED_DTYPES = "query, key and value differ in dtype"
DTYPE = "dtype not tuned (evo serves float16 and bfloat16 buckets)"
SHAPES = "key and value differ in shape, or batch or head_dim differ from query's"
EMPTY = "an empty dimension"
HEADS = "query heads are not a multiple of key/value heads"
HEADS_NO_GQA = "fewer key/value heads than query heads without enable_gqa=True (torch's SDPA refuses it)"
CAUSAL_BIAS_LENGTHS = "a causal attn_mask (CausalBias) whose seq_len_q/seq_len_kv are not the tensors' seq_q/seq_k"
CAUSAL_SEQ_Q_LONGER = "causal with seq_q > seq_k (evo's causal mask needs seq_q <= seq_k)"
CAUSAL_TOP_LEFT = ("top-left causal (is_causal=True or causal_upper_left) with seq_q < seq_k, and evo's causal "
                   "mask is bottom-right; for a KV cache, pass "
                   "attn_mask=torch.nn.attention.bias.causal_lower_right(seq_q, seq_k) and is_causal=False")
NO_BUCKET = "no exported bucket of this dtype, head_dim and causality"
TOO_LARGE = "a tensor of 2^31 elements or more (the kernel indexes with 32-bit integers)"

# attn_mask kinds route() takes (sdpa.py classifies the mask): a torch.nn.attention.bias.CausalBias
# of variant LOWER_RIGHT or UPPER_LEFT, or any other mask; None for no mask.
LOWER_RIGHT = "lower_right"
UPPER_LEFT = "upper_left"
OTHER_MASK = "other"

# The tensors' dtypes the op takes; a table may also hold e4m3 buckets (FP8, which SDPA's
# arguments never are: such buckets are read and never chosen).
_DTYPE_SUFFIXES = ("fp16", "bf16")
_BUCKET_DTYPES = _DTYPE_SUFFIXES + ("e4m3",)


def parse_shape(text):
    """A bucket's canonical shape text as
    (batch, heads, heads_kv, seq_q, seq_k, head_dim, causal, dtype).

    The grammar is evoctl's: BxHxSxD or BxHxSqxSkxD, or a packed batch LENSxHxD (LENS: each
    sequence's length, or its query/key lengths, joined by '+': 17+300/4096); then in any order
    ':causal'/':nc', ':fp16'/':bf16' and ':kvN' (N key/value heads, a divisor of the query heads;
    evoctl prints it only when it differs from them); fp16, non-causal and heads_kv = heads when
    unsaid. A packed batch gives its sequence count as batch and its longest lengths as seq_q and
    seq_k (is_packed tells it apart).
    """
    parts = text.split(":")
    fields = parts[0].split("x")
    if is_packed(text):
        if len(fields) != 3:
            raise ValueError("shape '%s': expected LENSxHxD for a packed batch" % text)
        lengths = [[int(n) for n in seq.split("/")] for seq in fields[0].split("+")]
        if any(len(pair) > 2 or min(pair) < 0 for pair in lengths):
            raise ValueError("shape '%s': each sequence is LEN or QLEN/KLEN" % text)
        dims = [len(lengths), int(fields[1]), max(p[0] for p in lengths), max(p[-1] for p in lengths),
                int(fields[2])]
    else:
        dims = [int(d) for d in fields]
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
        elif suffix in _BUCKET_DTYPES:
            dtype = suffix
        elif suffix.startswith("kv") and suffix[2:].isdigit():
            heads_kv = int(suffix[2:])
            if heads_kv < 1 or heads % heads_kv != 0:
                raise ValueError("shape '%s': %d key/value heads do not divide %d query heads" % (
                    text, heads_kv, heads))
        else:
            raise ValueError("shape '%s': unknown suffix '%s'" % (text, suffix))
    return (batch, heads, heads_kv, seq_q, seq_k, head_dim, causal, dtype)


def is_packed(text):
    """Whether a shape text is a packed batch (several sequences joined by '+', or one with its
    query and key lengths apart: 1/4096x8x64)."""
    lengths = text.split(":")[0].split("x")[0]
    return "+" in lengths or "/" in lengths


def served_kinds(shape_texts):
    """The (dtype, head_dim, causal) kinds a table's dense buckets were tuned and checked on, sorted.

    The exported entry point would serve more (any head dim a genome allows), but only these
    passed evo's correctness gate with the table's genomes; other calls go to SDPA. Key/value
    heads and sequence lengths are not part of a kind: the kernel serves any group size
    (heads % heads_kv == 0) and, causal, any seq_q <= seq_k with the same code paths. A tuple,
    not a set, so that dynamo can trace `kind in served`. Packed batches are read and left out:
    the routed calls are dense, and a genome tuned on packed batches only was checked on none.
    """
    kinds = set()
    for text in shape_texts:
        _, _, _, _, _, head_dim, causal, dtype = parse_shape(text)
        if is_packed(text):
            continue
        kinds.add((dtype, head_dim, causal))
    return tuple(sorted(kinds))


def route(dtypes, q_shape, k_shape, v_shape, is_cuda, mask_kind, mask_lengths, dropout_p, is_causal, enable_gqa,
          needs_grad, served):
    """(reason, evo_causal): reason None when evo serves the call, else why SDPA does.

    dtypes: the three tensors' dtype names ('fp16', 'bf16' or anything else); served: the device's
    library's served_kinds, or None where no library runs on the device. mask_kind: None (no
    attn_mask), LOWER_RIGHT or UPPER_LEFT (a torch.nn.attention.bias.CausalBias of that variant)
    or OTHER_MASK (any other mask); mask_lengths: a CausalBias's (seq_len_q, seq_len_kv), else
    None. evo_causal: the is_causal to give evo's op (False when SDPA serves).

    evo's causal mask is bottom-right aligned (query row i sees keys 0 .. i + seq_k - seq_q) and
    needs seq_q <= seq_k; SDPA's is_causal=True is top-left aligned, the same only when
    seq_q == seq_k. So evo serves is_causal=True and a causal_upper_left mask at seq_q == seq_k,
    and a causal_lower_right mask at any seq_q <= seq_k, each as evo_causal True and no mask.
    Grouped-query calls (enable_gqa=True, query heads a multiple of key/value heads) go to the op
    as they are: query head h reads key/value head h // (heads // heads_kv), SDPA's grouping.
    """
    if not is_cuda:
        return NOT_CUDA, False
    if served is None:
        return NO_LIBRARY, False
    if is_causal and mask_kind is not None:
        return CAUSAL_WITH_MASK, False
    if mask_kind is not None and mask_kind not in (LOWER_RIGHT, UPPER_LEFT):
        return MASK, False
    if dropout_p > 0.0:
        return DROPOUT, False
    if needs_grad:
        return GRAD, False
    if len(q_shape) != 4 or len(k_shape) != 4 or len(v_shape) != 4:
        return NOT_4D, False
    if dtypes[0] != dtypes[1] or dtypes[0] != dtypes[2]:
        return MIXED_DTYPES, False
    if dtypes[0] not in _DTYPE_SUFFIXES:
        return DTYPE, False
    batch, q_heads, seq_q, head_dim = q_shape
    if tuple(k_shape) != tuple(v_shape) or k_shape[0] != batch or k_shape[3] != head_dim:
        return SHAPES, False
    kv_heads, seq_k = k_shape[1], k_shape[2]
    if batch == 0 or q_heads == 0 or kv_heads == 0 or seq_q == 0 or seq_k == 0 or head_dim == 0:
        return EMPTY, False
    if q_heads % kv_heads != 0:
        return HEADS, False
    if q_heads != kv_heads and not enable_gqa:
        return HEADS_NO_GQA, False
    if mask_kind is not None and tuple(mask_lengths or ()) != (seq_q, seq_k):
        return CAUSAL_BIAS_LENGTHS, False
    causal = bool(is_causal) or mask_kind is not None
    if causal and seq_q > seq_k:
        return CAUSAL_SEQ_Q_LONGER, False
    if causal and mask_kind != LOWER_RIGHT and seq_q != seq_k:
        return CAUSAL_TOP_LEFT, False
    if batch * q_heads * seq_q * head_dim >= 2 ** 31 or batch * kv_heads * seq_k * head_dim >= 2 ** 31:
        return TOO_LARGE, False
    if (dtypes[0], head_dim, causal) not in served:
        return NO_BUCKET, False
    return None, causal


def shape_class(dtype, q_shape, k_shape, is_causal, mask_kind=None):
    """The calls one fallback log line stands for: sequence lengths left out, so a decode loop
    (seq_k growing each step) or a chunked prefill (seq_q fixed, seq_k growing) logs once, not
    once per step."""
    if len(q_shape) != 4 or len(k_shape) != 4:
        return "%s %d-D" % (dtype, len(q_shape))
    masking = "causal" if is_causal else "non-causal"
    if mask_kind is not None:
        masking = "%s%s attn_mask" % ("is_causal with " if is_causal else "", {
            LOWER_RIGHT: "causal_lower_right", UPPER_LEFT: "causal_upper_left"}.get(mask_kind, "another"))
    seq_q, seq_k = q_shape[2], k_shape[2]
    if seq_q == 1:
        lengths = "decode (seq_q=1)"
    elif seq_q < seq_k:
        lengths = "chunk (1<seq_q<seq_k)"
    elif seq_q == seq_k:
        lengths = "prefill (seq_q=seq_k)"
    else:
        lengths = "seq_q>seq_k"
    return "%s head_dim=%d %s heads=%d/%d %s" % (dtype, q_shape[3], masking, q_shape[1], k_shape[1], lengths)


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

"""The evo_kernels package's pure rules (kernel_templates/attention/torch_package/evo_kernels/
routing.py), without torch.

Each check runs on the rules as written and must pass; then each planted failure (one rule broken
by a one-line edit of the source) must make its check fail, so no check passes by accident.
Usage: torch_package_rules_test.py [--package DIR]  (DIR: a package evoctl export --python wrote,
whose manifest is checked too; the integration test passes it).
"""
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROUTING = os.path.join(HERE, "..", "..", "..", "kernel_templates", "attention", "torch_package", "evo_kernels",
                       "routing.py")
FP16_NC, FP16_CAUSAL = ("fp16", 64, False), ("fp16", 64, True)
SERVED = (FP16_NC, FP16_CAUSAL)


def load_rules(source=None):
    """routing.py as a module, from its file or from an edited text of it."""
    with open(ROUTING) as f:
        text = f.read() if source is None else source
    module = types.ModuleType("routing_under_test")
    exec(compile(text, ROUTING, "exec"), module.__dict__)
    return module


def call(r, q=(1, 8, 512, 64), k=(1, 8, 512, 64), dtype="fp16", **kw):
    """route() for a plain call, any argument overridden."""
    args = dict(dtypes=(dtype, dtype, dtype), q_shape=q, k_shape=k, v_shape=k, is_cuda=True, mask_kind=None,
                mask_lengths=None, dropout_p=0.0, is_causal=False, enable_gqa=False, needs_grad=False, served=SERVED)
    args.update(kw)
    return r.route(**args)


def masked(r, kind, q=(1, 8, 128, 64), k=(1, 8, 512, 64), **kw):
    """route() for a call whose attn_mask is a CausalBias of `kind` made for the tensors' lengths."""
    return call(r, q=q, k=k, mask_kind=kind, mask_lengths=(q[2], k[2]), **kw)


def check_shapes(r):
    assert r.parse_shape("1x8x512x64") == (1, 8, 8, 512, 512, 64, False, "fp16")
    assert r.parse_shape("2x4x1x512x128:bf16:causal") == (2, 4, 4, 1, 512, 128, True, "bf16")
    assert r.parse_shape("1x32x512x4096x128:kv8:causal:bf16") == (1, 32, 8, 512, 4096, 128, True, "bf16")
    assert r.parse_shape("1x32x512x4096x128:bf16:causal:kv8") == r.parse_shape("1x32x512x4096x128:kv8:causal:bf16"), \
        "suffixes in any order"
    assert r.parse_shape("1x8x512x64:kv8") == r.parse_shape("1x8x512x64"), "kvN equal to the heads is the default"
    assert r.served_kinds(["1x8x512x64", "1x8x512x64:causal", "2x8x1024x64"]) == SERVED
    assert r.served_kinds(["1x8x1x700x64:kv2", "1x8x128x512x64:kv1:causal"]) == SERVED, \
        "key/value heads and lengths are not part of a served kind"
    # A table of fp16 and FP8 buckets: the e4m3 ones are read (the package loads) and never serve a
    # tensor, whose dtype is fp16 or bf16.
    assert r.parse_shape("2x16x4096x128:causal:e4m3") == (2, 16, 16, 4096, 4096, 128, True, "e4m3")
    both = r.served_kinds(["1x8x512x64", "1x8x512x64:e4m3"])
    assert ("e4m3", 64, False) in both and ("fp16", 64, False) in both
    assert call(r, served=both) == (None, False), "the fp16 bucket serves fp16 tensors"
    assert call(r, served=tuple(k for k in both if k[0] == "e4m3"))[0] == r.NO_BUCKET
    # Packed batches (a run tuned for torch.ops.evo.attention_varlen) are read, and serve no dense
    # call: the package still loads when its table holds one.
    assert r.parse_shape("17+300+777x8x64:causal") == (3, 8, 8, 777, 777, 64, True, "fp16")
    assert r.parse_shape("1/4096+16/1024x32x128:kv8:bf16") == (2, 32, 8, 16, 4096, 128, False, "bf16")
    assert r.is_packed("17+300x8x64") and r.is_packed("1/4096x8x64") and not r.is_packed("1x8x512x64")
    assert r.served_kinds(["17+300+777x8x64", "17+300+777x8x64:causal"]) == ()
    assert r.served_kinds(["1x8x512x64", "17+300+777x8x64:causal"]) == (("fp16", 64, False),)
    for bad in ("1x8x512", "1x8x512x64:fp8", "17+300x8x512x64", "17/3/4x8x64", "17+x8x64", "1x8x512x64:kv3", "1x8x512x64:kv0", "1x8x512x64:kv", "1x8x512x64:kvx"):
        try:
            r.parse_shape(bad)
        except ValueError:
            continue
        raise AssertionError("parse_shape accepted " + bad)


def check_route_serves(r):
    assert call(r) == (None, False)
    assert call(r, is_causal=True) == (None, True)
    assert call(r, q=(1, 8, 1, 64), k=(1, 8, 700, 64)) == (None, False), "decode: one query over any number of keys"


def check_route_falls_back(r):
    assert call(r, is_cuda=False)[0] == r.NOT_CUDA
    assert call(r, served=None)[0] == r.NO_LIBRARY
    assert call(r, mask_kind=r.OTHER_MASK)[0] == r.MASK
    assert call(r, mask_kind=True)[0] == r.MASK, "a mask kind route does not know is some other mask"
    assert call(r, dropout_p=0.1)[0] == r.DROPOUT
    assert call(r, needs_grad=True)[0] == r.GRAD
    assert call(r, q=(8, 512, 64))[0] == r.NOT_4D
    assert call(r, dtypes=("fp16", "bf16", "fp16"))[0] == r.MIXED_DTYPES
    assert call(r, dtype="torch.float32")[0] == r.DTYPE
    assert call(r, k=(1, 8, 512, 128))[0] == r.SHAPES
    assert call(r, k=(1, 8, 0, 64))[0] == r.EMPTY
    assert call(r, dtype="bf16")[0] == r.NO_BUCKET
    assert call(r, q=(1, 8, 512, 128), k=(1, 8, 512, 128))[0] == r.NO_BUCKET
    assert call(r, served=(FP16_NC,), is_causal=True)[0] == r.NO_BUCKET
    assert masked(r, r.LOWER_RIGHT, served=(FP16_NC,))[0] == r.NO_BUCKET, "a causal mask needs a causal bucket"
    assert call(r, q=(64, 64, 8192, 64), k=(64, 64, 8192, 64))[0] == r.TOO_LARGE
    for fallback in (call(r, is_cuda=False), call(r, mask_kind=r.OTHER_MASK), call(r, is_causal=True, dtype="bf16")):
        assert fallback[1] is False, "a fallback gives evo no causality"


def check_route_gqa(r):
    assert call(r, q=(1, 8, 512, 64), k=(1, 2, 512, 64), enable_gqa=True) == (None, False)
    assert call(r, q=(1, 8, 512, 64), k=(1, 1, 512, 64), enable_gqa=True, is_causal=True) == (None, True)
    assert call(r, q=(1, 8, 512, 64), k=(1, 8, 512, 64), enable_gqa=True) == (None, False)
    assert call(r, q=(1, 8, 512, 64), k=(1, 2, 512, 64))[0] == r.HEADS_NO_GQA
    assert call(r, q=(1, 8, 512, 64), k=(1, 3, 512, 64), enable_gqa=True)[0] == r.HEADS
    assert call(r, q=(1, 8, 512, 64), k=(1, 16, 512, 64), enable_gqa=True)[0] == r.HEADS


def check_route_causal(r):
    # evo's causal is bottom-right: a lower-right mask is served at any seq_q <= seq_k, as is_causal=True.
    assert masked(r, r.LOWER_RIGHT) == (None, True), "chunked prefill over a KV cache"
    assert masked(r, r.LOWER_RIGHT, q=(1, 8, 1, 64), k=(1, 2, 700, 64), enable_gqa=True) == (None, True), \
        "grouped decode with a lower-right mask"
    assert masked(r, r.LOWER_RIGHT, q=(1, 8, 512, 64)) == (None, True)
    assert masked(r, r.UPPER_LEFT, q=(1, 8, 512, 64)) == (None, True), "upper-left is bottom-right at seq_q == seq_k"
    # SDPA's is_causal and an upper-left mask are top-left: evo's only at seq_q == seq_k.
    top_left = call(r, is_causal=True, q=(1, 8, 128, 64), k=(1, 8, 512, 64))[0]
    assert top_left == r.CAUSAL_TOP_LEFT, top_left
    assert "causal_lower_right(seq_q, seq_k)" in top_left, "the reason tells a KV-cache caller what to pass"
    assert call(r, is_causal=True, q=(1, 8, 1, 64), k=(1, 8, 512, 64))[0] == r.CAUSAL_TOP_LEFT
    assert masked(r, r.UPPER_LEFT)[0] == r.CAUSAL_TOP_LEFT
    # Nothing causal with more queries than keys.
    assert call(r, is_causal=True, q=(1, 8, 512, 64), k=(1, 8, 128, 64))[0] == r.CAUSAL_SEQ_Q_LONGER
    assert masked(r, r.LOWER_RIGHT, q=(1, 8, 512, 64), k=(1, 8, 128, 64))[0] == r.CAUSAL_SEQ_Q_LONGER
    assert call(r, q=(1, 8, 512, 64), k=(1, 8, 128, 64)) == (None, False), "non-causal takes any lengths"
    # torch refuses is_causal with a mask: torch's SDPA gets it, to raise as it would.
    assert masked(r, r.LOWER_RIGHT, is_causal=True)[0] == r.CAUSAL_WITH_MASK
    assert call(r, mask_kind=r.OTHER_MASK, is_causal=True)[0] == r.CAUSAL_WITH_MASK
    # A CausalBias made for other lengths than the tensors' is not evo's to interpret.
    assert call(r, q=(1, 8, 128, 64), mask_kind=r.LOWER_RIGHT, mask_lengths=(128, 1024))[0] == r.CAUSAL_BIAS_LENGTHS
    assert call(r, mask_kind=r.UPPER_LEFT, mask_lengths=(256, 256))[0] == r.CAUSAL_BIAS_LENGTHS
    assert call(r, mask_kind=r.LOWER_RIGHT, mask_lengths=None)[0] == r.CAUSAL_BIAS_LENGTHS


def check_route_size(r):
    # Each tensor under 2^31 elements, counted with its own heads and length.
    assert call(r, q=(64, 64, 8192, 64), k=(64, 8, 8192, 64), enable_gqa=True)[0] == r.TOO_LARGE, "query's size"
    assert call(r, q=(64, 64, 1, 64), k=(64, 8, 65536, 64), enable_gqa=True)[0] == r.TOO_LARGE, "key/value's size"
    assert call(r, q=(64, 64, 1, 64), k=(64, 8, 32768, 64), enable_gqa=True) == (None, False), \
        "grouped key/value of 2^30 elements: query heads must not count for them"
    assert call(r, q=(64, 64, 4096, 64), k=(64, 64, 4096, 64)) == (None, False)


def check_call_log(r):
    log = r.CallLog()
    decode = r.shape_class("fp16", (1, 8, 1, 64), (1, 2, 700, 64), False)
    assert decode == r.shape_class("fp16", (1, 8, 1, 64), (1, 2, 701, 64), False), "seq_k must not split a class"
    chunk = r.shape_class("fp16", (1, 8, 128, 64), (1, 2, 700, 64), False)
    assert chunk == r.shape_class("fp16", (1, 8, 128, 64), (1, 2, 828, 64), False), "seq_k must not split a chunk"
    prefill = r.shape_class("fp16", (1, 8, 300, 64), (1, 2, 300, 64), False)
    assert len({decode, chunk, prefill}) == 3, (decode, chunk, prefill)
    lower_right = r.shape_class("fp16", (1, 8, 128, 64), (1, 2, 700, 64), False, r.LOWER_RIGHT)
    assert lower_right != chunk and "lower_right" in lower_right, "a causal mask shows in the class"
    assert log.note_fallback(r.MASK, decode) is True
    assert log.note_fallback(r.MASK, decode) is False, "the second call of a class is not logged again"
    assert log.note_fallback(r.GRAD, decode) is True
    log.note_served()
    assert log.snapshot() == {"served": 1, "fell_back": {r.MASK: 2, r.GRAD: 1}, "fell_back_total": 3}


def check_arch(r):
    assert r.parse_arch("sm_90a") == (9, 0, True) and r.parse_arch("sm_80") == (8, 0, False)
    assert r.can_run("sm_90a", (9, 0)) and not r.can_run("sm_90a", (10, 0))
    assert r.can_run("sm_80", (8, 6)) and r.can_run("sm_80", (9, 0)) and not r.can_run("sm_86", (8, 0))
    assert r.pick_library(["sm_80", "sm_90a"], (9, 0))[0] == "sm_90a"
    assert r.pick_library(["sm_90a", "sm_80"], (8, 9))[0] == "sm_80"
    assert r.pick_library(["sm_80", "sm_86"], (8, 9))[0] == "sm_86", "the nearest earlier architecture"
    assert r.pick_library(["sm_90a", "sm_90"], (9, 0))[0] == "sm_90a", "the specific build first"
    arch, note = r.pick_library(["sm_90a"], (8, 0))
    assert arch is None and "SDPA" in note, note
    assert "nearest" in r.pick_library(["sm_80"], (9, 0))[1]


def check_build(r):
    assert r.nvcc_arch_flags("sm_90a") == ["-gencode", "arch=compute_90a,code=sm_90a"]
    assert r.nvcc_arch_flags("sm_80") == ["-gencode", "arch=compute_80,code=sm_80",
                                          "-gencode", "arch=compute_80,code=compute_80"]
    assert r.archs_to_build(["sm_90a", "sm_80"], "") == ["sm_90a", "sm_80"]
    assert r.archs_to_build(["sm_90a", "sm_80"], "sm_80") == ["sm_80"]
    try:
        r.archs_to_build(["sm_90a"], "sm_75")
    except ValueError as e:
        assert "sm_75" in str(e)
    else:
        raise AssertionError("archs_to_build accepted an architecture the package lacks")


CHECKS = [check_shapes, check_route_serves, check_route_falls_back, check_route_gqa, check_route_causal,
          check_route_size, check_call_log, check_arch, check_build]

# (what is broken, the source text, its broken form, the check that must catch it)
PLANTED = [
    ("the causal suffix is ignored", 'causal = suffix == "causal"', "causal = False", check_shapes),
    ("the kv suffix is ignored", "heads_kv = int(suffix[2:])", "heads_kv = heads", check_shapes),
    ("a kv suffix that does not divide the heads is taken", "if heads_kv < 1 or heads % heads_kv != 0:",
     "if False:", check_shapes),
    ("a mask is served", "if mask_kind is not None and mask_kind not in (LOWER_RIGHT, UPPER_LEFT):", "if False:",
     check_route_falls_back),
    ("dropout is served", "if dropout_p > 0.0:", "if dropout_p > 1.0:", check_route_falls_back),
    ("grad is served", "if needs_grad:", "if False:", check_route_falls_back),
    ("any bucket serves", "not in served:", "in ():", check_route_falls_back),
    ("no device library is ignored", "if served is None:\n        return NO_LIBRARY, False", "",
     check_route_falls_back),
    ("GQA without enable_gqa is served", "if q_heads != kv_heads and not enable_gqa:", "if False:",
     check_route_gqa),
    ("heads not a multiple of key/value heads are served", "if q_heads % kv_heads != 0:", "if False:",
     check_route_gqa),
    ("is_causal with a mask is served", "if is_causal and mask_kind is not None:", "if False:", check_route_causal),
    ("a CausalBias's lengths are not checked",
     "if mask_kind is not None and tuple(mask_lengths or ()) != (seq_q, seq_k):", "if False:", check_route_causal),
    ("causal with seq_q > seq_k is served", "if causal and seq_q > seq_k:", "if False:", check_route_causal),
    ("top-left causal with seq_q < seq_k is served", "if causal and mask_kind != LOWER_RIGHT and seq_q != seq_k:",
     "if False:", check_route_causal),
    ("an upper-left mask is taken for lower-right", "mask_kind != LOWER_RIGHT and seq_q != seq_k",
     "mask_kind is None and seq_q != seq_k", check_route_causal),
    ("a causal mask reaches evo as non-causal", "causal = bool(is_causal) or mask_kind is not None",
     "causal = bool(is_causal)", check_route_causal),
    ("evo is given the caller's is_causal", "return None, causal", "return None, bool(is_causal)",
     check_route_causal),
    ("the query's size is not checked", "batch * q_heads * seq_q * head_dim >= 2 ** 31 or ", "", check_route_size),
    ("key/value's size is counted with query heads", "batch * kv_heads * seq_k * head_dim >= 2 ** 31",
     "batch * q_heads * seq_k * head_dim >= 2 ** 31", check_route_size),
    ("every fallback is logged", "if key in self._seen:\n            return False", "", check_call_log),
    ("the shape class names seq_k", 'lengths = "chunk (1<seq_q<seq_k)"', 'lengths = "seq_k=%d" % seq_k',
     check_call_log),
    ("prefill is classed as a chunk", "elif seq_q < seq_k:", "elif seq_q <= seq_k:", check_call_log),
    ("the shape class leaves the mask out", "if mask_kind is not None:\n        masking =",
     "if False:\n        masking =", check_call_log),
    ("an 'a' build runs anywhere later", "return (major, minor) == tuple(capability)",
     "return (major, minor) <= tuple(capability)", check_arch),
    ("the farthest architecture is picked", "best = max(runnable, key=parse_arch)",
     "best = min(runnable, key=parse_arch)", check_arch),
    ("PTX is left out of generic builds", "if not specific:\n        flags +=", "if False:\n        flags +=",
     check_build),
    ("EVO_KERNELS_ARCHS names are not checked", "    if missing:\n        raise", "    if False:\n        raise",
     check_build),
]


def check_package(package_dir, r):
    """A package evoctl wrote: its manifest's libraries each with an arch, a source beside it, and
    buckets whose shapes give the served kinds the integration test tuned."""
    manifest = r.load_manifest(os.path.join(package_dir, "evo_kernels"))
    libraries = manifest["libraries"]
    assert [lib["arch"] for lib in libraries] == ["sm_90a"], libraries
    lib = libraries[0]
    assert os.path.exists(os.path.join(package_dir, "evo_kernels", lib["source"])), lib["source"]
    assert lib["estimated"] is True and lib["device_classes"] == ["sm_90a/model/estimated"], lib
    assert r.library_served(lib) == SERVED, r.library_served(lib)
    arch, _ = r.pick_library([x["arch"] for x in libraries], (9, 0))
    assert arch == "sm_90a"
    for name in ("setup.py", "pyproject.toml", "csrc/evo_op.cpp", "evo_kernels/__init__.py", "evo_kernels/sdpa.py",
                 "evo_kernels/_ops.py", "evo_kernels/routing.py"):
        assert os.path.exists(os.path.join(package_dir, name)), name
    with open(os.path.join(package_dir, "evo_kernels", "routing.py")) as f, open(ROUTING) as g:
        assert f.read() == g.read(), "the package's routing.py is not this tree's"


def main(argv):
    rules = load_rules()
    for check in CHECKS:
        check(rules)
        print("ok   %s" % check.__name__)
    with open(ROUTING) as f:
        source = f.read()
    failures = 0
    for what, old, new, check in PLANTED:
        if source.count(old) != 1:
            print("FAIL planted '%s': its text is not in routing.py exactly once" % what)
            failures += 1
            continue
        try:
            check(load_rules(source.replace(old, new)))
        except (AssertionError, ValueError, TypeError, KeyError):
            print("ok   planted '%s': %s fails" % (what, check.__name__))
            continue
        print("FAIL planted '%s': %s still passes" % (what, check.__name__))
        failures += 1
    if len(argv) == 3 and argv[1] == "--package":
        check_package(argv[2], rules)
        print("ok   the package in %s" % argv[2])
    if failures:
        print("%d planted failure(s) went unseen" % failures)
        return 1
    print("all checks passed; all %d planted failures caught" % len(PLANTED))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

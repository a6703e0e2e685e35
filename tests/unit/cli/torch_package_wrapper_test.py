"""evo_kernels' torch side (sdpa.py, _ops.py) wired to a stand-in torch, where torch is absent.

What it checks is the wiring, not torch: that scaled_dot_product_attention classifies attn_mask
(a torch.nn.attention.bias.CausalBias of either variant, or another mask) and hands routing.route
the call's facts in the right places; calls evo's op with contiguous tensors, grouped-query key
and value with their own (fewer) heads, and the causality route gives (a lower-right CausalBias
arrives as is_causal=True and no mask); calls SDPA with the caller's arguments otherwise (SDPA's
top-left is_causal at seq_q != seq_k among them); counts and logs each fallback class once; still
imports on a torch without torch.nn.attention.bias; and that sdpa_routing() swaps
torch.nn.functional's function and puts it back. Then each planted failure (one edit of sdpa.py)
must make a check fail, so no check passes by accident. The real op, torch.compile and CUDA graphs
are checked on a GPU (bench/torch_op_check.py).
"""
import enum
import json
import logging
import os
import shutil
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "..", "..", "..", "kernel_templates", "attention", "torch_package", "evo_kernels")
SDPA = os.path.join(PACKAGE, "sdpa.py")


class Device:
    def __init__(self, kind, index):
        self.type, self.index = kind, index


class Tensor:
    """Just what the wrapper reads: shape, dtype, device, requires_grad; and what it calls."""

    def __init__(self, shape, dtype="float16", cuda=True, requires_grad=False, contiguous=True, tag="t"):
        self.shape, self.dtype, self.requires_grad = tuple(shape), dtype, requires_grad
        self.is_cuda, self.device = cuda, Device("cuda" if cuda else "cpu", 0 if cuda else None)
        self.is_contiguous, self.tag = contiguous, tag

    def __repr__(self):
        return "Tensor(%s %s%s)" % (self.tag, self.shape, "" if self.is_contiguous else " non-contiguous")

    def contiguous(self):
        return Tensor(self.shape, self.dtype, self.is_cuda, self.requires_grad, True, self.tag)

    def repeat_interleave(self, n, dim):
        shape = list(self.shape)
        shape[dim] *= n
        return Tensor(shape, self.dtype, self.is_cuda, self.requires_grad, True, self.tag + "*%d" % n)


class CausalVariant(enum.IntEnum):
    """torch.nn.attention.bias.CausalVariant's shape."""
    UPPER_LEFT = 1
    LOWER_RIGHT = 2


class CausalBias(Tensor):
    """torch.nn.attention.bias.CausalBias's shape: a tensor (subclass) with variant, seq_len_q and
    seq_len_kv."""

    def __init__(self, variant, seq_len_q, seq_len_kv):
        super().__init__((seq_len_q, seq_len_kv), dtype="bool", tag="bias")
        self.variant, self.seq_len_q, self.seq_len_kv = variant, seq_len_q, seq_len_kv


def causal_lower_right(seq_q, seq_k):
    return CausalBias(CausalVariant.LOWER_RIGHT, seq_q, seq_k)


def causal_upper_left(seq_q, seq_k):
    return CausalBias(CausalVariant.UPPER_LEFT, seq_q, seq_k)


def fake_torch(calls, with_bias):
    """A module named torch with the attributes evo_kernels touches; calls records what ran.
    with_bias: whether it has torch.nn.attention.bias (older torch has not)."""
    torch = types.ModuleType("torch")
    torch.float16, torch.bfloat16, torch.float32 = "float16", "bfloat16", "float32"
    torch.contiguous_format = "contiguous_format"
    torch.is_grad_enabled = lambda: calls.setdefault("grad_enabled", False)

    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **extra):
        calls.setdefault("sdpa", []).append(dict(q=q, k=k, v=v, attn_mask=attn_mask, dropout_p=dropout_p,
                                                 is_causal=is_causal, scale=scale, **extra))
        return "sdpa-result"

    def evo(q, k, v, scale, is_causal):  # the op's schema: no mask
        calls.setdefault("evo", []).append(dict(q=q, k=k, v=v, scale=scale, is_causal=is_causal))
        return "evo-result"

    torch.nn = types.SimpleNamespace(functional=types.SimpleNamespace(scaled_dot_product_attention=sdpa))
    torch.ops = types.SimpleNamespace(evo=types.SimpleNamespace(attention=types.SimpleNamespace(default=evo)))
    torch.compiler = types.SimpleNamespace(is_compiling=lambda: False)
    torch.library = types.SimpleNamespace(register_fake=lambda name: (lambda fn: fn))
    torch.cuda = types.SimpleNamespace(is_available=lambda: False)
    modules = {"torch": torch}
    if with_bias:
        bias = types.ModuleType("torch.nn.attention.bias")
        bias.CausalBias, bias.CausalVariant = CausalBias, CausalVariant
        bias.causal_lower_right, bias.causal_upper_left = causal_lower_right, causal_upper_left
        torch.nn.attention = types.SimpleNamespace(bias=bias)
        modules["torch.nn"] = torch.nn
        modules["torch.nn.attention"] = torch.nn.attention
        modules["torch.nn.attention.bias"] = bias
    return modules


_roots = []


def load_package(calls, sdpa_source=None, with_bias=True):
    """evo_kernels from the source tree (sdpa.py's text replaced by `sdpa_source` if given) with a
    manifest of one fp16 head-dim-64 table, on the stand-in torch; device 0 bound to that table.
    Each call imports a fresh copy."""
    for name in [n for n in sys.modules if n.split(".")[0] in ("torch", "evo_kernels")]:
        del sys.modules[name]
    while _roots:
        root = _roots.pop()
        sys.path.remove(root)
        shutil.rmtree(root, ignore_errors=True)
    root = tempfile.mkdtemp()
    _roots.append(root)
    shutil.copytree(PACKAGE, os.path.join(root, "evo_kernels"))
    if sdpa_source is not None:
        with open(os.path.join(root, "evo_kernels", "sdpa.py"), "w") as f:
            f.write(sdpa_source)
    manifest = {"format": 1, "libraries": [{"arch": "sm_90a", "source": "kernels/sm_90a/kernel.cu",
                                            "device_classes": [], "estimated": False,
                                            "buckets": [{"run_id": "r", "genome": "g", "fitness_us": 1.0,
                                                         "estimated": False,
                                                         "shapes": ["1x8x512x64", "1x8x512x64:causal"]}]}]}
    with open(os.path.join(root, "evo_kernels", "manifest.json"), "w") as f:
        json.dump(manifest, f)
    sys.modules.update(fake_torch(calls, with_bias))
    sys.modules["evo_kernels._C"] = types.ModuleType("evo_kernels._C")
    sys.path.insert(0, root)
    import evo_kernels
    from evo_kernels import _ops, routing
    _ops.SERVED_BY_DEVICE[0] = routing.library_served(manifest["libraries"][0])
    return evo_kernels


class Records:
    """The evo_kernels logger's records while open."""

    def __enter__(self):
        self.lines = []
        self.handler = logging.Handler()
        self.handler.emit = lambda record: self.lines.append(record.getMessage())
        logging.getLogger("evo_kernels").addHandler(self.handler)
        return self

    def __exit__(self, *exc):
        logging.getLogger("evo_kernels").removeHandler(self.handler)


def check_wrapper(sdpa_source=None):
    """The wrapper on a torch with torch.nn.attention.bias: op calls, fallbacks, logs, counts and
    sdpa_routing."""
    calls = {}
    evo_kernels = load_package(calls, sdpa_source)
    routing = evo_kernels.routing
    sdpa = evo_kernels.scaled_dot_product_attention
    with Records() as records:
        q, k, v = (Tensor((1, 8, 512, 64), contiguous=False, tag=n) for n in "qkv")
        assert sdpa(q, k, v, is_causal=True, scale=0.5) == "evo-result"
        call = calls["evo"][-1]
        assert call["is_causal"] is True and call["scale"] == 0.5, call
        assert all(call[n].is_contiguous for n in "qkv"), "evo's op was handed a non-contiguous tensor"

        # Grouped-query: key and value reach the op with their own 2 heads, not repeated to 8.
        kv = [Tensor((1, 2, 700, 64), contiguous=False, tag=n) for n in "kv"]
        assert sdpa(Tensor((1, 8, 1, 64)), *kv, enable_gqa=True) == "evo-result"
        call = calls["evo"][-1]
        assert call["k"].shape == (1, 2, 700, 64) and call["v"].shape == (1, 2, 700, 64), call
        assert call["k"].tag == "k" and call["v"].tag == "v", "key/value repeated: %s" % call
        assert call["k"].is_contiguous and call["v"].is_contiguous and call["is_causal"] is False, call

        # A lower-right CausalBias (chunked prefill, grouped decode): the op, is_causal=True, no mask.
        chunk_q, long_k, long_v = Tensor((1, 8, 128, 64)), Tensor((1, 8, 512, 64)), Tensor((1, 8, 512, 64))
        assert sdpa(chunk_q, long_k, long_v, attn_mask=causal_lower_right(128, 512), scale=0.25) == "evo-result"
        call = calls["evo"][-1]
        assert call["is_causal"] is True and call["scale"] == 0.25 and call["q"].shape == (1, 8, 128, 64), call
        assert sdpa(Tensor((1, 8, 1, 64)), *kv, attn_mask=causal_lower_right(1, 700), enable_gqa=True) \
            == "evo-result"
        call = calls["evo"][-1]
        assert call["is_causal"] is True and call["k"].shape == (1, 2, 700, 64), call
        # An upper-left one is evo's at seq_q == seq_k only.
        assert sdpa(q, k, v, attn_mask=causal_upper_left(512, 512)) == "evo-result"
        assert calls["evo"][-1]["is_causal"] is True
        upper_left = causal_upper_left(128, 512)
        assert sdpa(chunk_q, long_k, long_v, attn_mask=upper_left) == "sdpa-result"
        assert calls["sdpa"][-1]["attn_mask"] is upper_left and calls["sdpa"][-1]["is_causal"] is False
        served = len(calls["evo"])

        # SDPA's is_causal at seq_q != seq_k is top-left: torch's SDPA gets the call unchanged.
        assert sdpa(chunk_q, long_k, long_v, is_causal=True, scale=0.2) == "sdpa-result"
        call = calls["sdpa"][-1]
        assert call == dict(q=chunk_q, k=long_k, v=long_v, attn_mask=None, dropout_p=0.0, is_causal=True,
                            scale=0.2), call
        assert len(calls["evo"]) == served
        # is_causal with a mask: torch's SDPA, to refuse it as torch does.
        bias = causal_lower_right(128, 512)
        assert sdpa(chunk_q, long_k, long_v, attn_mask=bias, is_causal=True) == "sdpa-result"
        assert calls["sdpa"][-1]["attn_mask"] is bias and calls["sdpa"][-1]["is_causal"] is True
        # A CausalBias made for other lengths than the tensors'.
        assert sdpa(chunk_q, long_k, long_v, attn_mask=causal_lower_right(128, 1024)) == "sdpa-result"

        mask = object()
        assert sdpa(q, k, v, attn_mask=mask, dropout_p=0.0, scale=0.3) == "sdpa-result"
        call = calls["sdpa"][-1]
        assert call["attn_mask"] is mask and call["scale"] == 0.3 and call["q"] is q, call
        assert "enable_gqa" not in call, "enable_gqa passed to an SDPA call that did not ask for it"
        assert sdpa(Tensor((1, 8, 1, 64)), *kv, attn_mask=mask, enable_gqa=True) == "sdpa-result"
        assert calls["sdpa"][-1]["enable_gqa"] is True
        assert sdpa(Tensor((1, 8, 1, 64)), *kv, attn_mask=mask, enable_gqa=True) == "sdpa-result"

        calls["grad_enabled"] = True
        assert sdpa(Tensor((1, 8, 512, 64), requires_grad=True), k, v) == "sdpa-result"
        calls["grad_enabled"] = False
        assert sdpa(Tensor((1, 8, 512, 64), requires_grad=True), k, v) == "evo-result", "no_grad calls are evo's"
        assert sdpa(Tensor((1, 8, 512, 64), cuda=False), k, v) == "sdpa-result"
        assert sdpa(Tensor((1, 8, 512, 64), dtype="bfloat16"), *(Tensor((1, 8, 512, 64), dtype="bfloat16"),) * 2) \
            == "sdpa-result"

    stats = evo_kernels.stats()
    assert stats["served"] == 6, stats
    assert stats["fell_back"] == {routing.CAUSAL_TOP_LEFT: 2, routing.CAUSAL_WITH_MASK: 1,
                                  routing.CAUSAL_BIAS_LENGTHS: 1, routing.MASK: 3, routing.GRAD: 1,
                                  routing.NOT_CUDA: 1, routing.NO_BUCKET: 1}, stats
    lines = records.lines
    assert len(lines) == 9 and all(line.startswith("evo_kernels: torch SDPA serves ") for line in lines), lines
    top_left = [line for line in lines if line.endswith(routing.CAUSAL_TOP_LEFT)]
    assert len(top_left) == 2 and "causal_upper_left attn_mask" in top_left[0] and " causal " in top_left[1], lines
    evo_kernels.reset_stats()
    assert evo_kernels.stats() == {"served": 0, "fell_back": {}, "fell_back_total": 0}

    torch = sys.modules["torch"]
    original = torch.nn.functional.scaled_dot_product_attention
    with evo_kernels.sdpa_routing():
        assert torch.nn.functional.scaled_dot_product_attention is sdpa
        assert torch.nn.functional.scaled_dot_product_attention(q, k, v) == "evo-result"
        assert calls["evo"][-1]["is_causal"] is False
    assert torch.nn.functional.scaled_dot_product_attention is original
    try:
        with evo_kernels.sdpa_routing():
            raise KeyError("inside")
    except KeyError:
        pass
    assert torch.nn.functional.scaled_dot_product_attention is original, "an error inside left the routing on"


def check_older_torch(sdpa_source=None):
    """On a torch without torch.nn.attention.bias the package imports, and any mask is SDPA's."""
    calls = {}
    evo_kernels = load_package(calls, sdpa_source, with_bias=False)
    sdpa = evo_kernels.scaled_dot_product_attention
    q, k, v = (Tensor((1, 8, 512, 64), tag=n) for n in "qkv")
    with Records():
        assert sdpa(q, k, v, attn_mask=causal_lower_right(512, 512)) == "sdpa-result"
        assert sdpa(q, k, v, is_causal=True) == "evo-result"
    assert evo_kernels.stats()["fell_back"] == {evo_kernels.routing.MASK: 1}, evo_kernels.stats()


CHECKS = [check_wrapper, check_older_torch]

# (what is broken, the text in sdpa.py, its broken form, the check that must catch it)
PLANTED = [
    ("grouped key/value are repeated to the query's heads",
     "    return torch.ops.evo.attention.default(",
     "    key = key.repeat_interleave(query.shape[1] // key.shape[1], dim=1)\n"
     "    value = value.repeat_interleave(query.shape[1] // value.shape[1], dim=1)\n"
     "    return torch.ops.evo.attention.default(", check_wrapper),
    ("the op is given the caller's is_causal", "scale,\n                                           evo_causal)",
     "scale,\n                                           bool(is_causal))", check_wrapper),
    ("the op is given non-contiguous tensors", "query.contiguous(), key.contiguous(), value.contiguous()",
     "query, key, value", check_wrapper),
    ("a CausalBias is taken for another mask", "if _CausalBias is not None and isinstance(attn_mask, _CausalBias):",
     "if False:", check_wrapper),
    ("the variants are swapped", "return routing.LOWER_RIGHT, lengths", "return routing.UPPER_LEFT, lengths",
     check_wrapper),
    ("the CausalBias's lengths are not handed on", "lengths = (attn_mask.seq_len_q, attn_mask.seq_len_kv)",
     "lengths = None", check_wrapper),
    ("route is not told of the mask", "query.is_cuda, mask_kind, mask_lengths,", "query.is_cuda, None, None,",
     check_wrapper),
    ("the fallback drops the mask", "attn_mask=attn_mask, dropout_p=dropout_p", "attn_mask=None, dropout_p=dropout_p",
     check_wrapper),
    ("every fallback is logged", "if _calls.note_fallback(reason, klass):",
     "if _calls.note_fallback(reason, klass) or True:", check_wrapper),
    ("the shape class leaves the mask out", "tuple(key.shape), is_causal, mask_kind)", "tuple(key.shape), is_causal)",
     check_wrapper),
    ("a torch without torch.nn.attention.bias fails the import", "except ImportError:\n    _CausalBias",
     "except ZeroDivisionError:\n    _CausalBias", check_older_torch),
]


def main():
    for check in CHECKS:
        check()
        print("ok   %s" % check.__name__)
    with open(SDPA) as f:
        source = f.read()
    failures = 0
    for what, old, new, check in PLANTED:
        if source.count(old) != 1:
            print("FAIL planted '%s': its text is not in sdpa.py exactly once" % what)
            failures += 1
            continue
        try:
            check(source.replace(old, new))
        except (AssertionError, AttributeError, TypeError, KeyError, ImportError):
            print("ok   planted '%s': %s fails" % (what, check.__name__))
            continue
        print("FAIL planted '%s': %s still passes" % (what, check.__name__))
        failures += 1
    load_package({})  # leaves sys.path and the temporary folders as a clean run does
    while _roots:
        root = _roots.pop()
        sys.path.remove(root)
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        print("%d planted failure(s) went unseen" % failures)
        return 1
    print("evo_kernels' wrapper: routing, op call, fallbacks, logs, counts and sdpa_routing as expected; "
          "all %d planted failures caught" % len(PLANTED))
    return 0


if __name__ == "__main__":
    sys.exit(main())

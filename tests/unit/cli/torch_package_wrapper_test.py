"""evo_kernels' torch side (sdpa.py, _ops.py) wired to a stand-in torch, where torch is absent.

What it checks is the wiring, not torch: that scaled_dot_product_attention hands routing.route
the call's facts in the right places, calls evo's op with contiguous tensors (key and value
repeated for grouped-query calls) and SDPA with the caller's arguments otherwise, counts and logs
each fallback class once, and that sdpa_routing() swaps torch.nn.functional's function and puts
it back. The real op, torch.compile and CUDA graphs are checked on a GPU (bench/torch_op_check.py).
"""
import json
import logging
import os
import shutil
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "..", "..", "..", "kernel_templates", "attention", "torch_package", "evo_kernels")


class Device:
    def __init__(self, kind, index):
        self.type, self.index = kind, index


class Tensor:
    """Just what the wrapper reads: shape, dtype, device, requires_grad; and what it calls."""

    def __init__(self, shape, dtype="float16", cuda=True, requires_grad=False, contiguous=True, tag="t"):
        self.shape, self.dtype, self.requires_grad = tuple(shape), dtype, requires_grad
        self.is_cuda, self.device = cuda, Device("cuda" if cuda else "cpu", 0 if cuda else None)
        self.is_contiguous, self.tag = contiguous, tag

    def contiguous(self):
        return Tensor(self.shape, self.dtype, self.is_cuda, self.requires_grad, True, self.tag)

    def repeat_interleave(self, n, dim):
        shape = list(self.shape)
        shape[dim] *= n
        return Tensor(shape, self.dtype, self.is_cuda, self.requires_grad, True, self.tag + "*%d" % n)


def fake_torch(calls):
    """A module named torch with the attributes evo_kernels touches; calls records what ran."""
    torch = types.ModuleType("torch")
    torch.float16, torch.bfloat16, torch.float32 = "float16", "bfloat16", "float32"
    torch.contiguous_format = "contiguous_format"
    torch.is_grad_enabled = lambda: calls.setdefault("grad_enabled", False)

    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **extra):
        calls.setdefault("sdpa", []).append(dict(q=q, k=k, v=v, attn_mask=attn_mask, dropout_p=dropout_p,
                                                 is_causal=is_causal, scale=scale, **extra))
        return "sdpa-result"

    def evo(q, k, v, scale, is_causal):
        calls.setdefault("evo", []).append(dict(q=q, k=k, v=v, scale=scale, is_causal=is_causal))
        return "evo-result"

    torch.nn = types.SimpleNamespace(functional=types.SimpleNamespace(scaled_dot_product_attention=sdpa))
    torch.ops = types.SimpleNamespace(evo=types.SimpleNamespace(attention=types.SimpleNamespace(default=evo)))
    torch.compiler = types.SimpleNamespace(is_compiling=lambda: False)
    torch.library = types.SimpleNamespace(register_fake=lambda name: (lambda fn: fn))
    torch.cuda = types.SimpleNamespace(is_available=lambda: False)
    return torch


def load_package(calls):
    """evo_kernels from the source tree with a manifest of one fp16 head-dim-64 table, on the
    stand-in torch; device 0 bound to that table."""
    root = tempfile.mkdtemp()
    shutil.copytree(PACKAGE, os.path.join(root, "evo_kernels"))
    manifest = {"format": 1, "libraries": [{"arch": "sm_90a", "source": "kernels/sm_90a/kernel.cu",
                                            "device_classes": [], "estimated": False,
                                            "buckets": [{"run_id": "r", "genome": "g", "fitness_us": 1.0,
                                                         "estimated": False,
                                                         "shapes": ["1x8x512x64", "1x8x512x64:causal"]}]}]}
    with open(os.path.join(root, "evo_kernels", "manifest.json"), "w") as f:
        json.dump(manifest, f)
    sys.modules["torch"] = fake_torch(calls)
    sys.modules["evo_kernels._C"] = types.ModuleType("evo_kernels._C")
    sys.path.insert(0, root)
    import evo_kernels
    from evo_kernels import _ops, routing
    _ops.SERVED_BY_DEVICE[0] = routing.library_served(manifest["libraries"][0])
    return evo_kernels


def main():
    calls = {}
    evo_kernels = load_package(calls)
    sdpa = evo_kernels.scaled_dot_product_attention
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("evo_kernels").addHandler(handler)

    q, k, v = (Tensor((1, 8, 512, 64), contiguous=False, tag=n) for n in "qkv")
    assert sdpa(q, k, v, is_causal=True, scale=0.5) == "evo-result"
    call = calls["evo"][-1]
    assert call["is_causal"] is True and call["scale"] == 0.5, call
    assert all(call[n].is_contiguous for n in "qkv"), "evo's op was handed a non-contiguous tensor"

    kv = [Tensor((1, 2, 700, 64), tag=n) for n in "kv"]
    assert sdpa(Tensor((1, 8, 1, 64)), *kv, enable_gqa=True) == "evo-result"
    call = calls["evo"][-1]
    assert call["k"].shape == (1, 8, 700, 64) and call["k"].tag == "k*4" and call["v"].tag == "v*4", call

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
    assert stats["served"] == 3, stats
    routing = evo_kernels.routing
    assert stats["fell_back"] == {routing.MASK: 3, routing.GRAD: 1, routing.NOT_CUDA: 1, routing.NO_BUCKET: 1}, stats
    lines = [r.getMessage() for r in records]
    assert len(lines) == 5 and all(line.startswith("evo_kernels: torch SDPA serves ") for line in lines), lines
    evo_kernels.reset_stats()
    assert evo_kernels.stats() == {"served": 0, "fell_back": {}, "fell_back_total": 0}

    torch = sys.modules["torch"]
    original = torch.nn.functional.scaled_dot_product_attention
    with evo_kernels.sdpa_routing():
        assert torch.nn.functional.scaled_dot_product_attention is sdpa
        assert torch.nn.functional.scaled_dot_product_attention(q, k, v) == "evo-result"
    assert torch.nn.functional.scaled_dot_product_attention is original
    try:
        with evo_kernels.sdpa_routing():
            raise KeyError("inside")
    except KeyError:
        pass
    assert torch.nn.functional.scaled_dot_product_attention is original, "an error inside left the routing on"
    print("evo_kernels' wrapper: routing, op call, fallbacks, logs, counts and sdpa_routing as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())

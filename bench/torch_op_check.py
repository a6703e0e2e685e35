"""torch.ops.evo.attention on a GPU: results, refusals, torch.compile and CUDA graphs.

Each check prints one PASS/FAIL line; the script exits 1 if any failed. The checks:
  results    the op and evo_kernels.scaled_dot_product_attention against float32 SDPA at
             1,8,512,64 fp16, causal and not; grouped-query calls (2 key/value heads) to the op, with
             K and V unrepeated, and through the wrapper; a chunk of 10 queries over the 512 keys,
             causal aligned bottom-right, to the op and through the wrapper as causal_lower_right
  refusals   requires_grad, non-contiguous, K/V heads that do not divide the query heads, a wrong
             dtype, causal with more queries than keys: one clear error each
  compile    torch.compile(fullgraph=True) of a function calling torch.nn.functional.
             scaled_dot_product_attention inside sdpa_routing(): the graph dynamo traced holds
             evo.attention (the patched function is what it traced), and the result matches
  graph      the op captured in a CUDA graph, replayed on new inputs
  reduce     torch.compile(mode="reduce-overhead", fullgraph=True): inductor's CUDA graphs
  varlen     torch.ops.evo.attention_varlen on a packed batch of the run's lengths (17, 300 and 777
             tokens, 8 heads, head dim 64, fp16), causal and not, against float32 SDPA sequence by
             sequence, also replayed from a CUDA graph; int64 offsets, offsets of two lengths and
             4-D tensors refused with one clear error each

Each check runs in a process of its own (this script with --only NAME), with faulthandler on, so a
crash (a signal) names the check and the case it died in, and the other checks still run.

Usage: python bench/torch_op_check.py [--only NAME]
"""
import faulthandler
import subprocess
import sys
import traceback

faulthandler.enable()

import torch
import torch.nn.functional as F

import evo_kernels

SHAPE = (1, 8, 512, 64)
PACKED_LENGTHS = (17, 300, 777)  # bench/torch_acceptance.sh's run tunes a packed batch of these
CHECKS = []


def check(name):
    """Registers a check under `name`; main runs them in order."""
    def register(fn):
        CHECKS.append((name, fn))
        return fn
    return register


def run_check(name, fn):
    """True when it passed; one PASS/FAIL line either way, the trace after a failure."""
    try:
        fn()
    except Exception as e:
        print("FAIL %s: %s" % (name, str(e).splitlines()[0] if str(e) else type(e).__name__), flush=True)
        traceback.print_exc()
        return False
    print("PASS %s" % name, flush=True)
    return True


def inputs(heads_kv=SHAPE[1], dtype=torch.float16):
    q = torch.randn(SHAPE, device="cuda", dtype=dtype)
    k, v = (torch.randn(SHAPE[0], heads_kv, SHAPE[2], SHAPE[3], device="cuda", dtype=dtype) for _ in range(2))
    return q, k, v


def reference(q, k, v, is_causal, enable_gqa=False):
    """float32 SDPA; causal aligned bottom-right (an explicit mask where the lengths differ)."""
    if enable_gqa:
        k, v = (t.repeat_interleave(q.shape[1] // k.shape[1], dim=1) for t in (k, v))
    seq_q, seq_k = q.shape[2], k.shape[2]
    if is_causal and seq_q != seq_k:
        mask = torch.ones(seq_q, seq_k, dtype=torch.bool, device=q.device).tril(seq_k - seq_q)
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask).to(q.dtype)
    return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=is_causal).to(q.dtype)


def expect_error(case, fn, words):
    print("     trying: %s" % case, flush=True)  # a crash in it is then named above the fault's trace
    try:
        fn()
    except RuntimeError as e:
        if not all(w in str(e) for w in words):
            raise AssertionError("error lacks %s: %s" % (words, str(e).splitlines()[0]))
        print("     refused: %s" % str(e).splitlines()[0])
        return
    raise AssertionError("no error (expected one naming %s)" % (words,))


@check("results")
def _results():
    with torch.no_grad():
        for causal in (False, True):
            q, k, v = inputs()
            torch.testing.assert_close(torch.ops.evo.attention(q, k, v, None, causal), reference(q, k, v, causal),
                                       atol=1e-2, rtol=1e-2)
        q, k, v = inputs(heads_kv=2)
        torch.testing.assert_close(torch.ops.evo.attention(q, k, v, None, True), reference(q, k, v, True, True),
                                   atol=1e-2, rtol=1e-2)
        evo_kernels.reset_stats()
        out = evo_kernels.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        torch.testing.assert_close(out, reference(q, k, v, True, enable_gqa=True), atol=1e-2, rtol=1e-2)
        assert evo_kernels.stats()["served"] == 1, evo_kernels.stats()
        # A chunk over a cache: 10 new queries against the 512 keys, bottom-right.
        q, k, v = inputs(heads_kv=2)
        chunk = q[:, :, :10].contiguous()
        torch.testing.assert_close(torch.ops.evo.attention(chunk, k, v, None, True),
                                   reference(chunk, k, v, True, True), atol=1e-2, rtol=1e-2)
        from torch.nn.attention.bias import causal_lower_right
        out = evo_kernels.scaled_dot_product_attention(chunk, k, v, attn_mask=causal_lower_right(10, SHAPE[2]),
                                                       enable_gqa=True)
        torch.testing.assert_close(out, reference(chunk, k, v, True, True), atol=1e-2, rtol=1e-2)
        assert evo_kernels.stats()["served"] == 2, evo_kernels.stats()


@check("refusals")
def _refusals():
    q, k, v = inputs()
    op = torch.ops.evo.attention
    q_grad = q.detach().clone().requires_grad_()  # q itself never requires grad
    expect_error("requires_grad", lambda: op(q_grad, k, v, None, False), ["backward"])
    expect_error("non-contiguous", lambda: op(q.transpose(1, 2), k, v, None, False), ["contiguous"])
    expect_error("K/V heads not dividing", lambda: op(q, k[:, :3].contiguous(), v[:, :3].contiguous(), None, False),
                 ["do not divide"])
    expect_error("float32", lambda: op(q.float(), k.float(), v.float(), None, False), ["float16"])
    expect_error("causal seq_q > seq_k", lambda: op(q, k[:, :, :10].contiguous(), v[:, :, :10].contiguous(), None, True),
                 ["seq_q <= seq_k"])
    with torch.no_grad():  # the same refusals from the CUDA kernel's checks, past the autograd one
        expect_error("non-contiguous, no_grad", lambda: op(q.transpose(1, 2), k, v, None, False), ["contiguous"])
    with torch.inference_mode():  # no autograd key at all: the CUDA kernel straight away
        expect_error("non-contiguous, inference_mode", lambda: op(q.transpose(1, 2), k, v, None, False),
                     ["contiguous"])


@check("compile")
def _compile():
    traced = []

    def recording_backend(gm, example_inputs):
        traced.append(str(gm.graph))
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q * 1.0, k, v, is_causal=True)

    torch._dynamo.reset()
    q, k, v = inputs()
    with torch.no_grad(), evo_kernels.sdpa_routing():
        out = torch.compile(attend, fullgraph=True, backend=recording_backend)(q, k, v)
    assert traced and "evo.attention" in traced[-1], "dynamo's graph holds no evo.attention:\n" + traced[-1]
    torch.testing.assert_close(out, reference(q, k, v, True), atol=1e-2, rtol=1e-2)


@check("graph")
def _graph():
    q, k, v = inputs()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    # Warm-up on the stream that captures: a genome with a workspace allocates it per stream at its
    # first call there, which must not happen inside the capture (docs/exported-kernel.md).
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):
            torch.ops.evo.attention(q, k, v, None, True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph, stream=side):
        out = torch.ops.evo.attention(q, k, v, None, True)
    for _ in range(3):
        for t in (q, k, v):
            t.copy_(torch.randn_like(t))
        graph.replay()
        torch.testing.assert_close(out, reference(q, k, v, True), atol=1e-2, rtol=1e-2)


@check("reduce")
def _reduce():
    torch._dynamo.reset()

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    with torch.no_grad(), evo_kernels.sdpa_routing():
        compiled = torch.compile(attend, mode="reduce-overhead", fullgraph=True)
        for _ in range(4):
            q, k, v = inputs()
            out = compiled(q, k, v).clone()
            torch.testing.assert_close(out, reference(q, k, v, True), atol=1e-2, rtol=1e-2)


def packed_inputs(dtype=torch.float16):
    """q, k, v [tokens, heads, head_dim] of PACKED_LENGTHS, self-attention, and their offsets."""
    heads, head_dim = SHAPE[1], SHAPE[3]
    total = sum(PACKED_LENGTHS)
    q, k, v = (torch.randn(total, heads, head_dim, device="cuda", dtype=dtype) for _ in range(3))
    offsets = [0]
    for n in PACKED_LENGTHS:
        offsets.append(offsets[-1] + n)
    cu = torch.tensor(offsets, device="cuda", dtype=torch.int32)
    return q, k, v, cu


def packed_reference(q, k, v, cu, is_causal):
    """float32 SDPA on each sequence of a packed batch, packed again."""
    ends = cu.tolist()
    parts = []
    for b in range(len(ends) - 1):
        rows = slice(ends[b], ends[b + 1])
        one = [t[rows].transpose(0, 1).unsqueeze(0) for t in (q, k, v)]  # [1, heads, seq, head_dim]
        parts.append(reference(*one, is_causal)[0].transpose(0, 1))
    return torch.cat(parts)


@check("varlen")
def _varlen():
    op = torch.ops.evo.attention_varlen
    longest = max(PACKED_LENGTHS)
    with torch.no_grad():
        for causal in (False, True):
            q, k, v, cu = packed_inputs()
            torch.testing.assert_close(op(q, k, v, cu, cu, longest, longest, None, causal),
                                       packed_reference(q, k, v, cu, causal), atol=1e-2, rtol=1e-2)
        q, k, v, cu = packed_inputs()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                op(q, k, v, cu, cu, longest, longest, None, True)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            out = op(q, k, v, cu, cu, longest, longest, None, True)
        for _ in range(2):
            for t in (q, k, v):
                t.copy_(torch.randn_like(t))
            graph.replay()
            torch.testing.assert_close(out, packed_reference(q, k, v, cu, True), atol=1e-2, rtol=1e-2)
        expect_error("int64 offsets", lambda: op(q, k, v, cu.long(), cu.long(), longest, longest, None, False),
                     ["int32"])
        expect_error("offsets of two lengths", lambda: op(q, k, v, cu, cu[:-1].contiguous(), longest, longest, None,
                                                          False), ["cu_seqlens_k", "offsets"])
        expect_error("4-D query", lambda: op(q.unsqueeze(0), k, v, cu, cu, longest, longest, None, False),
                     ["3-D [tokens, heads, head_dim]"])


def run_isolated(name):
    """Runs one check in a child process; True when it passed. A child killed by a signal is a
    FAIL naming the check and the signal (faulthandler printed where)."""
    done = subprocess.run([sys.executable, "-X", "faulthandler", __file__, "--only", name])
    if done.returncode < 0:
        print("FAIL %s: crashed (signal %d); the last 'trying:' line above names the case" % (name, -done.returncode),
              flush=True)
    elif done.returncode != 0 and done.returncode != 1:
        print("FAIL %s: exit %d" % (name, done.returncode), flush=True)
    return done.returncode == 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--only":
        found = dict(CHECKS)
        if sys.argv[2] not in found:
            print("no check %s (checks: %s)" % (sys.argv[2], ", ".join(found)))
            return 2
        return 0 if run_check(sys.argv[2], found[sys.argv[2]]) else 1
    print("device: %s; library: %s" % (torch.cuda.get_device_name(), evo_kernels.CHOICE_BY_DEVICE), flush=True)
    failed = [name for name, _ in CHECKS if not run_isolated(name)]
    print("torch_op_check: %d of %d checks passed%s" % (len(CHECKS) - len(failed), len(CHECKS),
                                                        "; failed: " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

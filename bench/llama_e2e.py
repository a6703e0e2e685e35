"""A Llama-style model end to end with torch's SDPA and with evo's kernel, eager and compiled.

A random-weight LlamaForCausalLM from a LlamaConfig (grouped-query heads; nothing downloaded),
attn_implementation="sdpa", fp16, run four ways: eager and torch.compile(fullgraph=True), each
with torch's SDPA and with evo_kernels.sdpa_routing() (the model unedited). It checks that evo's
logits agree with SDPA's (relative L2 error and max abs difference, limits below), and prints
the prefill time and the decode-step time of each way (CUDA events, medians; decode after a
warm-up pass, the eager ways alternating pass by pass) and how many attention calls evo served
and how many fell back to SDPA, and why. Decode steps are seq_q 1 against a longer key, not
causal: evo serves them where the export holds a non-causal bucket of the dtype and head_dim.

Under torch.compile, transformers builds an explicit causal mask instead of passing
is_causal=True (whether it may skip the mask depends on tensor values, which a trace cannot
read), and evo takes no mask. With no padding mask given the skip depends on shapes alone, so
this script lets the trace skip it as eager does (compiled_causal_skip below), for both SDPA and
evo, and says whether it could.

Usage: python bench/llama_e2e.py [--seq 512] [--decode-steps 16] [--decode-rounds 4] [--rounds 10]
                                 [--skip-compiled-decode]
Exits 1 when logits disagree beyond the limits, a fullgraph compile fails, or the compiled evo
prefill's traced graph holds no evo.attention.
"""
import argparse
import contextlib
import inspect
import statistics
import sys
import traceback

import torch
import transformers

import evo_kernels

# evo's fp16 kernel against SDPA's over 4 layers of a random model: both round differently.
MAX_REL_L2 = 1e-2
MAX_ABS = 5e-2


def build_model(layers, vocab):
    """Random weights, grouped-query attention (8 query heads, 2 key/value heads, head dim 64)."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=512, intermediate_size=1408,
                                      num_hidden_layers=layers, num_attention_heads=8, num_key_value_heads=2,
                                      max_position_embeddings=4096)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    model = model.to(device="cuda", dtype=torch.float16).eval()
    assert model.config._attn_implementation == "sdpa", model.config._attn_implementation
    return model


def _binder(fn):
    """A function mapping fn's call arguments to a dict by parameter name, defaults filled in.
    The signature is read here, once: dynamo traces the returned function (plain dict and zip),
    but not inspect.signature."""
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    names = [p.name for p in params if p.kind != p.KEYWORD_ONLY]
    defaults = {p.name: p.default for p in params if p.default is not p.empty}

    def bind(args, kwargs):
        named = dict(defaults)
        named.update(zip(names, args))
        named.update(kwargs)
        return named
    return bind


def _is_int(x):
    return isinstance(x, (int, torch.SymInt)) and not isinstance(x, bool)


def _first(named, *names):
    """The first of `names` that `named` holds (transformers renames arguments across versions)."""
    for name in names:
        if name in named:
            return named[name]
    return None


_is_compiling = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling


class CausalSkip:
    """What compiled_causal_skip patched and how often its rules said to skip in eager calls
    (the compiled ways' eager cache prefills)."""

    def __init__(self):
        self.patched = []
        self.mask_skipped = 0
        self.rule_skipped = 0

    def __bool__(self):
        return bool(self.patched)

    def __str__(self):
        return "%s (eager skips so far: create_causal_mask %d, _ignore_causal_mask_sdpa %d)" % (
            ", ".join(self.patched) or "nothing", self.mask_skipped, self.rule_skipped)


@contextlib.contextmanager
def compiled_causal_skip():
    """Lets a traced forward skip transformers' causal mask when no padding mask was given and
    query and key lengths are equal (or the query is one token), as its eager forward does.

    Two places, as transformers versions differ: (1) the Llama module's create_causal_mask (the
    name modeling_llama imported at load, so that is where it is patched): with no attention mask,
    no sliding window, and no cached positions or a one-token query, it returns None (the mask is
    all-causal or all-ones, which SDPA's is_causal says); under a trace, eager's own rule cannot
    apply, since its packed-sequence detection reads position values; (2) masking_utils'
    _ignore_causal_mask_sdpa (or the older AttentionMaskConverter's), whatever its arguments.
    Anything else goes to transformers' own function unchanged. Yields a CausalSkip."""
    found = CausalSkip()
    undo = []

    def replace(owner, name, new, owner_label):
        """owner.name = new until the context ends (the attribute as stored: a class's staticmethod
        comes back as one)."""
        old = vars(owner)[name]
        setattr(owner, name, new)
        undo.append(lambda: setattr(owner, name, old))
        found.patched.append(owner_label + "." + name)
    try:
        from transformers.models.llama import modeling_llama
    except ImportError:
        modeling_llama = None
    if modeling_llama is not None and hasattr(modeling_llama, "create_causal_mask"):
        original_mask = modeling_llama.create_causal_mask
        bind_mask = _binder(original_mask)

        def create_causal_mask(*args, **kwargs):
            named = bind_mask(args, kwargs)
            embeds = _first(named, "input_embeds", "inputs_embeds")
            config = named.get("config")
            cache = named.get("past_key_values")
            if (embeds is not None and named.get("attention_mask", 0) is None
                    and getattr(config, "sliding_window", None) is None
                    and not getattr(cache, "is_compileable", False)
                    and (cache is None or embeds.shape[1] == 1 or cache.get_seq_length() == 0)):
                if not _is_compiling():  # counted in eager calls only: a trace's counts mean nothing here
                    found.mask_skipped += 1
                return None
            return original_mask(*args, **kwargs)

        replace(modeling_llama, "create_causal_mask", create_causal_mask, "modeling_llama")
    try:
        from transformers import masking_utils
    except ImportError:
        masking_utils = None
    if masking_utils is not None and hasattr(masking_utils, "_ignore_causal_mask_sdpa"):
        original_rule = masking_utils._ignore_causal_mask_sdpa
        bind_rule = _binder(original_rule)

        def skip(*args, **kwargs):
            named = bind_rule(args, kwargs)
            padding_mask = _first(named, "padding_mask", "attention_mask")
            query_length = _first(named, "query_length", "q_length")
            kv_length = _first(named, "kv_length")
            local = _first(named, "local_attention_size", "local_size", "sliding_window")
            if (_is_int(query_length) and _is_int(kv_length) and padding_mask is None
                    and (local is None or kv_length < local) and (query_length == 1 or kv_length == query_length)):
                if not _is_compiling():
                    found.rule_skipped += 1
                return True
            return original_rule(*args, **kwargs)

        replace(masking_utils, "_ignore_causal_mask_sdpa", skip, "masking_utils")
    else:
        try:
            from transformers.modeling_attn_mask_utils import AttentionMaskConverter
        except ImportError:
            AttentionMaskConverter = None
        if AttentionMaskConverter is not None and hasattr(AttentionMaskConverter, "_ignore_causal_mask_sdpa"):
            original_older = AttentionMaskConverter._ignore_causal_mask_sdpa
            bind_older = _binder(original_older)

            def skip_older(*args, **kwargs):
                named = bind_older(args, kwargs)
                attention_mask = named.get("attention_mask")
                embeds = named.get("inputs_embeds")
                past = named.get("past_key_values_length")
                window = named.get("sliding_window")
                if embeds is not None and _is_int(past) and attention_mask is None:
                    query_length = embeds.shape[1]
                    kv_length = query_length + past
                    if (window is None or kv_length < window) and (query_length == 1 or kv_length == query_length):
                        if not _is_compiling():
                            found.rule_skipped += 1
                        return True
                return original_older(*args, **kwargs)

            replace(AttentionMaskConverter, "_ignore_causal_mask_sdpa", staticmethod(skip_older),
                    "AttentionMaskConverter")
    try:
        yield found
    finally:
        for fn in reversed(undo):
            fn()


def timed_ms(fn, rounds, warmup=3):
    """Median milliseconds of fn over `rounds`, each between CUDA events."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def compare(name, got, want):
    """(ok, line): relative L2 error and max abs difference of logits against the baseline's."""
    got, want = got.float(), want.float()
    rel = ((got - want).norm() / want.norm()).item()
    mx = (got - want).abs().max().item()
    ok = rel <= MAX_REL_L2 and mx <= MAX_ABS
    return ok, "  %-22s rel L2 %.2e (limit %.0e), max abs %.2e (limit %.0e): %s" % (
        name, rel, MAX_REL_L2, mx, MAX_ABS, "ok" if ok else "DISAGREE")


class EvoNodeCount:
    """A torch.compile backend that counts evo.attention nodes in what dynamo traced, then hands
    the graph to inductor."""

    def __init__(self):
        self.nodes = 0

    def __call__(self, gm, example_inputs):
        self.nodes += sum(1 for n in gm.graph.nodes if "evo.attention" in str(n.target))
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)


def decode_tokens(model, steps):
    """The fixed tokens every way decodes, so each decodes the same sequence."""
    return torch.randint(0, model.config.vocab_size, (steps, 1), device="cuda",
                         generator=torch.Generator(device="cuda").manual_seed(1))


def decode_pass(forward, model, ids, tokens):
    """A prefill with a cache (eager `model`), then one `forward` step per token, each between
    CUDA events: (step milliseconds, the last step's logits)."""
    cache = model(input_ids=ids, use_cache=True).past_key_values
    samples, logits = [], None
    for i in range(tokens.shape[0]):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = forward(input_ids=tokens[i:i + 1].view(1, 1), past_key_values=cache, use_cache=True)
        end.record()
        end.synchronize()
        cache, logits = out.past_key_values, out.logits
        samples.append(start.elapsed_time(end))
    return samples, logits


def run_way(model, ids, tokens, rounds, decode_rounds, routed, compiled, skip_compiled_decode):
    """One way (SDPA or evo, eager or compiled): prefill logits and time, and a first decode pass
    (its logits, and its step time: every step meets a key length for the first time). Compiled
    ways also time `decode_rounds` more passes here (warm; eager ways are timed alternating, in
    alternate_decode)."""
    result = {"evo_graph_nodes": None, "evo_prefill_nodes": None, "decode_ms": None, "decode_first_ms": None,
              "decode_note": ""}
    routing = evo_kernels.sdpa_routing() if routed else contextlib.nullcontext()
    torch._dynamo.reset()
    evo_kernels.reset_stats()
    with torch.no_grad(), routing:
        forward = model
        if compiled:
            counter = EvoNodeCount()
            forward = torch.compile(model, fullgraph=True, backend=counter)
        result["prefill_logits"] = forward(input_ids=ids, use_cache=False).logits
        if compiled:
            result["evo_graph_nodes"] = result["evo_prefill_nodes"] = counter.nodes
        result["prefill_ms"] = timed_ms(lambda: forward(input_ids=ids, use_cache=False), rounds)
        if not compiled:
            result["stats"] = evo_kernels.stats()
        if compiled and skip_compiled_decode:
            result["decode_note"] = "skipped (--skip-compiled-decode)"
            return result
        try:
            first, result["decode_logits"] = decode_pass(forward, model, ids, tokens)
            result["decode_first_ms"] = statistics.median(first)
            if compiled:
                warm = [ms for _ in range(decode_rounds) for ms in decode_pass(forward, model, ids, tokens)[0]]
                result["decode_ms"] = statistics.median(warm)
                result["evo_graph_nodes"] = counter.nodes
        except Exception as e:
            result["decode_note"] = "failed: %s" % str(e).splitlines()[0]
            traceback.print_exc()
    return result


def alternate_decode(model, ids, tokens, decode_rounds, ways):
    """Eager decode timing, fair between SDPA and evo: both already ran one pass (warm-up), then
    `decode_rounds` rounds, each one pass per way, the order swapped every round; the median step
    over all rounds goes to ways[name]["decode_ms"]. Returns evo's call counts over its rounds."""
    samples = {"eager SDPA": [], "eager evo": []}
    evo_kernels.reset_stats()
    with torch.no_grad():
        for r in range(decode_rounds):
            order = ("eager SDPA", "eager evo") if r % 2 == 0 else ("eager evo", "eager SDPA")
            for name in order:
                routing = evo_kernels.sdpa_routing() if name == "eager evo" else contextlib.nullcontext()
                with routing:
                    samples[name] += decode_pass(model, model, ids, tokens)[0]
    for name, ms in samples.items():
        if name in ways:
            ways[name]["decode_ms"] = statistics.median(ms)
    return evo_kernels.stats()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--decode-steps", type=int, default=16)
    parser.add_argument("--decode-rounds", type=int, default=4, help="timed decode passes per way, after one warm-up")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--skip-compiled-decode", action="store_true")
    args = parser.parse_args()

    print("torch %s, transformers %s, %s; evo: %s" % (torch.__version__, transformers.__version__,
                                                       torch.cuda.get_device_name(), evo_kernels.CHOICE_BY_DEVICE))
    model = build_model(args.layers, args.vocab)
    ids = torch.randint(0, args.vocab, (1, args.seq), device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
    tokens = decode_tokens(model, args.decode_steps)
    ways = {}
    failures = []
    decode_stats = None
    for compiled in (False, True):
        skip = compiled_causal_skip() if compiled else contextlib.nullcontext(None)
        with skip as skip_found:
            if compiled:
                print("compiled: transformers' causal-mask skip patched: %s" % (skip_found if skip_found else
                      "NOTHING found: compiled calls carry a mask, so evo falls back in them"), flush=True)
            for routed in (False, True):
                name = "%s %s" % ("compiled" if compiled else "eager", "evo" if routed else "SDPA")
                print("running: %s" % name, flush=True)
                try:
                    ways[name] = r = run_way(model, ids, tokens, args.rounds, args.decode_rounds, routed, compiled,
                                             args.skip_compiled_decode)
                    print("done: %s: prefill %.3f ms, first decode pass step %s ms, evo.attention nodes %s %s"
                          % (name, r["prefill_ms"], "%.3f" % r["decode_first_ms"] if r["decode_first_ms"] else "-",
                             r["evo_prefill_nodes"], r["decode_note"]), flush=True)
                except Exception as e:
                    failures.append("%s: %s" % (name, str(e).splitlines()[0] if str(e) else type(e).__name__))
                    traceback.print_exc()
            if compiled:
                print("compiled: causal-mask skip after the compiled ways: %s" % skip_found, flush=True)
        if not compiled and "eager SDPA" in ways and "eager evo" in ways:
            print("timing eager decode: %d rounds alternating SDPA and evo" % args.decode_rounds, flush=True)
            decode_stats = alternate_decode(model, ids, tokens, args.decode_rounds, ways)
    evo_compiled = ways.get("compiled evo")
    if evo_compiled is not None and not evo_compiled["evo_prefill_nodes"]:
        failures.append("compiled evo: no evo.attention node in the traced prefill graph")

    print("\nLlama (%d layers, hidden 512, 8 heads / 2 kv heads, head dim 64) fp16, prefill 1x%d, decode %d steps"
          " (key lengths %d..%d):" % (args.layers, args.seq, args.decode_steps, args.seq + 1,
                                      args.seq + args.decode_steps))
    print("  prefill: median of %d calls after 3 warm-up calls. decode step: median over %d passes of %d steps,"
          " after a first pass (eager ways alternating per pass, compiled ways one after the other); first pass:"
          " the median step of that first pass, where every key length is new (and compiled ways compile)"
          % (args.rounds, args.decode_rounds, args.decode_steps))
    print("  %-14s %12s %16s %16s  %s" % ("way", "prefill ms", "decode step ms", "first pass ms", "notes"))
    for name, r in ways.items():
        decode_ms = "%.3f" % r["decode_ms"] if r["decode_ms"] is not None else "-"
        first_ms = "%.3f" % r["decode_first_ms"] if r["decode_first_ms"] is not None else "-"
        notes = [r["decode_note"]] if r["decode_note"] else []
        if r["evo_graph_nodes"] is not None:
            notes.append("evo.attention nodes in the traced graphs: prefill %d, all %d" % (
                r["evo_prefill_nodes"], r["evo_graph_nodes"]))
        print("  %-14s %12.3f %16s %16s  %s" % (name, r["prefill_ms"], decode_ms, first_ms, "; ".join(notes)))
    if "eager evo" in ways:
        s = ways["eager evo"]["stats"]
        print("attention calls in the eager evo prefills (first call and timing rounds): evo served %d,"
              " SDPA served %d %s" % (s["served"], s["fell_back_total"], s["fell_back"] or ""))
    if decode_stats is not None:
        print("attention calls in the eager evo decode rounds (cache prefill: seq_q = seq_k, causal; steps: seq_q 1,"
              " seq_k %d..%d, not causal): evo served %d, SDPA served %d %s"
              % (args.seq + 1, args.seq + args.decode_steps, decode_stats["served"], decode_stats["fell_back_total"],
                 decode_stats["fell_back"] or ""))
        expected = args.decode_rounds * (args.decode_steps + 1) * args.layers
        print("  (%d expected in all: %d rounds x (1 cache prefill + %d steps) x %d layers)"
              % (expected, args.decode_rounds, args.decode_steps, args.layers))

    baseline = ways.get("eager SDPA")
    print("logits against eager SDPA:")
    for name, r in ways.items():
        if baseline is None or r is baseline:
            continue
        ok, line = compare(name + " prefill", r["prefill_logits"], baseline["prefill_logits"])
        print(line)
        failures += [] if ok else [name + " prefill logits"]
        if r.get("decode_logits") is not None and baseline.get("decode_logits") is not None:
            ok, line = compare(name + " decode", r["decode_logits"], baseline["decode_logits"])
            print(line)
            failures += [] if ok else [name + " decode logits"]
    print("llama_e2e: %s" % ("PASS" if not failures and baseline else "FAIL: " + "; ".join(failures or ["no baseline"])))
    return 0 if not failures and baseline else 1


if __name__ == "__main__":
    sys.exit(main())

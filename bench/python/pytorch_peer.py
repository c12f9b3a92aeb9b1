#!/usr/bin/env python3
"""The C++ benchmark cases, run in PyTorch eager mode: the peer of bench/bench_*.cpp.

Every case carries the name of the C++ benchmark it mirrors (same shapes, same
thread count, same work per iteration), so bench/report.py can put them side by
side. Timing as Google Benchmark does it with --benchmark_repetitions: one
warm-up call, then R repetitions, each running the case until at least
--min-time seconds have passed; a repetition's time is its mean per iteration,
and the reported time is the median of the repetitions (the minimum is kept too);
a case slower than 5 s per call gets a single repetition.

Output (--out): Google Benchmark's JSON layout, so the report reads both the
same way: {"context": {...}, "benchmarks": [{"name", "run_name", "run_type":
"iteration" | "aggregate", "aggregate_name": "median" | "min", "real_time",
"time_unit": "ms", "iterations", "tokens_per_s"}]}.

The models are bench/python/torch_models.py's (written from docs/MODELS.md,
the test suite's reference too), batched over sequences, with KV caches for
decode. Models with bf16 weights run in bf16 arithmetic (PyTorch's CPU bf16
kernels); the C++ cases of the same name widen bf16 weights and compute in
fp32 unless named compute:bf16. Run with Debian's PyTorch 1.13 (the authors'
era) or with the current PyTorch 2 of scripts/setup_peers.sh; the JSON names
the version.
"""
import argparse
import ctypes
import functools
import json
import math
import os
import platform
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402

torch.set_grad_enabled(False)

VOCAB = 32000


# ----------------------------------------------------------------------------- configurations
def complexity_config(d, layers, heads, kv, inter, mlp, experts, mu, vocab=VOCAB):
    return dict(hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
                intermediate_size=inter, vocab_size=vocab, mlp_type=mlp, num_experts=experts,
                use_mu_guidance=mu, norm_eps=1e-6, rope_theta=10000.0)


PRESETS = {
    "187M": complexity_config(768, 18, 12, 4, 2048, "token_routed", 4, True),
    "177M": complexity_config(768, 18, 12, 4, 2048, "token_routed", 4, False),
    "171M_dense": complexity_config(768, 18, 12, 4, 2416, "swiglu", 1, False),
    "384M": complexity_config(1024, 20, 16, 4, 3200, "token_routed", 4, True),
    "384M_dense": complexity_config(1024, 20, 16, 4, 4358, "swiglu", 1, False),
    "384M_learned": complexity_config(1024, 20, 16, 4, 3200, "learned", 4, True),
}
PRISM_MINI = dict(n_layer=8, n_head=8, n_embd=512, vocab_size=50304, block_size=512, prism_expansion_ratio=2,
                  prism_freq_multiplier=3.1415926535)


def normal(*shape, std=0.02, dtype=torch.float32):
    return (torch.randn(*shape) * std).to(dtype)


def complexity_tensors(c, layers=None, dtype=torch.float32, seed=0):
    """Random tensors with the names torch_models.ComplexityDeep reads (token_to_expert: t mod E)."""
    torch.manual_seed(seed)
    d, h, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = d // h
    E, I = c["num_experts"], c["intermediate_size"]
    ie = I // E if c["mlp_type"] != "swiglu" else I
    L = c["num_hidden_layers"] if layers is None else layers
    V = c["vocab_size"]
    t = {"embed_tokens.weight": normal(V, d, dtype=dtype), "norm.weight": torch.ones(d, dtype=dtype),
         "mu_init": torch.zeros(1, 1, d, dtype=dtype)}
    for i in range(L):
        p = f"layers.{i}."
        t[p + "input_layernorm.weight"] = torch.ones(d, dtype=dtype)
        t[p + "post_attention_layernorm.weight"] = torch.ones(d, dtype=dtype)
        for name, rows in (("q", h * hd), ("k", kv * hd), ("v", kv * hd)):
            t[p + f"self_attn.{name}_proj.weight"] = normal(rows, d, dtype=dtype)
            if c["use_mu_guidance"]:
                t[p + f"self_attn.mu_to_{name}.weight"] = normal(rows, d, dtype=dtype)
        t[p + "self_attn.o_proj.weight"] = normal(d, h * hd, dtype=dtype)
        t[p + "self_attn.q_norm.weight"] = torch.ones(hd, dtype=dtype)
        t[p + "self_attn.k_norm.weight"] = torch.ones(hd, dtype=dtype)
        m = p + "mlp."
        if c["mlp_type"] == "swiglu":
            t[m + "gate_proj.weight"] = normal(ie, d, dtype=dtype)
            t[m + "up_proj.weight"] = normal(ie, d, dtype=dtype)
            t[m + "down_proj.weight"] = normal(d, ie, dtype=dtype)
        else:
            t[m + "gate_proj_w"] = normal(E, d, ie, dtype=dtype)
            t[m + "up_proj_w"] = normal(E, d, ie, dtype=dtype)
            t[m + "down_proj_w"] = normal(E, ie, d, dtype=dtype)
            t[m + "shared_gate.weight"] = normal(ie, d, dtype=dtype)
            t[m + "shared_up.weight"] = normal(ie, d, dtype=dtype)
            t[m + "shared_down.weight"] = normal(d, ie, dtype=dtype)
            t[m + "token_to_expert"] = torch.arange(V) % E
            if c["mlp_type"] == "learned":
                t[m + "router.weight"] = normal(E, d, dtype=dtype)
        if c["use_mu_guidance"]:
            t[p + "mu_guidance.mu"] = torch.ones(d, dtype=dtype)
            t[p + "mu_guidance.mu_proj.weight"] = normal(d, d, dtype=dtype)
    return t


# ----------------------------------------------------------------------------- PRISM
def prism_tensors(c, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    d, V, L = c["n_embd"], c["vocab_size"], c["n_layer"]
    u_rows = 2 * c["n_head"] * (d // c["n_head"]) * c["prism_expansion_ratio"]
    t = {"transformer.wte.weight": normal(V, d), "transformer.wpe.weight": normal(c["block_size"], d),
         "transformer.ln_f.weight": torch.ones(d), "transformer.ln_f.bias": torch.zeros(d)}
    for i in range(L):
        p = f"transformer.h.{i}."
        t[p + "ln_1.weight"], t[p + "ln_1.bias"] = torch.ones(d), torch.zeros(d)
        t[p + "ln_2.weight"], t[p + "ln_2.bias"] = torch.ones(d), torch.zeros(d)
        t[p + "attn.u_proj.weight"] = normal(u_rows, d, std=1.0 / math.sqrt(u_rows))
        t[p + "attn.lambda_q"] = torch.tensor(0.5)
        t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = normal(4 * d, d), torch.zeros(4 * d)
        t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = normal(d, 4 * d), torch.zeros(d)
    return {k: v.to(dtype) for k, v in t.items()}


# ----------------------------------------------------------------------------- the cases
class Case:
    def __init__(self, name, threads, tokens, setup):
        self.name, self.threads, self.tokens, self.setup = name, threads, tokens, setup


CASES = []


def case(name, threads, tokens):
    def register(setup):
        CASES.append(Case(name, threads, tokens, setup))
        return setup

    return register


def suffix(tokens, threads):
    return f"/tokens:{tokens}/threads:{threads}"


def add_norm_cases():
    for threads in (1, 2):
        for T in (512, 2048):
            for d in (768, 1024):
                @case(f"rmsnorm/d:{d}" + suffix(T, threads), threads, T)
                def _(d=d, T=T):
                    x, w = torch.randn(T, d), torch.randn(d)
                    return lambda: torch_models.rms_norm(x, w, 1e-6)

            @case("layernorm/d:512" + suffix(T, threads), threads, T)
            def _(T=T):
                x, w, b = torch.randn(T, 512), torch.randn(512), torch.randn(512)
                return lambda: F.layer_norm(x, (512,), w, b, 1e-5)

            @case("rope/rotate_half/heads:16x64" + suffix(T, threads), threads, T)
            def _(T=T):
                rope, x = torch_models.Rope(T, 64, 10000.0), torch.randn(16, T, 64)
                return lambda: rope.rotate_half(x, 0)

            @case("rope/interleaved/heads:16x128" + suffix(T, threads), threads, T)
            def _(T=T):
                rope, x = torch_models.Rope(T, 128, 10000.0 * math.pi), torch.randn(16, T, 128)
                return lambda: rope.interleaved(x, 0)


LINEAR_SHAPES = [("qkv_mu/187M", 1280, 1536), ("o_proj/187M", 768, 768), ("qkv_mu/384M", 1536, 2048),
                 ("o_proj/384M", 1024, 1024), ("u/prism_mini", 2048, 512)]


def add_linear_cases():
    for name, out, inp in LINEAR_SHAPES:
        runs = [(T, 2) for T in (512, 2048)] + [(2048, 1)]
        for T, threads in runs:
            for dt, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
                @case(f"linear/{name}/{dt}" + suffix(T, threads), threads, T)
                def _(T=T, out=out, inp=inp, dtype=dtype):
                    x, w = torch.randn(T, inp, dtype=dtype), normal(out, inp, dtype=dtype)
                    return lambda: F.linear(x, w)

        for threads in (1, 2):
            for dt, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
                @case(f"linear/{name}/{dt}" + suffix(1, threads), threads, 1)
                def _(out=out, inp=inp, dtype=dtype):
                    # Copies filling 1 GiB, one per call: the weights come from memory.
                    esize = torch.tensor([], dtype=dtype).element_size()
                    copies = (1 << 30) // (out * inp * esize)
                    pool = torch.full((copies, out, inp), 0.01, dtype=dtype)
                    x = torch.randn(1, inp, dtype=dtype)
                    state = {"i": 0}

                    def run():
                        state["i"] = (state["i"] + 1) % copies
                        return F.linear(x, pool[state["i"]])

                    return run


def add_attention_cases():
    def gqa(preset, T, decode_context=None):
        c = PRESETS[preset]
        peer = torch_models.ComplexityDeep(c, complexity_tensors(c, layers=1), max_positions=max(T, decode_context or 0))
        d = c["hidden_size"]
        if decode_context is None:
            a, mu = torch.randn(1, T, d), torch.randn(1, T, d)
            return lambda: peer.attention(0, a, mu, 0)
        peer.new_cache(1, decode_context)
        a, mu = torch.randn(1, 1, d), torch.randn(1, 1, d)
        peer.cache.k.normal_()
        peer.cache.v.normal_()
        return lambda: peer.attention(0, a, mu, decode_context - 1)

    for name, preset in (("mu_gqa/187M", "187M"), ("gqa_no_mu/177M", "177M")):
        for T, threads in ((128, 2), (512, 2), (2048, 2), (2048, 1)):
            case(f"attention/{name}" + suffix(T, threads), threads, T)(lambda p=preset, T=T: gqa(p, T))
        for ctx in (128, 512, 2048):
            case(f"attention/{name}/decode/context:{ctx}/threads:2", 2, 1)(
                lambda p=preset, ctx=ctx: gqa(p, 1, ctx))

    for T, threads in ((512, 2), (2048, 2), (2048, 1)):
        @case("attention/core/gqa_12x4x64" + suffix(T, threads), threads, T)
        def _(T=T):
            q, k, v = torch.randn(1, 12, T, 64), torch.randn(1, 4, T, 64), torch.randn(1, 4, T, 64)
            return lambda: torch_models.attend(q, k, v, 0.125)

    def prism_layer(d, heads, T):
        c = dict(PRISM_MINI, n_layer=1, n_embd=d, n_head=heads, block_size=T)
        peer = torch_models.Prism(c, prism_tensors(c))
        x = torch.randn(1, T, d)
        return lambda: peer.attention(0, x, 0)

    def mha_layer(d, heads, T):
        wqkv, wo, x = normal(3 * d, d), normal(d, d), torch.randn(1, T, d)
        hd = d // heads

        def run():
            q, k, v = F.linear(x, wqkv).view(1, T, 3, heads, hd).permute(2, 0, 3, 1, 4)
            o = torch_models.attend(q, k, v, 1.0 / math.sqrt(hd))
            return F.linear(o.transpose(1, 2).reshape(1, T, d), wo)

        return run

    for label, d, heads, runs in (("mini", 512, 8, ((128, 2), (512, 2), (2048, 2), (2048, 1))),
                                  ("d1024", 1024, 16, ((512, 2), (2048, 2)))):
        for T, threads in runs:
            case(f"attention/prism/{label}" + suffix(T, threads), threads, T)(
                lambda d=d, h=heads, T=T: prism_layer(d, h, T))
            case(f"attention/mha/{label}" + suffix(T, threads), threads, T)(
                lambda d=d, h=heads, T=T: mha_layer(d, h, T))


def routed_config(experts, width=800, d=1024, mlp="token_routed"):
    return complexity_config(d, 1, 16, 4, width * experts, mlp, experts, False)


def add_mlp_cases():
    def mlp_case(config, kind, T):
        peer = torch_models.ComplexityDeep(config, complexity_tensors(config, layers=1))
        x = torch.randn(T, config["hidden_size"])
        tokens = torch.randint(0, VOCAB, (T,))
        if kind != "masked":
            return lambda: peer.mlp(0, x, tokens)
        p, E = "layers.0.mlp.", config["num_experts"]
        g, u, dn = peer.w(p + "gate_proj_w"), peer.w(p + "up_proj_w"), peer.w(p + "down_proj_w")
        sg, su, sd = peer.w(p + "shared_gate.weight"), peer.w(p + "shared_up.weight"), peer.w(p + "shared_down.weight")
        xs = x
        masks = [(peer.w(p + "token_to_expert")[tokens] == e).to(xs.dtype)[:, None] for e in range(E)]
        swiglu, expert = torch_models.swiglu, torch_models.expert

        def run():
            out = swiglu(xs, sg, su, sd)
            for e in range(E):
                out = out + masks[e] * expert(xs, g[e], u[e], dn[e])
            return out

        return run

    c384 = {"dense_swiglu": PRESETS["384M_dense"], "token_routed": PRESETS["384M"],
            "learned_router": PRESETS["384M_learned"], "masked_dense_dispatch": PRESETS["384M"]}
    for T, threads in ((1, 2), (512, 2), (2048, 2), (2048, 1)):
        for kind, cfg in c384.items():
            if threads == 1 and kind in ("learned_router", "masked_dense_dispatch"):
                continue
            case(f"mlp/{kind}/384M" + suffix(T, threads), threads, T)(
                lambda cfg=cfg, kind=kind, T=T: mlp_case(cfg, "masked" if kind.startswith("masked") else kind, T))
    case("mlp/dense_swiglu/171M" + suffix(2048, 2), 2, 2048)(lambda: mlp_case(PRESETS["171M_dense"], "dense", 2048))
    case("mlp/token_routed/187M" + suffix(2048, 2), 2, 2048)(lambda: mlp_case(PRESETS["187M"], "routed", 2048))
    for E in (1, 2, 4, 8, 16):
        case(f"mlp/token_routed/experts:{E}" + suffix(2048, 2), 2, 2048)(
            lambda E=E: mlp_case(routed_config(E), "routed", 2048))
        case(f"mlp/masked_dense_dispatch/experts:{E}" + suffix(2048, 2), 2, 2048)(
            lambda E=E: mlp_case(routed_config(E), "masked", 2048))
    for T, threads in ((512, 2), (2048, 2), (2048, 1)):
        @case("mlp/gelu/prism_mini" + suffix(T, threads), threads, T)
        def _(T=T):
            fc, fb, pj, pb = normal(2048, 512), normal(2048), normal(512, 2048), normal(512)
            x = torch.randn(T, 512)
            return lambda: F.linear(F.gelu(F.linear(x, fc, fb)), pj, pb)


_model_cache = {}


def complexity_model(preset, dtype):
    key = (preset, dtype)
    if key not in _model_cache:
        _model_cache.clear()  # one model alive at a time
        c = PRESETS[preset]
        _model_cache[key] = torch_models.ComplexityDeep(c, complexity_tensors(c, dtype=dtype))
    return _model_cache[key]


def prism_model(dtype=torch.float32):
    key = ("prism", dtype)
    if key not in _model_cache:
        _model_cache.clear()
        _model_cache[key] = torch_models.Prism(PRISM_MINI, prism_tensors(PRISM_MINI, dtype=dtype))
    return _model_cache[key]


def add_model_cases():
    def prefill(make, vocab, B, T):
        def setup():
            m = make()
            tokens = torch.randint(0, vocab, (B, T))

            def run():
                m.new_cache(B, T)
                return m.forward(tokens, 0)

            return run

        return setup

    def decode(make, vocab, B, ctx):
        def setup():
            m = make()
            m.new_cache(B, ctx)
            tokens = torch.randint(0, vocab, (B, 1))
            return lambda: m.forward(tokens, ctx - 1)

        return setup

    def model_cases(base, make, vocab, prefills, decodes):
        for B, T, threads in prefills:
            case(f"{base}/prefill/batch:{B}/tokens:{T}/threads:{threads}", threads, B * T)(prefill(make, vocab, B, T))
        for B, ctx, threads in decodes:
            case(f"{base}/decode/batch:{B}/context:{ctx}/threads:{threads}", threads, B)(decode(make, vocab, B, ctx))

    def complexity(preset, dt, prefills, decodes):
        dtype = torch.float32 if dt == "f32" else torch.bfloat16
        model_cases(f"model/complexity/{preset}/{dt}", lambda: complexity_model(preset, dtype), VOCAB, prefills, decodes)

    complexity("187M", "f32", [(1, 128, 2), (1, 512, 2), (1, 2048, 2), (4, 512, 2), (1, 512, 1), (1, 2048, 1)],
               [(1, 128, 2), (1, 512, 2), (1, 2048, 2), (4, 512, 2), (1, 512, 1)])
    complexity("187M", "bf16", [(1, 512, 2), (1, 512, 1), (1, 2048, 2), (1, 2048, 1)],
               [(1, 128, 2), (1, 512, 2), (1, 2048, 2), (1, 512, 1)])
    complexity("171M_dense", "f32", [(1, 512, 2)], [(1, 512, 2)])
    complexity("384M", "f32", [(1, 512, 2), (1, 512, 1)], [(1, 512, 2), (1, 2048, 2)])
    complexity("384M", "bf16", [(1, 512, 2), (1, 512, 1)], [(1, 512, 2), (1, 2048, 2)])
    complexity("384M_dense", "f32", [(1, 512, 2)], [(1, 512, 2)])
    complexity("384M_dense", "bf16", [], [(1, 512, 2)])

    V = PRISM_MINI["vocab_size"]
    bf16_prism = lambda: prism_model(torch.bfloat16)  # noqa: E731
    for dt, make, prefills, decodes in (
            ("f32", prism_model, ((1, 128, 2), (1, 512, 2), (4, 512, 2), (16, 128, 2), (1, 512, 1)),
             ((1, 128, 2), (1, 512, 2), (4, 512, 2), (1, 512, 1))),
            ("bf16", bf16_prism, ((1, 512, 2),), ((1, 128, 2), (1, 512, 2), (1, 512, 1)))):
        model_cases(f"model/prism/mini/{dt}", make, V, prefills, decodes)


# The C++ suite each case belongs to (bench/bench_<suite>.cpp), by name.
SUITES = {"norms": r"^(rmsnorm|layernorm|rope)/", "linear": r"^linear/", "attention": r"^attention/",
          "mlp": r"^mlp/", "complexity_model": r"^model/complexity/", "prism_model": r"^model/prism/"}


# ----------------------------------------------------------------------------- threads
@functools.lru_cache(maxsize=None)
def openblas_thread_setter():
    """openblas_set_num_threads of an OpenBLAS loaded in this process, or None. Debian's PyTorch does
    its fp32 products in OpenBLAS (pthreads build), whose pool torch.set_num_threads does not size:
    without this a "threads:1" case multiplied on every core."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "libopenblas" in line})
    except OSError:
        return None
    for path in paths:
        try:
            return ctypes.CDLL(path).openblas_set_num_threads
        except (OSError, AttributeError):
            continue
    return None


def set_threads(n):
    """n threads for PyTorch's own kernels and for the BLAS it calls."""
    torch.set_num_threads(n)
    setter = openblas_thread_setter()
    if setter:
        setter(n)


# ----------------------------------------------------------------------------- timing and output
def seconds_per_call(fn, min_time):
    """(mean seconds per call, calls) of fn called until at least min_time seconds have passed
    (one call at least); fn is warm."""
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_time:
            return elapsed / n, n


def measure(fn, min_time, repetitions, slow=5.0):
    """Per-repetition (mean seconds per call, calls); a case slower than `slow`
    seconds per call gets one repetition, to keep the suite's run time bounded."""
    t0 = time.perf_counter()
    fn()  # warm-up: allocations, first touch, masks and tables
    if time.perf_counter() - t0 > slow:
        repetitions = 1
    return [seconds_per_call(fn, min_time) for _ in range(repetitions)]


def timed(name, fn, tokens, min_time, repetitions):
    """measure() of fn as Google Benchmark's JSON entries (every repetition, median, min) and the median."""
    reps = measure(fn, min_time, repetitions)
    out = [entry(name, "iteration", s, n, tokens, repetition=i) for i, (s, n) in enumerate(reps)]
    times = [s for s, _ in reps]
    out.append(entry(name, "aggregate", statistics.median(times), len(reps), tokens, "median"))
    out.append(entry(name, "aggregate", min(times), len(reps), tokens, "min"))
    return out, statistics.median(times)


def write_results(path, library, extra, min_time, repetitions, results):
    """The JSON file the report reads: context (date, host, library, versions) and the entries."""
    context = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host_name": platform.node(), "library": library,
               "python": platform.python_version(), "min_time": min_time, "repetitions": repetitions, **extra}
    if path:
        with open(path, "w") as f:
            json.dump({"context": context, "benchmarks": results}, f, indent=1)


def entry(name, run_type, seconds, iterations, tokens, aggregate=None, repetition=None):
    e = {"name": name + ("" if aggregate is None else "_" + aggregate), "run_name": name, "run_type": run_type,
         "real_time": seconds * 1e3, "time_unit": "ms", "iterations": iterations,
         "tokens_per_s": tokens / seconds}
    if aggregate is not None:
        e["aggregate_name"] = aggregate
    if repetition is not None:
        e["repetition_index"] = repetition
    return e


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON output path")
    ap.add_argument("--suite", default="", choices=[""] + sorted(SUITES),
                    help="only the cases of one C++ suite (bench_<suite>)")
    ap.add_argument("--filter", default="", help="regular expression on case names")
    ap.add_argument("--exclude", default="", help="regular expression: leave out the cases it matches")
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds per repetition (at least one call)")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args(argv)
    add_norm_cases()
    add_linear_cases()
    add_attention_cases()
    add_mlp_cases()
    add_model_cases()
    selected = [c for c in CASES if re.search(args.filter, c.name)
                and not (args.exclude and re.search(args.exclude, c.name))
                and (not args.suite or re.search(SUITES[args.suite], c.name))]
    if args.list:
        print("\n".join(c.name for c in selected))
        return 0
    results = []
    for c in selected:
        set_threads(c.threads)
        fn = c.setup()
        entries, median = timed(c.name, fn, c.tokens, args.min_time, args.repetitions)
        del fn
        results += entries
        print(f"{c.name:80s} {median * 1e3:10.3f} ms", flush=True)
    _model_cache.clear()
    write_results(args.out, "pytorch-eager", {"torch_version": torch.__version__,
                                              "torch_parallel_info": torch.__config__.parallel_info(),
                                              "openblas_threads_set": openblas_thread_setter() is not None},
                  args.min_time, args.repetitions, results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

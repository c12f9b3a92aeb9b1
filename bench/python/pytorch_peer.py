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

Implementations follow bench/python/torch_models.py (written from docs/MODELS.md),
batched over sequences and with KV caches for decode, as an eager serving
loop would run them: RoPE cos/sin tables and causal masks are built once per
shape, projections are the model's own separate nn.Linear products. Models
with bf16 weights run in bf16 arithmetic (PyTorch's CPU bf16 kernels), while
the C++ library widens bf16 weights and computes in fp32: same bytes read,
different arithmetic. --check compares the batched models with
torch_models.py on tiny configurations and exits.
"""
import argparse
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


# ----------------------------------------------------------------------------- shared pieces
class Rope:
    """cos/sin tables of every position, built once (as serving code caches them)."""

    def __init__(self, positions, dim, theta, dtype=torch.float32):
        ang = torch_models.rope_tables(torch.arange(positions), dim, theta)
        self.cos, self.sin = ang.cos().to(dtype), ang.sin().to(dtype)
        self.cos2 = torch.cat([self.cos, self.cos], -1)
        self.sin2 = torch.cat([self.sin, self.sin], -1)

    def rotate_half(self, x, pos0):
        """x [..., T, dim], positions pos0..pos0+T-1, pairs (j, j + dim/2)."""
        t = x.shape[-2]
        c, s = self.cos2[pos0 : pos0 + t], self.sin2[pos0 : pos0 + t]
        half = x.shape[-1] // 2
        return x * c + torch.cat([-x[..., half:], x[..., :half]], -1) * s

    def interleaved(self, x, pos0):
        """x [..., T, dim], pairs (2i, 2i + 1)."""
        t = x.shape[-2]
        c, s = self.cos[pos0 : pos0 + t], self.sin[pos0 : pos0 + t]
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * c - b * s, a * s + b * c], -1).flatten(-2)


_masks = {}


def causal_mask(t, keys):
    """Additive mask [t, keys] for queries at the last t of `keys` positions."""
    key = (t, keys)
    if key not in _masks:
        m = torch.ones(t, keys, dtype=torch.bool).triu(diagonal=keys - t + 1)
        _masks[key] = torch.zeros(t, keys).masked_fill(m, float("-inf"))
    return _masks[key]


def attend(q, k, v, scale):
    """q [B, H, T, D]; k, v [B, H, S, D] with the queries at the last T of S positions."""
    s = (q @ k.transpose(-1, -2)) * scale
    if q.shape[-2] > 1:
        s = s + causal_mask(q.shape[-2], k.shape[-2]).to(s.dtype)
    return torch.softmax(s, -1) @ v


def swiglu(x, gate, up, down):
    """nn.Linear layout: gate/up [I, d], down [d, I]."""
    return F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down)


def expert(x, g, u, dn):
    """Input-major expert weights [d, I], [d, I], [I, d]."""
    return (F.silu(x @ g) * (x @ u)) @ dn


# ----------------------------------------------------------------------------- COMPLEXITY-DEEP, batched
class ComplexityPeer:
    """torch_models.ComplexityDeep over a batch [B, T], with a KV cache for decode."""

    def __init__(self, config, tensors, max_positions=4096):
        self.ref = torch_models.ComplexityDeep(config, tensors)
        r = self.ref
        self.dtype = tensors["embed_tokens.weight"].dtype
        self.rope = Rope(max_positions, r.hd, r.theta, self.dtype)
        self.cache_k = self.cache_v = None

    def w(self, name):
        return self.ref.w(name)

    def new_cache(self, batch, capacity):
        r = self.ref
        shape = (r.L, batch, r.kv, capacity, r.hd)
        self.cache_k = torch.zeros(shape, dtype=self.dtype)
        self.cache_v = torch.zeros(shape, dtype=self.dtype)

    def attention(self, i, a, mu, pos0):
        r, p = self.ref, f"layers.{i}.self_attn."
        B, T, _ = a.shape
        q = F.linear(a, self.w(p + "q_proj.weight"))
        k = F.linear(a, self.w(p + "k_proj.weight"))
        v = F.linear(a, self.w(p + "v_proj.weight"))
        if r.use_mu:
            q = q + F.linear(mu, self.w(p + "mu_to_q.weight"))
            k = k + F.linear(mu, self.w(p + "mu_to_k.weight"))
            v = v + F.linear(mu, self.w(p + "mu_to_v.weight"))
        q = q.view(B, T, r.h, r.hd).transpose(1, 2)
        k = k.view(B, T, r.kv, r.hd).transpose(1, 2)
        v = v.view(B, T, r.kv, r.hd).transpose(1, 2)
        q = torch_models.rms_norm(q, self.w(p + "q_norm.weight"), 1e-6)
        k = torch_models.rms_norm(k, self.w(p + "k_norm.weight"), 1e-6)
        q, k = self.rope.rotate_half(q, pos0), self.rope.rotate_half(k, pos0)
        if self.cache_k is not None:
            self.cache_k[i, :, :, pos0 : pos0 + T] = k
            self.cache_v[i, :, :, pos0 : pos0 + T] = v
            k, v = self.cache_k[i, :, :, : pos0 + T], self.cache_v[i, :, :, : pos0 + T]
        g = r.h // r.kv
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        o = attend(q, k, v, 1.0 / math.sqrt(r.hd))
        return F.linear(o.transpose(1, 2).reshape(B, T, r.h * r.hd), self.w(p + "o_proj.weight"))

    def mlp(self, i, x, tokens):
        """torch_models' MLP (boolean-mask loop over experts, docs/MODELS.md §8.4), dtype-preserving."""
        r, p = self.ref, f"layers.{i}.mlp."
        B, T, d = x.shape
        xs = x.reshape(B * T, d)
        if r.mlp_type == "swiglu":
            out = swiglu(xs, self.w(p + "gate_proj.weight"), self.w(p + "up_proj.weight"), self.w(p + "down_proj.weight"))
            return out.view(B, T, d)
        out = swiglu(xs, self.w(p + "shared_gate.weight"), self.w(p + "shared_up.weight"), self.w(p + "shared_down.weight"))
        gate, up, down = self.w(p + "gate_proj_w"), self.w(p + "up_proj_w"), self.w(p + "down_proj_w")
        scale = None
        if r.mlp_type == "token_routed":
            experts = self.w(p + "token_to_expert")[tokens.reshape(-1)]
        else:  # learned router, top-1, soft-gated
            probs = torch.softmax(F.linear(xs, self.w(p + "router.weight")).float(), -1)
            experts = probs.argmax(-1)
            scale = probs.gather(-1, experts[:, None]).to(xs.dtype)
        routed = torch.zeros_like(xs)
        for e in range(r.E):
            rows = experts == e
            if rows.any():
                y = expert(xs[rows], gate[e], up[e], down[e])
                routed[rows] = y if scale is None else y * scale[rows]
        return (out + routed).view(B, T, d)

    def forward(self, tokens, pos0=0):
        """tokens [B, T] at positions pos0..; returns the logits of the last position [B, V]."""
        r = self.ref
        h = self.w("embed_tokens.weight")[tokens]
        mu = self.w("mu_init").reshape(1, 1, -1).expand_as(h) if r.use_mu else None
        for i in range(r.L):
            p = f"layers.{i}."
            a = torch_models.rms_norm(h, self.w(p + "input_layernorm.weight"), r.eps)
            h = h + self.attention(i, a, mu, pos0)
            m = torch_models.rms_norm(h, self.w(p + "post_attention_layernorm.weight"), r.eps)
            h = h + self.mlp(i, m, tokens)
            if r.use_mu and i + 1 < r.L:
                mu = (self.w(p + "mu_guidance.mu").clamp(0.0, 2.0) +
                      F.linear(h, self.w(p + "mu_guidance.mu_proj.weight"))).clamp(-2.0, 2.0)
        last = torch_models.rms_norm(h[:, -1], self.w("norm.weight"), r.eps)
        return F.linear(last, self.w("embed_tokens.weight"))


# ----------------------------------------------------------------------------- PRISM, batched
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


class PrismPeer:
    def __init__(self, config, tensors):
        self.ref = torch_models.Prism(config, tensors)
        r = self.ref
        self.ctx = config["block_size"]
        dtype = tensors["transformer.wte.weight"].dtype
        self.signal = Rope(self.ctx, r.D, 10000.0 * r.m, dtype)
        self.noise = Rope(self.ctx, r.D, 10000.0 / r.m, dtype)
        self.lam = [float(self.ref.w(f"transformer.h.{i}.attn.lambda_q")) for i in range(r.L)]
        self.cache_k = self.cache_v = None
        self.dtype = dtype

    def new_cache(self, batch, capacity):
        r = self.ref
        shape = (r.L, batch, 2 * r.H, capacity, r.D)
        self.cache_k = torch.zeros(shape, dtype=self.dtype)
        self.cache_v = torch.zeros(shape, dtype=self.dtype)

    def attention(self, i, x, pos0):
        r = self.ref
        U = r.w(f"transformer.h.{i}.attn.u_proj.weight")
        B, T, _ = x.shape
        h = F.linear(x, U).view(B, T, 2 * r.H, r.D).transpose(1, 2)
        k = torch.cat([self.signal.interleaved(h[:, : r.H], pos0), self.noise.interleaved(h[:, r.H :], pos0)], 1)
        v = h
        if self.cache_k is not None:
            self.cache_k[i, :, :, pos0 : pos0 + T] = k
            self.cache_v[i, :, :, pos0 : pos0 + T] = v
            kk, vv = self.cache_k[i, :, :, : pos0 + T], self.cache_v[i, :, :, : pos0 + T]
        else:
            kk, vv = k, v
        y = attend(k, kk, vv, 1.0 / math.sqrt(r.D))
        y = torch.cat([y[:, : r.H], -self.lam[i] * y[:, r.H :]], 1).transpose(1, 2).reshape(B, T, 2 * r.H * r.D)
        return (y @ U) / math.sqrt(2 * r.H * r.R)

    def forward(self, tokens, pos0=0):
        r = self.ref
        T = tokens.shape[1]
        x = r.w("transformer.wte.weight")[tokens] + r.w("transformer.wpe.weight")[pos0 : pos0 + T]
        for i in range(r.L):
            p = f"transformer.h.{i}."
            x = x + self.attention(i, r.ln(x, p + "ln_1"), pos0)
            m = r.ln(x, p + "ln_2")
            x = x + F.linear(F.gelu(F.linear(m, r.w(p + "mlp.c_fc.weight"), r.w(p + "mlp.c_fc.bias"))),
                             r.w(p + "mlp.c_proj.weight"), r.w(p + "mlp.c_proj.bias"))
        return F.linear(r.ln(x[:, -1], "transformer.ln_f"), r.w("transformer.wte.weight"))


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
                rope, x = Rope(T, 64, 10000.0), torch.randn(16, T, 64)
                return lambda: rope.rotate_half(x, 0)

            @case("rope/interleaved/heads:16x128" + suffix(T, threads), threads, T)
            def _(T=T):
                rope, x = Rope(T, 128, 10000.0 * math.pi), torch.randn(16, T, 128)
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
        peer = ComplexityPeer(c, complexity_tensors(c, layers=1), max_positions=max(T, decode_context or 0))
        d = c["hidden_size"]
        if decode_context is None:
            a, mu = torch.randn(1, T, d), torch.randn(1, T, d)
            return lambda: peer.attention(0, a, mu, 0)
        peer.new_cache(1, decode_context)
        a, mu = torch.randn(1, 1, d), torch.randn(1, 1, d)
        peer.cache_k.normal_()
        peer.cache_v.normal_()
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
            return lambda: attend(q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1), 0.125)

    def prism_layer(d, heads, T):
        c = dict(PRISM_MINI, n_layer=1, n_embd=d, n_head=heads, block_size=T)
        peer = PrismPeer(c, prism_tensors(c))
        x = torch.randn(1, T, d)
        return lambda: peer.attention(0, x, 0)

    def mha_layer(d, heads, T):
        wqkv, wo, x = normal(3 * d, d), normal(d, d), torch.randn(1, T, d)
        hd = d // heads

        def run():
            q, k, v = F.linear(x, wqkv).view(1, T, 3, heads, hd).permute(2, 0, 3, 1, 4)
            o = attend(q, k, v, 1.0 / math.sqrt(hd))
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
        peer = ComplexityPeer(config, complexity_tensors(config, layers=1))
        x = torch.randn(1, T, config["hidden_size"])
        tokens = torch.randint(0, VOCAB, (1, T))
        if kind != "masked":
            return lambda: peer.mlp(0, x, tokens)
        p, E = "layers.0.mlp.", config["num_experts"]
        g, u, dn = peer.w(p + "gate_proj_w"), peer.w(p + "up_proj_w"), peer.w(p + "down_proj_w")
        sg, su, sd = peer.w(p + "shared_gate.weight"), peer.w(p + "shared_up.weight"), peer.w(p + "shared_down.weight")
        xs = x.reshape(T, -1)
        masks = [(peer.w(p + "token_to_expert")[tokens.reshape(-1)] == e).to(xs.dtype)[:, None] for e in range(E)]

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
        _model_cache[key] = ComplexityPeer(c, complexity_tensors(c, dtype=dtype))
    return _model_cache[key]


def prism_model(dtype=torch.float32):
    key = ("prism", dtype)
    if key not in _model_cache:
        _model_cache.clear()
        _model_cache[key] = PrismPeer(PRISM_MINI, prism_tensors(PRISM_MINI, dtype=dtype))
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

    complexity("187M", "f32", [(1, 128, 2), (1, 512, 2), (1, 2048, 2), (4, 512, 2), (1, 512, 1)],
               [(1, 128, 2), (1, 512, 2), (1, 2048, 2), (4, 512, 2), (1, 512, 1)])
    complexity("187M", "bf16", [(1, 512, 2), (1, 512, 1)], [(1, 128, 2), (1, 512, 2), (1, 2048, 2), (1, 512, 1)])
    complexity("171M_dense", "f32", [(1, 512, 2)], [(1, 512, 2)])
    complexity("384M", "f32", [(1, 512, 2)], [(1, 512, 2), (1, 2048, 2)])
    complexity("384M", "bf16", [], [(1, 512, 2), (1, 2048, 2)])
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


# ----------------------------------------------------------------------------- timing and output
def measure(fn, min_time, repetitions, slow=5.0):
    """Per-repetition (mean seconds per call, calls); a case slower than `slow`
    seconds per call gets one repetition, to keep the suite's run time bounded."""
    t0 = time.perf_counter()
    fn()  # warm-up: allocations, first touch, masks and tables
    if time.perf_counter() - t0 > slow:
        repetitions = 1
    reps = []
    for _ in range(repetitions):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= min_time:
                break
        reps.append((elapsed / n, n))
    return reps


def entry(name, run_type, seconds, iterations, tokens, aggregate=None, repetition=None):
    e = {"name": name + ("" if aggregate is None else "_" + aggregate), "run_name": name, "run_type": run_type,
         "real_time": seconds * 1e3, "time_unit": "ms", "iterations": iterations,
         "tokens_per_s": tokens / seconds}
    if aggregate is not None:
        e["aggregate_name"] = aggregate
    if repetition is not None:
        e["repetition_index"] = repetition
    return e


def batched_and_decode_errors(peer, ref, tokens):
    """Relative max errors of the peer's last-position logits against the reference's, batched
    (one forward of every sequence) and through the cache (prefill all but the last token, decode it)."""
    want = torch.stack([ref.forward(tokens[b])[-1] for b in range(tokens.shape[0])])
    scale = want.abs().max()
    err = (peer.forward(tokens) - want).abs().max() / scale
    T = tokens.shape[1]
    peer.new_cache(tokens.shape[0], T)
    peer.forward(tokens[:, :T - 1], 0)
    err_dec = (peer.forward(tokens[:, T - 1:], T - 1) - want).abs().max() / scale
    return err, err_dec


def check():
    """The batched peers against torch_models.py, tiny configurations, batch 2."""
    torch.manual_seed(3)
    for mlp in ("token_routed", "swiglu", "learned"):
        c = complexity_config(64, 2, 4, 2, 128, mlp, 4 if mlp != "swiglu" else 1, mlp != "swiglu", vocab=101)
        t = complexity_tensors(c, seed=4)
        for k in list(t):
            if t[k].dtype == torch.float32 and k.endswith("_w"):
                t[k] = t[k] * 10  # make the experts matter
        peer = ComplexityPeer(c, t, max_positions=64)
        ref = torch_models.ComplexityDeep(c, t)
        tokens = torch.randint(0, 101, (2, 9))
        err, err_dec = batched_and_decode_errors(peer, ref, tokens)
        print(f"complexity {mlp}: batched {err:.2e}, decode {err_dec:.2e}")
        assert err < 1e-5 and err_dec < 1e-5
    c = dict(PRISM_MINI, n_layer=2, n_head=2, n_embd=32, vocab_size=101, block_size=16)
    t = prism_tensors(c, seed=5)
    peer, ref = PrismPeer(c, t), torch_models.Prism(c, t)
    err, err_dec = batched_and_decode_errors(peer, ref, torch.randint(0, 101, (2, 9)))
    print(f"prism: batched {err:.2e}, decode {err_dec:.2e}")
    assert err < 1e-5 and err_dec < 1e-5
    print("peer implementations agree with torch_models.py")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON output path")
    ap.add_argument("--suite", default="", choices=[""] + sorted(SUITES),
                    help="only the cases of one C++ suite (bench_<suite>)")
    ap.add_argument("--filter", default="", help="regular expression on case names")
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds per repetition (at least one call)")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--check", action="store_true", help="check the batched peers against torch_models.py")
    args = ap.parse_args(argv)
    if args.check:
        check()
        return 0
    add_norm_cases()
    add_linear_cases()
    add_attention_cases()
    add_mlp_cases()
    add_model_cases()
    selected = [c for c in CASES if re.search(args.filter, c.name)
                and (not args.suite or re.search(SUITES[args.suite], c.name))]
    if args.list:
        print("\n".join(c.name for c in selected))
        return 0
    results = []
    for c in selected:
        torch.set_num_threads(c.threads)
        fn = c.setup()
        reps = measure(fn, args.min_time, args.repetitions)
        del fn
        for i, (s, n) in enumerate(reps):
            results.append(entry(c.name, "iteration", s, n, c.tokens, repetition=i))
        times = [s for s, _ in reps]
        results.append(entry(c.name, "aggregate", statistics.median(times), len(reps), c.tokens, "median"))
        results.append(entry(c.name, "aggregate", min(times), len(reps), c.tokens, "min"))
        print(f"{c.name:80s} {statistics.median(times) * 1e3:10.3f} ms", flush=True)
    _model_cache.clear()
    out = {"context": {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host_name": platform.node(),
                       "library": "pytorch-eager", "torch_version": torch.__version__,
                       "torch_parallel_info": torch.__config__.parallel_info(), "python": platform.python_version(),
                       "min_time": args.min_time, "repetitions": args.repetitions},
           "benchmarks": results}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""COMPLEXITY-DEEP and PRISM forward passes in PyTorch eager mode.

Written from docs/MODELS.md (not from the authors' code), the one PyTorch
implementation of each model, for three uses: the independent reference that
the test suite compares the C++ logits with (tests/python/check_torch_parity.py,
check_demo_model.py), the PyTorch peer timings (bench/python/pytorch_peer.py),
and the model OpenVINO converts (bench/python/openvino_peer.py). Batched over
sequences [B, T], with a KV cache for decode, as an eager serving loop runs
them: RoPE tables and causal masks built once per shape, the projections the
model's own separate products, attention PyTorch's fused SDPA where it has it.
Arithmetic is the tensors' dtype (fp32, or bf16 on PyTorch's bf16 kernels).
Checkpoints are read with numpy alone (safetensors layout: u64 header length,
JSON header, raw little-endian data).
"""
import argparse
import json
import math
import os
import re
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F


# ----------------------------------------------------------------------------- checkpoint reading
def read_safetensors(path):
    """Returns {name: torch.Tensor (float32, or int64 for integer tensors)}."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    data = memoryview(blob)[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[begin:end]
        shape = info["shape"]
        dt = info["dtype"]
        if dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif dt == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dt == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt == "I64":
            arr = np.frombuffer(raw, dtype="<i8").astype(np.int64)
        elif dt == "I32":
            arr = np.frombuffer(raw, dtype="<i4").astype(np.int64)
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        out[name] = torch.from_numpy(arr.reshape(shape).copy())
    return out


def read_checkpoint(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        tensors = {}
        for shard in sorted(set(weight_map.values())):
            tensors.update(read_safetensors(os.path.join(directory, shard)))
        return tensors
    return read_safetensors(os.path.join(directory, "model.safetensors"))


# ----------------------------------------------------------------------------- shared pieces
# Scaled dot-product attention as one fused call where this PyTorch has it (2.x; grouped K/V heads
# without copies from 2.5 on), else written out: the eager serving path of each version.
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
_VERSION = tuple(int(v) for v in re.findall(r"\d+", torch.__version__)[:2])
SDPA_GQA = HAS_SDPA and _VERSION >= (2, 5)


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope_tables(positions, dim, theta, scaling=1.0):
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    inv_freq = inv_freq.to(torch.float32)
    pos = (positions.to(torch.float64) / scaling).to(torch.float32)
    return torch.outer(pos, inv_freq)  # [T, dim/2], fp32 like the reference


def rope_rotate_half(x, angles):
    """x [..., T, dim]; pairs (j, j + dim/2)."""
    cos = torch.cat([angles.cos(), angles.cos()], -1)
    sin = torch.cat([angles.sin(), angles.sin()], -1)
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


class Rope:
    """cos/sin of positions 0..positions-1, built once in the model's dtype (as serving code caches them)."""

    def __init__(self, positions, dim, theta, dtype=torch.float32):
        self.positions, self.dim, self.theta, self.dtype = positions, dim, theta, dtype
        ang = rope_tables(torch.arange(positions), dim, theta)
        self.cos, self.sin = ang.cos().to(dtype), ang.sin().to(dtype)
        self.cos2 = torch.cat([self.cos, self.cos], -1)
        self.sin2 = torch.cat([self.sin, self.sin], -1)

    def covering(self, end):
        """This table, or a longer one when positions up to `end` are asked for."""
        return self if end <= self.positions else Rope(max(end, 2 * self.positions), self.dim, self.theta, self.dtype)

    def rotate_half(self, x, pos0):
        """x [..., T, dim] at positions pos0..pos0+T-1, pairs (j, j + dim/2)."""
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


def causal_mask(t, keys, dtype):
    """Additive mask [t, keys] for queries at the last t of `keys` positions."""
    key = (t, keys, dtype)
    if key not in _masks:
        m = torch.ones(t, keys, dtype=torch.bool).triu(diagonal=keys - t + 1)
        _masks[key] = torch.zeros(t, keys, dtype=dtype).masked_fill(m, float("-inf"))
    return _masks[key]


def attend(q, k, v, scale):
    """Causal attention. q [B, H, T, D]; k, v [B, Hkv, S, D] with the queries at the last T of S
    positions; H a multiple of Hkv (query head h reads key head h / (H / Hkv))."""
    t, s, groups = q.shape[-2], k.shape[-2], q.shape[1] // k.shape[1]
    if groups > 1 and not SDPA_GQA:
        k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    if HAS_SDPA:
        extra = {"enable_gqa": True} if groups > 1 and SDPA_GQA else {}
        if t == s:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, **extra)
        mask = None if t == 1 else causal_mask(t, s, q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, **extra)
    scores = (q @ k.transpose(-1, -2)) * scale
    if t > 1:
        scores = scores + causal_mask(t, s, scores.dtype)
    return torch.softmax(scores, -1) @ v


def attend_one_query(q, k, v):
    """attend() for one new position per sequence, in the form a graph compiler's stateful KV cache
    recognises (OpenVINO's CPU plugin fuses "past keys, concatenated, into SDPA" into one kernel
    that appends in place): the key/value heads repeated by expand + reshape instead of SDPA's
    enable_gqa, and SDPA's default scale 1/sqrt(D), which is every model's here. No mask: one query
    at the newest position sees every key."""
    b, kv_heads, s, d = k.shape
    groups = q.shape[1] // kv_heads
    if groups > 1:
        k = k[:, :, None].expand(b, kv_heads, groups, s, d).reshape(b, kv_heads * groups, s, d)
        v = v[:, :, None].expand(b, kv_heads, groups, s, d).reshape(b, kv_heads * groups, s, d)
    return F.scaled_dot_product_attention(q, k, v)


def swiglu(x, gate, up, down):
    """nn.Linear layout: gate/up [I, d], down [d, I]."""
    return F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down)


def expert(x, g, u, dn):
    """Input-major expert weights [d, I], [d, I], [I, d]."""
    return (F.silu(x @ g) * (x @ u)) @ dn


class Cache:
    """Keys and values of every layer, [L, B, heads, capacity, D], written at pos0.. by each call."""

    def __init__(self, layers, batch, heads, capacity, dim, dtype):
        self.k = torch.zeros(layers, batch, heads, capacity, dim, dtype=dtype)
        self.v = torch.zeros(layers, batch, heads, capacity, dim, dtype=dtype)

    def update(self, layer, k, v, pos0):
        """Stores k, v [B, heads, T, D] at positions pos0..; returns the keys and values up to them."""
        end = pos0 + k.shape[-2]
        if end > self.k.shape[-2]:
            raise ValueError(f"cache of {self.k.shape[-2]} positions, asked to hold {end}")
        self.k[layer, :, :, pos0:end] = k
        self.v[layer, :, :, pos0:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]


# ----------------------------------------------------------------------------- COMPLEXITY-DEEP
class ComplexityDeep(torch.nn.Module):
    """forward(tokens [B, T], pos0): the logits of the last position [B, V] (or of all, [B, T, V]),
    in the dtype of the tensors, through the KV cache made by new_cache() if there is one."""

    def __init__(self, config, tensors, max_positions=4096):
        super().__init__()
        c = config
        self.d = c["hidden_size"]
        self.L = c["num_hidden_layers"]
        self.h = c["num_attention_heads"]
        self.kv = c["num_key_value_heads"]
        self.hd = self.d // self.h
        self.eps = c.get("norm_eps", c.get("rms_norm_eps", 1e-6))
        self.theta = c.get("rope_theta", 10000.0)
        self.mlp_type = c.get("mlp_type", "token_routed")
        self.use_mu = c.get("use_mu_guidance", True)
        self.E = c.get("num_experts", 1)
        self.shared_expert = c.get("shared_expert", True)
        # The later models' MLP (docs/MODELS.md §8.5): top_k routes, route weights, scales or gates.
        self.top_k = c.get("top_k") or 1
        pw = c.get("top_k_primary_weight")
        pw = 1.0 if self.top_k == 1 else min(1.0, max(0.0, 0.95 if pw is None else pw))
        self.route_weights = [pw] + ([(1.0 - pw) / (self.top_k - 1)] * (self.top_k - 1) if self.top_k > 1 else [])
        self.gates = bool(c.get("use_shared_routed_gates", False)) and self.shared_expert
        self.shared_scale = c.get("shared_output_scale", 1.0)
        self.routed_scale = c.get("routed_output_scale", 1.0)
        self.t = {k[len("model.") :] if k.startswith("model.") else k: v for k, v in tensors.items()}
        self.dtype = self.t["embed_tokens.weight"].dtype
        # Per layer, split once (a benchmark may hold only some layers' tensors).
        routed = self.mlp_type != "swiglu"
        self.experts = {i: self.expert_weights(i) for i in range(self.L) if routed and (
            f"layers.{i}.mlp.down_proj_w" in self.t or f"layers.{i}.mlp.down_proj" in self.t)}
        self.rope = Rope(max_positions, self.hd, self.theta, self.dtype)
        self.cache = None
        # Formulations for a traced graph (bench/python/openvino_peer.py's decode step), where the
        # eager path's data-dependent branches would be frozen at the traced tokens: None (eager),
        # "gather" (each row's expert weights gathered by its route) or "all" (every expert on
        # every row, weighted by a one-hot of the routes). Both also use attend_one_query().
        self.graph_form = None

    def w(self, name):
        return self.t[name]

    def expert_weights(self, i):
        """Layer i's routed experts as input-major (gate [E, d, I], up [E, d, I], down [E, I, d])."""
        p = f"layers.{i}.mlp."
        if p + "gate_up_proj" in self.t:  # fused layout [E, d, 2 I_e]: gate columns, then up columns
            fused = self.w(p + "gate_up_proj")
            half = fused.shape[-1] // 2
            return fused[..., :half].contiguous(), fused[..., half:].contiguous(), self.w(p + "down_proj")
        return self.w(p + "gate_proj_w"), self.w(p + "up_proj_w"), self.w(p + "down_proj_w")

    def new_cache(self, batch, capacity):
        self.cache = Cache(self.L, batch, self.kv, capacity, self.hd, self.dtype)

    def attention(self, i, a, mu, pos0):
        p = f"layers.{i}.self_attn."
        B, T, _ = a.shape
        q = F.linear(a, self.w(p + "q_proj.weight"))
        k = F.linear(a, self.w(p + "k_proj.weight"))
        v = F.linear(a, self.w(p + "v_proj.weight"))
        if self.use_mu and mu is not None:
            q = q + F.linear(mu, self.w(p + "mu_to_q.weight"))
            k = k + F.linear(mu, self.w(p + "mu_to_k.weight"))
            v = v + F.linear(mu, self.w(p + "mu_to_v.weight"))
        q = q.view(B, T, self.h, self.hd).transpose(1, 2)
        k = k.view(B, T, self.kv, self.hd).transpose(1, 2)
        v = v.view(B, T, self.kv, self.hd).transpose(1, 2)
        q = rms_norm(q, self.w(p + "q_norm.weight"), 1e-6)
        k = rms_norm(k, self.w(p + "k_norm.weight"), 1e-6)
        self.rope = self.rope.covering(pos0 + T)
        q, k = self.rope.rotate_half(q, pos0), self.rope.rotate_half(k, pos0)
        if self.cache is not None:
            k, v = self.cache.update(i, k, v, pos0)
        o = attend_one_query(q, k, v) if self.graph_form else attend(q, k, v, 1.0 / math.sqrt(self.hd))
        return F.linear(o.transpose(1, 2).reshape(B, T, self.h * self.hd), self.w(p + "o_proj.weight"))

    def mlp(self, i, x, tokens):
        """x [N, d], tokens [N]: the MLP of layer i (routed experts by boolean masks, docs/MODELS.md §8.4)."""
        p = f"layers.{i}.mlp."
        if self.mlp_type == "swiglu":
            return swiglu(x, self.w(p + "gate_proj.weight"), self.w(p + "up_proj.weight"), self.w(p + "down_proj.weight"))
        shared = None
        if self.shared_expert:
            shared = swiglu(x, self.w(p + "shared_gate.weight"), self.w(p + "shared_up.weight"),
                            self.w(p + "shared_down.weight"))
        gate, up, down = self.experts[i]

        def experts_of(experts, scale=None):
            if self.graph_form == "gather":  # [N, d, I] per row: one expert's weights per row
                xb = x[:, None, :]
                y = torch.bmm(F.silu(torch.bmm(xb, gate[experts])) * torch.bmm(xb, up[experts]), down[experts])[:, 0]
                return y if scale is None else y * scale[:, None]
            if self.graph_form == "all":  # every expert on every row, the routes' one-hot as weights
                xe = x.unsqueeze(0).expand(self.E, -1, -1)
                y = torch.bmm(F.silu(torch.bmm(xe, gate)) * torch.bmm(xe, up), down)  # [E, N, d]
                pick = F.one_hot(experts, self.E).to(x.dtype).t()[:, :, None]  # [E, N, 1]
                y = (y * pick).sum(0)
                return y if scale is None else y * scale[:, None]
            out = torch.zeros_like(x)
            for e in range(self.E):
                rows = experts == e
                if rows.any():
                    y = expert(x[rows], gate[e], up[e], down[e])
                    out[rows] = y if scale is None else y * scale[rows, None]
            return out

        if self.mlp_type != "token_routed":  # learned router, top-1, soft-gated
            probs = torch.softmax(F.linear(x, self.w(p + "router.weight")).float(), -1)
            experts = probs.argmax(-1)
            routed = experts_of(experts, probs.gather(-1, experts[:, None])[:, 0].to(x.dtype))
            return routed if shared is None else routed + shared
        if p + "topk_token_to_expert" in self.t:
            routes = self.w(p + "topk_token_to_expert")[:, tokens]
        else:  # only the primary route stored: route r = (primary + r) mod E
            primary = self.w(p + "token_to_expert")[tokens]
            routes = torch.stack([(primary + r) % self.E for r in range(self.top_k)])
        routed = None
        for r, weight in enumerate(self.route_weights):
            y = experts_of(routes[r])
            y = y if weight == 1.0 else weight * y
            routed = y if routed is None else routed + y
        if shared is None:
            return routed if self.routed_scale == 1.0 else self.routed_scale * routed
        if self.gates:
            return self.w(p + "shared_output_gate") * shared + self.w(p + "routed_output_gate") * routed
        if self.shared_scale == 1.0 and self.routed_scale == 1.0:
            return routed + shared
        return self.routed_scale * routed + self.shared_scale * shared

    def forward(self, tokens, pos0: int = 0, all_logits: bool = False):
        B, T = tokens.shape
        h = self.w("embed_tokens.weight")[tokens]
        mu = self.w("mu_init").reshape(1, 1, -1).expand_as(h) if self.use_mu else None
        flat = tokens.reshape(-1)
        for i in range(self.L):
            p = f"layers.{i}."
            a = rms_norm(h, self.w(p + "input_layernorm.weight"), self.eps)
            h = h + self.attention(i, a, mu, pos0)
            m = rms_norm(h, self.w(p + "post_attention_layernorm.weight"), self.eps)
            h = h + self.mlp(i, m.reshape(B * T, self.d), flat).view(B, T, self.d)
            if self.use_mu and i + 1 < self.L:
                mu = (self.w(p + "mu_guidance.mu").clamp(0.0, 2.0) +
                      F.linear(h, self.w(p + "mu_guidance.mu_proj.weight"))).clamp(-2.0, 2.0)
        out = h if all_logits else h[:, -1]
        return F.linear(rms_norm(out, self.w("norm.weight"), self.eps), self.w("embed_tokens.weight"))

    def logits(self, tokens):
        """The reference use: every position's logits [T, V] of one sequence (a list of ids)."""
        return self.forward(torch.as_tensor(tokens, dtype=torch.int64)[None], 0, all_logits=True)[0]


# ----------------------------------------------------------------------------- PRISM
class Prism(torch.nn.Module):
    """forward(tokens [B, T], pos0) as ComplexityDeep's."""

    def __init__(self, config, tensors):
        super().__init__()
        self.L = config["n_layer"]
        self.H = config["n_head"]
        self.d = config["n_embd"]
        self.R = config.get("prism_expansion_ratio", 2)
        self.m = config.get("prism_freq_multiplier", math.pi)
        self.D = self.d // self.H * self.R
        self.t = tensors
        self.dtype = tensors["transformer.wte.weight"].dtype
        ctx = config.get("block_size", 1024)
        self.signal = Rope(ctx, self.D, 10000.0 * self.m, self.dtype)
        self.noise = Rope(ctx, self.D, 10000.0 / self.m, self.dtype)
        self.lam = [float(self.w(f"transformer.h.{i}.attn.lambda_q").reshape(-1)[0]) for i in range(self.L)]
        self.cache = None
        self.graph_form = None  # as ComplexityDeep's (any value: attend_one_query(); no experts here)

    def w(self, name):
        return self.t[name]

    def new_cache(self, batch, capacity):
        self.cache = Cache(self.L, batch, 2 * self.H, capacity, self.D, self.dtype)

    def ln(self, x, prefix):
        return F.layer_norm(x, (self.d,), self.w(prefix + ".weight"), self.t.get(prefix + ".bias"), 1e-5)

    def attention(self, i, x, pos0):
        U = self.w(f"transformer.h.{i}.attn.u_proj.weight")
        B, T, _ = x.shape
        h = F.linear(x, U).view(B, T, 2 * self.H, self.D).transpose(1, 2)
        # One projection serves as query, key and value: queries and keys are h rotated (signal
        # heads at base 10000 m, noise heads at 10000 / m), values h itself.
        k = torch.cat([self.signal.interleaved(h[:, : self.H], pos0), self.noise.interleaved(h[:, self.H :], pos0)], 1)
        kk, vv = (k, h) if self.cache is None else self.cache.update(i, k, h, pos0)
        y = attend_one_query(k, kk, vv) if self.graph_form else attend(k, kk, vv, 1.0 / math.sqrt(self.D))
        y = torch.cat([y[:, : self.H], -self.lam[i] * y[:, self.H :]], 1).transpose(1, 2)
        return (y.reshape(B, T, 2 * self.H * self.D) @ U) / math.sqrt(2 * self.H * self.R)

    def forward(self, tokens, pos0: int = 0, all_logits: bool = False):
        T = tokens.shape[1]
        x = self.w("transformer.wte.weight")[tokens] + self.w("transformer.wpe.weight")[pos0 : pos0 + T]
        for i in range(self.L):
            p = f"transformer.h.{i}."
            x = x + self.attention(i, self.ln(x, p + "ln_1"), pos0)
            m = self.ln(x, p + "ln_2")
            x = x + F.linear(F.gelu(F.linear(m, self.w(p + "mlp.c_fc.weight"), self.t.get(p + "mlp.c_fc.bias"))),
                             self.w(p + "mlp.c_proj.weight"), self.t.get(p + "mlp.c_proj.bias"))
        out = x if all_logits else x[:, -1]
        return F.linear(self.ln(out, "transformer.ln_f"), self.w("transformer.wte.weight"))

    def logits(self, tokens):
        return self.forward(torch.as_tensor(tokens, dtype=torch.int64)[None], 0, all_logits=True)[0]


def load_model(directory):
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    tensors = read_checkpoint(directory)
    if "n_layer" in config:
        return Prism(config, tensors)
    return ComplexityDeep(config, tensors)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, help="directory with model.safetensors and config.json")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True, help="where to write float32 logits [T, V] as .npy")
    args = ap.parse_args(argv)
    torch.set_grad_enabled(False)
    model = load_model(args.checkpoint)
    tokens = [int(t) for t in args.tokens.split(",")]
    logits = model.logits(tokens)
    np.save(args.out, logits.to(torch.float32).numpy())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

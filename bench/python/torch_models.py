#!/usr/bin/env python3
"""COMPLEXITY-DEEP and PRISM forward passes in PyTorch eager mode.

Written from docs/MODELS.md (not from the authors' code), for two
uses: the peer timings of bench/python/pytorch_peer.py, and an independent
reference that the test suite compares the C++ logits with
(tests/python/check_torch_parity.py). Checkpoints are read with numpy alone
(safetensors layout: u64 header length, JSON header, raw little-endian data).
"""
import argparse
import json
import math
import os
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


def rope_interleaved(x, angles):
    """x [..., T, dim]; pairs (2i, 2i + 1)."""
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = angles.cos(), angles.sin()
    out = torch.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


def causal_attention(q, k, v, scale):
    """q [H, T, D], k/v [H, T, D] (already expanded for GQA)."""
    t = q.shape[1]
    scores = (q @ k.transpose(-1, -2)) * scale
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, -1) @ v


# ----------------------------------------------------------------------------- COMPLEXITY-DEEP
class ComplexityDeep:
    def __init__(self, config, tensors):
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

    def w(self, name):
        return self.t[name]

    def attention(self, i, a, mu, positions):
        p = f"layers.{i}.self_attn."
        q = a @ self.w(p + "q_proj.weight").T
        k = a @ self.w(p + "k_proj.weight").T
        v = a @ self.w(p + "v_proj.weight").T
        if self.use_mu and mu is not None:
            q = q + mu @ self.w(p + "mu_to_q.weight").T
            k = k + mu @ self.w(p + "mu_to_k.weight").T
            v = v + mu @ self.w(p + "mu_to_v.weight").T
        T = a.shape[0]
        q = q.view(T, self.h, self.hd).transpose(0, 1)
        k = k.view(T, self.kv, self.hd).transpose(0, 1)
        v = v.view(T, self.kv, self.hd).transpose(0, 1)
        q = rms_norm(q, self.w(p + "q_norm.weight"), 1e-6)
        k = rms_norm(k, self.w(p + "k_norm.weight"), 1e-6)
        ang = rope_tables(positions, self.hd, self.theta)
        q, k = rope_rotate_half(q, ang), rope_rotate_half(k, ang)
        groups = self.h // self.kv
        k = k.repeat_interleave(groups, 0)
        v = v.repeat_interleave(groups, 0)
        o = causal_attention(q, k, v, 1.0 / math.sqrt(self.hd))
        return o.transpose(0, 1).reshape(T, self.d) @ self.w(p + "o_proj.weight").T

    def mlp(self, i, x, tokens):
        p = f"layers.{i}.mlp."
        if self.mlp_type == "swiglu":
            return (F.silu(x @ self.w(p + "gate_proj.weight").T) * (x @ self.w(p + "up_proj.weight").T)) @ self.w(
                p + "down_proj.weight"
            ).T
        shared = torch.zeros_like(x)
        if self.shared_expert:
            shared = (F.silu(x @ self.w(p + "shared_gate.weight").T) * (x @ self.w(p + "shared_up.weight").T)) @ self.w(
                p + "shared_down.weight"
            ).T
        if p + "gate_up_proj" in self.t:  # fused layout [E, d, 2 I_e]: gate columns, then up columns
            fused = self.w(p + "gate_up_proj")
            half = fused.shape[-1] // 2
            gate, up, down = fused[..., :half], fused[..., half:], self.w(p + "down_proj")
        else:
            gate, up, down = self.w(p + "gate_proj_w"), self.w(p + "up_proj_w"), self.w(p + "down_proj_w")

        def experts_of(experts, scale):
            out = torch.zeros_like(x)
            for e in range(self.E):
                rows = experts == e
                if rows.any():
                    xe = x[rows]
                    out[rows] = ((F.silu(xe @ gate[e]) * (xe @ up[e])) @ down[e]) * scale[rows, None]
            return out

        if self.mlp_type != "token_routed":  # learned router, top-1, soft-gated
            probs = torch.softmax(x @ self.w(p + "router.weight").T, -1)
            experts = probs.argmax(-1)
            return experts_of(experts, probs.gather(-1, experts[:, None])[:, 0]) + shared
        if p + "topk_token_to_expert" in self.t:
            routes = self.w(p + "topk_token_to_expert")[:, tokens]
        else:  # only the primary route stored: route r = (primary + r) mod E
            primary = self.w(p + "token_to_expert")[tokens]
            routes = torch.stack([(primary + r) % self.E for r in range(self.top_k)])
        ones = torch.ones(x.shape[0])
        routed = sum(w * experts_of(routes[r], ones) for r, w in enumerate(self.route_weights))
        if self.gates:
            return self.w(p + "shared_output_gate") * shared + self.w(p + "routed_output_gate") * routed
        return self.routed_scale * routed + self.shared_scale * shared

    def forward(self, tokens):
        tokens = torch.as_tensor(tokens, dtype=torch.int64)
        positions = torch.arange(tokens.shape[0])
        h = self.w("embed_tokens.weight")[tokens]
        mu = self.w("mu_init").reshape(1, -1).expand(h.shape[0], -1) if self.use_mu else None
        for i in range(self.L):
            p = f"layers.{i}."
            a = rms_norm(h, self.w(p + "input_layernorm.weight"), self.eps)
            h = h + self.attention(i, a, mu, positions)
            m = rms_norm(h, self.w(p + "post_attention_layernorm.weight"), self.eps)
            h = h + self.mlp(i, m, tokens)
            if self.use_mu and i + 1 < self.L:
                mu_l = self.w(p + "mu_guidance.mu").clamp(0.0, 2.0) + h @ self.w(p + "mu_guidance.mu_proj.weight").T
                mu = mu_l.clamp(-2.0, 2.0)
        h = rms_norm(h, self.w("norm.weight"), self.eps)
        return h @ self.w("embed_tokens.weight").T


# ----------------------------------------------------------------------------- PRISM
class Prism:
    def __init__(self, config, tensors):
        self.L = config["n_layer"]
        self.H = config["n_head"]
        self.d = config["n_embd"]
        self.R = config.get("prism_expansion_ratio", 2)
        self.m = config.get("prism_freq_multiplier", math.pi)
        self.D = self.d // self.H * self.R
        self.t = tensors

    def w(self, name):
        return self.t[name]

    def ln(self, x, prefix):
        b = self.t.get(prefix + ".bias")
        return F.layer_norm(x, (self.d,), self.w(prefix + ".weight"), b, 1e-5)

    def attention(self, i, x, positions):
        p = f"transformer.h.{i}.attn."
        U = self.w(p + "u_proj.weight")
        lam = float(self.w(p + "lambda_q").reshape(-1)[0])
        T = x.shape[0]
        h = (x @ U.T).view(T, 2 * self.H, self.D).transpose(0, 1)
        vs, vn = h[: self.H], h[self.H :]
        qs = rope_interleaved(vs, rope_tables(positions, self.D, 10000.0 * self.m))
        qn = rope_interleaved(vn, rope_tables(positions, self.D, 10000.0 / self.m))
        scale = 1.0 / math.sqrt(self.D)
        ys = causal_attention(qs, qs, vs, scale)
        yn = causal_attention(qn, qn, vn, scale)
        y = torch.cat([ys, -lam * yn], 0).transpose(0, 1).reshape(T, 2 * self.H * self.D)
        return (y @ U) / math.sqrt(2 * self.H * self.R)

    def forward(self, tokens):
        tokens = torch.as_tensor(tokens, dtype=torch.int64)
        positions = torch.arange(tokens.shape[0])
        x = self.w("transformer.wte.weight")[tokens] + self.w("transformer.wpe.weight")[positions]
        for i in range(self.L):
            p = f"transformer.h.{i}."
            x = x + self.attention(i, self.ln(x, p + "ln_1"), positions)
            m = self.ln(x, p + "ln_2")
            fc = m @ self.w(p + "mlp.c_fc.weight").T
            if p + "mlp.c_fc.bias" in self.t:
                fc = fc + self.w(p + "mlp.c_fc.bias")
            out = F.gelu(fc) @ self.w(p + "mlp.c_proj.weight").T
            if p + "mlp.c_proj.bias" in self.t:
                out = out + self.w(p + "mlp.c_proj.bias")
            x = x + out
        x = self.ln(x, "transformer.ln_f")
        return x @ self.w("transformer.wte.weight").T


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
    logits = model.forward(tokens)
    np.save(args.out, logits.to(torch.float32).numpy())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

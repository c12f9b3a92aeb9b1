#!/usr/bin/env python3
"""Train the built-in demo models on the King James Bible: the paper's pipeline end to end, at toy scale.

Steps (all seeded; the same machine and packages give the same files):
  1. corpus   `bible` (Debian bible-kjv) prints the whole text; chapters become blocks of
              "<Book> <chapter>" followed by one verse per line (verse numbers dropped).
              Every 20th chapter (index % 20 == 19, 60 of 1189) is the validation split.
  2. tokenizer a byte-level BPE of 4096 tokens (id 0 = <|endoftext|>), trained with the
              `tokenizers` package on the training split only; written as tokenizer.json.
  3. router   the training split's token counts become a frequency table; cpx's build-time
              router (tools/cpx_routing_table.cpp, balanced Zipf packing) turns it into the
              token -> expert table. The C++ build recomputes the same table from the same file
              (cpx_add_routing_table), so training and inference route identically.
  4. models   the token-routed COMPLEXITY-DEEP model (mu guidance, shared expert) and the dense
              SwiGLU baseline with the same total parameter count, each trained for the same number
              of steps on the same random windows of the training split (AdamW, cosine schedule).
  5. export   weights rounded to bf16, written as model.safetensors + config.json + tokenizer.json;
              the validation loss is measured on the exported (bf16) weights with the protocol of
              `complexity_run --eval` (non-overlapping windows of max_position_embeddings tokens,
              each scoring its tokens 2..n) and recorded in training.json.

The forward pass below is written for training (batched, autograd); the test suite checks the
exported checkpoints against the independent reference (bench/python/torch_models.py) and the C++
model. docs/DEMO_MODEL.md documents the choices and results.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

# RMSNorm and rotate-half RoPE as the PyTorch reference writes them (they take any leading dims).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "python"))
from torch_models import rms_norm, rope_rotate_half, rope_tables  # noqa: E402

# ----------------------------------------------------------------------------- configuration
# The compile-time presets KjvDeep / KjvDense (include/cpx/config/presets.hpp) hold the same numbers.
VOCAB = 4096
CONTEXT = 256
COMMON = dict(hidden_size=256, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
              vocab_size=VOCAB, max_position_embeddings=CONTEXT, rope_theta=10000.0, norm_eps=1e-6)
DEEP = dict(COMMON, intermediate_size=1024, mlp_type="token_routed", num_experts=4, shared_expert=True,
            use_mu_guidance=True)
# Dense width chosen so that the total parameter count matches DEEP's (see parameter_count()).
DENSE = dict(COMMON, intermediate_size=1536, mlp_type="swiglu", num_experts=1, shared_expert=False,
             use_mu_guidance=False)
SPECIAL = "<|endoftext|>"


# ----------------------------------------------------------------------------- 1. corpus
def read_bible():
    """Chapters as (heading, [verse texts]) in canonical order, from the `bible` program."""
    out = subprocess.run(["bible", "-l", "100000", "Gen1:1-Rev22:21"], check=True, capture_output=True, text=True)
    chapters = []
    for line in out.stdout.splitlines():
        if not line.strip():
            continue
        if line.startswith("  "):
            number, _, text = line.strip().partition(" ")
            if not number.isdigit() or not chapters:
                raise SystemExit(f"unexpected line from bible: {line!r}")
            chapters[-1][1].append(text.strip())
        else:
            chapters.append((line.strip(), []))
    if len(chapters) != 1189:
        raise SystemExit(f"expected 1189 chapters from bible, got {len(chapters)}")
    return chapters


def split_corpus(chapters):
    blocks = [heading + "\n" + "\n".join(verses) + "\n" for heading, verses in chapters]
    train = [b for i, b in enumerate(blocks) if i % 20 != 19]
    valid = [b for i, b in enumerate(blocks) if i % 20 == 19]
    return "\n".join(train), "\n".join(valid)


# ----------------------------------------------------------------------------- 2. tokenizer
def train_tokenizer(train_text):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=2, special_tokens=[SPECIAL],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(train_text.split("\n\n"), trainer=trainer)
    if tok.get_vocab_size() != VOCAB:
        raise SystemExit(f"tokenizer has {tok.get_vocab_size()} tokens, expected {VOCAB}")
    return tok


# ----------------------------------------------------------------------------- 3. router
def build_routing(repo, counts, out_dir, experts):
    """Runs cpx's build-time router on the frequency table; returns the [V] token -> expert table."""
    table_path = os.path.join(out_dir, "token_frequency.txt")
    with open(table_path, "w") as f:
        f.write("# Token frequency table of the KJV demo tokenizer (scripts/train_kjv.py)\n")
        f.write(f"# training split, {int(counts.sum())} tokens; line k of the counts is the count of token id k\n")
        f.writelines(f"{int(c)}\n" for c in counts)
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "cpx-routing-table")
        subprocess.run([os.environ.get("CXX", "g++"), "-std=c++20", "-O2", "-I", os.path.join(repo, "include"),
                        "-I", os.path.join(repo, "tools"), os.path.join(repo, "tools", "cpx_routing_table.cpp"),
                        "-o", exe], check=True)
        listing = os.path.join(tmp, "routing.txt")
        subprocess.run([exe, "--table", table_path, "--vocab", str(VOCAB), "--experts", str(experts),
                        "--algorithm", "balanced", "--name", "kjv_routing", "--namespace", "kjv",
                        "--header", os.path.join(tmp, "h.hpp"), "--check", os.path.join(tmp, "c.cpp"),
                        "--list", listing], check=True)
        table = np.loadtxt(listing, dtype=np.int64)
    if table.shape != (VOCAB,):
        raise SystemExit("router wrote a table of the wrong length")
    return torch.from_numpy(table)


# ----------------------------------------------------------------------------- 4. model
class Model(torch.nn.Module):
    """COMPLEXITY-DEEP (docs/MODELS.md) with checkpoint tensor names; '.' is stored as '__'."""

    def __init__(self, cfg, routing):
        super().__init__()
        self.cfg = cfg
        d, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
        self.H, self.KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.hd = d // self.H
        self.routed = cfg["mlp_type"] == "token_routed"
        self.use_mu = cfg["use_mu_guidance"]
        self.E = cfg["num_experts"]
        self.register_buffer("routing", routing if routing is not None else torch.zeros(V, dtype=torch.int64))
        std, res_std = 0.02, 0.02 / math.sqrt(2 * L)
        p = {}

        def normal(*shape, s=std):
            return torch.randn(*shape) * s

        p["embed_tokens.weight"] = normal(V, d)
        p["norm.weight"] = torch.ones(d)
        if self.use_mu:
            p["mu_init"] = torch.zeros(1, 1, d)
        q, kv = d, self.KV * self.hd
        for i in range(L):
            a = f"layers.{i}."
            p[a + "input_layernorm.weight"] = torch.ones(d)
            p[a + "post_attention_layernorm.weight"] = torch.ones(d)
            p[a + "self_attn.q_proj.weight"] = normal(q, d)
            p[a + "self_attn.k_proj.weight"] = normal(kv, d)
            p[a + "self_attn.v_proj.weight"] = normal(kv, d)
            p[a + "self_attn.o_proj.weight"] = normal(d, q, s=res_std)
            p[a + "self_attn.q_norm.weight"] = torch.ones(self.hd)
            p[a + "self_attn.k_norm.weight"] = torch.ones(self.hd)
            if self.use_mu:
                p[a + "self_attn.mu_to_q.weight"] = normal(q, d)
                p[a + "self_attn.mu_to_k.weight"] = normal(kv, d)
                p[a + "self_attn.mu_to_v.weight"] = normal(kv, d)
                p[a + "mu_guidance.mu"] = torch.ones(d)
                p[a + "mu_guidance.mu_proj.weight"] = normal(d, d)
            if self.routed:
                ie = cfg["intermediate_size"] // self.E
                p[a + "mlp.gate_proj_w"] = normal(self.E, d, ie)
                p[a + "mlp.up_proj_w"] = normal(self.E, d, ie)
                p[a + "mlp.down_proj_w"] = normal(self.E, ie, d, s=res_std)
                if cfg["shared_expert"]:
                    p[a + "mlp.shared_gate.weight"] = normal(ie, d)
                    p[a + "mlp.shared_up.weight"] = normal(ie, d)
                    p[a + "mlp.shared_down.weight"] = normal(d, ie, s=res_std)
            else:
                i_ = cfg["intermediate_size"]
                p[a + "mlp.gate_proj.weight"] = normal(i_, d)
                p[a + "mlp.up_proj.weight"] = normal(i_, d)
                p[a + "mlp.down_proj.weight"] = normal(d, i_, s=res_std)
        self.p = torch.nn.ParameterDict({k.replace(".", "__"): torch.nn.Parameter(v) for k, v in p.items()})
        self.register_buffer("angles", rope_tables(torch.arange(cfg["max_position_embeddings"]), self.hd,
                                                   cfg["rope_theta"]))

    def w(self, name):
        return self.p[name.replace(".", "__")]

    def named_checkpoint_tensors(self):
        out = {k.replace("__", "."): v.detach() for k, v in self.p.items()}
        if self.routed:
            for i in range(self.cfg["num_hidden_layers"]):
                out[f"layers.{i}.mlp.token_to_expert"] = self.routing.clone()
        return out

    def swiglu(self, x, gate, up, down):
        return (F.silu(x @ gate) * (x @ up)) @ down

    def forward(self, tokens):
        B, T = tokens.shape
        d, eps = self.cfg["hidden_size"], self.cfg["norm_eps"]
        h = self.w("embed_tokens.weight")[tokens]
        mu = self.w("mu_init").expand(B, T, d) if self.use_mu else None
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        ang = self.angles[:T]
        if self.routed:
            experts = self.routing[tokens].reshape(-1)
            order = torch.argsort(experts, stable=True)
            inverse = torch.empty_like(order)
            inverse[order] = torch.arange(order.numel())
            sizes = torch.bincount(experts, minlength=self.E).tolist()
        L = self.cfg["num_hidden_layers"]
        for i in range(L):
            a_ = f"layers.{i}."
            s = a_ + "self_attn."
            a = rms_norm(h, self.w(a_ + "input_layernorm.weight"), eps)
            q, k, v = (a @ self.w(s + n + "_proj.weight").T for n in "qkv")
            if self.use_mu:
                q = q + mu @ self.w(s + "mu_to_q.weight").T
                k = k + mu @ self.w(s + "mu_to_k.weight").T
                v = v + mu @ self.w(s + "mu_to_v.weight").T
            q = rms_norm(q.view(B, T, self.H, self.hd).transpose(1, 2), self.w(s + "q_norm.weight"), 1e-6)
            k = rms_norm(k.view(B, T, self.KV, self.hd).transpose(1, 2), self.w(s + "k_norm.weight"), 1e-6)
            v = v.view(B, T, self.KV, self.hd).transpose(1, 2)
            q, k = rope_rotate_half(q, ang), rope_rotate_half(k, ang)
            g = self.H // self.KV
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            o = torch.softmax(scores.masked_fill(mask, float("-inf")), -1) @ v
            h = h + o.transpose(1, 2).reshape(B, T, d) @ self.w(s + "o_proj.weight").T
            m = rms_norm(h, self.w(a_ + "post_attention_layernorm.weight"), eps)
            mp = a_ + "mlp."
            if self.routed:
                out = self.swiglu(m, self.w(mp + "shared_gate.weight").T, self.w(mp + "shared_up.weight").T,
                                  self.w(mp + "shared_down.weight").T)
                # Rows sorted by expert once (the routing depends on the token alone), one product per expert.
                grouped = m.reshape(B * T, d)[order].split(sizes)
                ys = [self.swiglu(x, self.w(mp + "gate_proj_w")[e], self.w(mp + "up_proj_w")[e],
                                  self.w(mp + "down_proj_w")[e]) for e, x in enumerate(grouped)]
                out = out + torch.cat(ys)[inverse].view(B, T, d)
            else:
                out = self.swiglu(m, self.w(mp + "gate_proj.weight").T, self.w(mp + "up_proj.weight").T,
                                  self.w(mp + "down_proj.weight").T)
            h = h + out
            if self.use_mu and i + 1 < L:
                g_ = a_ + "mu_guidance."
                mu = (self.w(g_ + "mu").clamp(0.0, 2.0) + h @ self.w(g_ + "mu_proj.weight").T).clamp(-2.0, 2.0)
        h = rms_norm(h, self.w("norm.weight"), eps)
        return h @ self.w("embed_tokens.weight").T


def parameter_count(model):
    return sum(p.numel() for p in model.parameters())


def evaluate(model, stream, window=CONTEXT, batch=16):
    """Mean cross-entropy (nats) of `complexity_run --eval`: non-overlapping windows of `window`
    tokens, each scoring its tokens 2..n given the ones before it in the window."""
    windows = [stream[i : i + window] for i in range(0, len(stream), window)]
    windows = [w for w in windows if len(w) >= 2]
    total, count = 0.0, 0
    with torch.no_grad():
        for b in range(0, len(windows), batch):
            for w in windows[b : b + batch]:  # one at a time: the last window is shorter
                t = torch.as_tensor(w, dtype=torch.int64)[None]
                logits = model(t[:, :-1]).double()
                total += F.cross_entropy(logits[0], t[0, 1:], reduction="sum").item()
                count += len(w) - 1
    return total / count, count


def train(name, cfg, routing, train_ids, valid_ids, total_steps, seed, batch, lr, log):
    torch.manual_seed(seed)
    model = Model(cfg, routing)
    decay = [p for n, p in model.p.items() if p.dim() >= 2]
    other = [p for n, p in model.p.items() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(seed + 1)
    data = torch.as_tensor(train_ids, dtype=torch.int64)
    warmup = 50
    start, step, history = time.time(), 0, []
    while step < total_steps:
        frac = step / total_steps
        scale = min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr * scale
        starts = torch.randint(0, len(data) - CONTEXT - 1, (batch,), generator=gen)
        seqs = torch.stack([data[s : s + CONTEXT + 1] for s in starts.tolist()])
        loss = F.cross_entropy(model(seqs[:, :-1]).reshape(-1, VOCAB), seqs[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        history.append(loss.item())
        if step % 50 == 0:
            log(f"{name}: step {step} loss {sum(history[-50:]) / 50:.4f} ({time.time() - start:.0f} s)")
    seconds = time.time() - start
    train_loss = sum(history[-50:]) / min(50, len(history))
    # Round to bf16 (what is committed), then measure on those weights.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    val_loss, val_tokens = evaluate(model, valid_ids)
    log(f"{name}: validation loss {val_loss:.5f} over {val_tokens} tokens (bf16 weights)")
    return model, dict(steps=step, seconds=round(seconds, 1), batch=batch, context=CONTEXT,
                       tokens_seen=step * batch * CONTEXT, peak_lr=lr, final_train_loss=round(train_loss, 4),
                       validation_loss=val_loss, validation_tokens=val_tokens,
                       validation_perplexity=math.exp(val_loss), parameters=parameter_count(model))


# ----------------------------------------------------------------------------- 5. export
def write_safetensors(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype == torch.int64:
            raw, dt = t.numpy().astype("<i8").tobytes(), "I64"
        else:
            raw, dt = t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes(), "BF16"
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def export(model, cfg, tokenizer_json, directory):
    os.makedirs(directory, exist_ok=True)
    write_safetensors(os.path.join(directory, "model.safetensors"), model.named_checkpoint_tensors())
    config = dict(cfg, model_type="complexity-deep", tie_word_embeddings=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(directory, "tokenizer.json"), "w") as f:
        f.write(tokenizer_json)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="data/kjv", help="output directory (default data/kjv)")
    ap.add_argument("--steps", type=int, default=434,
                    help="optimizer steps per model, the same for both (default 434: ~15 min per model here)")
    ap.add_argument("--seed", type=int, default=1611)
    ap.add_argument("--batch", type=int, default=8, help="sequences of %d tokens per step" % CONTEXT)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--models", default="deep,dense", help="which models to train (deep, dense)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(args.out, exist_ok=True)
    logs = []

    def log(msg):
        print(msg, flush=True)
        logs.append(msg)

    train_text, valid_text = split_corpus(read_bible())
    with open(os.path.join(args.out, "validation.txt"), "w") as f:
        f.write(valid_text)
    tok = train_tokenizer(train_text)
    train_ids, valid_ids = tok.encode(train_text).ids, tok.encode(valid_text).ids
    log(f"corpus: {len(train_text)} / {len(valid_text)} characters, {len(train_ids)} / {len(valid_ids)} tokens "
        "(train / validation)")
    counts = np.bincount(np.asarray(train_ids), minlength=VOCAB)
    routing = build_routing(repo, counts, args.out, DEEP["num_experts"])
    loads = [int(counts[routing.numpy() == e].sum()) for e in range(DEEP["num_experts"])]
    log(f"router: expert loads on the training split {loads}")

    import tokenizers

    record = dict(corpus="King James Bible, Debian package bible-kjv-text (`bible -l 100000 Gen1:1-Rev22:21`)",
                  split="chapters with index % 20 == 19 are validation", train_tokens=len(train_ids),
                  validation_tokens=len(valid_ids), tokenizer=f"byte-level BPE, {VOCAB} tokens, tokenizers "
                  f"{tokenizers.__version__}", torch=torch.__version__, threads=args.threads, seed=args.seed,
                  eval_protocol=f"non-overlapping windows of {CONTEXT} tokens, tokens 2..n of each scored",
                  models={})
    path = os.path.join(args.out, "training.json")
    if os.path.exists(path):  # keep the other model's record when training one
        with open(path) as f:
            record["models"] = json.load(f).get("models", {})
    for name in args.models.split(","):
        cfg = {"deep": DEEP, "dense": DENSE}[name]
        model, result = train(name, cfg, routing if name == "deep" else None, train_ids, valid_ids, args.steps,
                              args.seed, args.batch, args.lr, log)
        export(model, cfg, tok.to_str(), os.path.join(args.out, name))
        record["models"][name] = dict(result, config=cfg)
        with open(path, "w") as f:
            json.dump(record, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

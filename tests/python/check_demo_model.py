#!/usr/bin/env python3
"""Checks a built-in demo model (data/kjv) end to end through its C++ program.

1. Greedy generation from a fixed text prompt is reproducible (two runs, the same ids) and
   equals greedy generation by the independent PyTorch model (bench/python/torch_models.py)
   on the same checkpoint, token for token.
2. `--eval` on the validation split reproduces the validation loss that scripts/train_kjv.py
   recorded in training.json (within 1e-3 nats per token).

usage: check_demo_model.py PROGRAM CHECKPOINT_DIR TRAINING_JSON MODEL_NAME VALIDATION_TEXT
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "python"))
import torch  # noqa: E402
import torch_models  # noqa: E402

PROMPT = "And God said"
NEW_TOKENS = 24


def run(args):
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return out


def ids_after(label, text):
    m = re.search(label + r"[^\n]*?: ([0-9,]+) \(", text)
    if not m:
        raise SystemExit(f"no '{label}' line in the program's output:\n{text}")
    return [int(t) for t in m.group(1).split(",")]


def main(argv):
    program, checkpoint, training_json, name, validation = argv
    failures = []
    outputs = [run([program, "--checkpoint", checkpoint, "--prompt", PROMPT, "--generate", str(NEW_TOKENS)])
               for _ in range(2)]
    prompt_ids = ids_after("prompt: [0-9]+ token ids", outputs[0])
    got = ids_after("generated", outputs[0])
    if got != ids_after("generated", outputs[1]):
        failures.append("two greedy runs generated different tokens")
    torch.set_grad_enabled(False)
    model = torch_models.load_model(checkpoint)
    tokens, want = list(prompt_ids), []
    for _ in range(NEW_TOKENS):
        nxt = int(model.logits(tokens)[-1].argmax())
        want.append(nxt)
        tokens.append(nxt)
    print(f"{name}: prompt {prompt_ids}; C++ greedy {got}")
    if got != want:
        failures.append(f"greedy tokens differ from PyTorch's {want}")
    text = outputs[0].split("text:\n", 1)[1].split("\nprompt:", 1)[0] if "text:\n" in outputs[0] else ""
    print(f"{name}: text: {text!r}")
    if not text.startswith(PROMPT) or len(text) <= len(PROMPT):
        failures.append("the program did not print the prompt followed by generated text")

    out = run([program, "--checkpoint", checkpoint, "--eval", validation])
    m = re.search(r"cross-entropy ([0-9.]+) nats/token", out)
    if not m:
        failures.append(f"no cross-entropy in the --eval output: {out}")
    else:
        with open(training_json) as f:
            recorded = json.load(f)["models"][name]["validation_loss"]
        ours = float(m.group(1))
        print(f"{name}: --eval cross-entropy {ours:.5f}, recorded by training {recorded:.5f}")
        if abs(ours - recorded) > 1e-3:
            failures.append(f"--eval gives {ours:.5f}, training recorded {recorded:.5f} (tolerance 1e-3)")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

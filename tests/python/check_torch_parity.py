#!/usr/bin/env python3
"""Compares a C++ example program's logits with the independent PyTorch model.

The program writes its seeded random model as a checkpoint and the prompt's
logits; bench/python/torch_models.py (written from the specification, with no
code shared with the C++ library) loads that checkpoint and computes the
logits of the same prompt. They must agree within the stated tolerance. The
same PyTorch model run as the benchmarks run it (two sequences in one batch,
the prompt but its last token through a KV cache, then that token) must give
the same last logits to fp32 rounding.

usage: check_torch_parity.py PROGRAM WORKDIR TOKENS TOLERANCE [extra program flags]
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "python"))
import torch  # noqa: E402
import torch_models  # noqa: E402


def main(argv):
    program, workdir, tokens, tolerance = argv[:4]
    extra = argv[4:]
    os.makedirs(workdir, exist_ok=True)
    ckpt = os.path.join(workdir, "checkpoint")
    ours = os.path.join(workdir, "cpp_logits.npy")
    subprocess.run([program, "--tokens", tokens, "--generate", "0", "--save-checkpoint", ckpt,
                    "--dump-logits", ours, *extra], check=True, stdout=subprocess.DEVNULL)
    torch.set_grad_enabled(False)
    model = torch_models.load_model(ckpt)
    ids = [int(t) for t in tokens.split(",")]
    want = model.logits(ids).to(torch.float64).numpy()
    got = np.load(ours).astype(np.float64)
    if got.shape != want.shape:
        print(f"shape mismatch: C++ {got.shape}, PyTorch {want.shape}")
        return 1
    err = np.max(np.abs(got - want)) / np.max(np.abs(want))
    print(f"{os.path.basename(program)}: logits {got.shape}, relative error vs PyTorch {err:.3e} (tolerance {tolerance})")
    batch = torch.tensor([ids, ids])
    model.new_cache(2, len(ids))
    model.forward(batch[:, :-1], 0)
    last = model.forward(batch[:, -1:], len(ids) - 1).to(torch.float64).numpy()
    cached_err = np.max(np.abs(last - want[-1])) / np.max(np.abs(want))
    print(f"PyTorch model batched through its KV cache: relative error {cached_err:.3e} (tolerance 1e-5)")
    return 0 if err <= float(tolerance) and cached_err <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""The whole-model prefill cases of bench/bench_*_model.cpp run by OpenVINO's CPU plugin.

Each model is bench/python/torch_models.py's PyTorch module (the one the PyTorch
peer times and the test suite's reference), converted with openvino.convert_model
at the case's static input shape [B, T] and compiled for the CPU with the
LATENCY hint, INFERENCE_NUM_THREADS set to the case's thread count and
INFERENCE_PRECISION_HINT f32 or bf16 (OpenVINO's default on a CPU with bf16
instructions is bf16; the f32 cases ask for f32 explicitly). The bf16 cases
convert the fp32 module and let OpenVINO compute in bf16, as its users do.
Before timing, each compiled model's logits are checked against the PyTorch
module's on the same tokens. Only prefill: decode would need OpenVINO's stateful
KV-cache transformation of this module, which this peer does not attempt.

Timing and output as bench/python/pytorch_peer.py (Google Benchmark's JSON
layout, the same case names, median of repetitions).
"""
import argparse
import os
import re
import sys
import warnings

import numpy as np
import openvino as ov
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_peer  # noqa: E402
import torch_models  # noqa: E402

torch.set_grad_enabled(False)


class Prefill(torch.nn.Module):
    """tokens [B, T] -> the last position's logits [B, V], no KV cache."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens):
        return self.model.forward(tokens, 0)


CASES = []  # (name, maker, vocab, batch, tokens, threads, precision)


def add(base, maker, vocab, runs):
    for batch, tokens, threads in runs:
        for precision in ("f32", "bf16"):
            name = f"{base}/{precision}/prefill/batch:{batch}/tokens:{tokens}/threads:{threads}"
            CASES.append((name, maker, vocab, batch, tokens, threads, precision))


def register():
    for preset, lengths in (("187M", (512, 2048)), ("384M", (512,))):
        c = pytorch_peer.PRESETS[preset]
        add(f"model/complexity/{preset}",
            lambda c=c: torch_models.ComplexityDeep(c, pytorch_peer.complexity_tensors(c)), pytorch_peer.VOCAB,
            [(1, t, threads) for t in lengths for threads in (2, 1)])
    mini = pytorch_peer.PRISM_MINI
    add("model/prism/mini", lambda: torch_models.Prism(mini, pytorch_peer.prism_tensors(mini)), mini["vocab_size"],
        [(1, 512, 2), (1, 512, 1)])


SUITES = {"complexity_model": r"^model/complexity/", "prism_model": r"^model/prism/"}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON output path")
    ap.add_argument("--suite", default="", choices=[""] + sorted(SUITES))
    ap.add_argument("--filter", default="", help="regular expression on case names")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    register()
    selected = [c for c in CASES if re.search(args.filter, c[0]) and (not args.suite or re.search(SUITES[args.suite], c[0]))]
    if args.list:
        print("\n".join(c[0] for c in selected))
        return 0
    core = ov.Core()
    results, module, converted = [], {}, {}
    for name, maker, vocab, batch, tokens, threads, precision in selected:
        key = name.split("/prefill/")[0].rsplit("/", 1)[0]  # the model, whatever the precision
        if module.get("key") != key:
            module.clear()
            converted.clear()
            module.update(key=key, model=maker())
        model = module["model"]
        tok = torch.randint(0, vocab, (batch, tokens))
        if (batch, tokens) not in converted:
            model.cache = None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tracing warns about the routing's data-dependent branches
                converted[(batch, tokens)] = ov.convert_model(Prefill(model), example_input=tok,
                                                              input=[ov.PartialShape([batch, tokens])])
        compiled = core.compile_model(converted[(batch, tokens)], "CPU", {
            "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": precision})
        request = compiled.create_infer_request()
        feed = {0: tok.numpy()}
        got = request.infer(feed)[0]
        torch.set_num_threads(threads)
        want = Prefill(model)(tok).numpy()
        err = float(np.abs(got - want).max() / np.abs(want).max())
        bound = 1e-4 if precision == "f32" else 5e-2
        if not err <= bound:
            raise SystemExit(f"{name}: OpenVINO's logits are {err:.2e} from PyTorch's (allowed {bound})")
        entries, median = pytorch_peer.timed(name, lambda: request.infer(feed), batch * tokens, args.min_time,
                                             args.repetitions)
        results += entries
        print(f"{name:80s} {median * 1e3:10.3f} ms  (logits vs PyTorch {err:.1e})", flush=True)
    pytorch_peer.write_results(args.out, "openvino", {"openvino_version": ov.__version__,
                                                      "torch_version": torch.__version__},
                               args.min_time, args.repetitions, results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

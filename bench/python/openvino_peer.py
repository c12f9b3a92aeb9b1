#!/usr/bin/env python3
"""The whole-model prefill and decode cases of bench/bench_*_model.cpp run by OpenVINO's CPU plugin.

Each model is bench/python/torch_models.py's PyTorch module (the one the PyTorch
peer times and the test suite's reference), converted with openvino.convert_model
and compiled for the CPU with the LATENCY hint, INFERENCE_NUM_THREADS set to the
case's thread count and INFERENCE_PRECISION_HINT f32 or bf16 (OpenVINO's default
on a CPU with bf16 instructions is bf16; the f32 cases ask for f32 explicitly).
The bf16 cases convert the fp32 module and let OpenVINO compute in bf16, as its
users do. Before timing, each compiled model's logits are checked against the
PyTorch module's on the same tokens.

Prefill: the module at the case's static input shape [B, T], the last position's
logits, no cache.

Decode: one graph per model, a step of one token per sequence whose KV cache is
OpenVINO state, made as OpenVINO's own LLM exports make theirs: the traced step
takes the past keys and values as inputs and returns them with the new position
appended; the past inputs are reordered by a beam_idx input (identity here), then
apply_make_stateful_transformation turns each past/present pair into a state
variable whose initial value is an empty cache of the batch's size. The CPU plugin
then fuses each layer's "state, concat, SDPA" into its attention kernel with an
in-place KV cache (checked: the compiled graph must hold no Concatenation on the
cache). KV_CACHE_PRECISION is set to the case's type (the plugin's default is u8,
a quantised cache; ours and PyTorch's hold the weights' type). The routed experts
are a traced graph's formulation (torch_models.ComplexityDeep.graph_form), since
the eager module's per-expert branches would be frozen at the traced tokens: one
sequence gathers its expert's weights by the route, a batch runs every expert on
every sequence and keeps each sequence's own (measured on the 187M model at 512
cached tokens, two threads: batch 1 fp32 31.5-33.5 ms gathering against 36.3-36.5
running every expert, bf16 level; batch 4 fp32 40.6-40.9 ms against 44.9-48.2,
bf16 29.9 against 57.7: the plugin's Gather copies the weights at a few GB/s).
--decode-experts forces either. Timing: a repetition sets the state to a cache of random keys and
values, then runs consecutive steps, the cache growing by one position per step,
centred on the case's context (at most context/4 steps, so the mean context is
the case's and no step is more than 1/8 off it); the time is the mean per step and
the case's time the median of the repetitions.

Output as bench/python/pytorch_peer.py (Google Benchmark's JSON layout, the same
case names, median of repetitions).
"""
import argparse
import math
import os
import re
import statistics
import sys
import time
import warnings
import zlib
from collections import Counter

import numpy as np
import openvino as ov
import torch
from openvino import opset13 as ops
from openvino._offline_transformations import apply_make_stateful_transformation

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


class Appending:
    """torch_models' cache interface (update(layer, k, v, pos0)) over explicit past tensors: each layer's
    keys and values come back with the new positions appended, and are kept as the step's outputs."""

    def __init__(self, past):
        self.past, self.present = past, []

    def update(self, layer, k, v, pos0):
        k = torch.cat([self.past[2 * layer], k], 2)
        v = torch.cat([self.past[2 * layer + 1], v], 2)
        self.present += [k, v]
        return k, v


class DecodeStep(torch.nn.Module):
    """tokens [B, 1], beam_idx [B] (int32), then every layer's past keys and values [B, heads, S, D]
    -> the logits [B, V] and every layer's keys and values with the new position appended. The
    position of the new token is S, read from the past keys' shape."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens, beam_idx, *past):
        m = self.model
        past = [p.index_select(0, beam_idx) for p in past]
        m.cache = Appending(past)
        logits = m.forward(tokens, past[0].shape[2])
        present, m.cache = m.cache.present, None
        return (logits, *present)


def cache_heads(model):
    """(layers, heads, head dim) of a model's KV cache."""
    if isinstance(model, torch_models.Prism):
        return model.L, 2 * model.H, model.D
    return model.L, model.kv, model.hd


def stateful_decode_model(model, form):
    """The decode step of `model` as an OpenVINO model whose KV cache is state (module docstring)."""
    layers, heads, dim = cache_heads(model)
    model.graph_form, model.cache = form, None
    example = (torch.zeros(1, 1, dtype=torch.int64), torch.zeros(1, dtype=torch.int32),
               *[torch.zeros(1, heads, 3, dim) for _ in range(2 * layers)])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracing warns about shapes read as Python numbers
            converted = ov.convert_model(DecodeStep(model), example_input=example)
    finally:
        model.graph_form = None
    converted.inputs[0].get_tensor().set_names({"tokens"})
    converted.inputs[1].get_tensor().set_names({"beam_idx"})
    for i, port in enumerate(converted.inputs[2:]):
        port.get_tensor().set_names({f"past.{i}"})
    converted.outputs[0].get_tensor().set_names({"logits"})
    for i, port in enumerate(converted.outputs[1:]):
        port.get_tensor().set_names({f"present.{i}"})
    apply_make_stateful_transformation(converted, {f"past.{i}": f"present.{i}" for i in range(2 * layers)})
    # Each state starts as an empty cache [B, heads, 0, D], B taken from the tokens' shape.
    batch = ops.gather(ops.shape_of(converted.input("tokens"), output_type="i64"), ops.constant([0]), ops.constant(0))
    empty = ops.concat([batch, ops.constant(np.array([heads, 0, dim], dtype=np.int64))], 0)
    for op in converted.get_ops():
        if op.get_type_name() == "ReadValue":
            op.set_arguments([ops.broadcast(ops.constant(0.0, dtype=op.get_output_element_type(0)), empty)])
    converted.validate_nodes_and_infer_types()
    return converted


def runtime_layer_types(compiled):
    return Counter(op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ops())


class StateFeeder:
    """Sets a compiled decode model's state to a cache of `positions` random keys and values (the same
    values each time for one shape), and gives the eager module's cache the same values."""

    def __init__(self, request, model, batch, context):
        self.request, self.batch = request, batch
        layers, self.heads, self.dim = cache_heads(model)
        gen = torch.Generator().manual_seed(1)
        self.values = torch.randn(2 * layers, batch, self.heads, context, self.dim, generator=gen)
        # apply_make_stateful_transformation names a variable by its input and output, "past.0present.0".
        self.states = {st.name.split("present.")[0]: st for st in request.query_state()}
        if len(self.states) != 2 * layers:
            raise SystemExit(f"the decode graph has {len(self.states)} states, expected {2 * layers}")

    def set(self, positions):
        self.request.reset_state()
        for i in range(self.values.shape[0]):
            self.states[f"past.{i}"].state = ov.Tensor(np.ascontiguousarray(self.values[i, :, :, :positions].numpy()))

    def fill_eager(self, model, positions):
        model.new_cache(self.batch, positions + 1)
        for layer in range(self.values.shape[0] // 2):
            model.cache.k[layer, :, :, :positions] = self.values[2 * layer, :, :, :positions].to(model.cache.k.dtype)
            model.cache.v[layer, :, :, :positions] = self.values[2 * layer + 1, :, :, :positions].to(model.cache.v.dtype)


def time_decode(name, request, feeder, feed, batch, context, min_time, repetitions):
    """Repetitions of consecutive steps centred on `context` (module docstring); Google Benchmark's entries."""
    feeder.set(context - 1)
    t0 = time.perf_counter()
    request.infer(feed)
    estimate = time.perf_counter() - t0
    steps = max(1, min(context // 4, math.ceil(min_time / max(estimate, 1e-6))))
    reps = []
    for _ in range(repetitions):
        feeder.set(context - 1 - steps // 2)
        t0 = time.perf_counter()
        for _ in range(steps):
            request.infer(feed)
        reps.append(((time.perf_counter() - t0) / steps, steps))
    out = [pytorch_peer.entry(name, "iteration", sec, n, batch, repetition=i) for i, (sec, n) in enumerate(reps)]
    times = [sec for sec, _ in reps]
    out.append(pytorch_peer.entry(name, "aggregate", statistics.median(times), len(reps), batch, "median"))
    out.append(pytorch_peer.entry(name, "aggregate", min(times), len(reps), batch, "min"))
    return out, statistics.median(times)


# ----------------------------------------------------------------------------- the cases
CASES = []  # (name, model key, maker, vocab, kind, batch, tokens or context, threads, precision)


def add(base, maker, vocab, prefills, decodes, precisions=("f32", "bf16")):
    for precision in precisions:
        for kind, runs in (("prefill", prefills), ("decode", decodes)):
            for batch, length, threads in runs:
                what = "tokens" if kind == "prefill" else "context"
                name = f"{base}/{precision}/{kind}/batch:{batch}/{what}:{length}/threads:{threads}"
                CASES.append((name, base, maker, vocab, kind, batch, length, threads, precision))


def register():
    def complexity(preset):
        c = pytorch_peer.PRESETS[preset]
        return lambda: torch_models.ComplexityDeep(c, pytorch_peer.complexity_tensors(c))

    # The PyTorch peer's decode cases of the same models, plus batches of 16 (bench_complexity_model's).
    add("model/complexity/187M", complexity("187M"), pytorch_peer.VOCAB,
        [(1, t, threads) for t in (512, 2048) for threads in (2, 1)],
        [(1, 128, 2), (1, 512, 2), (1, 2048, 2), (4, 512, 2), (16, 512, 2), (1, 512, 1)])
    add("model/complexity/384M", complexity("384M"), pytorch_peer.VOCAB,
        [(1, 512, 2), (1, 512, 1)], [(1, 512, 2), (1, 2048, 2)])
    add("model/complexity/171M_dense", complexity("171M_dense"), pytorch_peer.VOCAB, [], [(1, 512, 2)], ("f32",))
    add("model/complexity/384M_dense", complexity("384M_dense"), pytorch_peer.VOCAB, [], [(1, 512, 2)])
    mini = pytorch_peer.PRISM_MINI
    add("model/prism/mini", lambda: torch_models.Prism(mini, pytorch_peer.prism_tensors(mini)), mini["vocab_size"],
        [(1, 512, 2), (1, 512, 1)], [(1, 128, 2), (1, 512, 2), (4, 512, 2), (1, 512, 1)])


SUITES = {"complexity_model": r"^model/complexity/", "prism_model": r"^model/prism/"}


def decode_form(model, batch, choice):
    """The routed experts' graph formulation for a batch (module docstring): one sequence gathers
    its expert's weights, a batch runs every expert (its tokens reach most experts anyway);
    `choice` other than "auto" forces one."""
    if not isinstance(model, torch_models.ComplexityDeep) or model.mlp_type == "swiglu":
        return "dense"
    if choice != "auto":
        return choice
    return "gather" if batch == 1 else "all"


def check(name, got, want, precision):
    err = float(np.abs(got - want).max() / np.abs(want).max())
    bound = 1e-4 if precision == "f32" else 5e-2
    if not err <= bound:
        raise SystemExit(f"{name}: OpenVINO's logits are {err:.2e} from PyTorch's (allowed {bound})")
    return err


def compile_config(threads, precision):
    """The CPU plugin's settings for a case: LATENCY hint, the case's threads and precision."""
    return {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": precision}


def prefill_request(core, model, tok, threads, precision, converted, name):
    """An infer request of `model`'s prefill at tok's shape [B, T] (converted once per shape into
    `converted`), its feed, and its logits' error against the PyTorch module's (check())."""
    model.cache = None
    shape = tuple(tok.shape)
    if shape not in converted:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracing warns about the routing's data-dependent branches
            converted[shape] = ov.convert_model(Prefill(model), example_input=tok, input=[ov.PartialShape(list(shape))])
    request = core.compile_model(converted[shape], "CPU", compile_config(threads, precision)).create_infer_request()
    feed = {0: tok.numpy()}
    err = check(name, request.infer(feed)[0], Prefill(model)(tok).numpy(), precision)
    return request, feed, err


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON output path")
    ap.add_argument("--suite", default="", choices=[""] + sorted(SUITES))
    ap.add_argument("--filter", default="", help="regular expression on case names")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--decode-experts", default="auto", choices=("auto", "gather", "all"),
                    help="the routed experts' formulation in the decode graphs (auto: decode_form's rule)")
    args = ap.parse_args(argv)
    register()
    selected = [c for c in CASES if re.search(args.filter, c[0]) and (not args.suite or re.search(SUITES[args.suite], c[0]))]
    if args.list:
        print("\n".join(c[0] for c in selected))
        return 0
    core = ov.Core()
    results, module, converted = [], {}, {}
    for name, key, maker, vocab, kind, batch, length, threads, precision in selected:
        if module.get("key") != key:  # one model alive at a time
            module.clear()
            converted.clear()
            module.update(key=key, model=maker())
        model = module["model"]
        model.cache = None
        config = compile_config(threads, precision)
        torch.set_num_threads(threads)
        gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))  # the same tokens in every run
        tok = torch.randint(0, vocab, (batch, length if kind == "prefill" else 1), generator=gen)
        if kind == "prefill":
            request, feed, err = prefill_request(core, model, tok, threads, precision, converted, name)
            entries, median = pytorch_peer.timed(name, lambda: request.infer(feed), batch * length, args.min_time,
                                                 args.repetitions)
        else:
            form = decode_form(model, batch, args.decode_experts)
            if form not in converted:
                converted[form] = stateful_decode_model(model, form)
            compiled = core.compile_model(converted[form], "CPU", {**config, "KV_CACHE_PRECISION": precision})
            types = runtime_layer_types(compiled)
            if types["ScaledDotProductAttention"] != model.L or types["Softmax"]:
                raise SystemExit(f"{name}: the CPU plugin did not fuse the attention with its KV cache ({types})")
            request = compiled.create_infer_request()
            feed = {"tokens": tok.numpy(), "beam_idx": np.arange(batch, dtype=np.int32)}
            feeder = StateFeeder(request, model, batch, length)
            feeder.set(length - 1)
            got = request.infer(feed)["logits"]
            feeder.fill_eager(model, length - 1)
            want = model.forward(tok, length - 1).numpy()
            model.cache = None
            err = check(name, got, want, precision)
            entries, median = time_decode(name, request, feeder, feed, batch, length, args.min_time, args.repetitions)
        results += entries
        print(f"{name:80s} {median * 1e3:10.3f} ms  (logits vs PyTorch {err:.1e})", flush=True)
    pytorch_peer.write_results(args.out, "openvino", {"openvino_version": ov.__version__,
                                                      "torch_version": torch.__version__},
                               args.min_time, args.repetitions, results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

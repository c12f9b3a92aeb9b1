#!/usr/bin/env python3
"""Whole-model prefill, ours against OpenVINO and PyTorch 2, alternated round by round.

The suites time each engine in its own stage, minutes apart; on a machine whose speed
drifts by tens of percent from one minute to the next (shared or virtual CPUs), a ratio
of two such figures measures the minutes as much as the engines. This stage times the
engines on the same case in turns: each round runs ours (a process of
bench_complexity_model filtered to the case, which warms the model up once and then
times at least --min-time seconds), OpenVINO and, for fp32 cases, PyTorch 2 eager (in
this process, warm, at least --min-time seconds each), in an order that rotates from
round to round so that no engine always follows another. A round's ratio compares
figures taken within seconds of one another; the report gives the median ratio over
the rounds and its range.

The cases are the prefill cases of the targets (COMPLEXITY-DEEP 187M and 384M, one
sequence, one and two threads), fp32 and bf16:
- fp32: OpenVINO with precision hint f32, PyTorch 2 on fp32 tensors, ours the faster
  of the default arithmetic and `compute:fp32_packed` in the round (both run in our
  process; the arithmetic is the user's choice, as in the report's other comparisons);
- bf16: OpenVINO with precision hint bf16 (the fp32 module converted, as its users
  do), ours `compute:bf16` on bf16 weights. PyTorch 2 is left out of these (no target
  compares with it in bf16, and on a CPU without bf16 instructions it takes ~30 s per
  512-token prefill of the 187M model).
The models are bench/python/torch_models.py's, with the weights of pytorch_peer.py;
OpenVINO's logits are checked against PyTorch's before timing, as openvino_peer.py does.

Output (--out): JSON, {"context": {...}, "cases": [{"name": the peers' case name,
"ours": [our case names], "rounds": [{"order": [...], "ours": ms, "ours_by_case":
{name: ms}, "openvino": ms, "pytorch2": ms (f32 cases)}, ...]}]}, rewritten after each
case. Run with the interpreter of scripts/setup_peers.sh; scripts/bench.sh runs it after
the complexity_model suite. The eight cases at five rounds took 16 minutes on two Zen 3
vCPUs, much of it our process starting anew each round (building the model, measuring the
GEMM ceilings its report line needs).
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

import openvino as ov
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openvino_peer  # noqa: E402
import pytorch_peer  # noqa: E402
import torch_models  # noqa: E402

torch.set_grad_enabled(False)



def cases(tokens_list):
    """(peers' case name, preset, precision, tokens, threads, our case names) of the targets' prefill cases."""
    out = []
    for preset in ("187M", "384M"):
        for precision in ("f32", "bf16"):
            for tokens in tokens_list:
                for threads in (1, 2):
                    rest = f"prefill/batch:1/tokens:{tokens}/threads:{threads}"
                    base = f"model/complexity/{preset}/{precision}"
                    ours = ([f"{base}/{rest}", f"{base}/compute:fp32_packed/{rest}"] if precision == "f32"
                            else [f"{base}/compute:bf16/{rest}"])
                    out.append((f"{base}/{rest}", preset, precision, tokens, threads, ours))
    return out


def listed_cases(binary):
    """Our binary's case names (without Google Benchmark's /real_time suffix)."""
    text = subprocess.run([binary, "--benchmark_list_tests=true"], check=True, capture_output=True, text=True).stdout
    return {line.strip().removesuffix("/real_time") for line in text.splitlines() if line.strip()}


def time_ours(binary, names, min_time):
    """One process of our benchmark binary on `names`: each case warmed once, then timed for at
    least min_time seconds (one repetition). {name: ms per call}."""
    pattern = "^(" + "|".join(re.escape(n) for n in names) + ")(/real_time)?$"
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        done = subprocess.run([binary, f"--benchmark_filter={pattern}", f"--benchmark_min_time={min_time}",
                               "--benchmark_repetitions=1", f"--benchmark_out={out.name}",
                               "--benchmark_out_format=json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
        if done.returncode != 0:
            raise SystemExit(f"paired_prefill: {binary} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        with open(out.name) as f:
            results = json.load(f)["benchmarks"]
    times = {}
    for b in results:
        if b.get("run_type", "iteration") != "iteration":
            continue
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
        times[b["run_name"].removesuffix("/real_time")] = b["real_time"] * scale
    missing = [n for n in names if n not in times]
    if missing:
        raise SystemExit(f"paired_prefill: {binary} did not report {missing}")
    return times


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default="build/bench/bench/bench_complexity_model", help="our benchmark program")
    ap.add_argument("--out", help="JSON output path")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds each engine runs a case per round")
    ap.add_argument("--tokens", type=int, nargs="+", default=[512], help="prompt lengths (512 and 2048 exist)")
    ap.add_argument("--filter", default="", help="regular expression on the peers' case names")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        raise SystemExit("paired_prefill: --rounds must be at least 1")
    if not os.access(args.binary, os.X_OK):
        raise SystemExit(f"paired_prefill: no benchmark program at {args.binary} (scripts/bench.sh builds it)")
    available = listed_cases(args.binary)
    selected = []
    for case in cases(args.tokens):
        if not re.search(args.filter, case[0]):
            continue
        ours = [n for n in case[5] if n in available]
        if not ours:
            print(f"paired_prefill: {case[0]}: {args.binary} has no case of ours for it; left out", file=sys.stderr)
            continue
        selected.append(case[:5] + (ours,))
    if args.list:
        print("\n".join(f"{c[0]}  (ours: {', '.join(c[5])})" for c in selected))
        return 0

    core = ov.Core()
    context = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "end": None, "host_name": platform.node(),
               "openvino_version": ov.__version__, "torch_version": torch.__version__,
               "rounds": args.rounds, "min_time": args.min_time, "binary": os.path.basename(args.binary)}
    records, loaded, fp32_module, converted = [], None, None, {}
    if args.out:  # an empty file first: a stage that measures nothing must not leave an older run's results
        with open(args.out, "w") as f:
            json.dump({"context": context, "cases": records}, f, indent=1)
    for name, preset, precision, tokens, threads, ours in selected:
        config = pytorch_peer.PRESETS[preset]
        if loaded != preset:  # one model alive at a time
            fp32_module = None  # freed before the next one is built
            converted.clear()
            fp32_module = torch_models.ComplexityDeep(config, pytorch_peer.complexity_tensors(config))
            loaded = preset
        pytorch_peer.set_threads(threads)
        gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))  # the tokens of openvino_peer.py
        tok = torch.randint(0, pytorch_peer.VOCAB, (1, tokens), generator=gen)

        # OpenVINO: the fp32 module converted once per shape, compiled for the case, its logits checked.
        request, feed, _ = openvino_peer.prefill_request(core, fp32_module, tok, threads, precision, converted, name)

        def pytorch2():
            fp32_module.new_cache(1, tokens)
            return fp32_module.forward(tok, 0)

        request.infer(feed)  # warm: allocations, first touch
        run = {"ours": lambda: time_ours(args.binary, ours, args.min_time),
               "openvino": lambda: pytorch_peer.seconds_per_call(lambda: request.infer(feed), args.min_time)[0] * 1e3}
        if precision == "f32":
            pytorch2()
            run["pytorch2"] = lambda: pytorch_peer.seconds_per_call(pytorch2, args.min_time)[0] * 1e3
        engines = tuple(run)
        rounds = []
        for r in range(args.rounds):
            order = engines[r % len(engines):] + engines[:r % len(engines)]
            got = {"order": list(order)}
            for engine in order:
                value = run[engine]()
                if engine == "ours":
                    got["ours_by_case"] = value
                    got["ours"] = min(value.values())
                else:
                    got[engine] = value
            rounds.append(got)
            print(f"{name:64s} round {r + 1}: " + ", ".join(f"{e} {got[e]:9.1f} ms" for e in engines), flush=True)
        ratio = statistics.median(g["openvino"] / g["ours"] for g in rounds)
        print(f"{name:64s} OpenVINO / ours, median of {len(rounds)} rounds: {ratio:.3f}", flush=True)
        records.append({"name": name, "ours": ours, "precision": precision, "tokens": tokens, "threads": threads,
                        "rounds": rounds})
        context["end"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        if args.out:  # after every case, so an interrupted stage keeps what it measured
            with open(args.out, "w") as f:
                json.dump({"context": context, "cases": records}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

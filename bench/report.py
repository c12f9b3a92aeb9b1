#!/usr/bin/env python3
"""Turns the benchmark JSON into docs/BENCHMARKS.md and PNG plots.

Inputs (a results directory written by scripts/bench.sh): bench_*.json from the
Google Benchmark suites, pytorch_*.json from bench/python/pytorch_peer.py (same
layout and case names), machine.json and load_*.json (load average per stage). A case's time is the
median of its repetitions. The discussion section is bench/report_notes.md,
copied verbatim when it exists (it is written by hand for a given run). With --no-plots the
page is written without its plots, and matplotlib is not needed (tests/python/check_report.py).
"""
import argparse
import glob
import json
import math
import os
import re
import statistics

UNIT = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


# ----------------------------------------------------------------------------- loading
def load(path):
    """{case name: {"ms": median time, "min_ms", "reps", counters...}} and the JSON context."""
    with open(path) as f:
        data = json.load(f)
    cases = {}
    for b in data.get("benchmarks", []):
        name = b.get("run_name", b["name"])
        name = re.sub(r"/(real|manual)_time$", "", name)
        rec = cases.setdefault(name, {"reps": []})
        ms = b["real_time"] * UNIT[b.get("time_unit", "ns")]
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                rec["ms"] = ms
                rec.update({k: v for k, v in b.items() if isinstance(v, (int, float)) and k not in rec})
        else:
            rec["reps"].append(ms)
            if "first" not in rec:
                rec["first"] = {k: v for k, v in b.items() if isinstance(v, (int, float))}
    for rec in cases.values():
        if "ms" not in rec and rec["reps"]:  # a single repetition has no aggregates
            rec["ms"] = statistics.median(rec["reps"])
            for k, v in rec["first"].items():
                rec.setdefault(k, v)
        if rec["reps"]:
            rec["min_ms"] = min(rec["reps"])
        rec.pop("first", None)
    return cases, data.get("context", {})


def load_or_skip(path):
    """load(), or nothing with a warning for a file a running suite is still writing."""
    try:
        return load(path)
    except (json.JSONDecodeError, KeyError) as e:
        print(f"report: skipping {path}: {e}")
        return {}, {}


def params(name):
    """'a/b/tokens:512/threads:2' -> {'tokens': 512, 'threads': 2}."""
    out = {}
    for part in name.split("/"):
        if ":" in part:
            k, v = part.split(":", 1)
            try:
                out[k] = int(v)
            except ValueError:
                out[k] = v
    return out


def with_param(name, key, value):
    return re.sub(rf"/{key}:[^/]+", f"/{key}:{value}", name)


# ----------------------------------------------------------------------------- formatting
def fms(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fnum(x, digits=3):
    if x is None:
        return "–"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.2f}M"
    if abs(x) >= 1e4:
        return f"{x / 1e3:.1f}k"
    return f"{x:.{digits}g}"


def fpct(x):
    return "–" if x is None else f"{100 * x:.0f}%"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def verdict(ok):
    return "**met**" if ok else "**missed**"


def plot(method):
    """A Report method that draws: skipped when the report has no image directory (--no-plots),
    else called with pyplot as its first argument (imported here, so the tables need no matplotlib)."""
    def draw(self, *args):
        if self.img_dir is None:
            return
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        method(self, plt, *args)
    return draw


# ----------------------------------------------------------------------------- the report
class Report:
    def __init__(self, results, img_dir, doc_dir):
        self.ours, self.contexts = {}, {}
        for path in sorted(glob.glob(os.path.join(results, "bench_*.json"))):
            cases, ctx = load_or_skip(path)
            self.ours.update(cases)
            self.contexts[os.path.basename(path)] = ctx
        self.torch, self.torch_ctx = self.peer(results, "pytorch")  # Debian's PyTorch (1.13)
        self.torch2, self.torch2_ctx = self.peer(results, "pytorch2")  # the current PyTorch 2 (scripts/setup_peers.sh)
        self.ov, self.ov_ctx = self.peer(results, "openvino")
        # Prefill alternated with the peers round by round (bench/python/paired_prefill.py).
        self.paired, self.paired_ctx = {}, {}
        paired_path = os.path.join(results, "paired_prefill.json")
        if os.path.exists(paired_path):
            with open(paired_path) as f:
                paired = json.load(f)
            self.paired = {c["name"]: c for c in paired["cases"] if c["rounds"]}
            self.paired_ctx = paired["context"]
        self.machine = {}
        if os.path.exists(os.path.join(results, "machine.json")):
            with open(os.path.join(results, "machine.json")) as f:
                self.machine = json.load(f)
        self.load_events = []
        for path in glob.glob(os.path.join(results, "load_*.json")):
            with open(path) as f:
                self.load_events.append(json.load(f))
        self.load_events.sort(key=lambda e: e["start"])
        self.img_dir, self.doc_dir = img_dir, doc_dir
        self.lines = []

    @staticmethod
    def peer(results, prefix):
        """A peer's cases and context from its <prefix>_<suite>.json files."""
        found, context = {}, {}
        for path in sorted(glob.glob(os.path.join(results, f"{prefix}_*.json"))):
            cases, ctx = load_or_skip(path)
            found.update(cases)
            context = ctx or context
        return found, context

    # -- helpers
    def o(self, name, key="ms"):
        r = self.ours.get(name)
        return None if r is None else r.get(key)

    def t(self, name):
        r = self.torch.get(name)
        return None if r is None else r.get("ms")

    def speedup(self, name):
        a, b = self.o(name), self.t(name)
        return None if a is None or b is None else b / a

    def names(self, pattern):
        return [n for n in self.ours if re.search(pattern, n)]

    def emit(self, *text):
        self.lines.extend(text)

    @plot
    def img(self, plt, fig, name, alt):
        os.makedirs(self.img_dir, exist_ok=True)
        path = os.path.join(self.img_dir, name)
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        rel = os.path.relpath(path, self.doc_dir)
        self.emit(f"![{alt}]({rel})", "")

    # -- sections
    def header(self, notes):
        m = self.machine
        ctx = next(iter(self.contexts.values()), {})
        flags = m.get("flags_avx512", "").split()
        kind = (" (a CPU with AMX)" if "amx_bf16" in flags else "" if not flags or "avx512f" in flags
                else " (a CPU without AVX-512)")
        self.emit(f"# Benchmarks{kind}", "",
                  "Generated by `scripts/bench.sh` (suites under `bench/`, PyTorch peer "
                  "`bench/python/pytorch_peer.py`, this page by `bench/report.py`); the discussion at the end is "
                  f"`{notes}`. Re-running the script replaces every number here.", "")
        self.emit("## Machine, build and method", "")
        rows = [("CPU", f"{m.get('cpu', '?')} ({m.get('cpus', '?')} vCPUs, {m.get('hypervisor', 'bare metal')} guest)"),
                ("ISA of note", m.get("flags_avx512", "")), ("L3 (as reported)", m.get("l3", "?")),
                ("Memory", m.get("memory", "?")), ("Kernel", m.get("kernel", "?")),
                ("CPU as the binaries saw it", ctx.get('cpx_cpu_model', '?')
                 + (f" ({ctx['cpx_cpu_id']})" if 'cpx_cpu_id' in ctx else "") + f": {ctx.get('cpx_cpu_levels', '?')}"),
                ("Compiler", ctx.get("cpx_compiler", m.get("compiler", "?"))),
                ("Flags", f"`{ctx.get('cpx_flags', '?')}`"), ("Eigen", m.get("eigen", "?")),
                ("Google Benchmark", "1.7 (Debian; its library reports a debug build, which affects only its own "
                                     "loop overhead)" if ctx.get("library_build_type") == "debug" else
                 ctx.get("library_build_type", "?")),
                ("PyTorch (Debian)", f"{self.torch_ctx.get('torch_version', 'not run')} eager, CPU "
                                     f"({self.torch_ctx.get('python', '')})"),
                ("PyTorch 2 (PyPI)", f"{self.torch2_ctx.get('torch_version', 'not run')} eager, CPU"),
                ("OpenVINO (PyPI)", f"{self.ov_ctx.get('openvino_version', 'not run')}, CPU plugin"),
                ("Date", m.get("date", ctx.get("date", "?"))), ("Commit", m.get("git", "?"))]
        self.emit(table(["", ""], rows), "")
        if self.load_events:
            self.emit("Load average (1, 5, 15 min) before and after each stage. The machine is shared: other work "
                      "on its two vCPUs slows every case, and multi-threaded ones most (a thread that loses its "
                      "core stalls the other at the next barrier).", "")
            self.emit(table(["stage", "start", "end", "load before", "load after"],
                            [(e["stage"], e["start"][:19].replace("T", " "), e["end"][11:19], e["load_before"],
                              e["load_after"]) for e in self.load_events]), "")
        self.emit(
            "Method. Each case runs at least the minimum time per repetition, repeated; the time shown is the median "
            "of the repetitions' mean iteration time (wall clock). Counters: tokens/s; GFLOP/s from the constexpr "
            "FLOP counts of `cpx/config/model_counts.hpp` (useful work: for the masked dispatch too); GB/s of the "
            "bytes the work must move; `frac_of_gemm` = GFLOP/s over Eigen's fp32 GEMM rate for the same "
            "products' shapes measured in the same binary at the same thread count (several products: their "
            "time-weighted combination); `frac_of_bandwidth` = GB/s over the memory read rate measured in the "
            "same binary (512 MiB buffer, measured again just before each case and repetition; the faster of a bare "
            "read and a read that prefetches 4 KiB ahead into L2; whole-model decode cases measure it between "
            "their rounds of steps instead, below), i.e. the bandwidth bound's time over ours. bf16-stored weights count "
            "2 bytes. The PyTorch peer runs the same cases (names, shapes, threads) and is timed the same way "
            "(warm-up, repetitions, median). " + self.warmup_note(), "")

    def warmup_note(self):
        """Which suites called each case once, untimed, before timing it (bench_support.hpp, Warmup)."""
        cold = sorted(name.removesuffix(".json") for name, ctx in self.contexts.items()
                      if "cpx_warmup" not in ctx and name.startswith("bench_") and not name.endswith("_model.json")
                      and name != "bench_machine.json")
        note = ("Our layer cases build their layer anew for each repetition and run it once untimed before "
                "the loop; the whole-model cases keep their model and run each case once before its first "
                "repetition.")
        if cold:
            note += (" Suites run before that warm-up existed, whose layer cases time their first call "
                     "(workspace sizing and page faults, a large share of cases of a few iterations): "
                     + ", ".join(f"`{c}`" for c in cold) + ".")
        return note

    def ceilings(self):
        rows = []
        for n in self.names(r"^machine/"):
            p = params(n)
            if "eigen_sgemm" in n:
                rows.append((f"Eigen SGEMM m={p['m']} n={p['n']} k={p['k']}", p["threads"],
                             f"{self.o(n, 'GFLOP_per_s'):.0f} GFLOP/s"))
            elif "/peak/" in n:
                what = {"fma_f32": "peak: fp32 FMA (vfmadd231ps loop)", "dpbf16": "peak: bf16 dot product (vdpbf16ps loop)",
                        "amx_bf16": "peak: bf16 AMX tile product (tdpbf16ps loop)"}
                rows.append((what.get(n.split("/")[2], n), p["threads"], f"{self.o(n, 'GFLOP_per_s'):.0f} GFLOP/s"))
            elif "gemm_f32_packed" in n:
                rows.append((f"our packed fp32 product m={p['m']} n={p['n']} k={p['k']}", p["threads"],
                             f"{self.o(n, 'GFLOP_per_s'):.0f} GFLOP/s ({fpct(self.o(n, 'frac_of_fma_peak'))} of the "
                             f"FMA peak, {fpct(self.o(n, 'frac_of_gemm'))} of Eigen's)"))
            elif "gemm_bf16" in n:
                rows.append((f"our bf16 product m={p['m']} n={p['n']} k={p['k']}", p["threads"],
                             f"{self.o(n, 'GFLOP_per_s'):.0f} GFLOP/s ({fpct(self.o(n, 'frac_of_bf16_peak'))} of the "
                             f"bf16 peak)"))
            else:
                how = " with L2 prefetches ahead" if "memory_read_prefetch" in n else ""
                rows.append((f"memory read{how}, {p['mib']} MiB", p["threads"], f"{self.o(n, 'GB_per_s'):.1f} GB/s"))
        if rows:
            self.emit("## The machine's limits (bench_machine)", "",
                      "Every suite measures its own ceilings for its own shapes; these are the reference points.", "")
            self.emit(table(["what", "threads", "rate"], rows), "")

    def fraction_row(self, label, cases, key, floor):
        """A target row: every case's `key` fraction at least `floor`; median, best and worst."""
        fr = {n: self.o(n, key) for n in cases}
        worst, best = min(cases, key=fr.get), max(cases, key=fr.get)
        met = [n for n in cases if fr[n] >= floor]
        return (label, f"{len(met)} of {len(cases)}; median {fpct(statistics.median(fr.values()))}, best "
                f"{fpct(fr[best])} (`{best}`), worst {fpct(fr[worst])} (`{worst}`)", verdict(len(met) == len(cases)),
                f"worst short by {max(0, 100 * (floor - fr[worst])):.0f} points")

    def targets(self):
        self.emit("## Targets: the fp32 path", "")
        summary = []

        # 1. GEMM-bound layers
        gemm_layers = [n for n in self.names(r"^(linear/.*/f32|mlp/(dense_swiglu|token_routed|learned_router|gelu)/)")
                       if params(n).get("tokens", 0) >= 512 and self.o(n, "frac_of_gemm") is not None]
        if gemm_layers:
            summary.append(self.fraction_row("GEMM-bound layers (fp32 projections and MLPs, prefill) ≥ 70% of the "
                                             "GEMM rate", gemm_layers, "frac_of_gemm", 0.70))
        # 2. model prefill
        prefill = [n for n in self.names(r"^model/.*/prefill/") if self.o(n, "frac_of_gemm") is not None
                   and "/compute:bf16/" not in n
                   and params(n)["threads"] == 2]
        if prefill:
            summary.append(self.fraction_row("Whole-model prefill ≥ 50% of the GEMM rate (2 threads)", prefill,
                                             "frac_of_gemm", 0.5))
        # 3. TR / dense
        ratios = []
        for n in self.names(r"^mlp/token_routed/384M/"):
            dn = n.replace("token_routed", "dense_swiglu")
            if params(n)["tokens"] >= 512 and self.o(dn):
                ratios.append((n, self.o(n) / self.o(dn)))
        if ratios:
            worst = max(ratios, key=lambda r: r[1])
            summary.append(("Token-routed ÷ iso-parameter dense MLP time ≤ 0.42 (384M, prefill)",
                            ", ".join(f"{r[1]:.3f} ({params(r[0])['tokens']} tok, {params(r[0])['threads']} thr"
                                      f"{', packed' if '/compute:' in r[0] else ''})" for r in ratios),
                            verdict(all(r[1] <= 0.42 for r in ratios)),
                            f"worst {worst[1]:.3f} vs 0.42 ({100 * (worst[1] / 0.42 - 1):+.0f}%)"))
        # 4. decode
        decode = [n for n in self.names(r"^model/.*/decode/") if self.o(n, "frac_of_bandwidth")]
        if decode:
            ratio = {n: self.decode_ratio(n) for n in decode}
            worst = max(decode, key=lambda n: ratio[n])
            ok = [n for n in decode if ratio[n] <= 1.4]
            summary.append(("Decode time ≤ 1.4 × the bandwidth bound (bf16 weights at 2 bytes)",
                            f"{len(ok)} of {len(decode)}; median {statistics.median(ratio.values()):.2f}×, "
                            f"worst {ratio[worst]:.2f}× (`{worst}`)", verdict(len(ok) == len(decode)),
                            f"worst {100 * (ratio[worst] / 1.4 - 1):+.0f}% vs 1.4×"))
        # 5. threads
        pairs = self.thread_pairs(r"^model/.*/prefill/")
        if pairs:
            worst = min(pairs, key=lambda p: p[1])
            summary.append(("2 threads ≥ 1.7 × 1 thread, whole-model prefill",
                            ", ".join(f"{s:.2f}× (`{n}`)" for n, s in pairs), verdict(all(s >= 1.7 for _, s in pairs)),
                            f"worst {worst[1]:.2f}× vs 1.7×"))
        # 6. PyTorch. The target is about fp32 arithmetic: cases with bf16-stored
        # weights compare our fp32 arithmetic with PyTorch's bf16 arithmetic
        # (oneDNN, AMX where the CPU has it), so they are reported on their own.
        both = [n for n in self.ours if self.t(n) is not None]
        for label, group in (("fp32 cases", [n for n in both if "/bf16/" not in n]),
                             ("bf16-stored weights (PyTorch computes in bf16, we in fp32)",
                              [n for n in both if "/bf16/" in n])):
            if not group:
                continue
            sp = {n: self.speedup(n) for n in group}
            losses = sorted((n for n in group if sp[n] <= 1.0), key=lambda n: sp[n])
            target = label == "fp32 cases"
            summary.append((f"Faster than PyTorch eager on every layer and model (prefill and decode): {label}",
                            f"{len(group) - len(losses)} of {len(group)} cases faster; geometric-mean speedup "
                            f"{math.exp(statistics.mean(math.log(s) for s in sp.values())):.2f}×",
                            verdict(not losses) if target else "(not a target: different arithmetic)",
                            "slower on " + ", ".join(f"`{n}` ({sp[n]:.2f}×)" for n in losses[:8]) +
                            (f" and {len(losses) - 8} more" if len(losses) > 8 else "") if losses else "none slower"))
        self.emit(table(["target", "measured", "verdict", "margin"], summary), "")

    def ours_best(self, name):
        """Our fastest time (ms) for a peer's case: the same name, or the same weights
        under another arithmetic (`compute:bf16` / `bf16_compute` for bf16 weights,
        `compute:fp32_packed` / `f32_packed` for fp32), since the arithmetic is the user's
        choice and the peers pick theirs."""
        alternatives = [name]
        for kind in ("/prefill/", "/decode/"):
            if kind in name:
                base, rest = name.split(kind)
                alt = "/compute:bf16" if base.endswith("/bf16") else "/compute:fp32_packed"
                alternatives.append(base + alt + kind + rest)
        if name.startswith("linear/") and "/bf16/" in name:
            alternatives.append(name.replace("/bf16/", "/bf16_compute/"))
        if name.startswith("linear/") and "/f32/" in name:
            alternatives.append(name.replace("/f32/", "/f32_packed/"))
        if name.startswith(("attention/", "mlp/")) and "/compute:" not in name and "/tokens:" in name:
            alternatives.append(name.replace("/tokens:", "/compute:fp32_packed/tokens:", 1))
        times = [t for t in (self.o(n) for n in alternatives) if t]
        return min(times) if times else None

    def peer_ratio(self, peer, name):
        """Peer time ÷ our fastest time (> 1: we are faster), or None."""
        ours, theirs = self.ours_best(name), peer.get(name, {}).get("ms")
        return theirs / ours if ours and theirs else None

    def targets_peak(self):
        """The targets for bf16 arithmetic, the current peers and the decode bounds."""
        summary = []

        def ratios_row(what, peer, pattern, floor):
            cases = sorted((n for n in peer if re.search(pattern, n) and self.peer_ratio(peer, n)), key=self.sort_key)
            if not cases:
                return
            r = {n: self.peer_ratio(peer, n) for n in cases}
            worst = min(cases, key=lambda n: r[n])
            summary.append((what, ", ".join(f"{r[n]:.2f}× (`{n.replace('model/complexity/', '')}`)" for n in cases),
                            verdict(all(v >= floor for v in r.values())),
                            f"worst {r[worst]:.2f}× vs {floor}× ({100 * (r[worst] / floor - 1):+.0f}%)"))

        def paired_row(what, engine, pattern, floor):
            """The same target on the alternated rounds: each case's median over its rounds of the
            round's peer time ÷ ours."""
            cases = sorted((n for n in self.paired if re.search(pattern, n)), key=self.sort_key)
            if not cases:
                return
            r = {n: self.paired_ratios(n, engine)[0] for n in cases}
            cases = [n for n in cases if r[n]]
            if not cases:
                return
            worst = min(cases, key=lambda n: r[n])
            rounds = sorted({len(self.paired[n]["rounds"]) for n in cases})
            summary.append((f"{what}, alternated (median of {'/'.join(map(str, rounds))} rounds per case)",
                            ", ".join(f"{r[n]:.2f}× (`{n.replace('model/complexity/', '')}`)" for n in cases),
                            verdict(all(r[n] >= floor for n in cases)),
                            f"worst {r[worst]:.2f}× vs {floor}× ({100 * (r[worst] / floor - 1):+.0f}%)"))

        ratios_row("bf16 prefill ≥ 1.25 × OpenVINO bf16 (ours: `compute:bf16`)", self.ov,
                   r"^model/complexity/(187M|384M)/bf16/prefill/", 1.25)
        paired_row("bf16 prefill ≥ 1.25 × OpenVINO bf16", "openvino", r"/bf16/prefill/", 1.25)
        layers = [n for n in self.names(r"^linear/.*/bf16_compute/")  # prefill: decode rows are read-bound
                  if self.o(n, "frac_of_bf16_peak") is not None and params(n).get("tokens", 0) >= 128]
        if layers and self.names(r"^machine/peak/amx_bf16/"):  # the bf16 peak is then the AMX tiles'
            summary.append(self.fraction_row("GEMM-bound layers, bf16 arithmetic on AMX ≥ 40% of the AMX tile peak",
                                             layers, "frac_of_bf16_peak", 0.40))
        elif layers and self.names(r"^machine/peak/dpbf16/"):
            summary.append(self.fraction_row("GEMM-bound layers, bf16 arithmetic ≥ 75% of the `vdpbf16ps` peak",
                                             layers, "frac_of_bf16_peak", 0.75))
        elif layers:  # no bf16 instructions: the widened level multiplies with fp32 FMAs
            summary.append(self.fraction_row("GEMM-bound layers, bf16 arithmetic on the widened level (no bf16 "
                                             "instructions here: fp32 FMAs) ≥ 75% of the fp32 FMA peak",
                                             layers, "frac_of_bf16_peak", 0.75))
        ratios_row("fp32 prefill ≥ 1.1 × OpenVINO fp32", self.ov, r"^model/complexity/(187M|384M)/f32/prefill/", 1.1)
        paired_row("fp32 prefill ≥ 1.1 × OpenVINO fp32", "openvino", r"/f32/prefill/", 1.1)
        ratios_row("fp32 prefill ≥ 1.5 × PyTorch 2 fp32", self.torch2, r"^model/complexity/(187M|384M)/f32/prefill/",
                   1.5)
        paired_row("fp32 prefill ≥ 1.5 × PyTorch 2 fp32", "pytorch2", r"/f32/prefill/", 1.5)
        for label, pattern, limit in (("Batch-1 decode ≤ 1.15 × the read bound, 128–2048 cached tokens",
                                       r"^model/.*/decode/batch:1/", 1.15),
                                      ("Batched decode (4–16 sequences) ≤ the read bound",
                                       r"^model/.*/decode/batch:(4|8|16)/", 1.0)):
            decode = [n for n in self.names(pattern) if self.o(n, "frac_of_bandwidth")]
            if decode:
                ratio = {n: self.decode_ratio(n) for n in decode}
                worst = max(decode, key=lambda n: ratio[n])
                ok = [n for n in decode if ratio[n] <= limit]
                summary.append((label, f"{len(ok)} of {len(decode)}; median {statistics.median(ratio.values()):.2f}×, "
                                f"best {min(ratio.values()):.2f}×, worst {ratio[worst]:.2f}× (`{worst}`)",
                                verdict(len(ok) == len(decode)), f"worst {100 * (ratio[worst] / limit - 1):+.0f}% vs "
                                f"{limit}×"))
        # The read bound alone cannot be met where the arithmetic takes longer than the reads even at
        # the instruction's peak: say which batched cases those are, and how far each is from the
        # larger of the two floors.
        batched = [n for n in self.names(r"^model/.*/decode/batch:(4|8|16)/")
                   if self.o(n, "frac_of_bandwidth") and self.arithmetic_floor_ms(n)]
        if batched:
            read = {n: self.read_bound_ms(n) for n in batched}
            above = [n for n in batched if self.arithmetic_floor_ms(n) > read[n]]
            floor = {n: self.o(n) / max(read[n], self.arithmetic_floor_ms(n)) for n in batched}
            worst = max(batched, key=lambda n: floor[n])
            summary.append(("(context) Batched decode ÷ max(read bound, arithmetic floor = FLOPs at the measured "
                            "peak of its instruction)",
                            f"{len(above)} of {len(batched)} cases have an arithmetic floor above the read bound"
                            + (" (" + ", ".join(f"`{n.replace('model/complexity/', '')}`" for n in above) + ")"
                               if above else "") +
                            f"; against the larger floor: median {statistics.median(floor.values()):.2f}×, worst "
                            f"{floor[worst]:.2f}× (`{worst.replace('model/complexity/', '')}`)",
                            "(not a target)", "–"))
        for label, peer in (("PyTorch 2", self.torch2), ("OpenVINO", self.ov)):
            cases = [n for n in peer if self.peer_ratio(peer, n)]
            if not cases:
                continue
            r = {n: self.peer_ratio(peer, n) for n in cases}
            losses = sorted((n for n in cases if r[n] <= 1.0), key=lambda n: r[n])
            summary.append((f"Faster than {label} on every case it runs (ours: the fastest arithmetic for the "
                            "same weights)",
                            f"{len(cases) - len(losses)} of {len(cases)} faster; geometric-mean speedup "
                            f"{math.exp(statistics.mean(math.log(v) for v in r.values())):.2f}×",
                            verdict(not losses),
                            "slower on " + ", ".join(f"`{n}` ({r[n]:.2f}×)" for n in losses[:8]) +
                            (f" and {len(losses) - 8} more" if len(losses) > 8 else "") if losses else "none slower"))
        if summary:
            self.emit("## Targets: bf16 arithmetic, the current peers, the decode bounds", "",
                      "Ratios are the peer's time ÷ ours (> 1: ours faster) or ours ÷ the bound. bf16 rows compare "
                      "bf16 arithmetic with bf16 arithmetic (OpenVINO's precision hint bf16, PyTorch 2 on bf16 "
                      "tensors).", "")
            self.emit(table(["target", "measured", "verdict", "margin"], summary), "")

    def arithmetic_floor_ms(self, name):
        """A batched decode step's FLOPs at the peak of the instruction its products run on
        (bf16 dot products or fp32 FMAs, measured in the same binary), ms; None where not recorded."""
        peak = self.o(name, "bf16_peak_GFLOP_per_s") or self.o(name, "fma_peak_GFLOP_per_s")
        flops = self.o(name, "flops_per_iter")
        return flops / peak * 1e-6 if peak and flops else None

    def read_bound_ms(self, name):
        """The bytes a decode case reads at its read rate (the median of the rates measured between
        its rounds of steps, or where a run predates those, the rate measured before it), ms; None
        where not recorded."""
        mb, ceiling = self.o(name, "bytes_per_iter"), self.o(name, "read_ceiling_GB_per_s")
        return mb / 1e6 / ceiling if mb and ceiling else None  # MB / (GB/s) = ms

    def decode_ratio(self, name):
        """Our time over the bandwidth bound: the median over rounds of steps of each round's time
        over the bound at the read rate measured beside it (bench_support.hpp, run_read_paired),
        where recorded; else the median time over bytes / the median read ceiling."""
        paired = self.o(name, "bound_ratio_paired")
        return paired if paired else self.o(name) / self.read_bound_ms(name)

    def thread_pairs(self, pattern):
        pairs = []
        for n in self.names(pattern):
            if params(n).get("threads") == 1:
                two = with_param(n, "threads", 2)
                if self.o(two):
                    pairs.append((two.replace("/threads:2", ""), self.o(n) / self.o(two)))
        return pairs

    # -- layer tables
    def layer_rows(self, pattern, cols):
        rows = []
        for n in sorted(self.names(pattern), key=self.sort_key):
            r = [f"`{n}`", fms(self.o(n)), fnum(self.o(n, "tokens_per_s"))]
            for c in cols:
                v = self.o(n, c)
                r.append(fpct(v) if c.startswith("frac") else fnum(v))
            r += [fms(self.t(n)), (f"{self.speedup(n):.2f}×" if self.speedup(n) else "–")]
            rows.append(r)
        return rows

    @staticmethod
    def sort_key(n):
        p = params(n)
        base = re.sub(r"/[a-z_]+:[^/]+", "", n)
        return (base, p.get("threads", 0) * -1, p.get("tokens", 0), p.get("context", 0), p.get("batch", 0))

    def layers(self):
        self.emit("## Layers", "")
        hdr = lambda extra: ["case", "ms", "tokens/s"] + extra + ["PyTorch ms", "PyTorch ÷ ours"]  # noqa: E731
        self.emit("### Element-wise (RMSNorm, LayerNorm, RoPE)", "",
                  "Bandwidth-type work on cache-resident data (a few MB): GB/s is read + write, the fraction is "
                  "against the DRAM read rate, so it can exceed 100%.", "")
        self.emit(table(hdr(["GB/s", "of DRAM read"]), self.layer_rows(r"^(rmsnorm|layernorm|rope)/",
                                                                      ["GB_per_s", "frac_of_bandwidth"])), "")
        self.emit("### Projections (`cpu::linear`, `cpu::matmul`)", "",
                  "Prefill (512/2048 rows) against Eigen's GEMM of the same shape; decode (`tokens:1`, and 4, 8 or 16 "
                  "rows for a batched step, against the peak of the instruction too: fp32 FMA, or the bf16 peak for "
                  "`bf16_compute`) against the memory read rate, weights rotating "
                  "through 1 GiB of copies. `matmul/expert_*` rows are a routed expert's input-major products at the "
                  "rows a decode step sends it. `*_portable` rows run the same decode products with the vector "
                  "kernels switched off (`cpu::VectorIsaLimit`), as on a CPU without AVX2; `*_avx2` rows (AVX-512 "
                  "machines) cap them at AVX2, as on a CPU without AVX-512. `eigen_gemv` is Eigen's own "
                  "matrix-vector product (single-threaded in Eigen 3.4) on the same fp32 weights. PyTorch's bf16 "
                  "column is bf16 arithmetic, as ours is in the `bf16_compute` rows (weights packed once, against the "
                  "bf16 peak measured in the same binary (`vdpbf16ps`, AMX tile products where the AMX level runs, or "
                  "the fp32 FMA peak where the widened level runs on a CPU without bf16 instructions); "
                  "their \"of GEMM\" compares with Eigen's fp32 GEMM).", "")
        self.emit(table(hdr(["GFLOP/s", "of GEMM", "of bf16 peak", "of FMA peak", "GB/s", "of read"]),
                        self.layer_rows(r"^(linear|matmul)/", ["GFLOP_per_s", "frac_of_gemm", "frac_of_bf16_peak",
                                                               "frac_of_fma_peak", "GB_per_s", "frac_of_bandwidth"])),
                  "")
        self.emit("### Attention", "",
                  "`mu_gqa` is COMPLEXITY-DEEP's attention with the mu terms (input [a|mu], 2d wide); `gqa_no_mu` the "
                  "same layer without them (run3). `prism` is PRISM's differential attention, `mha` a standard "
                  "multi-head attention with the same 4d² parameters. Decode rows: one token through a cache of "
                  "`context` positions (one layer's weights and cache fit in the caches; GB/s is informative).", "")
        self.emit(table(hdr(["GFLOP/s", "of GEMM", "GB/s"]),
                        self.layer_rows(r"^attention/", ["GFLOP_per_s", "frac_of_gemm", "GB_per_s"])), "")
        self.attention_comparisons()
        self.emit("### MLPs", "",
                  "GFLOP/s counts useful work (one expert + shared per token), so the masked dispatch's fraction shows "
                  "its waste. `tokens:1` rows are one decode row (weights cache-resident at this size).", "")
        self.emit(table(hdr(["GFLOP/s", "of GEMM"]), self.layer_rows(r"^mlp/", ["GFLOP_per_s", "frac_of_gemm"])), "")
        self.mlp_comparisons()

    def attention_comparisons(self):
        rows = []
        for n in sorted(self.names(r"^attention/mu_gqa/187M/"), key=self.sort_key):
            other = n.replace("mu_gqa/187M", "gqa_no_mu/177M")
            if self.o(other):
                rows.append((f"`{n.replace('attention/mu_gqa/187M/', '')}`", "mu ÷ no mu",
                             f"{self.o(n) / self.o(other):.3f}",
                             f"{self.t(n) / self.t(other):.3f}" if self.t(n) and self.t(other) else "–"))
        for n in sorted(self.names(r"^attention/prism/"), key=self.sort_key):
            other = n.replace("/prism/", "/mha/")
            if self.o(other):
                rows.append((f"`{n.replace('attention/prism/', '')}`", "PRISM ÷ MHA", f"{self.o(n) / self.o(other):.3f}",
                             f"{self.t(n) / self.t(other):.3f}" if self.t(n) and self.t(other) else "–"))
        if rows:
            self.emit("Time ratios of the pairs (ours, and the same ratio in PyTorch):", "")
            self.emit(table(["case", "ratio", "ours", "PyTorch"], rows), "")

    def mlp_comparisons(self):
        rows = []
        for n in sorted(self.names(r"^mlp/dense_swiglu/(384M|171M)/"), key=self.sort_key):
            p = params(n)
            preset = n.split("/")[2]
            routed = n.replace("dense_swiglu", "token_routed").replace("171M", "187M")
            active = 1600 / 4358 if preset == "384M" else 1024 / 2416
            r = [f"{preset} vs {'384M' if preset == '384M' else '187M'}"
                 f"{' (`fp32_packed`)' if '/compute:' in n else ''}", p["tokens"], p["threads"], fms(self.o(n))]
            for variant in ("token_routed", "learned_router", "masked_dense_dispatch"):
                v = routed.replace("token_routed", variant)
                r.append(f"{fms(self.o(v))} ({self.o(v) / self.o(n):.3f})" if self.o(v) else "–")
            r.append(f"{active:.3f} → ≤ {1.15 * active:.2f}")
            tr = self.t(routed)
            r.append(f"{tr / self.t(n):.3f}" if tr and self.t(n) else "–")
            rows.append(r)
        if rows:
            self.emit("Side by side (ms, and in parentheses the time ÷ the dense MLP's); the target is 1.15 × the "
                      "active-FLOP ratio:", "")
            self.emit(table(["shapes", "tokens", "threads", "dense ms", "token-routed", "learned router",
                             "masked dispatch", "active-FLOP ratio → target", "PyTorch TR ÷ dense"], rows), "")
        self.plot_mlp()

    # -- models
    def models(self):
        self.emit("## Models", "", "### Prefill", "",
                  "B sequences of T tokens into empty KV caches, logits of the last position. The fraction is "
                  "against Eigen's GEMM rate for every product of the model at these shapes.", "")
        rows = []
        for n in sorted(self.names(r"^model/.*/prefill/"), key=self.sort_key):
            rows.append((f"`{n.replace('model/', '')}`", fms(self.o(n)), fnum(self.o(n, "tokens_per_s")),
                         fnum(self.o(n, "GFLOP_per_s")), fnum(self.o(n, "gemm_ceiling_GFLOP_per_s")),
                         fpct(self.o(n, "frac_of_gemm")), fms(self.t(n)),
                         f"{self.speedup(n):.2f}×" if self.speedup(n) else "–"))
        self.emit(table(["case", "ms", "tokens/s", "GFLOP/s", "GEMM ceiling", "of GEMM", "PyTorch ms",
                         "PyTorch ÷ ours"], rows), "")
        rows = []
        for n in sorted(self.names(r"^model/.*/compute:bf16/prefill/"), key=self.sort_key):
            fp32 = n.replace("/compute:bf16", "")
            rows.append((f"`{n.replace('model/', '')}`", fms(self.o(n)), fnum(self.o(n, "tokens_per_s")),
                         fnum(self.o(n, "GFLOP_per_s")), fpct(self.o(n, "frac_of_bf16_peak")),
                         f"{self.o(fp32) / self.o(n):.2f}×" if self.o(fp32) and self.o(n) else "–"))
        if rows:
            self.emit("bf16 arithmetic (docs/BF16.md): the same prefills with bf16 products and fp32 sums, against "
                      "the bf16 peak measured in the same binary (`vdpbf16ps`, AMX tiles where that level runs, the fp32 FMA "
                      "peak where the widened level runs); the last column is the fp32-arithmetic "
                      "time of the same weights ÷ this time.", "")
            self.emit(table(["case", "ms", "tokens/s", "GFLOP/s", "of bf16 peak", "fp32 arithmetic ÷ bf16"], rows), "")
        self.emit("### Decode", "",
                  "One new token per sequence at `context` positions. Bound = bytes read (weights in their storage "
                  "type, one routed expert per distinct expert, the head, the KV cache) ÷ the measured read rate. "
                  "The steps run in rounds of at least 50 ms with one 512 MiB read pass before and after each; "
                  "a round whose two passes agree within 15% is timed against the higher of them, and \"ours ÷ bound\" is "
                  "the median of those rounds' ratios (the read ceiling column: the median of their rates), so "
                  "a step and its ceiling come from the same moments of a machine whose read rate jumps "
                  "between levels. Arithmetic "
                  "floor (batched steps) = the step's FLOPs at the peak of the instruction its products run on, "
                  "measured in the same binary (`vdpbf16ps` under `compute:bf16`, else the fp32 FMA): a step "
                  "cannot take less than either.", "")
        rows = []
        for n in sorted(self.names(r"^model/.*/decode/"), key=self.sort_key):
            gbps, ceiling = self.o(n, "GB_per_s"), self.o(n, "read_ceiling_GB_per_s")
            mb = self.o(n, "bytes_per_iter") / 1e6 if self.o(n, "bytes_per_iter") else None
            bound = self.read_bound_ms(n)
            rows.append((f"`{n.replace('model/', '')}`", fms(self.o(n)), fnum(self.o(n, "tokens_per_s")),
                         fnum(mb), fnum(gbps), fnum(ceiling), fms(bound),
                         f"{self.decode_ratio(n):.2f}×" if bound else "–", fms(self.arithmetic_floor_ms(n)),
                         fms(self.t(n)),
                         f"{self.speedup(n):.2f}×" if self.speedup(n) else "–"))
        self.emit(table(["case", "ms", "tokens/s", "MB read", "GB/s", "read ceiling GB/s", "bound ms", "ours ÷ bound",
                         "arithmetic floor ms", "PyTorch ms", "PyTorch ÷ ours"], rows), "")
        self.plot_models()

    # -- scaling
    def scaling(self):
        self.emit("## Scaling", "", "### Threads (1 → 2)", "")
        rows = [(f"`{n}`", f"{s:.2f}×", "met" if s >= 1.7 else "missed") for n, s in
                sorted(self.thread_pairs(r"/(prefill|tokens:(512|2048))/?"), key=lambda p: p[0])]
        rows += [(f"`{n}`", f"{s:.2f}×", "(decode)") for n, s in sorted(self.thread_pairs(r"/decode/"))]
        self.emit(table(["case", "2 threads ÷ 1 thread", "≥ 1.7×"], rows), "")
        self.emit("### Expert count at a fixed active width (800 routed + 800 shared per token, 2048 tokens)", "")
        rows = []
        for e in (1, 2, 4, 8, 16):
            tr, mk = f"mlp/token_routed/experts:{e}/tokens:2048/threads:2", \
                f"mlp/masked_dense_dispatch/experts:{e}/tokens:2048/threads:2"
            if self.o(tr):
                rows.append((e, fms(self.o(tr)), fpct(self.o(tr, "frac_of_gemm")), fms(self.o(mk)),
                             f"{self.o(mk) / self.o(tr):.2f}×" if self.o(mk) else "–", fms(self.t(tr)), fms(self.t(mk))))
        self.emit(table(["experts", "token-routed ms", "of GEMM", "masked ms", "masked ÷ routed", "PyTorch routed ms",
                         "PyTorch masked ms"], rows), "")
        self.plot_experts()
        self.emit("### Sequence length", "")
        self.plot_sequence()

    def versus_peers(self):
        """Whole models against PyTorch 2 and OpenVINO, per peer case (f32 or bf16 weights; bf16 = bf16
        arithmetic in the peers): our default and our fastest packed arithmetic for the same weights,
        and the ratios to our faster one. One table for prefill, one for decode."""
        every = sorted(set(self.torch2) | set(self.ov), key=self.sort_key)
        for kind in ("prefill", "decode"):
            cases = [n for n in every if re.search(rf"^model/.*/{kind}/", n)]
            if not cases:
                continue
            if kind == "prefill":
                self.emit("## Against PyTorch 2 and OpenVINO: whole-model prefill", "",
                          "Tokens/s, same machine, same run. f32 rows: fp32 weights and arithmetic (ours: the default "
                          "`fp32` on the stored weights, its prefill products packed during the call for our kernel "
                          "where AVX2 or AVX-512 is present, Eigen's elsewhere; and `fp32_packed`, the same kernel on "
                          "a copy packed once); bf16 rows: bf16 weights, bf16 "
                          "arithmetic with fp32 sums (ours: `compute:bf16`). PyTorch 2 runs "
                          "`bench/python/torch_models.py` eagerly; OpenVINO runs the same module converted "
                          "(`bench/python/openvino_peer.py`, LATENCY hint, its precision hint set to the row's "
                          "type). Ratios use our fastest column.", "")
            else:
                self.emit("## Against PyTorch 2 and OpenVINO: decode", "",
                          "Tokens/s (sequences × steps per second) of one decode step at the given cache length, "
                          "same machine, same run; columns as for prefill. OpenVINO runs the module's decode "
                          "step converted with its KV cache as OpenVINO state (stateful model, the CPU plugin's "
                          "fused attention with an in-place cache of the row's type; `openvino_peer.py` says how "
                          "the routed experts are expressed in its graph).", "")
            rows = []
            for n in cases:
                base, rest = n.split(f"/{kind}/")
                if base.endswith("/f32"):
                    ours = [(self.o(n, "tokens_per_s"), "fp32"),
                            (self.o(f"{base}/compute:fp32_packed/{kind}/{rest}", "tokens_per_s"), "fp32_packed")]
                else:
                    ours = [(self.o(n, "tokens_per_s"), "fp32 on bf16"),
                            (self.o(f"{base}/compute:bf16/{kind}/{rest}", "tokens_per_s"), "bf16")]
                t2 = self.torch2.get(n, {}).get("tokens_per_s")
                ov = self.ov.get(n, {}).get("tokens_per_s")
                best = max((v for v, _ in ours if v), default=None)
                rate = lambda v: f"{v:,.0f}" if v else "–"  # noqa: E731
                rows.append((f"`{n.replace('model/', '')}`", rate(ours[0][0]), rate(ours[1][0]), rate(t2), rate(ov),
                             f"{best / ov:.2f}×" if best and ov else "–", f"{best / t2:.2f}×" if best and t2 else "–"))
            self.emit(table(["case", "ours (default fp32 / fp32 on bf16)", "ours (fp32_packed / bf16)", "PyTorch 2",
                             "OpenVINO", "ours ÷ OpenVINO", "ours ÷ PyTorch 2"], rows), "")

    def paired_ratios(self, name, engine):
        """(median, lowest, highest) over a paired case's rounds of the peer's time ÷ ours."""
        ratios = sorted(r[engine] / r["ours"] for r in self.paired[name]["rounds"] if engine in r)
        return (statistics.median(ratios), ratios[0], ratios[-1]) if ratios else (None, None, None)

    def paired_prefill(self):
        """The prefill cases of the targets, ours and the peers alternated round by round."""
        if not self.paired:
            return
        ctx = self.paired_ctx
        self.emit("## Prefill alternated with the peers", "",
                  f"The suites above time each engine in its own stage, minutes apart; this stage "
                  f"(`bench/python/paired_prefill.py`, {ctx.get('date', '?')[:16].replace('T', ' ')}"
                  f"{' to ' + ctx['end'][11:16] if ctx.get('end') else ''}) runs ours, OpenVINO "
                  f"{ctx.get('openvino_version', '?')} and PyTorch {ctx.get('torch_version', '?')} on the same case in "
                  f"turns, {ctx.get('rounds', '?')} rounds of at least {ctx.get('min_time', '?')} s per engine, the "
                  "order rotating between rounds. A ratio is taken within each round (peer time ÷ ours, > 1: ours "
                  "faster), then the median over the rounds, with the lowest and highest round; the times are "
                  "the medians over the rounds. Ours: the faster of `fp32` and `fp32_packed` in the round for f32 "
                  "rows, `compute:bf16` for bf16 rows; PyTorch 2 runs the f32 rows only (no target compares "
                  "with it in bf16).", "")
        rows = []
        for n in sorted(self.paired, key=self.sort_key):
            rounds = self.paired[n]["rounds"]
            def med(key):
                values = [r[key] for r in rounds if key in r]
                return statistics.median(values) if values else None

            cells = []
            for engine in ("openvino", "pytorch2"):
                m, lo, hi = self.paired_ratios(n, engine)
                cells.append(f"{m:.2f}× ({lo:.2f}–{hi:.2f})" if m else "–")
            rows.append((f"`{n.replace('model/', '')}`", str(len(rounds)), fms(med("ours")), fms(med("openvino")),
                         fms(med("pytorch2")), *cells))
        self.emit(table(["case", "rounds", "ours ms", "OpenVINO ms", "PyTorch 2 ms", "OpenVINO ÷ ours",
                         "PyTorch 2 ÷ ours"], rows), "")

    def versus_torch(self):
        both = sorted((n for n in self.ours if self.t(n)), key=self.sort_key)
        if not both:
            return
        self.emit("## Against PyTorch eager (Debian's), every case", "")
        self.plot_speedups(both)

    # -- plots
    @plot
    def plot_mlp(self, plt):
        variants = ["dense_swiglu", "token_routed", "learned_router", "masked_dense_dispatch"]
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
        for ax, tokens in zip(axes, (512, 2048)):
            names = [f"mlp/{v}/384M/tokens:{tokens}/threads:2" for v in variants]
            ours = [self.o(n) or 0 for n in names]
            torch_ = [self.t(n) or 0 for n in names]
            x = range(len(variants))
            ax.bar([i - 0.2 for i in x], ours, 0.4, label="cpx")
            ax.bar([i + 0.2 for i in x], torch_, 0.4, label="PyTorch eager")
            ax.set_xticks(list(x), ["dense\nI=4358", "token-routed\n4×800+800", "learned\nrouter", "masked\ndispatch"])
            ax.set_ylabel("ms")
            ax.set_title(f"384M MLP, {tokens} tokens, 2 threads")
            ax.legend()
        self.img(fig, "mlp_384M.png", "384M MLPs")

    @plot
    def plot_experts(self, plt):
        es = [1, 2, 4, 8, 16]
        if not self.names(r"^mlp/.*/experts:"):  # a partial run (BENCH_SUITES / BENCH_FILTER) without these cases
            return
        fig, ax = plt.subplots(figsize=(6, 3.8))
        for variant, label in (("token_routed", "token-routed"), ("masked_dense_dispatch", "masked dispatch")):
            names = [f"mlp/{variant}/experts:{e}/tokens:2048/threads:2" for e in es]
            ax.plot(es, [self.o(n) for n in names], "o-", label=f"{label}, cpx")
            if any(self.t(n) for n in names):
                ax.plot(es, [self.t(n) for n in names], "s--", label=f"{label}, PyTorch")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("experts (active width fixed: 800 + 800 shared)")
        ax.set_ylabel("ms per 2048 tokens")
        ax.legend(fontsize=8)
        self.img(fig, "experts.png", "expert-count scaling")

    def plot_series(self, ax, series, suffix, value, labels):
        """One line per (base name, label): value(name) against the tokens of the cases
        named base + suffix; labels = (x label, y label, title), x on a log2 scale."""
        for base, label in series:
            pts = sorted((params(n)["tokens"], value(n)) for n in self.names("^" + re.escape(base) + suffix))
            if pts:
                ax.plot(*zip(*pts), "o-", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(labels[0])
        ax.set_ylabel(labels[1])
        ax.set_title(labels[2])
        ax.legend(fontsize=8)

    @plot
    def plot_sequence(self, plt):
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
        self.plot_series(axes[0], [("attention/mu_gqa/187M", "mu-GQA 187M"), ("attention/gqa_no_mu/177M", "GQA no mu 177M"),
                                   ("attention/prism/mini", "PRISM mini"), ("attention/mha/mini", "MHA d=512")],
                         r"/tokens:\d+/threads:2$", lambda n: self.o(n) / params(n)["tokens"] * 1e3,
                         ("tokens", "µs per token", "attention layers, prefill, 2 threads"))
        self.plot_series(axes[1], [("model/complexity/187M/f32", "COMPLEXITY-DEEP 187M"),
                                   ("model/complexity/384M/f32", "384M"), ("model/prism/mini/f32", "PRISM mini")],
                         r"/prefill/batch:1/tokens:\d+/threads:2$", lambda n: self.o(n, "frac_of_gemm"),
                         ("tokens (batch 1)", "fraction of GEMM rate", "model prefill"))
        axes[1].set_ylim(0, 1)
        self.img(fig, "sequence.png", "sequence-length scaling")

    @plot
    def plot_models(self, plt):
        pre = sorted(self.names(r"^model/.*/prefill/"), key=self.sort_key)
        dec = sorted(self.names(r"^model/.*/decode/"), key=self.sort_key)
        fig, axes = plt.subplots(1, 2, figsize=(13, max(4.5, 0.16 * max(len(pre), len(dec)))))
        fig.subplots_adjust(wspace=1.1)  # room for the right panel's case names
        axes[0].barh(range(len(pre)), [self.o(n, "frac_of_gemm") or 0 for n in pre])
        axes[0].set_yticks(range(len(pre)), [n.replace("model/", "").replace("/prefill", "") for n in pre], fontsize=6)
        axes[0].axvline(0.5, color="k", ls="--", lw=1)
        axes[0].set_xlabel("fraction of GEMM rate (target ≥ 0.5)")
        axes[0].invert_yaxis()
        axes[1].barh(range(len(dec)), [self.decode_ratio(n) if self.o(n, "bytes_per_iter") else 0 for n in dec])
        axes[1].set_yticks(range(len(dec)), [n.replace("model/", "").replace("/decode", "") for n in dec], fontsize=6)
        axes[1].axvline(1.15, color="k", ls="--", lw=1)
        axes[1].axvline(1.0, color="k", ls=":", lw=1)
        axes[1].set_xlabel("decode time ÷ read bound\n(targets: batch 1 ≤ 1.15, batched ≤ 1)")
        axes[1].invert_yaxis()
        self.img(fig, "models.png", "model prefill and decode against the machine's limits")

    @plot
    def plot_speedups(self, plt, names):
        sp = [self.speedup(n) for n in names]
        fig, ax = plt.subplots(figsize=(8, max(4, 0.13 * len(names))))
        ax.barh(range(len(names)), sp, color=["tab:green" if s > 1 else "tab:red" for s in sp])
        ax.set_yticks(range(len(names)), names, fontsize=5)
        ax.axvline(1.0, color="k", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("PyTorch eager time ÷ cpx time (> 1: cpx faster)")
        ax.invert_yaxis()
        self.img(fig, "vs_pytorch.png", "speedup over PyTorch eager")

    def notes(self, path):
        if os.path.exists(path):
            with open(path) as f:
                self.emit("## Discussion", "", f.read().strip(), "")

    def write(self, out, notes):
        self.header(os.path.relpath(notes, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))
        self.targets_peak()
        self.targets()
        self.ceilings()
        self.layers()
        self.models()
        self.scaling()
        self.versus_peers()
        self.paired_prefill()
        self.versus_torch()
        self.notes(notes)
        with open(out, "w") as f:
            f.write("\n".join(self.lines).rstrip() + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="build/bench/results")
    ap.add_argument("--out", default="docs/BENCHMARKS.md")
    ap.add_argument("--img", default="docs/img")
    ap.add_argument("--no-plots", action="store_true", help="write the tables only (no matplotlib needed)")
    ap.add_argument("--notes", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "report_notes.md"))
    args = ap.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    img = None if args.no_plots else args.img
    Report(args.results, img, os.path.dirname(os.path.abspath(args.out))).write(args.out, args.notes)
    print(f"wrote {args.out}" + (f" and plots under {img}" if img else " (no plots)"))


if __name__ == "__main__":
    main()

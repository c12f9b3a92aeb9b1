#!/usr/bin/env python3
"""Tests of bench/report.py, the program that turns benchmark JSON into docs/BENCHMARKS.md.

The page's verdicts are arithmetic over recorded results (medians of repetitions, decode times over
read bounds, peers' times over ours); a slip there misstates every run, so the arithmetic is checked
here on small results written the way Google Benchmark and the peer scripts write them. Plots are
off (no matplotlib needed): any python3 runs this.

usage: check_report.py REPO_ROOT
"""
import json
import os
import statistics
import sys
import tempfile
import unittest

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import report  # noqa: E402

DECODE = "model/complexity/187M/bf16/decode/batch:1/context:512/threads:2"
DECODE_UNPAIRED = "model/complexity/187M/f32/decode/batch:1/context:512/threads:2"
BATCHED = "model/complexity/187M/bf16/compute:bf16/decode/batch:16/context:512/threads:2"
PREFILL_F32 = "model/complexity/187M/f32/prefill/batch:1/tokens:512/threads:2"
PREFILL_PACKED = "model/complexity/187M/f32/compute:fp32_packed/prefill/batch:1/tokens:512/threads:2"


def runs(name, times_ms, counters_per_rep, suffix="", median=True):
    """Google Benchmark's records of one case: a record per repetition, then (with more than one) the
    mean and median aggregates, whose counters are each counter's own mean and median."""
    full = name + suffix
    out = [dict(name=full, run_name=full, run_type="iteration", repetitions=len(times_ms), repetition_index=i,
                real_time=t, time_unit="ms", **c) for i, (t, c) in enumerate(zip(times_ms, counters_per_rep))]
    if median and len(times_ms) > 1:
        for agg, f in (("mean", statistics.mean), ("median", statistics.median)):
            rec = dict(name=f"{full}_{agg}", run_name=full, run_type="aggregate", aggregate_name=agg,
                       real_time=f(times_ms), time_unit="ms")
            for k in counters_per_rep[0]:
                rec[k] = f(c[k] for c in counters_per_rep)
            out.append(rec)
    return out


def write_json(path, benchmarks, context=None):
    with open(path, "w") as f:
        json.dump({"context": context or {}, "benchmarks": benchmarks}, f)


class Fixture(unittest.TestCase):
    """A results directory with a few cases of each kind the verdicts use."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        mb = 400e6  # bytes a step reads
        ours = []
        # Paired decode: per-repetition paired ratios 1.10, 1.30, 1.12 -> median 1.12; the time over the
        # median ceiling would say 4.0 / (400 MB / 80 GB/s = 5 ms) = 0.8, so the two paths differ.
        ours += runs(DECODE, [4.2, 4.0, 3.9],
                     [dict(bytes_per_iter=mb, read_ceiling_GB_per_s=80.0, bound_ratio_paired=r,
                           frac_of_bandwidth=0.9, tokens_per_s=250.0) for r in (1.10, 1.30, 1.12)],
                     suffix="/manual_time")
        # A decode record from before the paired rounds: 12 ms over 400 MB / 50 GB/s = 8 ms -> 1.5.
        ours += runs(DECODE_UNPAIRED, [12.0], [dict(bytes_per_iter=mb, read_ceiling_GB_per_s=50.0,
                                                    frac_of_bandwidth=0.6, tokens_per_s=83.0)])
        # Batched: 40 ms, bound 400 MB / 40 GB/s = 10 ms (paired 3.9), arithmetic floor 2e9 FLOP / 100
        # GFLOP/s = 20 ms: above the read bound, so 40 / 20 = 2.0 against the larger floor.
        ours += runs(BATCHED, [40.0, 40.0, 40.0],
                     [dict(bytes_per_iter=mb, read_ceiling_GB_per_s=40.0, bound_ratio_paired=3.9,
                           frac_of_bandwidth=0.25, flops_per_iter=2e9, bf16_peak_GFLOP_per_s=100.0,
                           tokens_per_s=400.0)] * 3, suffix="/manual_time")
        ours += runs(PREFILL_F32, [110.0, 100.0, 120.0], [dict(frac_of_gemm=0.8, tokens_per_s=5000.0)] * 3)
        ours += runs(PREFILL_PACKED, [90.0, 95.0, 80.0], [dict(frac_of_gemm=0.9, tokens_per_s=5600.0)] * 3)
        ours += runs(PREFILL_F32.replace("threads:2", "threads:1"), [180.0], [dict(frac_of_gemm=0.85)])
        write_json(os.path.join(self.dir, "bench_complexity_model.json"), ours,
                   {"cpx_cpu_model": "Test CPU", "cpx_cpu_levels": "avx2 avx512f"})
        # Peers: OpenVINO 100 ms against our fastest 90 (packed) -> 1.11x; PyTorch 2 at 85 -> 0.94x.
        write_json(os.path.join(self.dir, "openvino_complexity_model.json"), runs(PREFILL_F32, [100.0], [{}]),
                   {"openvino_version": "9.9"})
        write_json(os.path.join(self.dir, "pytorch2_complexity_model.json"), runs(PREFILL_F32, [85.0], [{}]),
                   {"torch_version": "2.99"})
        # Alternated prefill: OpenVINO / ours per round 1.2, 1.0, 1.4 -> median 1.2 (lowest 1.0, highest 1.4).
        with open(os.path.join(self.dir, "paired_prefill.json"), "w") as f:
            json.dump({"context": {"rounds": 3}, "cases": [
                {"name": PREFILL_F32, "rounds": [{"ours": 10.0, "openvino": 12.0}, {"ours": 10.0, "openvino": 10.0},
                                                 {"ours": 10.0, "openvino": 14.0}]},
                {"name": "model/complexity/384M/f32/prefill/batch:1/tokens:512/threads:2", "rounds": []}]}, f)

    def tearDown(self):
        self.tmp.cleanup()

    def report(self):
        return report.Report(self.dir, None, self.dir)

    def page(self):
        out = os.path.join(self.dir, "page.md")
        self.report().write(out, os.path.join(self.dir, "no_notes.md"))
        with open(out) as f:
            return f.read()


class Loading(Fixture):
    def test_median_of_repetitions_and_suffix_stripped(self):
        cases, ctx = report.load(os.path.join(self.dir, "bench_complexity_model.json"))
        self.assertIn(DECODE, cases)  # "/manual_time" is not part of the case's name
        self.assertNotIn(DECODE + "/manual_time", cases)
        self.assertAlmostEqual(cases[DECODE]["ms"], 4.0)
        self.assertAlmostEqual(cases[DECODE]["min_ms"], 3.9)
        self.assertEqual(cases[DECODE]["reps"], [4.2, 4.0, 3.9])
        self.assertAlmostEqual(cases[DECODE]["bound_ratio_paired"], 1.12)  # the median aggregate's counter
        self.assertEqual(ctx["cpx_cpu_model"], "Test CPU")

    def test_single_repetition_takes_its_own_counters(self):
        cases, _ = report.load(os.path.join(self.dir, "bench_complexity_model.json"))
        rec = cases[DECODE_UNPAIRED]
        self.assertAlmostEqual(rec["ms"], 12.0)
        self.assertAlmostEqual(rec["read_ceiling_GB_per_s"], 50.0)
        self.assertNotIn("first", rec)

    def test_repetitions_without_aggregates_take_the_median(self):
        path = os.path.join(self.dir, "bench_x.json")
        write_json(path, runs("a/threads:1", [3.0, 1.0, 2.0, 9.0], [{"k": 1.0}] * 4, median=False))
        cases, _ = report.load(path)
        self.assertAlmostEqual(cases["a/threads:1"]["ms"], 2.5)
        self.assertAlmostEqual(cases["a/threads:1"]["k"], 1.0)

    def test_time_units(self):
        path = os.path.join(self.dir, "bench_units.json")
        write_json(path, [dict(name=f"u/{u}", run_type="iteration", real_time=2.0, time_unit=u)
                          for u in ("ns", "us", "ms", "s")])
        cases, _ = report.load(path)
        self.assertEqual([cases[f"u/{u}"]["ms"] for u in ("ns", "us", "ms", "s")], [2e-6, 2e-3, 2.0, 2e3])

    def test_a_file_still_being_written_is_skipped(self):
        path = os.path.join(self.dir, "bench_partial.json")
        with open(path, "w") as f:
            f.write('{"context": {}, "benchmarks": [{"name": "x", "real_')
        self.assertEqual(report.load_or_skip(path), ({}, {}))
        self.assertIn(DECODE, self.report().ours)  # and the other suites still load

    def test_params(self):
        self.assertEqual(report.params(DECODE), {"batch": 1, "context": 512, "threads": 2})
        self.assertEqual(report.params("x/compute:bf16/tokens:8"), {"compute": "bf16", "tokens": 8})
        self.assertEqual(report.with_param(DECODE, "threads", 1), DECODE.replace("threads:2", "threads:1"))


class Ratios(Fixture):
    def test_decode_ratio_prefers_the_paired_rounds(self):
        self.assertAlmostEqual(self.report().decode_ratio(DECODE), 1.12)

    def test_decode_ratio_without_paired_rounds(self):
        r = self.report()
        self.assertAlmostEqual(r.read_bound_ms(DECODE_UNPAIRED), 8.0)
        self.assertAlmostEqual(r.decode_ratio(DECODE_UNPAIRED), 1.5)

    def test_arithmetic_floor(self):
        r = self.report()
        self.assertAlmostEqual(r.arithmetic_floor_ms(BATCHED), 20.0)
        self.assertIsNone(r.arithmetic_floor_ms(DECODE))

    def test_peers_are_compared_with_our_fastest_arithmetic(self):
        r = self.report()
        self.assertAlmostEqual(r.ours_best(PREFILL_F32), 90.0)  # fp32_packed beats the default's 110
        self.assertAlmostEqual(r.peer_ratio(r.ov, PREFILL_F32), 100.0 / 90.0)
        self.assertAlmostEqual(r.peer_ratio(r.torch2, PREFILL_F32), 85.0 / 90.0)
        self.assertIsNone(r.peer_ratio(r.ov, DECODE))  # no OpenVINO record of that case

    def test_alternated_rounds(self):
        r = self.report()
        self.assertEqual(r.paired_ratios(PREFILL_F32, "openvino"), (1.2, 1.0, 1.4))
        self.assertEqual(r.paired_ratios(PREFILL_F32, "pytorch2"), (None, None, None))
        self.assertEqual(list(r.paired), [PREFILL_F32])  # a case without rounds is dropped

    def test_thread_scaling(self):
        pairs = self.report().thread_pairs(r"^model/.*/prefill/")
        self.assertEqual(pairs, [(PREFILL_F32.replace("/threads:2", ""), 180.0 / 110.0)])


def row(page, start):
    """The cells of the page's first table row whose first cell starts with `start`."""
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith(start):
            return cells
    raise AssertionError(f"no row starting {start!r}")


class Page(Fixture):
    def test_decode_verdicts(self):
        page = self.page()
        batch1 = row(page, "Batch-1 decode ≤ 1.15")
        # 1.12 (paired) meets it, 1.5 (unpaired) does not.
        self.assertTrue(batch1[1].startswith("1 of 2; median 1.31×, best 1.12×, worst 1.50×"), batch1)
        self.assertEqual(batch1[2], "**missed**")
        self.assertEqual(batch1[3], "worst +30% vs 1.15×")
        batched = row(page, "Batched decode (4–16 sequences)")
        self.assertTrue(batched[1].startswith("0 of 1; median 3.90×"), batched)
        context = row(page, "(context) Batched decode")
        self.assertIn("1 of 1 cases have an arithmetic floor above the read bound", context[1])
        self.assertIn("median 2.00×", context[1])

    def test_decode_table(self):
        cells = row(self.page(), "`complexity/187M/bf16/decode/batch:1/")
        # ms, tokens/s, MB, GB/s, ceiling, bound ms, ours ÷ bound (the paired median, not 4.0 / 5.0)
        self.assertEqual(cells[7], "1.12×")
        self.assertEqual(cells[6], report.fms(5.0))

    def test_peer_verdicts(self):
        page = self.page()
        ov = row(page, "fp32 prefill ≥ 1.1 × OpenVINO fp32")
        self.assertEqual(ov[2], "**met**")  # 1.11x
        self.assertIn("1.11×", ov[1])
        alternated = row(page, "fp32 prefill ≥ 1.1 × OpenVINO fp32, alternated")
        self.assertEqual(alternated[2], "**met**")
        self.assertIn("1.20×", alternated[1])
        pt2 = row(page, "fp32 prefill ≥ 1.5 × PyTorch 2 fp32")
        self.assertEqual(pt2[2], "**missed**")
        slower = row(page, "Faster than PyTorch 2 on every case")
        self.assertTrue(slower[1].startswith("0 of 1 faster"), slower)
        self.assertIn(f"`{PREFILL_F32}` (0.94×)", slower[3])

    def test_machine_named(self):
        self.assertIn("Test CPU: avx2 avx512f", self.page())

    def test_empty_results_give_a_page(self):
        with tempfile.TemporaryDirectory() as empty:
            out = os.path.join(empty, "page.md")
            report.Report(empty, None, empty).write(out, os.path.join(empty, "no_notes.md"))
            with open(out) as f:
                self.assertTrue(f.read().startswith("# Benchmarks"))


if __name__ == "__main__":
    unittest.main(verbosity=2)

#pragma once
// Measurements of this machine's limits, taken inside the benchmark binary so
// every layer is compared with ceilings measured in the same run:
//   - the Eigen fp32 GEMM rate for a given shape (compute-bound work),
//   - the memory read rate over a buffer far larger than the caches (bandwidth-bound work).
// Results are cached per shape / thread count for the life of the process.

#include <benchmark/benchmark.h>

#include <cpx/cpu/runtime/aligned_buffer.hpp>
#include <cpx/cpu/runtime/eigen.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "bench_counters.hpp"
#include "cpx/core/dtype.hpp"
#include "cpx/cpu/kernels/gemm_bf16.hpp"
#include "cpx/cpu/kernels/gemm_f32_packed.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"
#include "cpx/cpu/runtime/cpu_features.hpp"

namespace cpx::bench {

using Clock = std::chrono::steady_clock;

/// Best-of-`repeats` wall time of `fn`, in seconds, after one warm-up call.
template <class Fn>
double best_seconds(Fn&& fn, int repeats) {
    fn();
    double best = 1e300;
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = Clock::now();
        fn();
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return best;
}

/// Eigen fp32 GEMM rate, GFLOP/s, for C[m,n] = A[m,k] * B[k,n] with the current thread count.
inline double machine_gemm_gflops(int m, int n, int k) {
    static std::map<std::tuple<int, int, int, int>, double> cache;
    const auto key = std::make_tuple(m, n, k, Eigen::nbThreads());
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    M a = M::Random(m, k), b = M::Random(k, n), c(m, n);
    const double flops = 2.0 * m * n * k;
    const int repeats = std::clamp(static_cast<int>(2e10 / flops), 3, 50);
    const double s = best_seconds([&] { c.noalias() = a * b; benchmark::DoNotOptimize(c.data()); }, repeats);
    return cache[key] = flops / s * 1e-9;
}

/// Register-resident loops of one instruction, enough independent accumulators
/// per thread to cover its latency: the arithmetic peak of the chip, which no
/// kernel can pass. Each returns a value that depends on every accumulator.
/// `vfmadd231ps` counts 32 FLOP per 512-bit instruction (16 per 256-bit one), `vdpbf16ps` 64 (16 lanes
/// x 2 products x multiply-add), an AMX `tdpbf16ps` of 16 x 16 fp32 outputs over
/// 32 bf16 inputs 16,384.
inline constexpr int register_loop_accumulators = 24;
__attribute__((target("avx512f"))) inline double fma_f32_loop(long iterations) {
    __m512 acc[register_loop_accumulators];
    for (auto& a : acc) a = _mm512_setzero_ps();
    const __m512 x = _mm512_set1_ps(1e-7f), y = _mm512_set1_ps(1.0f);
    for (long i = 0; i < iterations; ++i)
#pragma GCC unroll 24
        for (auto& a : acc) a = _mm512_fmadd_ps(x, y, a);
    float sum = 0;
    for (auto& a : acc) sum += _mm512_reduce_add_ps(a);
    return sum;
}
/// The AVX2 machine's loop: 12 of its 16 registers accumulate (two FMA pipes, 4-5 cycles each).
inline constexpr int register_loop_accumulators_avx2 = 12;
__attribute__((target("avx2,fma"))) inline double fma_f32_avx2_loop(long iterations) {
    __m256 acc[register_loop_accumulators_avx2];
    for (auto& a : acc) a = _mm256_setzero_ps();
    const __m256 x = _mm256_set1_ps(1e-7f), y = _mm256_set1_ps(1.0f);
    for (long i = 0; i < iterations; ++i)
#pragma GCC unroll 12
        for (auto& a : acc) a = _mm256_fmadd_ps(x, y, a);
    alignas(32) float lanes[8];
    float sum = 0;
    for (auto& a : acc) {
        _mm256_store_ps(lanes, a);
        for (float v : lanes) sum += v;
    }
    return sum;
}
__attribute__((target("avx512f,avx512bf16"))) inline double dpbf16_loop(long iterations) {
    __m512 acc[register_loop_accumulators];
    for (auto& a : acc) a = _mm512_setzero_ps();
    const __m512bh x = (__m512bh)_mm512_set1_epi32(0x33d633d6), y = (__m512bh)_mm512_set1_epi32(0x3f803f80);
    for (long i = 0; i < iterations; ++i)
#pragma GCC unroll 24
        for (auto& a : acc) a = _mm512_dpbf16_ps(a, x, y);
    float sum = 0;
    for (auto& a : acc) sum += _mm512_reduce_add_ps(a);
    return sum;
}
#ifdef CPX_HAVE_GEMM_BF16_AMX
/// Four independent tile products per iteration (the instruction's latency is about four
/// times its issue interval on the Xeons that have it), on the kernel's tile configuration.
inline constexpr int amx_loop_products = 4;
__attribute__((target("amx-tile,amx-bf16"))) inline double amx_tile_loop(long iterations) {
    static constexpr cpx::cpu::amx::TileConfig config = cpx::cpu::amx::full_tiles();
    alignas(64) std::uint16_t operand[16 * 32];
    std::fill(std::begin(operand), std::end(operand), std::uint16_t{0x3c00});  // bf16 2^-7
    alignas(64) float out[4][16 * 16];
    _tile_loadconfig(&config);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, operand, 64);
    _tile_loadd(5, operand, 64);
    _tile_loadd(6, operand, 64);
    _tile_loadd(7, operand, 64);
    for (long i = 0; i < iterations / 64; ++i) {  // one tile product does the work of 256 vdpbf16ps
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out[0], 64);
    _tile_stored(1, out[1], 64);
    _tile_stored(2, out[2], 64);
    _tile_stored(3, out[3], 64);
    _tile_release();
    return out[0][0] + out[1][0] + out[2][0] + out[3][0];
}
#endif

/// GFLOP/s of `loop` run on `threads` threads at once (best of 5); `flop_per_iteration` of its loop.
inline double peak_gflops(double (*loop)(long), double flop_per_iteration, int threads) {
    constexpr long iterations = 4000000;
    double sink = 0;
    const double s = best_seconds(
        [&] {
#pragma omp parallel num_threads(threads) reduction(+ : sink)
            sink += loop(iterations);
        },
        5);
    benchmark::DoNotOptimize(sink);
    return threads * static_cast<double>(iterations) * flop_per_iteration / s * 1e-9;
}

/// The fp32 FMA peak (AVX-512, else AVX2), GFLOP/s, with `threads` threads (0 without either).
inline double machine_fma_peak_gflops(int threads) {
    static std::map<int, double> cache;
    if (auto it = cache.find(threads); it != cache.end()) return it->second;
    const auto& f = cpx::cpu::cpu_features();
    return cache[threads] = f.avx512f ? peak_gflops(fma_f32_loop, register_loop_accumulators * 32.0, threads)
                            : f.avx2  ? peak_gflops(fma_f32_avx2_loop, register_loop_accumulators_avx2 * 16.0, threads)
                                      : 0.0;
}

/// The vdpbf16ps peak, GFLOP/s, with `threads` threads (0 without AVX512_BF16).
inline double machine_dpbf16_peak_gflops(int threads) {
    static std::map<int, double> cache;
    if (auto it = cache.find(threads); it != cache.end()) return it->second;
    return cache[threads] = cpx::cpu::cpu_features().avx512_bf16
                                ? peak_gflops(dpbf16_loop, register_loop_accumulators * 64.0, threads)
                                : 0.0;
}

/// The AMX tile-product peak, GFLOP/s, with `threads` threads (0 where the AMX level is absent).
inline double machine_amx_peak_gflops(int threads) {
#ifdef CPX_HAVE_GEMM_BF16_AMX
    static std::map<int, double> cache;
    if (auto it = cache.find(threads); it != cache.end()) return it->second;
    // iterations / 64 rounds of amx_loop_products tile products of 16 x 16 x 32 x 2 FLOP.
    return cache[threads] = cpx::cpu::bf16_level_available(cpx::cpu::Bf16Level::amx)
                                ? peak_gflops(amx_tile_loop, amx_loop_products * 16384.0 / 64, threads)
                                : 0.0;
#else
    (void)threads;
    return 0.0;
#endif
}

/// The peak of the instruction our bf16 products run on this machine (the best level's:
/// AMX tile products where the AMX level runs, vdpbf16ps where AVX512_BF16 does, the fp32 FMA
/// where the widened level does), GFLOP/s; 0 with no bf16 level.
inline double machine_bf16_peak_gflops(int threads) {
    switch (cpx::cpu::best_bf16_level()) {
        case cpx::cpu::Bf16Level::amx: return machine_amx_peak_gflops(threads);
        case cpx::cpu::Bf16Level::avx512_bf16: return machine_dpbf16_peak_gflops(threads);
        case cpx::cpu::Bf16Level::widened: return machine_fma_peak_gflops(threads);
        default: return 0.0;
    }
}

/// How far ahead of the lines being summed the prefetching read asks for lines (into L2).
inline constexpr std::size_t read_prefetch_bytes = 4096;

/// A buffer of `bytes` for the read-rate measurements: on huge pages from 2 MiB (AlignedVector,
/// as the models' weights), every 4 KiB different (no same-page merging, the kernel's or a
/// hypervisor's, can turn the read into hits on one cached page). On AMD Zen 4 one core read
/// 4 KiB pages at 19-20 GB/s and huge pages at 28-29 (two cores: 26-37 against 32-33 in the
/// same minutes): a ceiling measured on small pages put the weights' reads above "100%".
inline cpx::cpu::AlignedVector<float> read_buffer(std::size_t bytes) {
    cpx::cpu::AlignedVector<float> buf(bytes / sizeof(float));
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i);  // increasing: no two pages alike
    return buf;
}

/// Sums floats [lo, hi) of `data` (hi - lo a multiple of 64), 256 bytes per step into four
/// vector sums (one would be bound by the add latency, not by memory). Prefetch: each step
/// first asks for the four lines read_prefetch_bytes ahead, into L2.
template <bool Prefetch>
inline float read_range(const float* data, std::size_t lo, std::size_t hi) {
    using V = float __attribute__((vector_size(64)));
    V a[4] = {};
    for (std::size_t i = lo; i < hi; i += 64) {
        const float* p = data + i;
        if constexpr (Prefetch)
            for (int l = 0; l < 4; ++l)  // locality 2: L2 (x86 prefetcht1); a hint, never a fault
                __builtin_prefetch(reinterpret_cast<const char*>(p) + read_prefetch_bytes + 64 * l, 0, 2);
        for (int l = 0; l < 4; ++l) {
            V v;
            std::memcpy(&v, p + 16 * l, sizeof v);
            a[l] += v;
        }
    }
    const V s = (a[0] + a[1]) + (a[2] + a[3]);
    float total = 0;
    for (int l = 0; l < 16; ++l) total += s[l];
    return total;
}

/// Sums `n` floats with `threads` OpenMP threads, each over its own contiguous chunk of whole
/// 256-byte steps (the last also takes the rest). prefetch_l2: with L2 prefetches ahead of the
/// stream (read_range), which our decode kernels also issue; on 4 KiB pages they read 10-15%
/// faster than the bare stream on Zen 4, on huge pages level with it.
inline float read_all(const float* data, std::size_t n, int threads, bool prefetch_l2 = false) {
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        const std::size_t t = static_cast<std::size_t>(omp_get_thread_num()),
                          count = static_cast<std::size_t>(omp_get_num_threads());
        const std::size_t chunks = n / 64, lo = chunks * t / count * 64, hi = chunks * (t + 1) / count * 64;
        total += prefetch_l2 ? read_range<true>(data, lo, hi) : read_range<false>(data, lo, hi);
        if (t + 1 == count)
            for (std::size_t i = hi; i < n; ++i) total += data[i];
    }
    return total;
}

/// The 512 MiB buffer every read ceiling of this binary is measured on.
inline const cpx::cpu::AlignedVector<float>& read_ceiling_buffer() {
    static const cpx::cpu::AlignedVector<float> buf = read_buffer(512ull << 20);
    return buf;
}
/// Per thread count, whether the stream with L2 prefetches read faster in machine_read_gbps.
inline std::map<int, bool>& read_prefers_prefetch() {
    static std::map<int, bool> prefers;
    return prefers;
}

/// Sustained memory read rate, GB/s, over a 512 MiB buffer with `threads` threads,
/// measured afresh on every call (best of 3 for each way of reading, ~0.2 s): a
/// shared machine's read rate moves by tens of percent from minute to minute, so
/// each case measures its own ceiling just before it runs (and each repetition
/// again), and `frac_of_bandwidth` compares the case with the machine of that
/// moment (whole-model decode cases measure it between their rounds of steps instead:
/// run_read_paired). The ceiling is the faster of the bare stream and the stream with L2
/// prefetches (read_all).
inline double machine_read_gbps(int threads) {
    const auto& buf = read_ceiling_buffer();
    double best = 0;
    for (bool prefetch : {false, true}) {
        const double s =
            best_seconds([&] { benchmark::DoNotOptimize(read_all(buf.data(), buf.size(), threads, prefetch)); }, 3);
        const double gbps = static_cast<double>(buf.size() * sizeof(float)) / s * 1e-9;
        if (gbps > best) best = gbps, read_prefers_prefetch()[threads] = prefetch;
    }
    return best;
}

/// The read rate of this moment, GB/s: one pass over machine_read_gbps's buffer with the way of
/// reading that was faster there (~10-20 ms).
inline double read_gbps_now(int threads) {
    if (!read_prefers_prefetch().contains(threads)) (void)machine_read_gbps(threads);
    const auto& buf = read_ceiling_buffer();
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(read_all(buf.data(), buf.size(), threads, read_prefers_prefetch()[threads]));
    return static_cast<double>(buf.size() * sizeof(float)) / std::chrono::duration<double>(Clock::now() - t0).count() *
           1e-9;
}

/// The median of v (not empty), the mean of the middle two for an even count.
inline double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

/// Sets the thread count of our OpenMP loops and of Eigen's GEMM together
/// (Eigen reads its own setting, not OMP_NUM_THREADS, once it has been set).
inline void set_threads(int threads) {
    omp_set_num_threads(threads);
    Eigen::setNbThreads(threads);
}

/// One product of a layer, C[m, n] = A[m, k] B[k, n], run `count` times per iteration.
struct Gemm {
    double m = 0, n = 0, k = 0, count = 1;
    double flops() const { return 2.0 * m * n * k * count; }
};

/// The GEMM ceiling of work made of several products: the rate Eigen reaches
/// running all of them, each at the rate measured for its own shape with the
/// current thread count: sum(FLOPs) / sum(FLOPs_i / rate_i). Shapes with an
/// empty side are skipped; fractional m (rows per expert) is rounded.
inline double gemm_ceiling(const std::vector<Gemm>& gemms) {
    double flops = 0, seconds = 0;
    for (const Gemm& g : gemms) {
        const int m = static_cast<int>(std::lround(g.m)), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
        if (m < 1 || n < 1 || k < 1 || g.count <= 0) continue;
        flops += g.flops();
        seconds += g.flops() / (machine_gemm_gflops(m, n, k) * 1e9);
    }
    return seconds > 0 ? flops / seconds * 1e-9 : 0.0;
}

/// Fills v with N(0, stddev) values from a fixed seed (any storage type).
template <class T>
void fill_normal(std::span<T> v, double stddev, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> dist(0.0f, static_cast<float>(stddev));
    for (T& x : v) x = cpx::from_float<T>(dist(gen));
}

template <class T>
std::vector<T> normal_vector(std::size_t n, double stddev, std::uint64_t seed) {
    std::vector<T> v(n);
    fill_normal<T>(v, stddev, seed);
    return v;
}

/// Registers a benchmark under a full name ("group/variant/shape/param:value/...") in ms.
inline benchmark::internal::Benchmark* registered(const std::string& name, std::function<void(benchmark::State&)> fn) {
    return benchmark::RegisterBenchmark(name.c_str(), [fn = std::move(fn)](benchmark::State& s) { fn(s); })
        ->Unit(benchmark::kMillisecond);
}

/// registered() with the suite's default timing: wall-clock time (the work is multi-threaded).
inline benchmark::internal::Benchmark* add(const std::string& name, std::function<void(benchmark::State&)> fn) {
    return registered(name, std::move(fn))->UseRealTime();
}

/// registered() for a case that times its iterations itself (state.SetIterationTime):
/// run_read_paired, which measures the read rate between its rounds of iterations, outside the
/// time reported.
inline benchmark::internal::Benchmark* add_manual_time(const std::string& name,
                                                       std::function<void(benchmark::State&)> fn) {
    return registered(name, std::move(fn))->UseManualTime();
}

/// A layer case's arithmetic: the default (Eigen's fp32 products) or fp32 on copies of the
/// weights packed once (`compute:fp32_packed`, cpu/kernels/gemm_f32_packed.hpp: the same fp32
/// numbers up to summation order). The packed variant's name carries "/compute:fp32_packed"
/// before its "/tokens:" part; the report compares the faster of the two with the peers,
/// as it does for the projections (`f32_packed`) and the models.
inline std::string compute_tag(bool packed) { return packed ? "/compute:fp32_packed" : ""; }

/// Whether a packed case can run here (AVX-512F); callers skip registering it otherwise.
inline bool packed_runs() { return cpu::gemm_f32_packed_available(); }

/// The packed fp32 copy of a weight W (orientation as the layer reads it), or an empty
/// optional for the default arithmetic.
inline std::optional<cpu::PackedWeight> pack_f32(bool packed, const float* w, index_t rows, index_t cols,
                                                 cpu::WeightOrientation orientation) {
    if (!packed) return std::nullopt;
    return cpu::PackedWeight::pack(StridedMatrix<const float>(w, rows, cols, cols), orientation,
                                   cpu::Compute::fp32_packed);
}

/// The address of an optional's value, or null.
template <class T>
const T* ptr(const std::optional<T>& o) { return o ? &*o : nullptr; }

/// Batched decode cases record the peak of the instruction their products run on (bf16 dot
/// products under Compute::bf16, else fp32 FMAs), measured here: the report's arithmetic floor
/// (FLOPs / peak) beside the read bound. A single sequence is bound by reading; nothing recorded.
inline void set_decode_arithmetic_peak(Work& work, index_t batch, cpu::Compute compute, int threads) {
    if (batch <= 1) return;
    if (compute == cpu::Compute::bf16) work.bf16_peak = machine_bf16_peak_gflops(threads);
    else work.fma_peak = machine_fma_peak_gflops(threads);
}

/// Whether the opt-in large shapes (many seconds per iteration) are requested:
/// environment variable CPX_BENCH_LARGE=1.
inline bool large_shapes() {
    const char* v = std::getenv("CPX_BENCH_LARGE");
    return v && std::string(v) == "1";
}

/// main() of a suite: registers its benchmarks, records the build in the JSON context, runs.
inline int bench_main(int argc, char** argv, void (*register_all)()) {
    register_all();
    benchmark::AddCustomContext("cpx_compiler", __VERSION__);
    benchmark::AddCustomContext("cpx_cpu_model", cpx::cpu::cpu_features().model);
    benchmark::AddCustomContext("cpx_cpu_levels", cpx::cpu::cpu_features().summary());
    benchmark::AddCustomContext("cpx_cpu_id", cpx::cpu::cpu_features().id());
#ifdef CPX_BENCH_FLAGS
    benchmark::AddCustomContext("cpx_flags", CPX_BENCH_FLAGS);
#endif
    benchmark::AddCustomContext("cpx_warmup", "first call of each layer case untimed");
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}

/// Whether run() calls `fn` once, untimed, before its loop. A layer case builds its layer (and
/// workspaces) each time Google Benchmark calls it, so its first call would time the sizing and
/// first touch of those buffers: PRISM's d = 1024 attention at 2048 tokens took 330-440 ms on its
/// first call and 175-183 on the next, in cases of two iterations. The whole-model suites keep
/// their model alive and warm each case once (bench_models.hpp, warm_once): `done`.
enum class Warmup : bool { first_call, done };

/// Runs the timing loop of `state` over `fn` (wall clock) and sets the suite's counters.
template <class Fn>
void run(benchmark::State& state, const Work& w, Fn&& fn, Warmup warmup = Warmup::first_call) {
    if (warmup == Warmup::first_call) fn();
    const auto t0 = Clock::now();
    for (auto _ : state) fn();
    set_counters(state, w, std::chrono::duration<double>(Clock::now() - t0).count());
}

/// run() for a decode step, the bound's read rate measured in the same moments as the steps.
/// The machine's read rate can jump by half between minutes (docs/BENCHMARKS.md's notes), so a
/// ceiling measured once before a case can belong to another level than the steps timed after
/// it. Here the steps run in rounds of at least `round_seconds`, with one read pass
/// (read_gbps_now) before the first round and after each; a round whose two neighbouring passes
/// agree within 15% counts, against the higher of the two. Counters as run()'s (the time is the
/// steps' own: register with add_manual_time), with `read_ceiling_GB_per_s` the median of the
/// counted rounds' rates, plus `bound_ratio_paired`: the median over those rounds of the round's
/// time per step ÷ (bytes per step ÷ its rate), and `paired_rounds`, how many rounds counted.
/// Where no round counts, the ceiling is the median of every pass and no paired ratio is set.
template <class Fn>
void run_read_paired(benchmark::State& state, Work w, Fn&& fn, int threads, double round_seconds = 0.05) {
    std::vector<double> ratios, ceilings, passes;
    double total = 0, round = 0;
    long round_steps = 0;
    double before = read_gbps_now(threads);
    passes.push_back(before);
    const auto close_round = [&] {
        const double after = read_gbps_now(threads);
        passes.push_back(after);
        if (std::abs(after - before) <= 0.15 * std::max(after, before) && w.bytes > 0) {
            const double ceiling = std::max(after, before);  // one pass each: err toward the machine
            ceilings.push_back(ceiling);
            ratios.push_back(round / static_cast<double>(round_steps) * ceiling * 1e9 / w.bytes);
        }
        before = after;
        round = 0;
        round_steps = 0;
    };
    for (auto _ : state) {
        const auto t0 = Clock::now();
        fn();
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        state.SetIterationTime(dt);
        total += dt;
        round += dt;
        ++round_steps;
        if (round >= round_seconds) close_round();
    }
    if (round_steps > 0) close_round();
    w.read_ceiling = median_of(ceilings.empty() ? passes : ceilings);
    set_counters(state, w, total);
    if (!ratios.empty()) {
        state.counters["bound_ratio_paired"] = benchmark::Counter(median_of(ratios));
        state.counters["paired_rounds"] = benchmark::Counter(static_cast<double>(ratios.size()));
    }
}

}  // namespace cpx::bench

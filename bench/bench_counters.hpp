#pragma once
// The counters every suite reports (CPU and GPU alike), from what one iteration
// does and the time the timing loop took: tokens/s, GFLOP/s, GB/s, and the
// fractions of the ceilings measured in the same binary. Free of Eigen, so the
// CUDA suite (compiled by nvcc) shares it.

#include <benchmark/benchmark.h>

namespace cpx::bench {

/// What one iteration of a benchmark does, for its counters.
struct Work {
    double tokens = 0;        ///< tokens processed
    double flops = 0;         ///< floating-point operations (from the constexpr FLOP counts)
    double bytes = 0;         ///< bytes that must move from memory (weights, KV cache)
    double gemm_ceiling = 0;  ///< GFLOP/s of the GEMM library (Eigen, cuBLAS) on matching shapes, measured here (0: n/a)
    double read_ceiling = 0;  ///< GB/s memory read rate (CPU) or device copy rate (GPU), measured here (0: n/a)
};

/// Sets the counters of `state` for its iterations of `w`, which took `seconds` in all.
inline void set_counters(benchmark::State& state, const Work& w, double seconds) {
    const double iters = static_cast<double>(state.iterations());
    using benchmark::Counter;
    const double gflops = w.flops * iters / seconds * 1e-9, gbps = w.bytes * iters / seconds * 1e-9;
    // The work of one iteration itself, so reports can derive bounds exactly.
    if (w.flops > 0) state.counters["flops_per_iter"] = Counter(w.flops);
    if (w.bytes > 0) state.counters["bytes_per_iter"] = Counter(w.bytes);
    if (w.tokens > 0) state.counters["tokens_per_s"] = Counter(w.tokens * iters / seconds);
    if (w.flops > 0) state.counters["GFLOP_per_s"] = Counter(gflops);
    if (w.bytes > 0) state.counters["GB_per_s"] = Counter(gbps);
    if (w.gemm_ceiling > 0) {
        state.counters["gemm_ceiling_GFLOP_per_s"] = Counter(w.gemm_ceiling);
        state.counters["frac_of_gemm"] = Counter(gflops / w.gemm_ceiling);
    }
    if (w.read_ceiling > 0) {
        state.counters["read_ceiling_GB_per_s"] = Counter(w.read_ceiling);
        state.counters["frac_of_bandwidth"] = Counter(gbps / w.read_ceiling);
    }
}

}  // namespace cpx::bench

#pragma once
// The counters every suite reports (CPU and GPU alike), from what one iteration
// does and the time the timing loop took: tokens/s, GFLOP/s, GB/s, and the
// fractions of the ceilings measured in the same binary; the work counts they
// start from; the one-model-alive slot of the whole-model suites. Free of
// Eigen, so the CUDA suite (compiled by nvcc) shares it.

#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "cpx/config/model_counts.hpp"

namespace cpx::bench {

/// What one iteration of a benchmark does, for its counters.
struct Work {
    double tokens = 0;        ///< tokens processed
    double flops = 0;         ///< floating-point operations (from the constexpr FLOP counts)
    double bytes = 0;         ///< bytes that must move from memory (weights, KV cache)
    double gemm_ceiling = 0;  ///< GFLOP/s of the GEMM library (Eigen, cuBLAS) on matching shapes, measured here (0: n/a)
    double read_ceiling = 0;  ///< GB/s memory read rate (CPU) or device copy rate (GPU), measured here (0: n/a)
    double bf16_peak = 0;     ///< GFLOP/s of the CPU's bf16 dot-product instruction, measured here (0: n/a)
    double fma_peak = 0;      ///< GFLOP/s of the CPU's fp32 FMA instruction, measured here (0: n/a)
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
    if (w.bf16_peak > 0) {
        state.counters["bf16_peak_GFLOP_per_s"] = Counter(w.bf16_peak);
        state.counters["frac_of_bf16_peak"] = Counter(gflops / w.bf16_peak);
    }
    if (w.fma_peak > 0) {
        state.counters["fma_peak_GFLOP_per_s"] = Counter(w.fma_peak);
        state.counters["frac_of_fma_peak"] = Counter(gflops / w.fma_peak);
    }
    if (w.read_ceiling > 0) {
        state.counters["read_ceiling_GB_per_s"] = Counter(w.read_ceiling);
        state.counters["frac_of_bandwidth"] = Counter(gbps / w.read_ceiling);
    }
}

/// Sum over the positions 1..T of a sequence of a per-token count f(context)
/// that is affine in the context (every FLOP count here is).
template <class F>
double causal_sum(F&& f, double tokens) {
    const double f0 = static_cast<double>(f(0)), slope = static_cast<double>(f(1)) - f0;
    return tokens * f0 + slope * tokens * (tokens + 1) / 2;
}

/// FLOPs of a prefill of `batch` sequences of `tokens` tokens with logits of the
/// last position only: flops_per_token summed over the causal positions, the
/// tied head counted once per sequence. `last_row_finished`: the model's last
/// layer finishes only each sequence's last row (the CPU models; model_counts.hpp,
/// unfinished_row_flops), so the other rows' share of it is not counted.
template <class C>
double prefill_flops(double batch, double tokens, bool last_row_finished) {
    double f = causal_sum([](count_t ctx) { return flops_per_token<C>(ctx); }, tokens) -
               (tokens - 1) * static_cast<double>(head_flops_per_token<C>());
    if (last_row_finished) f -= causal_sum([](count_t ctx) { return unfinished_row_flops<C>(ctx); }, tokens - 1);
    return batch * f;
}

/// The model alive now, of any type, and its key (one slot for the whole binary).
struct ModelSlot {
    std::string key;
    std::shared_ptr<void> model;
};

inline ModelSlot& model_slot() {
    static ModelSlot slot;
    return slot;
}

/// One model alive at a time (several GB each): `make()` (returning a
/// std::unique_ptr<M>) builds the model of `key` after the previous one is
/// freed. Benchmarks of one model are registered together, so each is built once.
template <class M, class Make>
M& one_model_alive(const std::string& key, Make&& make) {
    ModelSlot& slot = model_slot();
    if (slot.key != key) {
        slot.model.reset();
        slot.key.clear();
        slot.model = std::shared_ptr<M>(make());
        slot.key = key;
    }
    return *static_cast<M*>(slot.model.get());
}

}  // namespace cpx::bench

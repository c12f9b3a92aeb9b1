// The whole PRISM-mini model, weights stored as fp32 or bf16 (the KV cache in
// the same type), through KV caches, counted as in bench_complexity_model.cpp:
// prefill FLOPs from flops_per_token over the causal positions with the tied
// head once per sequence and the last layer's unfinished rows left out, against
// the GEMM rates of its products; decode bytes (all weights, the head, the
// cache) against the memory read rate.
#include "bench_models.hpp"
#include "bench_support.hpp"

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/models/prism/model.hpp>

#include <memory>
#include <string>

namespace {

using namespace cpx;
using namespace cpx::bench;  // the suites' helpers: add, add_manual_time, Gemm, Work, shape_suffix, warm_once...
using C = presets::PrismMini;

/// One model per storage type and arithmetic, built on first use (PRISM-mini is ~200 MB in fp32).
template <class W, cpu::Compute K = cpu::Compute::fp32>
PrismModel<C, W, W>& model() {
    static PrismModel<C, W, W> m(PrismWeights<C, W>::random(1), K);
    return m;
}

/// Other arithmetic than fp32 is named .../compute:<name>/... as in bench_complexity_model.cpp
/// (bf16 also against the vdpbf16ps peak, fp32_packed against the FMA peak); a case whose kernels
/// this machine lacks is not registered.
template <class W, cpu::Compute K = cpu::Compute::fp32>
void prefill(index_t batch, index_t tokens, int threads) {
    if (K == cpu::Compute::bf16 && cpu::best_bf16_level() == cpu::Bf16Level::none) return;
    if (K == cpu::Compute::fp32_packed && !cpu::gemm_f32_packed_available()) return;
    const std::string name = std::string("model/prism/mini/") + dtype_name<W>() +
                             (K == cpu::Compute::fp32 ? "" : "/compute:" + std::string(cpu::compute_name(K))) +
                             shape_suffix("prefill", batch, "tokens", tokens, threads);
    add(name, [=](benchmark::State& state) {
        bench::set_threads(threads);
        auto& m = model<W, K>();
        bench::PrefillStep<PrismModel<C, W, W>, KVCache<C, W>> step(m, batch, tokens, C::vocab);
        Work work;
        const double t = static_cast<double>(tokens), b = static_cast<double>(batch), n = b * t, d = C::hidden;
        work.tokens = n;
        work.flops = bench::prefill_flops<C>(b, t, true);
        const double L = C::layers, heads = 2 * C::heads;
        work.gemm_ceiling = bench::gemm_ceiling({{n, double(C::u_rows), d, L},
                                                 {n, d, double(C::u_rows), L},
                                                 {t, t, double(C::head_dim), b * L * heads / 2},
                                                 {t, double(C::head_dim), t, b * L * heads / 2},
                                                 {n, double(C::mlp_width), d, L},
                                                 {n, d, double(C::mlp_width), L},
                                                 {b, double(C::vocab), d}});
        if (K == cpu::Compute::bf16) work.bf16_peak = bench::machine_bf16_peak_gflops(threads);
        if (K == cpu::Compute::fp32_packed) work.fma_peak = bench::machine_fma_peak_gflops(threads);
        warm_once(name, step);
        bench::run(state, work, step, bench::Warmup::done);
    });
}

/// Under fp32_packed or bf16 arithmetic a decode step's products read the packs (bf16 panels under
/// bf16, fp32 panels under fp32_packed on fp32 weights), so its matrices count in the packs' type.
template <class W, cpu::Compute K = cpu::Compute::fp32>
void decode(index_t batch, index_t context, int threads) {
    if (K == cpu::Compute::bf16 && cpu::best_bf16_level() == cpu::Bf16Level::none) return;
    if (K == cpu::Compute::fp32_packed && !cpu::gemm_f32_packed_available()) return;
    const std::string name = std::string("model/prism/mini/") + dtype_name<W>() +
                             (K == cpu::Compute::fp32 ? "" : "/compute:" + std::string(cpu::compute_name(K))) +
                             shape_suffix("decode", batch, "context", context, threads);
    add_manual_time(name, [=](benchmark::State& state) {
        bench::set_threads(threads);
        auto& m = model<W, K>();
        bench::DecodeStep<PrismModel<C, W, W>, KVCache<C, W>> step(m, batch, context, C::vocab);
        Work work;
        const double d = C::hidden, L = C::layers, sw = sizeof(W), mw = K == cpu::Compute::bf16 ? 2.0 : sw;
        work.tokens = static_cast<double>(batch);
        work.flops = static_cast<double>(batch) * static_cast<double>(flops_per_token<C>(context));
        // Matrices (U, c_fc, c_proj, the tied head) in the type the products read; one wpe row per
        // sequence in the storage type; LayerNorm and bias vectors in fp32; keys and values of every layer.
        const double matrices = L * (double(C::u_rows) * d + 2.0 * C::mlp_width * d) + double(C::vocab) * d;
        const double wpe_rows = static_cast<double>(batch) * d;
        const double vectors = (L * (4 * d + C::mlp_width + d) + 2 * d) * sizeof(float);
        const double kv = static_cast<double>(batch) * L * 2 * C::u_rows * static_cast<double>(context) * sw;
        work.bytes = matrices * mw + wpe_rows * sw + vectors + kv;
        bench::set_decode_arithmetic_peak(work, batch, K, threads);
        warm_once(name, step);
        bench::run_read_paired(state, work, step, threads);
    });
}

void register_all() {
    for (auto [b, t] : {std::pair<index_t, index_t>{1, 128}, {1, 512}, {4, 512}, {16, 128}}) prefill<float>(b, t, 2);
    prefill<float>(1, 512, 1);
    for (index_t ctx : {128, 512}) decode<float>(1, ctx, 2);
    decode<float>(4, 512, 2);
    decode<float>(1, 512, 1);
    prefill<bf16>(1, 512, 2);
    // The arithmetic OpenVINO and PyTorch 2 use for these weights (bench/python/openvino_peer.py).
    for (int threads : {2, 1}) {
        prefill<bf16, cpu::Compute::bf16>(1, 512, threads);
        prefill<float, cpu::Compute::fp32_packed>(1, 512, threads);
    }
    for (index_t ctx : {128, 512}) decode<bf16>(1, ctx, 2);
    decode<bf16>(1, 512, 1);
    // Decode under the same arithmetic choices, the peers' decode cases (openvino_peer.py).
    for (index_t ctx : {128, 512}) {
        decode<bf16, cpu::Compute::bf16>(1, ctx, 2);
        decode<float, cpu::Compute::fp32_packed>(1, ctx, 2);
    }
    decode<bf16, cpu::Compute::bf16>(4, 512, 2);
    decode<float, cpu::Compute::fp32_packed>(4, 512, 2);
    decode<bf16, cpu::Compute::bf16>(1, 512, 1);
    decode<float, cpu::Compute::fp32_packed>(1, 512, 1);
}

}  // namespace

int main(int argc, char** argv) { return cpx::bench::bench_main(argc, argv, register_all); }

// Whole COMPLEXITY-DEEP models (token-routed 187M and 384M, dense 171M and
// 384M baselines), weights stored as fp32 or bf16 (the KV cache in the same
// type), through the caller-owned KV caches as a server would run them:
//   prefill: B sequences of T tokens into empty caches, logits of the last
//     position only; FLOPs from flops_per_token summed over the causal
//     positions (the head counted once per sequence, the last layer's work
//     for the rows it does not finish left out); ceiling: Eigen's GEMM
//     rate of every product's shape (projections over B*T rows, each expert
//     over its B*T/E rows, attention as [T x T x 64] at half count);
//   decode: one new token per sequence at a given context (cache length
//     after the step); bytes: every weight the step reads (one routed expert
//     per distinct expert among the batch's tokens), in its storage type, plus
//     the KV cache; ceiling: the memory read rate, so frac_of_bandwidth is the
//     bandwidth bound's time / our time.
// Weights are N(0, init std) values tiled from one block of normals (the
// timing does not depend on them; a full seeded init of 384M values would
// dominate the suite's run time). Shapes taking many seconds per iteration (the
// 384M pair at 2048 tokens, batch 16, the pilot 1.5B) are opt-in: CPX_BENCH_LARGE=1.
#include "bench_models.hpp"
#include "bench_support.hpp"

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/model.hpp>

#include <memory>
#include <set>
#include <string>

namespace {

using namespace cpx;
using namespace cpx::bench;  // the suites' helpers: add, add_manual_time, Gemm, Work, shape_suffix, warm_once...

/// Every tensor at its initialisation scale, values tiled from 1M normals.
template <ComplexityConfigType C, class W>
std::unique_ptr<ComplexityWeights<C, W>> make_weights() {
    auto w = std::make_unique<ComplexityWeights<C, W>>();
    const auto normals = bench::normal_vector<float>(std::size_t{1} << 20, 1.0, 42);
    std::vector<float> values;
    std::size_t next = 0;
    for (const auto& slot : w->slots()) {
        values.resize(static_cast<std::size_t>(slot.elements()));
        for (float& v : values)
            v = slot.init_std > 0 ? static_cast<float>(slot.init_std) * normals[next++ % normals.size()] : slot.init_value;
        slot.assign(values);
    }
    return w;
}

/// The model of `key` (one alive at a time: the 384M ones take 1.5 GB in fp32).
template <ComplexityConfigType C, class W>
ComplexityModel<C, W, W>& model(const std::string& key, cpu::Compute compute = cpu::Compute::fp32) {
    return bench::one_model_alive<ComplexityModel<C, W, W>>(key, [compute] {
        return std::make_unique<ComplexityModel<C, W, W>>(std::move(*make_weights<C, W>()), compute);
    });
}

template <ComplexityConfigType C>
std::vector<Gemm> model_gemms(double batch, double tokens) {
    const double n = batch * tokens, L = C::layers, d = C::hidden;
    using Wt = ComplexityWeights<C, float>;
    std::vector<Gemm> g{{n, double(Wt::qkv_width), double(Wt::input_width), L}, {n, d, double(C::q_width), L},
                        {tokens, tokens, double(C::head_dim), batch * L * C::heads / 2},
                        {tokens, double(C::head_dim), tokens, batch * L * C::heads / 2},
                        {batch, double(C::vocab), d}};
    if constexpr (C::routed) {
        const double e = C::experts;
        g.push_back({n / e, 2.0 * C::expert_width, d, e * L});
        g.push_back({n / e, d, double(C::expert_width), e * L});
        if constexpr (C::has_shared_expert) {
            g.push_back({n, 2.0 * C::shared_width, d, L});
            g.push_back({n, d, double(C::shared_width), L});
        }
        if constexpr (C::mlp == MlpKind::learned_router) g.push_back({n, e, d, L});
    } else {
        g.push_back({n, 2.0 * C::expert_width, d, L});
        g.push_back({n, d, double(C::expert_width), L});
    }
    if constexpr (C::use_mu) g.push_back({n, d, d, L - 1});
    return g;
}

/// Other arithmetic than fp32 is named .../compute:<name>/...: bf16 (bf16 products with fp32 sums,
/// also against the peak of the bf16 level that runs, measured in this binary) and fp32_packed (also against the FMA
/// peak); a case whose kernels this machine lacks is not registered.
template <ComplexityConfigType C, class W>
void prefill(const std::string& preset, index_t batch, index_t tokens, int threads,
             cpu::Compute compute = cpu::Compute::fp32) {
    const bool bf16c = compute == cpu::Compute::bf16, packed_fp32 = compute == cpu::Compute::fp32_packed;
    if (bf16c && cpu::best_bf16_level() == cpu::Bf16Level::none) return;
    if (packed_fp32 && !cpu::gemm_f32_packed_available()) return;
    const std::string key = preset + "/" + dtype_name<W>() +
                            (compute == cpu::Compute::fp32 ? "" : "/compute:" + std::string(cpu::compute_name(compute)));
    const std::string name = "model/complexity/" + key + shape_suffix("prefill", batch, "tokens", tokens, threads);
    add(name, [=](benchmark::State& state) {
        bench::set_threads(threads);
        auto& m = model<C, W>(key, compute);
        bench::PrefillStep<ComplexityModel<C, W, W>, KVCache<C, W>> step(m, batch, tokens, C::vocab);
        Work work;
        const double t = static_cast<double>(tokens), b = static_cast<double>(batch);
        work.tokens = b * t;
        work.flops = bench::prefill_flops<C>(b, t, true);
        work.gemm_ceiling = bench::gemm_ceiling(model_gemms<C>(b, t));
        if (bf16c) work.bf16_peak = bench::machine_bf16_peak_gflops(threads);
        if (packed_fp32) work.fma_peak = bench::machine_fma_peak_gflops(threads);
        warm_once(name, step);
        bench::run(state, work, step, bench::Warmup::done);
    });
}

/// Bytes one decode step reads (model_counts.hpp), with the distinct experts of the batch's tokens'
/// routes (layer 0's table); under bf16 arithmetic the products read the bf16 packs, whatever the
/// stored type.
template <ComplexityConfigType C, class W>
double decode_bytes(const ComplexityModel<C, W, W>& m, std::span<const std::int64_t> next, index_t context,
                    cpu::Compute compute) {
    std::set<int> experts;
    if constexpr (C::mlp == MlpKind::token_routed)
        for (std::int64_t t : next)
            for (int r = 0; r < C::top_k; ++r) experts.insert(m.weights().routing(0).expert_of(t, r));
    return decode_step_bytes<C>(static_cast<int>(experts.size()), static_cast<count_t>(next.size()), context,
                                compute == cpu::Compute::bf16 ? 2 : static_cast<int>(sizeof(W)),
                                static_cast<int>(sizeof(W)));
}

/// Under fp32_packed or bf16 arithmetic every decode step runs its products on the packs (as
/// prefill does), never on the stored weights.
template <ComplexityConfigType C, class W>
void decode(const std::string& preset, index_t batch, index_t context, int threads,
            cpu::Compute compute = cpu::Compute::fp32) {
    if (compute == cpu::Compute::bf16 && cpu::best_bf16_level() == cpu::Bf16Level::none) return;
    if (compute == cpu::Compute::fp32_packed && !cpu::gemm_f32_packed_available()) return;
    const std::string key = preset + "/" + dtype_name<W>() +
                            (compute == cpu::Compute::fp32 ? "" : "/compute:" + std::string(cpu::compute_name(compute)));
    const std::string name = "model/complexity/" + key + shape_suffix("decode", batch, "context", context, threads);
    add_manual_time(name, [=](benchmark::State& state) {
        bench::set_threads(threads);
        auto& m = model<C, W>(key, compute);
        bench::DecodeStep<ComplexityModel<C, W, W>, KVCache<C, W>> step(m, batch, context, C::vocab);
        Work work;
        work.tokens = static_cast<double>(batch);
        work.flops = static_cast<double>(batch) * static_cast<double>(flops_per_token<C>(context));
        work.bytes = decode_bytes<C, W>(m, step.next, context, compute);
        bench::set_decode_arithmetic_peak(work, batch, compute, threads);
        warm_once(name, step);
        bench::run_read_paired(state, work, step, threads);
    });
}

void register_all() {
    using namespace presets;
    // 187M (run2): sequence lengths 128-2048 and batch 4 in fp32, the 512-token prefill with bf16 weights,
    // decode at three cache lengths and batched decode (4, 16 sequences) in both storage types; 1 thread
    // for the scaling figures.
    for (auto [b, t] : {std::pair<index_t, index_t>{1, 128}, {1, 512}, {1, 2048}, {4, 512}})
        prefill<ComplexityDeep187M, float>("187M", b, t, 2);
    prefill<ComplexityDeep187M, float>("187M", 1, 512, 1);
    for (index_t ctx : {128, 512, 2048}) decode<ComplexityDeep187M, float>("187M", 1, ctx, 2);
    for (index_t batch : {4, 8, 16}) decode<ComplexityDeep187M, float>("187M", batch, 512, 2);
    for (index_t batch : {1, 4, 16}) decode<ComplexityDeep187M, float>("187M", batch, 512, 2, cpu::Compute::fp32_packed);
    decode<ComplexityDeep187M, float>("187M", 1, 512, 1);

    prefill<ComplexityDeep187M, bf16>("187M", 1, 512, 2);
    prefill<ComplexityDeep187M, bf16>("187M", 1, 512, 1);
    for (index_t ctx : {128, 512, 2048}) decode<ComplexityDeep187M, bf16>("187M", 1, ctx, 2);
    // Two sequences: the few-row products' two-row stream (avx512::detail::gemv_two_rows_nt).
    for (index_t batch : {2, 4, 8, 16}) decode<ComplexityDeep187M, bf16>("187M", batch, 512, 2);
    decode<ComplexityDeep187M, bf16>("187M", 1, 512, 1);
    // Decode under bf16 arithmetic: the products read the bf16 packs (fp32 weights too).
    for (index_t ctx : {128, 512, 2048}) decode<ComplexityDeep187M, bf16>("187M", 1, ctx, 2, cpu::Compute::bf16);
    for (index_t batch : {4, 16}) decode<ComplexityDeep187M, bf16>("187M", batch, 512, 2, cpu::Compute::bf16);
    decode<ComplexityDeep187M, bf16>("187M", 1, 512, 1, cpu::Compute::bf16);
    for (index_t batch : {1, 16}) decode<ComplexityDeep187M, float>("187M", batch, 512, 2, cpu::Compute::bf16);
    // fp32 arithmetic on bf16 weights packed once: bf16 panels, widened exactly by the kernel.
    for (index_t batch : {1, 4, 16}) decode<ComplexityDeep187M, bf16>("187M", batch, 512, 2, cpu::Compute::fp32_packed);
    prefill<ComplexityDeep187M, bf16>("187M", 1, 512, 2, cpu::Compute::fp32_packed);

    // bf16 arithmetic (bf16 weights, products in bf16 with fp32 sums): the comparison with
    // OpenVINO's and PyTorch's bf16 inference.
    for (index_t t : {512, 2048})
        for (int threads : {2, 1}) prefill<ComplexityDeep187M, bf16>("187M", 1, t, threads, cpu::Compute::bf16);

    // fp32 on packed weights: the comparison with OpenVINO's and PyTorch's fp32 inference (PyTorch also
    // runs the short prompt and the batch of four).
    for (index_t t : {512, 2048})
        for (int threads : {2, 1}) prefill<ComplexityDeep187M, float>("187M", 1, t, threads, cpu::Compute::fp32_packed);
    for (auto [b, t] : {std::pair<index_t, index_t>{1, 128}, {4, 512}})
        prefill<ComplexityDeep187M, float>("187M", b, t, 2, cpu::Compute::fp32_packed);
    prefill<ComplexityDeep187M, float>("187M", 1, 2048, 1);

    // run1 dense baseline.
    prefill<ComplexityDense171M, float>("171M_dense", 1, 512, 2);
    prefill<ComplexityDense171M, float>("171M_dense", 1, 512, 2, cpu::Compute::fp32_packed);
    decode<ComplexityDense171M, float>("171M_dense", 1, 512, 2);

    // Table 3 pair: 384M token-routed vs dense.
    prefill<ComplexityDeep384M, float>("384M", 1, 512, 2);
    for (index_t ctx : {512, 2048}) decode<ComplexityDeep384M, float>("384M", 1, ctx, 2);
    for (index_t ctx : {512, 2048}) decode<ComplexityDeep384M, bf16>("384M", 1, ctx, 2);
    decode<ComplexityDeep384M, bf16>("384M", 1, 512, 2, cpu::Compute::bf16);
    for (int threads : {2, 1}) prefill<ComplexityDeep384M, bf16>("384M", 1, 512, threads, cpu::Compute::bf16);
    prefill<ComplexityDeep384M, float>("384M", 1, 512, 1);
    for (int threads : {2, 1}) prefill<ComplexityDeep384M, float>("384M", 1, 512, threads, cpu::Compute::fp32_packed);
    prefill<ComplexityDense384M, float>("384M_dense", 1, 512, 2);
    prefill<ComplexityDense384M, float>("384M_dense", 1, 512, 2, cpu::Compute::fp32_packed);
    decode<ComplexityDense384M, float>("384M_dense", 1, 512, 2);
    decode<ComplexityDense384M, bf16>("384M_dense", 1, 512, 2);

    // Opt-in (CPX_BENCH_LARGE=1): many seconds per iteration.
    if (bench::large_shapes()) {
        prefill<ComplexityDeep384M, float>("384M", 1, 2048, 2);
        for (int threads : {2, 1}) prefill<ComplexityDeep384M, bf16>("384M", 1, 2048, threads, cpu::Compute::bf16);
        prefill<ComplexityDense384M, float>("384M_dense", 1, 2048, 2);
        prefill<ComplexityDeep187M, float>("187M", 16, 128, 2);
        prefill<ComplexityPilot1_5B, bf16>("1.5B", 1, 512, 2);
        decode<ComplexityPilot1_5B, bf16>("1.5B", 1, 512, 2);
    }
}

}  // namespace

int main(int argc, char** argv) { return cpx::bench::bench_main(argc, argv, register_all); }

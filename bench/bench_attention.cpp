// Attention layers side by side:
//   - COMPLEXITY-DEEP's mu-guided GQA (187M) vs the same GQA without mu (177M,
//     run3): the cost of the mu terms, prefill and decode;
//   - the causal attention core alone (the products and the softmax);
//   - PRISM's pi-RoPE differential attention vs a standard multi-head attention
//     with the same parameter count (4 d^2: fused Q/K/V and O, GPT-2 style,
//     no RoPE), built here from the library's products and core.
// Prefill FLOPs are the constexpr per-token counts summed over the causal
// positions; the ceiling is Eigen's GEMM rate for each product's shape, the
// attention products taken as dense [T x T x head_dim] GEMMs at half count.
#include "bench_support.hpp"

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/cpu/layers/causal_attention.hpp>
#include <cpx/cpu/layers/mu_gqa_attention.hpp>
#include <cpx/cpu/layers/prism_attention.hpp>

#include <cmath>
#include <string>

namespace {

using namespace cpx;
using cpx::bench::add;
using cpx::bench::Gemm;
using cpx::bench::Work;

std::string suffix(index_t tokens, int threads) {
    return "/tokens:" + std::to_string(tokens) + "/threads:" + std::to_string(threads);
}

/// The two causal products of `heads` heads over T positions as GEMM shapes.
std::vector<Gemm> attention_products(double tokens, double heads, double dk, double dv) {
    return {{tokens, tokens, dk, heads / 2}, {tokens, dv, tokens, heads / 2}};
}

std::vector<Gemm> operator+(std::vector<Gemm> a, const std::vector<Gemm>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// ---------------------------------------------------------------- mu-guided GQA

template <ComplexityConfigType C>
struct GqaLayer {
    using Weights = cpu::MuGqaAttentionWeights<C, float>;
    std::vector<float> qkv = bench::normal_vector<float>(std::size_t{Weights::qkv_width} * Weights::input_width, 0.02, 11);
    std::vector<float> o = bench::normal_vector<float>(std::size_t{C::hidden} * C::q_width, 0.02, 12);
    std::vector<float> norm = std::vector<float>(C::head_dim, 1.0f);
    Weights weights() const {
        return {cpu::rows_of(qkv.data(), Weights::qkv_width, Weights::input_width),
                cpu::rows_of(o.data(), C::hidden, C::q_width), norm.data(), norm.data()};
    }
};

template <ComplexityConfigType C>
void gqa_prefill(const std::string& name, index_t tokens, int threads, bool packed = false) {
    add(name + bench::compute_tag(packed) + suffix(tokens, threads), [=](benchmark::State& state) {
        bench::set_threads(threads);
        using Weights = cpu::MuGqaAttentionWeights<C, float>;
        const GqaLayer<C> layer;
        auto w = layer.weights();
        const auto qkv_packed = bench::pack_f32(packed, layer.qkv.data(), Weights::qkv_width, Weights::input_width,
                                                cpu::WeightOrientation::out_in);
        const auto o_packed = bench::pack_f32(packed, layer.o.data(), C::hidden, C::q_width, cpu::WeightOrientation::out_in);
        w.qkv_packed = bench::ptr(qkv_packed);
        w.o_proj_packed = bench::ptr(o_packed);
        // [a | mu] rows: RMS-normalised activations and clamped mu, both O(1).
        const auto input = bench::normal_vector<float>(static_cast<std::size_t>(tokens) * Weights::input_width, 1.0, 13);
        std::vector<float> residual(static_cast<std::size_t>(tokens) * C::hidden, 0.0f);
        cpu::MuGqaAttention<C, float> attention;
        const cpu::SequenceRows<float> seq{0, tokens, 0, {}, {}};
        Work work;
        work.tokens = static_cast<double>(tokens);
        work.flops = bench::causal_sum([](count_t ctx) { return attention_flops_per_token<C>(ctx); }, double(tokens));
        const double t = static_cast<double>(tokens);
        work.gemm_ceiling = bench::gemm_ceiling(
            std::vector<Gemm>{{t, Weights::qkv_width, Weights::input_width}, {t, C::hidden, C::q_width}} +
            attention_products(t, C::heads, C::head_dim, C::head_dim));
        bench::run(state, work, [&] {
            attention.forward(w, cpu::rows_of<const float>(input.data(), tokens, Weights::input_width),
                              std::span<const cpu::SequenceRows<float>>(&seq, 1),
                              cpu::rows_of(residual.data(), tokens, C::hidden));
            benchmark::DoNotOptimize(residual.data());
        });
    });
}

/// One new token attending to `context` positions through a KV cache.
template <ComplexityConfigType C>
void gqa_decode(const std::string& name, index_t context, int threads) {
    add(name + "/decode/context:" + std::to_string(context) + "/threads:" + std::to_string(threads),
        [=](benchmark::State& state) {
            bench::set_threads(threads);
            using Weights = cpu::MuGqaAttentionWeights<C, float>;
            const GqaLayer<C> layer;
            const auto w = layer.weights();
            const auto input = bench::normal_vector<float>(Weights::input_width, 1.0, 13);
            std::vector<float> residual(C::hidden, 0.0f);
            auto keys = bench::normal_vector<float>(static_cast<std::size_t>(context) * C::kv_width, 1.0, 14);
            auto values = bench::normal_vector<float>(keys.size(), 1.0, 15);
            const auto cache = [&](float* data) {
                return cpu::HeadRows<float>{data, context, C::kv_heads, C::head_dim, C::head_dim, context * C::head_dim};
            };
            cpu::MuGqaAttention<C, float> attention;
            attention.reserve(1, 1, context);
            // The new token is position context - 1; the cache rows before it are filled.
            const cpu::SequenceRows<float> seq{0, 1, context - 1, cache(keys.data()), cache(values.data())};
            Work work;
            work.tokens = 1;
            work.flops = static_cast<double>(attention_flops_per_token<C>(context));
            work.bytes = static_cast<double>((std::size_t{Weights::qkv_width} * Weights::input_width +
                                              std::size_t{C::hidden} * C::q_width) * sizeof(float) +
                                             2 * keys.size() * sizeof(float));
            bench::run(state, work, [&] {
                attention.forward(w, cpu::rows_of<const float>(input.data(), 1, Weights::input_width),
                                  std::span<const cpu::SequenceRows<float>>(&seq, 1),
                                  cpu::rows_of(residual.data(), 1, C::hidden));
                benchmark::DoNotOptimize(residual.data());
            });
        });
}

/// The causal core alone: `heads` query heads over `kv_heads` KV heads of 64, its products in
/// the given arithmetic (fp32: Eigen's; fp32_packed or bf16: on keys and values packed per call).
void core(int heads, int kv_heads, index_t tokens, int threads, cpu::Compute compute = cpu::Compute::fp32) {
    constexpr int hd = 64;
    add("attention/core/gqa_" + std::to_string(heads) + "x" + std::to_string(kv_heads) + "x64" +
            (compute == cpu::Compute::fp32 ? "" : "/compute:" + std::string(cpu::compute_name(compute))) +
            suffix(tokens, threads),
        [=](benchmark::State& state) {
            bench::set_threads(threads);
            const auto q = bench::normal_vector<float>(static_cast<std::size_t>(tokens) * heads * hd, 1.0, 1);
            const auto k = bench::normal_vector<float>(static_cast<std::size_t>(tokens) * kv_heads * hd, 1.0, 2);
            const auto v = bench::normal_vector<float>(k.size(), 1.0, 3);
            std::vector<float> out(q.size());
            cpu::AttentionWorkspace ws;
            const auto heads_of = [&](const float* p, int h) { return cpu::packed_heads(p, tokens, h, hd); };
            Work work;
            work.tokens = static_cast<double>(tokens);
            work.flops = bench::causal_sum([=](double ctx) { return 4.0 * heads * hd * ctx; }, double(tokens));
            work.gemm_ceiling = bench::gemm_ceiling(attention_products(double(tokens), heads, hd, hd));
            if (compute == cpu::Compute::bf16) work.bf16_peak = bench::machine_bf16_peak_gflops(threads);
            bench::run(state, work, [&] {
                cpu::causal_attention<float>(heads_of(q.data(), heads), heads_of(k.data(), kv_heads),
                                             heads_of(v.data(), kv_heads),
                                             cpu::packed_heads(out.data(), tokens, heads, hd), 0, 0.125f, ws,
                                             cpu::NoAttentionObserver{}, compute);
                benchmark::DoNotOptimize(out.data());
            });
        });
}

/// The causal core of a decode step alone: `seqs` sequences, one new query row each
/// (`heads` query heads over `kv_heads` KV heads of `hd`), `context` cached positions in a
/// head-major cache of KV (fp32 or bf16), at each vector level this machine has
/// (cpu::VectorIsaLimit: `portable` is the general path, a widened copy and Eigen's GEMV), so
/// the decode kernels are compared with it in one run.
template <class KV>
void core_decode(int heads, int kv_heads, int hd, index_t seqs, index_t context, int threads, cpu::VectorIsa isa) {
    add("attention/core_decode/" + std::string(heads == kv_heads ? "mha_" : "gqa_") + std::to_string(heads) + "x" +
            std::to_string(kv_heads) + "x" + std::to_string(hd) + "/kv:" +
            std::string(std::is_same_v<KV, bf16> ? "bf16" : "f32") +
            "/seqs:" + std::to_string(seqs) + "/context:" + std::to_string(context) + "/threads:" +
            std::to_string(threads) + "/" + std::string(cpu::vector_isa_name(isa)),
        [=](benchmark::State& state) {
            bench::set_threads(threads);
            const cpu::VectorIsaLimit limit(isa);
            const std::size_t per_seq = static_cast<std::size_t>(context) * kv_heads * hd;
            const auto q = bench::normal_vector<float>(static_cast<std::size_t>(seqs) * heads * hd, 1.0, 1);
            const auto k = bench::normal_vector<KV>(seqs * per_seq, 1.0, 2);
            const auto v = bench::normal_vector<KV>(seqs * per_seq, 1.0, 3);
            std::vector<float> out(q.size());
            std::vector<cpu::AttentionProblem<KV>> problems;
            for (index_t i = 0; i < seqs; ++i) {
                const auto cache = [&](const std::vector<KV>& c) {
                    return cpu::HeadRows<const KV>{c.data() + i * per_seq, context, kv_heads, hd, hd, context * hd};
                };
                problems.push_back({cpu::packed_heads<const float>(q.data() + i * heads * hd, 1, heads, hd), cache(k),
                                    cache(v), cpu::packed_heads(out.data() + i * heads * hd, 1, heads, hd), context - 1});
            }
            cpu::AttentionWorkspace ws;
            Work work;
            work.tokens = static_cast<double>(seqs);
            work.flops = static_cast<double>(seqs) * 4.0 * heads * hd * static_cast<double>(context);
            work.bytes = 2.0 * static_cast<double>(seqs * per_seq * sizeof(KV));
            bench::run(state, work, [&] {
                cpu::causal_attention_batch<KV>(problems, 0.125f, ws);
                benchmark::DoNotOptimize(out.data());
            });
        });
}

// ---------------------------------------------------------------- PRISM vs standard MHA

template <PrismAttentionShapeType S>
void prism(const std::string& name, index_t tokens, int threads, bool packed = false) {
    add("attention/prism/" + name + bench::compute_tag(packed) + suffix(tokens, threads), [=](benchmark::State& state) {
        bench::set_threads(threads);
        constexpr index_t d = S::hidden;
        const auto x = bench::normal_vector<float>(static_cast<std::size_t>(tokens * d), 1.0, 1);
        const auto u = bench::normal_vector<float>(static_cast<std::size_t>(S::u_rows * d), 1.0 / std::sqrt(double(d)), 2);
        std::vector<float> out(x.size());
        cpu::PrismAttention<S> attention(tokens);
        // x U^T reads U as nn.Linear's [out, in]; y U as [in, out].
        const auto u_packed = bench::pack_f32(packed, u.data(), S::u_rows, d, cpu::WeightOrientation::out_in);
        const auto u_t_packed = bench::pack_f32(packed, u.data(), S::u_rows, d, cpu::WeightOrientation::in_out);
        const cpu::PrismAttentionWeights<float> w{Matrix<const float>(u.data(), S::u_rows, d), 0.5f,
                                                  bench::ptr(u_packed), bench::ptr(u_t_packed)};
        Work work;
        const double t = static_cast<double>(tokens);
        work.tokens = t;
        work.flops = bench::causal_sum([](count_t ctx) { return attention_flops_per_token<S>(ctx); }, t);
        work.gemm_ceiling = bench::gemm_ceiling(std::vector<Gemm>{{t, S::u_rows, d}, {t, d, S::u_rows}} +
                                                attention_products(t, S::physical_heads, S::head_dim, S::head_dim));
        bench::run(state, work, [&] {
            attention.forward(w, Matrix<const float>(x.data(), tokens, d), Matrix<float>(out.data(), tokens, d));
            benchmark::DoNotOptimize(out.data());
        });
    });
}

/// GPT-2's attention: [q|k|v] = x Wqkv^T, causal softmax per head, out = o Wo^T.
void mha(const std::string& name, index_t d, int heads, index_t tokens, int threads, bool packed = false) {
    add("attention/mha/" + name + bench::compute_tag(packed) + suffix(tokens, threads), [=](benchmark::State& state) {
        bench::set_threads(threads);
        const int hd = static_cast<int>(d / heads);
        const auto x = bench::normal_vector<float>(static_cast<std::size_t>(tokens * d), 1.0, 1);
        const auto wqkv = bench::normal_vector<float>(static_cast<std::size_t>(3 * d * d), 0.02, 2);
        const auto wo = bench::normal_vector<float>(static_cast<std::size_t>(d * d), 0.02, 3);
        std::vector<float> qkv(static_cast<std::size_t>(tokens * 3 * d)), o(static_cast<std::size_t>(tokens * d)),
            out(o.size());
        cpu::LinearScratch scratch;
        cpu::AttentionWorkspace ws;
        const auto wqkv_packed = bench::pack_f32(packed, wqkv.data(), 3 * d, d, cpu::WeightOrientation::out_in);
        const auto wo_packed = bench::pack_f32(packed, wo.data(), d, d, cpu::WeightOrientation::out_in);
        const cpu::Compute compute = packed ? cpu::Compute::fp32_packed : cpu::Compute::fp32;
        const float scale = static_cast<float>(1.0 / std::sqrt(double(hd)));
        Work work;
        const double t = static_cast<double>(tokens);
        work.tokens = t;
        work.flops = bench::causal_sum([=](double ctx) { return 2.0 * (4.0 * d * d + 2.0 * d * ctx); }, t);
        work.gemm_ceiling = bench::gemm_ceiling(std::vector<Gemm>{{t, 3.0 * d, double(d)}, {t, double(d), double(d)}} +
                                                attention_products(t, heads, hd, hd));
        bench::run(state, work, [&] {
            cpu::linear<float>(cpu::rows_of<const float>(x.data(), tokens, d), cpu::rows_of<const float>(wqkv.data(), 3 * d, d),
                               cpu::rows_of(qkv.data(), tokens, 3 * d), cpu::Write::overwrite, scratch,
                               bench::ptr(wqkv_packed));
            const auto part = [&](index_t col) { return cpu::packed_heads(qkv.data() + col, tokens, heads, hd, 3 * d); };
            cpu::causal_attention<float>(part(0), part(d), part(2 * d), cpu::packed_heads(o.data(), tokens, heads, hd), 0,
                                         scale, ws, cpu::NoAttentionObserver{}, compute);
            cpu::linear<float>(cpu::rows_of<const float>(o.data(), tokens, d), cpu::rows_of<const float>(wo.data(), d, d),
                               cpu::rows_of(out.data(), tokens, d), cpu::Write::overwrite, scratch,
                               bench::ptr(wo_packed));
            benchmark::DoNotOptimize(out.data());
        });
    });
}

/// PRISM at d = 1024 with 16 heads (D = 128), the 384M width.
using PrismD1024 = PrismAttentionShape<PrismAttentionDims{.hidden = 1024, .heads = 16, .expansion_ratio = 2}>;

void register_all() {
    using presets::ComplexityDeep187M;
    using presets::ComplexityNoMu177M;
    for (index_t tokens : {128, 512, 2048}) {
        gqa_prefill<ComplexityDeep187M>("attention/mu_gqa/187M", tokens, 2);
        gqa_prefill<ComplexityNoMu177M>("attention/gqa_no_mu/177M", tokens, 2);
    }
    gqa_prefill<ComplexityDeep187M>("attention/mu_gqa/187M", 2048, 1);
    gqa_prefill<ComplexityNoMu177M>("attention/gqa_no_mu/177M", 2048, 1);
    // The same prefills on packed fp32 copies (projections and the core's products).
    if (bench::packed_runs()) {
        for (index_t tokens : {128, 512, 2048}) {
            gqa_prefill<ComplexityDeep187M>("attention/mu_gqa/187M", tokens, 2, true);
            gqa_prefill<ComplexityNoMu177M>("attention/gqa_no_mu/177M", tokens, 2, true);
        }
        gqa_prefill<ComplexityDeep187M>("attention/mu_gqa/187M", 2048, 1, true);
        gqa_prefill<ComplexityNoMu177M>("attention/gqa_no_mu/177M", 2048, 1, true);
    }
    for (index_t context : {128, 512, 2048}) {
        gqa_decode<ComplexityDeep187M>("attention/mu_gqa/187M", context, 2);
        gqa_decode<ComplexityNoMu177M>("attention/gqa_no_mu/177M", context, 2);
    }
    for (cpu::Compute compute : {cpu::Compute::fp32, cpu::Compute::fp32_packed, cpu::Compute::bf16}) {
        if (cpu::runnable_compute(compute) != compute) continue;
        for (index_t tokens : {512, 2048}) core(12, 4, tokens, 2, compute);
        core(12, 4, 2048, 1, compute);
    }
    for (cpu::VectorIsa isa : {cpu::VectorIsa::portable, cpu::VectorIsa::avx2, cpu::VectorIsa::avx512}) {
        if (isa > cpu::machine_vector_isa()) continue;
        // 187M's heads (12 query heads on 4 KV heads of 64), and PRISM-mini's (8 heads of 128).
        for (index_t context : {512, 2048}) core_decode<bf16>(12, 4, 64, 1, context, 1, isa);
        core_decode<float>(12, 4, 64, 1, 512, 1, isa);
        core_decode<bf16>(12, 4, 64, 16, 512, 2, isa);
        core_decode<float>(12, 4, 64, 16, 512, 2, isa);
        core_decode<bf16>(8, 8, 128, 1, 512, 1, isa);
    }

    for (index_t tokens : {128, 512, 2048}) {
        prism<PrismAttentionOf<presets::PrismMini>>("mini", tokens, 2);
        mha("mini", 512, 8, tokens, 2);
    }
    prism<PrismAttentionOf<presets::PrismMini>>("mini", 2048, 1);
    mha("mini", 512, 8, 2048, 1);
    for (index_t tokens : {512, 2048}) {
        prism<PrismD1024>("d1024", tokens, 2);
        mha("d1024", 1024, 16, tokens, 2);
    }
    if (bench::packed_runs()) {
        mha("mini", 512, 8, 128, 2, true);
        for (index_t tokens : {512, 2048}) {
            prism<PrismAttentionOf<presets::PrismMini>>("mini", tokens, 2, true);
            mha("mini", 512, 8, tokens, 2, true);
            prism<PrismD1024>("d1024", tokens, 2, true);
            mha("d1024", 1024, 16, tokens, 2, true);
        }
        prism<PrismAttentionOf<presets::PrismMini>>("mini", 2048, 1, true);
        mha("mini", 512, 8, 2048, 1, true);
    }
}

}  // namespace

int main(int argc, char** argv) { return cpx::bench::bench_main(argc, argv, register_all); }

// MLPs side by side at the paper's Table 3 shapes (384M, d = 1024):
//   - token-routed: 4 experts of 800 (one per token, sparse dispatch) + shared 800;
//   - the iso-parameter dense SwiGLU, I = 4358;
//   - the learned top-1 router over the same experts (ablation run4);
//   - naive masked dispatch: the paper's first version, every expert on every
//     token, each output multiplied by the token's 0/1 mask and summed;
// the 187M pair (run2 token-routed vs run1 dense, I = 2416), the scaling with
// the expert count at a fixed active width (experts of 800 + shared 800), and
// PRISM's GPT-2 GELU MLP; the authors' later top-k routing at 384M shapes
// (top-1, top-2, top-4 of 4 experts, routed work alone) and their tr-moe-306 /
// dense-306 pair. FLOPs are the useful work of the constexpr counts (top_k
// experts + shared per token), for the masked dispatch too: its fraction of
// the ceiling shows the waste.
#include "bench_support.hpp"

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/cpu/layers/gelu_mlp.hpp>
#include <cpx/cpu/layers/learned_router_mlp.hpp>
#include <cpx/cpu/layers/swiglu_mlp.hpp>
#include <cpx/cpu/layers/token_routed_mlp.hpp>
#include <cpx/router/modulo_routing.hpp>
#include <cpx/router/top_k_routing.hpp>

#include <cmath>
#include <string>

namespace {

using namespace cpx;
using cpx::bench::add;
using cpx::bench::Gemm;
using cpx::bench::Work;

/// The 384M model with the ablation's learned router in place of the token table.
using LearnedRouter384M = ComplexityConfig<ComplexityDims{
    .hidden_size = 1024, .num_hidden_layers = 20, .num_attention_heads = 16, .num_key_value_heads = 4,
    .intermediate_size = 3200, .vocab_size = 32000, .max_position_embeddings = 4096,
    .mlp = MlpKind::learned_router, .num_experts = 4, .shared_expert = true, .use_mu_guidance = true}>;

/// E experts of width 800 plus a shared expert of 800 at d = 1024: the active
/// width per token is 1600 whatever E is.
template <int E>
using Routed800 = ComplexityConfig<ComplexityDims{
    .hidden_size = 1024, .num_hidden_layers = 1, .num_attention_heads = 16, .num_key_value_heads = 4,
    .intermediate_size = 800 * E, .vocab_size = 32000, .max_position_embeddings = 4096,
    .mlp = MlpKind::token_routed, .num_experts = E, .shared_expert = true}>;

/// The 384M model's experts (4 of 800) taking K routes per token, without the
/// shared expert: the routed work alone, which top-k multiplies by K.
template <int K>
using RoutedOnly384M = ComplexityConfig<ComplexityDims{
    .hidden_size = 1024, .num_hidden_layers = 20, .num_attention_heads = 16, .num_key_value_heads = 4,
    .intermediate_size = 3200, .vocab_size = 32000, .max_position_embeddings = 4096,
    .mlp = MlpKind::token_routed, .num_experts = 4, .shared_expert = false, .use_mu_guidance = false,
    .top_k = K}>;

std::string suffix(index_t tokens, int threads) {
    return "/tokens:" + std::to_string(tokens) + "/threads:" + std::to_string(threads);
}

constexpr int vocab = 32000;

/// Token ids uniform over the vocabulary; with the t mod E table every expert gets ~T/E rows.
std::vector<std::int64_t> random_tokens(index_t n) {
    std::mt19937_64 gen(7);
    std::uniform_int_distribution<std::int64_t> dist(0, vocab - 1);
    std::vector<std::int64_t> t(static_cast<std::size_t>(n));
    for (auto& v : t) v = dist(gen);
    return t;
}

/// The weights of a routed MLP (token-routed or learned router), N(0, 0.02).
template <ComplexityConfigType C>
struct RoutedWeights {
    static constexpr index_t d = C::hidden, ie = C::expert_width, is = C::shared_width, e = C::experts;
    std::vector<float> gate_up = bench::normal_vector<float>(static_cast<std::size_t>(e * d * 2 * ie), 0.02, 1);
    std::vector<float> down = bench::normal_vector<float>(static_cast<std::size_t>(e * ie * d), 0.02, 2);
    std::vector<float> shared_gate_up = bench::normal_vector<float>(static_cast<std::size_t>(2 * is * d), 0.02, 3);
    std::vector<float> shared_down = bench::normal_vector<float>(static_cast<std::size_t>(d * is), 0.02, 4);
    std::vector<float> router = bench::normal_vector<float>(static_cast<std::size_t>(e * d), 0.02, 5);
    /// t mod E, and routes r = (t mod E + r) mod E for top-k configurations.
    std::vector<std::int32_t> table =
        router::cyclic_routes(router::modulo_routing(vocab, static_cast<int>(e)), C::top_k, static_cast<int>(e));

    cpu::ExpertWeights<float> experts() const { return {gate_up.data(), down.data(), C::experts, d, ie}; }
    cpu::SwiGluWeights<float> shared() const {
        return {cpu::rows_of(shared_gate_up.data(), 2 * is, d), cpu::rows_of(shared_down.data(), d, is)};
    }
    TopKRouting routing() const { return TopKRouting(table, C::top_k, C::experts); }
};

/// Packed fp32 copies of a routed MLP's weights (the experts' input-major matrices in_out, the
/// shared expert's out_in), for the `compute:fp32_packed` cases.
template <ComplexityConfigType C>
struct RoutedPacks {
    std::vector<cpu::PackedWeight> gate_up, down;
    std::optional<cpu::PackedWeight> shared_gate_up, shared_down;

    RoutedPacks(const RoutedWeights<C>& rw, bool packed) {
        if (!packed) return;
        const auto experts = rw.experts();
        for (int e = 0; e < C::experts; ++e) {
            gate_up.push_back(cpu::PackedWeight::pack(experts.gate_up_of(e), cpu::WeightOrientation::in_out,
                                                      cpu::Compute::fp32_packed));
            down.push_back(cpu::PackedWeight::pack(experts.down_of(e), cpu::WeightOrientation::in_out,
                                                   cpu::Compute::fp32_packed));
        }
        if constexpr (C::has_shared_expert) {
            constexpr index_t d = C::hidden, is = C::shared_width;
            shared_gate_up = bench::pack_f32(true, rw.shared_gate_up.data(), 2 * is, d, cpu::WeightOrientation::out_in);
            shared_down = bench::pack_f32(true, rw.shared_down.data(), d, is, cpu::WeightOrientation::out_in);
        }
    }
    cpu::ExpertWeights<float> experts(const RoutedWeights<C>& rw) const {
        auto w = rw.experts();
        if (!gate_up.empty()) w.gate_up_packed = gate_up.data(), w.down_packed = down.data();
        return w;
    }
    cpu::SwiGluWeights<float> shared(const RoutedWeights<C>& rw) const {
        auto w = rw.shared();
        w.gate_up_packed = bench::ptr(shared_gate_up);
        w.down_packed = bench::ptr(shared_down);
        return w;
    }
};

/// GEMM shapes of a routed MLP over T rows: shared expert on all, each expert on T * top_k / E.
template <ComplexityConfigType C>
std::vector<Gemm> routed_gemms(double t) {
    const double e = C::experts, per_expert = t * C::top_k / e;
    std::vector<Gemm> g{{per_expert, 2.0 * C::expert_width, C::hidden, e},
                        {per_expert, C::hidden, double(C::expert_width), e}};
    if constexpr (C::has_shared_expert) {
        g.push_back({t, 2.0 * C::shared_width, C::hidden});
        g.push_back({t, C::hidden, double(C::shared_width)});
    }
    if constexpr (C::mlp == MlpKind::learned_router) g.push_back({t, e, C::hidden});
    return g;
}

/// Work of one MLP call over T rows: useful FLOPs, ceiling, bytes a decode step must read.
template <ComplexityConfigType C>
Work mlp_work(index_t tokens, const std::vector<Gemm>& gemms) {
    Work w;
    w.tokens = static_cast<double>(tokens);
    w.flops = static_cast<double>(mlp_flops_per_token<C>()) * w.tokens;
    if (tokens > 1) w.gemm_ceiling = bench::gemm_ceiling(gemms);
    else w.bytes = static_cast<double>(mlp_flops_per_token<C>()) / 2 * sizeof(float);  // one read per MAC
    return w;
}

template <ComplexityConfigType C>
void token_routed(const std::string& name, index_t tokens, int threads, bool packed = false) {
    add("mlp/token_routed/" + name + bench::compute_tag(packed) + suffix(tokens, threads), [=](benchmark::State& state) {
        bench::set_threads(threads);
        const RoutedWeights<C> rw;
        const RoutedPacks<C> packs(rw, packed);
        const cpu::TokenRoutedMlpWeights<C, float> w{packs.experts(rw), packs.shared(rw)};
        const TopKRouting routing = rw.routing();
        const auto x = bench::normal_vector<float>(static_cast<std::size_t>(tokens * C::hidden), 1.0, 6);
        const auto ids = random_tokens(tokens);
        std::vector<float> residual(x.size(), 0.0f);
        cpu::TokenRoutedMlp<C, float> mlp;
        mlp.reserve(tokens);
        bench::run(state, mlp_work<C>(tokens, routed_gemms<C>(double(tokens))), [&] {
            mlp.forward(w, cpu::rows_of(x.data(), tokens, C::hidden), ids, routing,
                        cpu::rows_of(residual.data(), tokens, C::hidden));
            benchmark::DoNotOptimize(residual.data());
        });
    });
}

/// The paper's first version: every expert on every token, then a 0/1 mask.
template <ComplexityConfigType C>
void masked_dispatch(const std::string& name, index_t tokens, int threads, bool packed = false) {
    add("mlp/masked_dense_dispatch/" + name + bench::compute_tag(packed) + suffix(tokens, threads),
        [=](benchmark::State& state) {
        bench::set_threads(threads);
        constexpr index_t d = C::hidden, ie = C::expert_width;
        const RoutedWeights<C> rw;
        const RoutedPacks<C> packs(rw, packed);
        const auto experts = packs.experts(rw);
        const auto shared = packs.shared(rw);
        const TokenRouting routing = rw.routing().route(0);
        const auto x = bench::normal_vector<float>(static_cast<std::size_t>(tokens * d), 1.0, 6);
        const auto ids = random_tokens(tokens);
        std::vector<float> residual(x.size(), 0.0f), mask(static_cast<std::size_t>(tokens));
        cpu::AlignedVector<float> shared_hidden, hidden, out;
        cpu::LinearScratch scratch;
        const auto xs = cpu::rows_of<const float>(x.data(), tokens, d);
        const auto res = cpu::rows_of(residual.data(), tokens, d);
        bench::run(state, mlp_work<C>(tokens, routed_gemms<C>(double(tokens))), [&] {
            cpu::swiglu_block<float>(shared, xs, res, shared_hidden, scratch);
            const auto h = cpu::block_in(hidden, tokens, 2 * ie);
            const auto y = cpu::block_in(out, tokens, d);
            for (int e = 0; e < C::experts; ++e) {
                const auto pack = [&](const cpu::PackedWeight* p) { return p ? p + e : nullptr; };
                cpu::matmul<float>(xs, experts.gate_up_of(e), h, cpu::Write::overwrite, scratch,
                                   pack(experts.gate_up_packed));
                cpu::swiglu_inplace(h, ie);
                cpu::matmul<float>(StridedMatrix<const float>(h.columns(0, ie)), experts.down_of(e), y,
                                   cpu::Write::overwrite, scratch, pack(experts.down_packed));
                for (index_t r = 0; r < tokens; ++r)
                    mask[static_cast<std::size_t>(r)] = routing.expert_of(ids[static_cast<std::size_t>(r)]) == e ? 1.0f : 0.0f;
#pragma omp parallel for schedule(static) if (tokens * d > 65536)
                for (index_t r = 0; r < tokens; ++r) {
                    const float m = mask[static_cast<std::size_t>(r)];
                    float* dst = res.row(r);
                    const float* src = y.row(r);
                    for (index_t c = 0; c < d; ++c) dst[c] += m * src[c];
                }
            }
            benchmark::DoNotOptimize(residual.data());
        });
    });
}

template <ComplexityConfigType C>
void learned_router(const std::string& name, index_t tokens, int threads, bool packed = false) {
    add("mlp/learned_router/" + name + bench::compute_tag(packed) + suffix(tokens, threads), [=](benchmark::State& state) {
        bench::set_threads(threads);
        const RoutedWeights<C> rw;
        const RoutedPacks<C> packs(rw, packed);
        const cpu::LearnedRouterMlpWeights<C, float> w{cpu::rows_of(rw.router.data(), C::experts, C::hidden),
                                                       packs.experts(rw), packs.shared(rw)};
        const auto x = bench::normal_vector<float>(static_cast<std::size_t>(tokens * C::hidden), 1.0, 6);
        std::vector<float> residual(x.size(), 0.0f);
        cpu::LearnedRouterMlp<C, float> mlp;
        mlp.reserve(tokens);
        bench::run(state, mlp_work<C>(tokens, routed_gemms<C>(double(tokens))), [&] {
            mlp.forward(w, cpu::rows_of(x.data(), tokens, C::hidden), cpu::rows_of(residual.data(), tokens, C::hidden));
            benchmark::DoNotOptimize(residual.data());
        });
    });
}

template <ComplexityConfigType C>
void dense(const std::string& name, index_t tokens, int threads, bool packed = false) {
    add("mlp/dense_swiglu/" + name + bench::compute_tag(packed) + suffix(tokens, threads), [=](benchmark::State& state) {
        bench::set_threads(threads);
        constexpr index_t d = C::hidden, width = C::expert_width;
        const auto gate_up = bench::normal_vector<float>(static_cast<std::size_t>(2 * width * d), 0.02, 1);
        const auto down = bench::normal_vector<float>(static_cast<std::size_t>(d * width), 0.02, 2);
        const auto gate_up_packed = bench::pack_f32(packed, gate_up.data(), 2 * width, d, cpu::WeightOrientation::out_in);
        const auto down_packed = bench::pack_f32(packed, down.data(), d, width, cpu::WeightOrientation::out_in);
        const cpu::SwiGluWeights<float> w{cpu::rows_of(gate_up.data(), 2 * width, d), cpu::rows_of(down.data(), d, width),
                                          bench::ptr(gate_up_packed), bench::ptr(down_packed)};
        const auto x = bench::normal_vector<float>(static_cast<std::size_t>(tokens * d), 1.0, 6);
        std::vector<float> residual(x.size(), 0.0f);
        cpu::SwiGluMlp<float> mlp;
        mlp.reserve(tokens, width);
        const double t = static_cast<double>(tokens);
        bench::run(state, mlp_work<C>(tokens, {{t, 2.0 * width, double(d)}, {t, double(d), double(width)}}), [&] {
            mlp.forward(w, cpu::rows_of(x.data(), tokens, d), cpu::rows_of(residual.data(), tokens, d));
            benchmark::DoNotOptimize(residual.data());
        });
    });
}

/// GPT-2's MLP of PRISM-mini: c_fc (512 -> 2048, bias), GELU, c_proj (2048 -> 512, bias).
void gelu(index_t tokens, int threads, bool packed = false) {
    using C = presets::PrismMini;
    add("mlp/gelu/prism_mini" + bench::compute_tag(packed) + suffix(tokens, threads), [=](benchmark::State& state) {
        bench::set_threads(threads);
        constexpr index_t d = C::hidden, width = C::mlp_width;
        const auto fc = bench::normal_vector<float>(static_cast<std::size_t>(width * d), 0.02, 1);
        const auto fc_b = bench::normal_vector<float>(static_cast<std::size_t>(width), 0.02, 2);
        const auto proj = bench::normal_vector<float>(static_cast<std::size_t>(d * width), 0.02, 3);
        const auto proj_b = bench::normal_vector<float>(static_cast<std::size_t>(d), 0.02, 4);
        const auto fc_packed = bench::pack_f32(packed, fc.data(), width, d, cpu::WeightOrientation::out_in);
        const auto proj_packed = bench::pack_f32(packed, proj.data(), d, width, cpu::WeightOrientation::out_in);
        const cpu::GeluMlpWeights<float> w{Matrix<const float>(fc.data(), width, d), Vector<const float>(fc_b.data(), width),
                                    Matrix<const float>(proj.data(), d, width), Vector<const float>(proj_b.data(), d),
                                    bench::ptr(fc_packed), bench::ptr(proj_packed)};
        const auto x = bench::normal_vector<float>(static_cast<std::size_t>(tokens * d), 1.0, 6);
        std::vector<float> hidden(static_cast<std::size_t>(tokens * width)), out(x.size());
        cpu::LinearScratch scratch;
        Work work;
        const double t = static_cast<double>(tokens);
        work.tokens = t;
        work.flops = static_cast<double>(mlp_flops_per_token<C>()) * t;
        work.gemm_ceiling = bench::gemm_ceiling({{t, double(width), double(d)}, {t, double(d), double(width)}});
        bench::run(state, work, [&] {
            cpu::gelu_mlp(Matrix<const float>(x.data(), tokens, d), w, Matrix<float>(hidden.data(), tokens, width),
                          Matrix<float>(out.data(), tokens, d), scratch);
            benchmark::DoNotOptimize(out.data());
        });
    });
}

template <int E>
void experts_scaling(index_t tokens) {
    const std::string name = "experts:" + std::to_string(E);
    token_routed<Routed800<E>>(name, tokens, 2);
    masked_dispatch<Routed800<E>>(name, tokens, 2);
    if (bench::packed_runs()) {
        token_routed<Routed800<E>>(name, tokens, 2, true);
        masked_dispatch<Routed800<E>>(name, tokens, 2, true);
    }
}

void register_all() {
    using presets::ComplexityDeep187M;
    using presets::ComplexityDeep384M;
    using presets::ComplexityDense171M;
    using presets::ComplexityDense384M;
    // Table 3: 384M shapes, prefill at two lengths and one decode row, 2 threads; 1 thread at 2048.
    for (index_t tokens : {1, 512, 2048}) {
        dense<ComplexityDense384M>("384M", tokens, 2);
        token_routed<ComplexityDeep384M>("384M", tokens, 2);
        learned_router<LearnedRouter384M>("384M", tokens, 2);
        masked_dispatch<ComplexityDeep384M>("384M", tokens, 2);
    }
    dense<ComplexityDense384M>("384M", 2048, 1);
    token_routed<ComplexityDeep384M>("384M", 2048, 1);
    // run1 vs run2 at 187M.
    dense<ComplexityDense171M>("171M", 2048, 2);
    token_routed<ComplexityDeep187M>("187M", 2048, 2);
    // Expert count at fixed active width (800 routed + 800 shared per token).
    experts_scaling<1>(2048);
    experts_scaling<2>(2048);
    experts_scaling<4>(2048);
    experts_scaling<8>(2048);
    experts_scaling<16>(2048);
    // The authors' later top-k routing: the routed work grows with K, not with E.
    for (index_t tokens : {512, 2048}) {
        token_routed<RoutedOnly384M<1>>("routed_only_384M/top_k:1", tokens, 2);
        token_routed<RoutedOnly384M<2>>("routed_only_384M/top_k:2", tokens, 2);
        token_routed<RoutedOnly384M<4>>("routed_only_384M/top_k:4", tokens, 2);
    }
    // Their matched 306.5M pair: shared 3840 + 2 of 4 experts of 64 vs dense 4096.
    for (index_t tokens : {1, 512}) {
        token_routed<presets::TrMoe306>("tr-moe-306", tokens, 2);
        dense<presets::Dense306>("dense-306", tokens, 2);
    }
    for (index_t tokens : {512, 2048}) gelu(tokens, 2);
    gelu(2048, 1);
    // The prefills again on packed fp32 copies of the weights.
    if (bench::packed_runs()) {
        for (index_t tokens : {512, 2048}) {
            dense<ComplexityDense384M>("384M", tokens, 2, true);
            token_routed<ComplexityDeep384M>("384M", tokens, 2, true);
            masked_dispatch<ComplexityDeep384M>("384M", tokens, 2, true);
            learned_router<LearnedRouter384M>("384M", tokens, 2, true);
            gelu(tokens, 2, true);
        }
        dense<ComplexityDense384M>("384M", 2048, 1, true);
        token_routed<ComplexityDeep384M>("384M", 2048, 1, true);
        dense<ComplexityDense171M>("171M", 2048, 2, true);
        token_routed<ComplexityDeep187M>("187M", 2048, 2, true);
        for (index_t tokens : {512, 2048}) {
            token_routed<RoutedOnly384M<1>>("routed_only_384M/top_k:1", tokens, 2, true);
            token_routed<RoutedOnly384M<2>>("routed_only_384M/top_k:2", tokens, 2, true);
            token_routed<RoutedOnly384M<4>>("routed_only_384M/top_k:4", tokens, 2, true);
        }
        token_routed<presets::TrMoe306>("tr-moe-306", 512, 2, true);
        dense<presets::Dense306>("dense-306", 512, 2, true);
        gelu(2048, 1, true);
    }
}

}  // namespace

int main(int argc, char** argv) { return cpx::bench::bench_main(argc, argv, register_all); }

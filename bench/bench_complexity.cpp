// COMPLEXITY-DEEP on the CPU at the 187M run2 shapes: the token-routed MLP
// against one expert's worth of work (and against running every expert), a
// decode step (bandwidth-bound: fraction of the measured read rate), and a
// prefill (compute-bound: fraction of the measured GEMM rate).
#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/models/complexity_model.hpp>

#include "bench_support.hpp"

namespace {

using C = cpx::presets::ComplexityDeep187M;
using cpx::index_t;

std::vector<float> random_rows(index_t n, int cols, unsigned seed) {
    std::vector<float> v(static_cast<std::size_t>(n * cols));
    cpx::SeededRandom r(seed);
    for (float& x : v) x = static_cast<float>(r.normal());
    return v;
}

std::vector<std::int64_t> random_tokens(index_t n, unsigned seed) {
    std::vector<std::int64_t> t(static_cast<std::size_t>(n));
    cpx::SeededRandom r(seed);
    for (auto& x : t) x = static_cast<std::int64_t>(r.uniform() * C::vocab) % C::vocab;
    return t;
}

/// The 187M shapes with one layer: the MLP benchmarks need one layer's weights.
constexpr cpx::ComplexityDims one_layer_dims() {
    auto d = C::dims;
    d.num_hidden_layers = 1;
    return d;
}
using OneLayer = cpx::ComplexityConfig<one_layer_dims()>;

const cpx::ComplexityWeights<OneLayer>& one_layer() {
    static const auto w = cpx::ComplexityWeights<OneLayer>::random(1);
    return w;
}

double mlp_flops(index_t n, int width) { return 2.0 * static_cast<double>(n) * 3.0 * C::hidden * width; }

// The token-routed MLP: each token through its own expert plus the shared expert.
void BM_TokenRoutedMlp(benchmark::State& state) {
    const index_t n = state.range(0);
    const auto& w = one_layer();
    const auto x = random_rows(n, C::hidden, 2);
    auto residual = random_rows(n, C::hidden, 3);
    const auto tokens = random_tokens(n, 4);
    cpx::cpu::TokenRoutedMlp<OneLayer, float> mlp;
    cpx::bench::Work work;
    work.tokens = static_cast<double>(n);
    work.flops = mlp_flops(n, C::expert_width + C::shared_width);
    work.gemm_ceiling = cpx::bench::machine_gemm_gflops(static_cast<int>(n), 2 * C::expert_width, C::hidden);
    cpx::bench::run(state, work, [&] {
        mlp.forward(w.token_routed_mlp(0), cpx::cpu::rows_of<const float>(x.data(), n, C::hidden), tokens, w.routing(),
                    cpx::cpu::rows_of(residual.data(), n, C::hidden));
    });
}

// One expert's worth: the same tokens through a single SwiGLU of the expert
// width, plus the shared expert. The routed MLP should cost about this.
void BM_OneExpertMlp(benchmark::State& state) {
    const index_t n = state.range(0);
    const auto& w = one_layer();
    const auto x = random_rows(n, C::hidden, 2);
    auto residual = random_rows(n, C::hidden, 3);
    cpx::cpu::SwiGluMlp<float> expert, shared;
    // Expert 0 in nn.Linear layout: [gate ; up] rows = columns of the input-major block, transposed.
    std::vector<float> gate_up(2 * C::expert_width * C::hidden), down(C::hidden * C::expert_width);
    const auto& l = w.layers[0];
    for (int i = 0; i < C::hidden; ++i)
        for (int j = 0; j < 2 * C::expert_width; ++j) gate_up[j * C::hidden + i] = l.gate_up[i * 2 * C::expert_width + j];
    for (int j = 0; j < C::expert_width; ++j)
        for (int c = 0; c < C::hidden; ++c) down[c * C::expert_width + j] = l.down[j * C::hidden + c];
    const cpx::cpu::SwiGluWeights<float> one{cpx::cpu::rows_of<const float>(gate_up.data(), 2 * C::expert_width, C::hidden),
                                             cpx::cpu::rows_of<const float>(down.data(), C::hidden, C::expert_width)};
    cpx::bench::Work work;
    work.tokens = static_cast<double>(n);
    work.flops = mlp_flops(n, C::expert_width + C::shared_width);
    work.gemm_ceiling = cpx::bench::machine_gemm_gflops(static_cast<int>(n), 2 * C::expert_width, C::hidden);
    const auto rows = cpx::cpu::rows_of<const float>(x.data(), n, C::hidden);
    cpx::bench::run(state, work, [&] {
        expert.forward(one, rows, cpx::cpu::rows_of(residual.data(), n, C::hidden));
        shared.forward(w.shared_expert(0), rows, cpx::cpu::rows_of(residual.data(), n, C::hidden));
    });
}

// What sparse dispatch avoids: every expert on every token (then a mask).
void BM_AllExpertsMlp(benchmark::State& state) {
    const index_t n = state.range(0);
    const auto& w = one_layer();
    const auto x = random_rows(n, C::hidden, 2);
    auto residual = random_rows(n, C::hidden, 3);
    std::vector<float> h(static_cast<std::size_t>(n * 2 * C::expert_width)), y(static_cast<std::size_t>(n * C::hidden));
    cpx::cpu::LinearScratch scratch;
    cpx::cpu::SwiGluMlp<float> shared;
    cpx::bench::Work work;
    work.tokens = static_cast<double>(n);
    work.flops = mlp_flops(n, C::expert_width + C::shared_width);  // useful work only
    const auto rows = cpx::cpu::rows_of<const float>(x.data(), n, C::hidden);
    cpx::bench::run(state, work, [&] {
        for (int e = 0; e < C::experts; ++e) {
            cpx::cpu::matmul<float>(rows, w.experts(0).gate_up_of(e), cpx::cpu::rows_of(h.data(), n, 2 * C::expert_width),
                                    cpx::cpu::Write::overwrite, scratch);
            cpx::cpu::swiglu_inplace(cpx::cpu::rows_of(h.data(), n, 2 * C::expert_width), C::expert_width);
            cpx::cpu::matmul<float>(cpx::cpu::RowBlock<const float>{h.data(), n, C::expert_width, 2 * C::expert_width},
                                    w.experts(0).down_of(e), cpx::cpu::rows_of(y.data(), n, C::hidden),
                                    cpx::cpu::Write::overwrite, scratch);
        }
        shared.forward(w.shared_expert(0), rows, cpx::cpu::rows_of(residual.data(), n, C::hidden));
    });
}

BENCHMARK(BM_TokenRoutedMlp)->ArgName("tokens")->Arg(1)->Arg(64)->Arg(512)->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OneExpertMlp)->ArgName("tokens")->Arg(1)->Arg(64)->Arg(512)->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AllExpertsMlp)->ArgName("tokens")->Arg(512)->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);

template <class W>
cpx::ComplexityModel<C, W>& model() {
    static cpx::ComplexityModel<C, W> m(cpx::convert_weights<W>(cpx::ComplexityWeights<C>::random(5)));
    return m;
}

// One decode token after a 128-token prompt: reads every active weight once.
template <class W>
void BM_DecodeStep(benchmark::State& state) {
    auto& m = model<W>();
    cpx::KVCache<C> cache(C::max_positions);
    const auto prompt = random_tokens(128, 6);
    std::vector<float> logits(C::vocab);
    m.extend(cache, prompt, cpx::LogitsAt::none, cpx::cpu::RowBlock<float>{nullptr, 0, C::vocab, C::vocab});
    cpx::KVCache<C>* caches[] = {&cache};
    std::int64_t token = 17;
    cpx::bench::Work work;
    work.tokens = 1;
    work.flops = static_cast<double>(cpx::flops_per_token<C>(128));
    work.bytes = static_cast<double>(cpx::active_parameters<C>(true) - static_cast<cpx::count_t>(C::vocab) * C::hidden) * sizeof(W) +
                 static_cast<double>(C::vocab) * C::hidden * sizeof(W);  // the tied head reads the whole embedding
    work.read_ceiling = cpx::bench::machine_read_gbps(cpx::cpu::max_threads());
    cpx::bench::run(state, work, [&] {
        if (cache.length() + 1 > cache.capacity()) cache.truncate(128);
        m.decode(caches, std::span<const std::int64_t>(&token, 1), cpx::cpu::rows_of(logits.data(), 1, C::vocab));
        cache.truncate(128);
    });
}
BENCHMARK(BM_DecodeStep<float>)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeStep<cpx::bf16>)->UseRealTime()->Unit(benchmark::kMillisecond);

// A prefill of T tokens, last-position logits.
template <class W>
void BM_Prefill(benchmark::State& state) {
    auto& m = model<W>();
    const index_t t = state.range(0);
    cpx::KVCache<C> cache(C::max_positions);
    const auto prompt = random_tokens(t, 7);
    std::vector<float> logits(C::vocab);
    cpx::bench::Work work;
    work.tokens = static_cast<double>(t);
    double flops = 0;
    for (index_t p = 1; p <= t; ++p) flops += static_cast<double>(cpx::flops_per_token<C>(p));
    work.flops = flops - static_cast<double>(t - 1) * 2.0 * C::vocab * C::hidden;  // one head row only
    work.gemm_ceiling = cpx::bench::machine_gemm_gflops(static_cast<int>(t), C::hidden, C::hidden);
    cpx::bench::run(state, work, [&] {
        cache.clear();
        m.extend(cache, prompt, cpx::LogitsAt::last, cpx::cpu::rows_of(logits.data(), 1, C::vocab));
    });
}
BENCHMARK(BM_Prefill<float>)->ArgName("tokens")->Arg(128)->Arg(512)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Prefill<cpx::bf16>)->ArgName("tokens")->Arg(512)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

// Microbenchmarking one layer alone, as a downstream project would: the
// token-routed MLP and the mu-guided attention of the 187M COMPLEXITY-DEEP
// configuration, on their own parameters (no model is built), with Google
// Benchmark. Each layer object keeps its workspaces, so after the first
// iteration a call allocates nothing.
//
//   layer_benchmark [--benchmark_filter=MLP] [--benchmark_min_time=1]
//
// Shapes: `tokens` rows of the residual stream (one sequence of that length
// for attention). Counters: tokens/s and the layer's GFLOP/s (2 FLOPs per
// multiply-add of its products).
#include <benchmark/benchmark.h>

#include <cpx/config/presets.hpp>
#include <cpx/cpu/layers/mu_gqa_attention.hpp>
#include <cpx/cpu/layers/token_routed_mlp.hpp>
#include <cpx/models/complexity/cpu_views.hpp>
#include <cpx/models/layer_params_io.hpp>

#include <cstdint>
#include <random>
#include <vector>

namespace {
using C = cpx::presets::ComplexityDeep187M;

std::vector<float> random_rows(cpx::index_t rows, cpx::index_t cols, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(static_cast<std::size_t>(rows * cols));
    for (float& x : v) x = normal(gen);
    return v;
}

void report(benchmark::State& state, cpx::index_t tokens, double flops_per_call) {
    state.counters["tokens/s"] =
        benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["GFLOP/s"] = benchmark::Counter(flops_per_call * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

/// residual += MLP(x): the shared expert on every row, each row's routed expert
/// chosen by its token id (here t mod E; a model uses its checkpoint's table).
void token_routed_mlp(benchmark::State& state) {
    const auto tokens_n = static_cast<cpx::index_t>(state.range(0));
    const auto params = cpx::random_layer<cpx::TokenRoutedMlpParams<C>>(/*seed=*/1, /*layer=*/0);
    const std::vector<std::int32_t> table = cpx::modulo_routing<C>();
    const cpx::TokenRouting routing(table, C::experts);
    const auto x = random_rows(tokens_n, C::hidden, 2);
    std::vector<std::int64_t> tokens(static_cast<std::size_t>(tokens_n));
    std::mt19937_64 gen(3);
    for (auto& t : tokens) t = static_cast<std::int64_t>(gen() % C::vocab);
    std::vector<float> residual(x.size(), 0.0f);
    cpx::cpu::TokenRoutedMlp<C, float> mlp;
    mlp.reserve(tokens_n);
    for (auto _ : state) {
        mlp.forward(cpx::cpu_view(params), cpx::cpu::rows_of<const float>(x.data(), tokens_n, C::hidden), tokens, routing,
                    cpx::cpu::rows_of(residual.data(), tokens_n, C::hidden));
        benchmark::ClobberMemory();
    }
    const double per_token = 2.0 * 3.0 * C::hidden * (C::expert_width + C::shared_width);  // gate, up, down
    report(state, tokens_n, per_token * static_cast<double>(tokens_n));
}

/// residual += attention([a | mu]) over one sequence of `tokens` positions, no cache.
void mu_gqa_attention(benchmark::State& state) {
    const auto n = static_cast<cpx::index_t>(state.range(0));
    const auto params = cpx::random_layer<cpx::MuGqaAttentionParams<C>>(1, 0);
    const auto input = random_rows(n, cpx::MuGqaAttentionParams<C>::input_width, 4);
    std::vector<float> residual(static_cast<std::size_t>(n * C::hidden), 0.0f);
    const cpx::cpu::SequenceRows<float> sequence{0, n, 0, {}, {}};
    cpx::cpu::MuGqaAttention<C, float> attention;
    attention.reserve(n, 1, n);
    for (auto _ : state) {
        attention.forward(cpx::cpu_view(params),
                          cpx::cpu::rows_of<const float>(input.data(), n, cpx::MuGqaAttentionParams<C>::input_width),
                          std::span(&sequence, 1), cpx::cpu::rows_of(residual.data(), n, C::hidden));
        benchmark::ClobberMemory();
    }
    const double projections = 2.0 * n * (double(cpx::MuGqaAttentionParams<C>::qkv_width) *
                                              cpx::MuGqaAttentionParams<C>::input_width + double(C::hidden) * C::q_width);
    const double scores = 2.0 * 2.0 * C::heads * C::head_dim * (double(n) * (n + 1) / 2);  // QK^T and PV, causal
    report(state, n, projections + scores);
}
}  // namespace

BENCHMARK(token_routed_mlp)->ArgName("tokens")->Arg(16)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(mu_gqa_attention)->ArgName("tokens")->Arg(16)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();

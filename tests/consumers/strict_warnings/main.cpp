// Every CPU header, both model families on fp32 and bf16, the layers alone and
// generation, compiled with the consumer's strict warnings.
#include "all_headers.hpp"

#include <cstdio>
#include <vector>

namespace {
template <class Model>
int run(typename Model::Weights weights) {
    Model model(std::move(weights));
    const std::vector<std::int64_t> prompt = {1, 2, 3, 4, 5};
    typename Model::Cache cache(16);
    const auto out = cpx::generate(model, cache, prompt, {.max_new_tokens = 4, .warm_up = true});
    return out.size() == 4 ? 0 : 1;
}
}  // namespace

int main() {
    namespace p = cpx::presets;
    int failures = 0;
    failures += run<cpx::ComplexityModel<p::TinyComplexity>>(cpx::ComplexityWeights<p::TinyComplexity>::random(1));
    failures += run<cpx::ComplexityModel<p::TinyComplexity, cpx::bf16, cpx::bf16>>(
        cpx::ComplexityWeights<p::TinyComplexity, cpx::bf16>::random(1));
    failures += run<cpx::ComplexityModel<p::TinyDense>>(cpx::ComplexityWeights<p::TinyDense>::random(2));
    failures += run<cpx::ComplexityModel<p::TinyLearnedRouter, cpx::bf16>>(
        cpx::ComplexityWeights<p::TinyLearnedRouter, cpx::bf16>::random(3));
    failures += run<cpx::ComplexityModel<p::TinyComplexityPrism>>(cpx::ComplexityWeights<p::TinyComplexityPrism>::random(4));
    failures += run<cpx::PrismModel<p::TinyPrism>>(cpx::PrismWeights<p::TinyPrism>::random(5));
    failures += run<cpx::PrismModel<p::TinyPrism, cpx::bf16, cpx::bf16>>(cpx::PrismWeights<p::TinyPrism, cpx::bf16>::random(5));

    // One layer alone: the token-routed MLP on its own parameters.
    using C = p::TinyComplexity;
    const auto mlp_params = cpx::random_layer<cpx::TokenRoutedMlpParams<C>>(6);
    const auto table = cpx::modulo_routing<C>();
    std::vector<float> x(7 * C::hidden, 0.5f), residual(7 * C::hidden, 0.0f);
    const std::vector<std::int64_t> tokens = {0, 1, 2, 3, 4, 5, 6};
    cpx::cpu::TokenRoutedMlp<C, float> mlp;
    mlp.forward(cpx::cpu_view(mlp_params), cpx::cpu::rows_of<const float>(x.data(), 7, C::hidden), tokens,
                cpx::TokenRouting(table, C::experts), cpx::cpu::rows_of(residual.data(), 7, C::hidden));
    std::printf("consumer: strict-warnings build runs (%s)\n", failures == 0 ? "ok" : "FAILED");
    return failures;
}

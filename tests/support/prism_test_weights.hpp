#pragma once
// Random PRISM weights for tests, at scales where every part of the model matters: the
// reference's seeded initialisation, then the LayerNorm weights and biases, every bias and each
// layer's lambda randomised, and the embeddings and MLP matrices scaled up so that the logits are
// not all near zero.

#include <cstdint>
#include <random>

#include <cpx/models/orthogonal_fill.hpp>
#include <cpx/models/prism/weights.hpp>

namespace cpx::testing {

template <PrismConfigType C>
PrismWeights<C> prism_test_weights(std::uint64_t seed) {
    auto w = PrismWeights<C>::random(seed);
    std::mt19937_64 gen(seed + 1);
    std::normal_distribution<float> n(0.0f, 1.0f);
    const auto jitter = [&](auto& vec, float mean, float sd) {
        for (auto& v : vec) v = mean + sd * n(gen);
    };
    for (auto& v : w.wte) v *= 25.0f;
    for (auto& v : w.wpe) v *= 10.0f;
    jitter(w.ln_f_weight, 1.0f, 0.2f);
    jitter(w.ln_f_bias, 0.0f, 0.2f);
    float lambda = 0.05f;
    for (auto& l : w.layers) {
        jitter(l.ln_1_weight, 1.0f, 0.2f);
        jitter(l.ln_1_bias, 0.0f, 0.2f);
        jitter(l.ln_2_weight, 1.0f, 0.2f);
        jitter(l.ln_2_bias, 0.0f, 0.2f);
        jitter(l.c_fc_bias, 0.0f, 0.1f);
        jitter(l.c_proj_bias, 0.0f, 0.1f);
        for (auto& v : l.c_fc_weight) v *= 5.0f;
        for (auto& v : l.c_proj_weight) v *= 5.0f;
        for (auto& v : l.u) v *= 2.0f;
        l.lambda = (lambda += 0.3f);
    }
    return w;
}

}  // namespace cpx::testing

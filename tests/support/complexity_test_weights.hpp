#pragma once
// Random COMPLEXITY-DEEP weights for tests, scaled so that every feature is
// exercised: activations of order one, norm weights away from one, mu
// parameters on both sides of the [0, 2] clamp and mu values past +-2, a random
// routing table. Also converts them to the reference's named tensors.

#include <cmath>
#include <string>
#include <vector>

#include <cpx/models/complexity/weights.hpp>
#include <cpx/models/orthogonal_fill.hpp>

#include "complexity_reference.hpp"
#include "test_support.hpp"

namespace cpx::testing {

template <ComplexityConfigType C, class W = float>
ComplexityWeights<C, W> test_weights(std::uint64_t seed) {
    ComplexityWeights<C, W> w;
    std::uint64_t stream = seed * 1000;
    for (const auto& s : w.slots()) {
        const auto n = static_cast<std::size_t>(s.elements());
        const std::string& name = s.name;
        const auto ends_with = [&](const std::string& suffix) {
            return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
        };
        std::vector<float> v;
        if (ends_with("norm.weight") || ends_with("layernorm.weight")) {
            v = random_normal(n, ++stream, 0.2f, 1.0f);
        } else if (ends_with("mu_guidance.mu")) {
            v = random_normal(n, ++stream, 1.0f, 1.0f);  // some below 0, some above 2
        } else if (name == "mu_init") {
            v = random_normal(n, ++stream, 1.5f);  // unclamped: some beyond +-2
        } else if (ends_with("_output_gate")) {
            v = {ends_with("shared_output_gate") ? 0.6f : 1.3f};  // learned gates away from 1 and from each other
        } else if (ends_with("self_attn.lambda_q")) {
            v = {0.25f + 0.5f * static_cast<float>(++stream % 3)};  // PRISM's noise weight, well away from 0
        } else if (name == "embed_tokens.weight") {
            v = random_normal(n, ++stream, 1.0f);
        } else {
            // A matrix: the input dimension is the last extent except for the
            // input-major experts [E, in, out], whose input is the middle one.
            const bool input_major = s.shape.size() == 3;
            const auto in = static_cast<float>(input_major ? s.shape[1] : s.shape.back());
            const float gain = ends_with("mu_proj.weight") ? 3.0f : 1.0f;  // mu past the clamp
            v = random_normal(n, ++stream, gain / std::sqrt(in));
        }
        s.assign(v);
    }
    if constexpr (C::mlp == MlpKind::token_routed) {
        if constexpr (C::top_k == 1) {  // the paper: one random table shared by every layer
            const auto table = random_ints(C::vocab, 0, C::experts - 1, seed + 7);
            w.set_routing(std::vector<std::int32_t>(table.begin(), table.end()));
        } else {  // the later models: a different random [top_k, V] table per layer
            for (int l = 0; l < C::layers; ++l) {
                const auto table = random_ints(static_cast<std::size_t>(C::top_k) * C::vocab, 0, C::experts - 1,
                                               seed + 7 + 1000 * static_cast<std::uint64_t>(l));
                w.set_layer_routes(l, std::vector<std::int32_t>(table.begin(), table.end()));
            }
        }
    }
    return w;
}

/// The weights as the reference reads them: checkpoint names and layouts, the
/// values exactly as stored (bf16-rounded for bf16 weights).
template <ComplexityConfigType C, class W>
ReferenceWeights reference_weights(const ComplexityWeights<C, W>& w) {
    ReferenceWeights r;
    for (const auto& s : w.slots()) {
        std::vector<float> v(static_cast<std::size_t>(s.elements()));
        s.extract(v);
        r.tensors[s.name].assign(v.begin(), v.end());
    }
    if constexpr (C::mlp == MlpKind::token_routed)
        for (int l = 0; l < C::layers; ++l) {
            const auto& routes = w.layers[static_cast<std::size_t>(l)].routes;
            r.tables["layers." + std::to_string(l) + ".mlp.topk_token_to_expert"].assign(routes.begin(), routes.end());
        }
    return r;
}

}  // namespace cpx::testing

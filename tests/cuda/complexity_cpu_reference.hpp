#pragma once
// A double-precision COMPLEXITY-DEEP forward pass written from the spec
// (sections 2-6), the GPU model tests' reference, and the random named weights
// and routing tables they share. Implemented in test_complexity_model_cpu.cpp.

#include <cpx/config/presets.hpp>

#include <cstdint>
#include <vector>

#include "prism_cpu_reference.hpp"  // NamedTensors, source_of

namespace cpx::testing {

/// The configurations the GPU tests run: token-routed with mu (head dim 16),
/// dense without mu, and token-routed without mu or shared expert at head dim 64.
using ComplexityTiny = presets::TinyComplexity;
using ComplexityDenseTiny = presets::TinyDense;
using ComplexityWide = ComplexityConfig<ComplexityDims{
    .hidden_size = 128, .num_hidden_layers = 2, .num_attention_heads = 2, .num_key_value_heads = 1,
    .intermediate_size = 192, .vocab_size = 97, .max_position_embeddings = 40, .mlp = MlpKind::token_routed,
    .num_experts = 3, .shared_expert = false, .use_mu_guidance = false}>;

/// Random weights under the checkpoint names (spec section 9.1), at scales where
/// every part shows in the logits and the mu clamps are active.
template <class C>
NamedTensors complexity_weights(std::uint64_t seed);

/// A random token_to_expert table using every expert.
template <class C>
std::vector<std::int32_t> complexity_routing(std::uint64_t seed);

/// Logits [tokens.size(), vocab] of `batch` equal-length sequences from position 0,
/// computed in double.
template <class C>
std::vector<double> complexity_reference_logits(const NamedTensors& weights, const std::vector<std::int32_t>& table,
                                                const std::vector<std::int32_t>& tokens, int batch);

#define CPX_COMPLEXITY_REFERENCE(C)                                                                          \
    extern template NamedTensors complexity_weights<C>(std::uint64_t);                                         \
    extern template std::vector<std::int32_t> complexity_routing<C>(std::uint64_t);                            \
    extern template std::vector<double> complexity_reference_logits<C>(                                        \
        const NamedTensors&, const std::vector<std::int32_t>&, const std::vector<std::int32_t>&, int);
CPX_COMPLEXITY_REFERENCE(ComplexityTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityDenseTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityWide)
#undef CPX_COMPLEXITY_REFERENCE

}  // namespace cpx::testing

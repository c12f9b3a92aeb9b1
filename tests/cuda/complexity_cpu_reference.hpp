#pragma once
// The CPU COMPLEXITY-DEEP model (cpx::ComplexityModel) and the double-precision
// spec reference (tests/support/complexity_reference.hpp) as the GPU tests'
// references, behind an interface free of Eigen: weights travel as named fp32
// tensors, logits as plain vectors. Implemented in test_complexity_model_cpu.cpp.

#include <cpx/config/presets.hpp>

#include <cstdint>
#include <vector>

#include "prism_cpu_reference.hpp"  // NamedTensors, source_of

namespace cpx::testing {

/// The configurations the GPU tests run: token-routed with mu (head dim 16),
/// dense without mu, the learned router (multi-query), token-routed without
/// mu or shared expert at head dim 64, and the authors' later MLP: top-2 with
/// learned gates and per-layer tables, and every expert for every token with
/// output scales.
using ComplexityTiny = presets::TinyComplexity;
using ComplexityDenseTiny = presets::TinyDense;
using ComplexityRouterTiny = presets::TinyLearnedRouter;
using ComplexityPrismTiny = presets::TinyComplexityPrism;  ///< PRISM attention inside the decoder
using ComplexityWide = ComplexityConfig<ComplexityDims{
    .hidden_size = 128, .num_hidden_layers = 2, .num_attention_heads = 2, .num_key_value_heads = 1,
    .intermediate_size = 192, .vocab_size = 97, .max_position_embeddings = 40, .mlp = MlpKind::token_routed,
    .num_experts = 3, .shared_expert = false, .use_mu_guidance = false}>;
using ComplexityTopKTiny = presets::TinyTopK;
using ComplexityTopAll = ComplexityConfig<ComplexityDims{
    .hidden_size = 64, .num_hidden_layers = 2, .num_attention_heads = 4, .num_key_value_heads = 2,
    .intermediate_size = 96, .vocab_size = 131, .max_position_embeddings = 40, .mlp = MlpKind::token_routed,
    .num_experts = 3, .shared_expert = true, .use_mu_guidance = true, .top_k = 3, .routed_output_scale = 0.8,
    .shared_output_scale = 1.2}>;

/// One test model: the CPU tests' random weights (testing::test_weights: every
/// feature exercised, mu clamps active) by checkpoint name, stored as fp32 or
/// rounded to bf16, and each layer's [top_k, V] routing table (none unless
/// token-routed; the paper's models route every layer alike, the later ones not).
struct ComplexityCase {
    NamedTensors tensors;
    std::vector<std::vector<std::int32_t>> routes;
};

template <class C>
ComplexityCase complexity_case(std::uint64_t seed, bool bf16_weights);

/// The CPU model's logits [tokens.size(), vocab] for `batch` equal-length sequences
/// from position 0, on the weights of complexity_case(seed, bf16_weights).
template <class C>
std::vector<float> complexity_cpu_logits(std::uint64_t seed, bool bf16_weights, const std::vector<std::int32_t>& tokens,
                                         int batch);

/// The double-precision reference's logits on the given tensors (any rounding already applied).
template <class C>
std::vector<double> complexity_reference_logits(const ComplexityCase& weights, const std::vector<std::int32_t>& tokens,
                                                int batch);

/// Greedy generation (cpx::generate) by the CPU model on complexity_case(seed, false)'s weights.
template <class C>
std::vector<std::int64_t> complexity_cpu_generate(std::uint64_t seed, const std::vector<std::int64_t>& prompt,
                                                  int new_tokens);

#define CPX_COMPLEXITY_REFERENCE(C)                                                                                  \
    extern template ComplexityCase complexity_case<C>(std::uint64_t, bool);                                        \
    extern template std::vector<std::int64_t> complexity_cpu_generate<C>(std::uint64_t,                           \
                                                                         const std::vector<std::int64_t>&, int);   \
    extern template std::vector<float> complexity_cpu_logits<C>(std::uint64_t, bool, const std::vector<std::int32_t>&, \
                                                                int);                                                \
    extern template std::vector<double> complexity_reference_logits<C>(const ComplexityCase&,                        \
                                                                       const std::vector<std::int32_t>&, int);
CPX_COMPLEXITY_REFERENCE(ComplexityTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityDenseTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityRouterTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityWide)
CPX_COMPLEXITY_REFERENCE(ComplexityPrismTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityTopKTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityTopAll)
#undef CPX_COMPLEXITY_REFERENCE

}  // namespace cpx::testing

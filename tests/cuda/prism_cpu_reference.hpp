#pragma once
// The CPU PRISM model as the GPU tests' reference, behind an interface free of
// Eigen: weights travel as named fp32 tensors (checkpoint names), logits as
// plain vectors. Implemented in test_prism_model_cpu.cpp (host compiler).

#include <cpx/config/presets.hpp>
#include <cpx/core/error.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cpx::testing {

using NamedTensors = std::map<std::string, std::vector<float>, std::less<>>;

/// The configurations the GPU PRISM tests run: TinyPrism (head dim 32, biases)
/// and a wider one without biases (head dim 64).
using PrismTiny = presets::TinyPrism;
using PrismWide = PrismConfig<PrismDims{.n_layer = 2, .n_head = 2, .n_embd = 64, .vocab_size = 83, .block_size = 40,
                                        .prism_expansion_ratio = 2, .bias = false}>;

/// Random weights (the spec's init, with norms, biases and lambda randomised and
/// the embeddings enlarged so every part of the model shows in the logits).
template <class C>
NamedTensors prism_weights(std::uint64_t seed);

/// The CPU model's logits for `batch` sequences of equal length from position 0:
/// [tokens.size(), vocab], every row.
template <class C>
std::vector<float> prism_cpu_logits(const NamedTensors& weights, const std::vector<std::int32_t>& tokens, int batch);

extern template NamedTensors prism_weights<PrismTiny>(std::uint64_t);
extern template NamedTensors prism_weights<PrismWide>(std::uint64_t);
extern template std::vector<float> prism_cpu_logits<PrismTiny>(const NamedTensors&, const std::vector<std::int32_t>&,
                                                              int);
extern template std::vector<float> prism_cpu_logits<PrismWide>(const NamedTensors&, const std::vector<std::int32_t>&,
                                                              int);

/// Host weights (ComplexityWeights or PrismWeights: the models' one tensor
/// description, which the GPU models upload) filled slot by slot from named tensors.
template <class Weights>
Weights weights_from(const NamedTensors& tensors) {
    Weights w;
    for (const auto& s : w.slots()) {
        const auto it = tensors.find(s.name);
        require<ShapeError>(it != tensors.end(), "test weights: no tensor named ", s.name);
        s.assign(it->second);
    }
    return w;
}

}  // namespace cpx::testing

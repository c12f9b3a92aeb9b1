// The host side of test_complexity_model.cu: the CPU tests' random weights, the
// CPU model's logits and the double-precision spec reference (Eigen stays here).
#include <cpx/models/complexity/model.hpp>
#include <cpx/models/generation.hpp>

#include <span>
#include <string>

#include "complexity_cpu_reference.hpp"
#include "complexity_reference.hpp"
#include "complexity_test_weights.hpp"

namespace cpx::testing {

namespace {
template <class C, class W>
ComplexityCase case_of(const ComplexityWeights<C, W>& w) {
    ComplexityCase out;
    for (const auto& s : w.slots()) {
        std::vector<float> v(static_cast<std::size_t>(s.elements()));
        s.extract(v);
        out.tensors.emplace(s.name, std::move(v));
    }
    if constexpr (C::mlp == MlpKind::token_routed)
        for (const auto& l : w.layers) out.routes.push_back(l.routes);
    return out;
}

template <class C, class W>
std::vector<float> cpu_logits(ComplexityWeights<C, W> w, const std::vector<std::int32_t>& tokens, int batch) {
    ComplexityModel<C, W> model(std::move(w));
    const std::vector<std::int64_t> ids(tokens.begin(), tokens.end());
    const std::size_t T = tokens.size() / static_cast<std::size_t>(batch);
    std::vector<std::span<const std::int64_t>> seqs;
    for (int b = 0; b < batch; ++b) seqs.emplace_back(ids.data() + b * T, T);
    std::vector<float> logits(tokens.size() * C::vocab);
    model.forward(seqs, LogitsAt::all, cpu::rows_of(logits.data(), static_cast<index_t>(tokens.size()), C::vocab));
    return logits;
}
}  // namespace

template <class C>
ComplexityCase complexity_case(std::uint64_t seed, bool bf16_weights) {
    auto w = test_weights<C>(seed);
    return bf16_weights ? case_of(convert_weights<bf16>(w)) : case_of(w);
}

template <class C>
std::vector<float> complexity_cpu_logits(std::uint64_t seed, bool bf16_weights, const std::vector<std::int32_t>& tokens,
                                         int batch) {
    auto w = test_weights<C>(seed);
    return bf16_weights ? cpu_logits(convert_weights<bf16>(w), tokens, batch) : cpu_logits(std::move(w), tokens, batch);
}

template <class C>
std::vector<std::int64_t> complexity_cpu_generate(std::uint64_t seed, const std::vector<std::int64_t>& prompt,
                                                  int new_tokens) {
    ComplexityModel<C> model(test_weights<C>(seed));
    typename ComplexityModel<C>::Cache cache(static_cast<index_t>(prompt.size()) + new_tokens);
    return generate(model, cache, prompt, new_tokens);
}

template <class C>
std::vector<double> complexity_reference_logits(const ComplexityCase& weights, const std::vector<std::int32_t>& tokens,
                                                int batch) {
    ReferenceWeights ref;
    for (const auto& [name, v] : weights.tensors) ref.tensors[name].assign(v.begin(), v.end());
    for (std::size_t l = 0; l < weights.routes.size(); ++l)
        ref.tables["layers." + std::to_string(l) + ".mlp.topk_token_to_expert"].assign(weights.routes[l].begin(),
                                                                                      weights.routes[l].end());
    const std::size_t T = tokens.size() / static_cast<std::size_t>(batch);
    std::vector<double> out;
    for (int b = 0; b < batch; ++b) {
        const std::vector<std::int64_t> seq(tokens.begin() + b * T, tokens.begin() + (b + 1) * T);
        const auto l = reference_logits<C>(ref, seq);
        out.insert(out.end(), l.begin(), l.end());
    }
    return out;
}

#define CPX_COMPLEXITY_REFERENCE(C)                                                                                      \
    template ComplexityCase complexity_case<C>(std::uint64_t, bool);                                                     \
    template std::vector<std::int64_t> complexity_cpu_generate<C>(std::uint64_t, const std::vector<std::int64_t>&, int); \
    template std::vector<float> complexity_cpu_logits<C>(std::uint64_t, bool, const std::vector<std::int32_t>&, int);    \
    template std::vector<double> complexity_reference_logits<C>(const ComplexityCase&, const std::vector<std::int32_t>&, \
                                                                int);
CPX_COMPLEXITY_REFERENCE(ComplexityTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityDenseTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityRouterTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityWide)
CPX_COMPLEXITY_REFERENCE(ComplexityPrismTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityTopKTiny)
CPX_COMPLEXITY_REFERENCE(ComplexityTopAll)

}  // namespace cpx::testing

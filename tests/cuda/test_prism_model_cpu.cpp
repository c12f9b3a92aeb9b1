// The CPU side of test_prism_model.cu: builds weights with the CPU model's
// initialiser and computes the CPU model's logits (Eigen stays in this file).
#include <cpx/models/prism/model.hpp>

#include <random>
#include <utility>

#include "prism_cpu_reference.hpp"

namespace cpx::testing {

template <class C>
NamedTensors prism_weights(std::uint64_t seed) {
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
    NamedTensors out;
    for (const auto& slot : w.slots()) {
        std::vector<float> values(static_cast<std::size_t>(slot.elements()));
        slot.extract(values);
        out.emplace(slot.name, std::move(values));
    }
    return out;
}

template <class C>
std::vector<float> prism_cpu_logits(const NamedTensors& weights, const std::vector<std::int32_t>& tokens, int batch) {
    PrismModel<C> model(weights_from<PrismWeights<C>>(weights));
    // `batch` sequences of equal length, concatenated.
    const std::vector<std::int64_t> ids(tokens.begin(), tokens.end());
    const std::size_t length = ids.size() / static_cast<std::size_t>(batch);
    std::vector<TokenSpan> sequences;
    for (int b = 0; b < batch; ++b) sequences.emplace_back(ids.data() + b * length, length);
    std::vector<float> logits(tokens.size() * C::vocab);
    model.forward(sequences, LogitsAt::all,
                  cpu::rows_of(logits.data(), static_cast<index_t>(tokens.size()), C::vocab));
    return logits;
}

template NamedTensors prism_weights<PrismTiny>(std::uint64_t);
template NamedTensors prism_weights<PrismWide>(std::uint64_t);
template std::vector<float> prism_cpu_logits<PrismTiny>(const NamedTensors&, const std::vector<std::int32_t>&, int);
template std::vector<float> prism_cpu_logits<PrismWide>(const NamedTensors&, const std::vector<std::int32_t>&, int);

}  // namespace cpx::testing

// The CPU side of test_prism_model.cu: builds weights with the CPU model's
// initialiser and computes the CPU model's logits (Eigen stays in this file).
#include <cpx/models/prism/model.hpp>

#include <utility>

#include "prism_cpu_reference.hpp"
#include "prism_test_weights.hpp"

namespace cpx::testing {

template <class C>
NamedTensors prism_weights(std::uint64_t seed) {
    const auto w = prism_test_weights<C>(seed);
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

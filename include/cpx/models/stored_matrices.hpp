#pragma once
// What a model does with its stored matrices once packed arithmetic has packed them
// (models/compute_choice.hpp, docs/BF16.md "Holding the matrices once").

#include <cstdint>

namespace cpx {

/// keep: the stored matrices stay beside the packs (the arithmetic can change, the weights
/// can be saved, converted, uploaded, edited); release: the packs replace them.
enum class StoredMatrices : std::uint8_t { keep, release };

/// What a model's packs call once layer l is packed: with release, free that layer's stored
/// matrices (Weights::free_packed_layer; the packs call Weights::finish_release at the end).
template <class Weights>
auto after_layer_packed(Weights& w, StoredMatrices stored) {
    return [&w, stored](int l) {
        if (stored == StoredMatrices::release) (void)w.free_packed_layer(l);
    };
}

}  // namespace cpx

#pragma once
// What a model does with its stored matrices once packed arithmetic has packed them
// (models/compute_choice.hpp, docs/BF16.md "Holding the matrices once").

#include <cstddef>
#include <cstdint>

namespace cpx {

/// keep: the stored matrices stay beside the packs (the arithmetic can change, the weights
/// can be saved, converted, uploaded, edited); release: the packs replace them.
enum class StoredMatrices : std::uint8_t { keep, release };

/// Frees every layer's stored matrices that the packs replace (Weights::free_packed_layer),
/// then moves the kept pieces to fresh storage (Weights::finish_release); the bytes freed.
template <class Weights>
std::size_t release_packed_layers(Weights& w) {
    std::size_t freed = 0;
    for (int l = 0; l < Weights::Config::layers; ++l) freed += w.free_packed_layer(l);
    w.finish_release();
    return freed;
}

/// What a model's packs call once layer l is packed: with release, free that layer's stored
/// matrices (Weights::free_packed_layer; the packs call Weights::finish_release at the end).
template <class Weights>
auto after_layer_packed(Weights& w, StoredMatrices stored) {
    return [&w, stored](int l) {
        if (stored == StoredMatrices::release) (void)w.free_packed_layer(l);
    };
}

}  // namespace cpx

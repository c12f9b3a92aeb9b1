#pragma once
// What a model does with its stored matrices once packed arithmetic has packed them
// (models/compute_choice.hpp, docs/BF16.md "Holding the matrices once").

#include <cstddef>
#include <cstdint>

#include "cpx/core/error.hpp"

namespace cpx {

/// keep: the stored matrices stay beside the packs (the arithmetic can change, the weights
/// can be saved, converted, uploaded, edited); release: the packs replace them.
enum class StoredMatrices : std::uint8_t { keep, release };

/// Packed matrices that a release keeps stored all the same, because a kernel of the chosen
/// arithmetic reads them as stored on this machine: PRISM attention's U, which a batch-1 decode
/// row multiplies head by head on AVX-512, reading U once where its two packs would each be read
/// (cpu::PrismAttention::decode_reads_stored_u). The model decides (it knows its layers).
struct ReleaseKeeps {
    bool prism_u = false;
};

/// The mark a model's weights carry once their layer matrices were released to the model's
/// packs (set by Weights::finish_release): from then on the weights' tensor slots, and so
/// reading, saving, converting and uploading them, are InputErrors.
class ReleaseMark {
public:
    /// Whether finish_release() ran, or a release stopped part way (mark_release_failed).
    bool packed_matrices_released() const { return released_; }
    /// Whether packing under StoredMatrices::release failed after freeing some layers' matrices:
    /// no packs hold them, and the weights serve nothing more (load them again).
    bool release_failed() const { return failed_; }
    /// Set by the packs' constructor when packing under release throws (std::bad_alloc, most
    /// likely): the layers packed so far were freed, so the weights must not be read again.
    void mark_release_failed() { released_ = failed_ = true; }

protected:
    void mark_released() { released_ = true; }
    /// An InputError once released.
    void require_stored() const {
        require<InputError>(!failed_, "the layer matrices of these weights were partly freed by a release whose "
                            "packing failed: load the weights again");
        require<InputError>(!released_, "the layer matrices of these weights were released to the model's packs "
                            "(release_stored_matrices): they cannot be read, saved, converted or uploaded");
    }

private:
    bool released_ = false, failed_ = false;
};

/// Frees every layer's stored matrices that the packs replace (Weights::free_packed_layer),
/// then moves the kept pieces to fresh storage (Weights::finish_release); the bytes freed.
template <class Weights>
std::size_t release_packed_layers(Weights& w, ReleaseKeeps keeps) {
    std::size_t freed = 0;
    for (int l = 0; l < Weights::Config::layers; ++l) freed += w.free_packed_layer(l, keeps);
    w.finish_release();
    return freed;
}

/// What a model's packs call once layer l is packed: with release, free that layer's stored
/// matrices (Weights::free_packed_layer; the packs call Weights::finish_release at the end).
template <class Weights>
auto after_layer_packed(Weights& w, StoredMatrices stored, ReleaseKeeps keeps) {
    return [&w, stored, keeps](int l) {
        if (stored == StoredMatrices::release) (void)w.free_packed_layer(l, keeps);
    };
}

}  // namespace cpx

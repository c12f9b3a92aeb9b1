#pragma once
// How a batch reaches an attention layer: the rows of one activation matrix
// are split into chunks, each a run of consecutive positions of one sequence,
// optionally with that sequence's key/value storage for the layer. Full
// forward passes, chunked prefill and batched decode are all lists of chunks.

#include <optional>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/strided.hpp"

namespace cpx::cpu {

/// One layer's key/value rows of one sequence: row p holds position p; `rows`
/// is the capacity.
template <class KV>
struct LayerKv {
    HeadRows<KV> k, v;
};

/// Rows [first_row, first_row + rows) of the layer input are positions
/// [offset, offset + rows) of one sequence.
template <class KV = float>
struct SequenceChunk {
    index_t first_row = 0;
    index_t rows = 0;
    index_t offset = 0;
    std::optional<LayerKv<KV>> cache{};  ///< absent: the chunk starts at 0 and attends within itself
};

}  // namespace cpx::cpu

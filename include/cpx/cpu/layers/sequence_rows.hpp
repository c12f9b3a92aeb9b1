#pragma once
// How a batch reaches an attention layer (either front end: GQA or PRISM):
// the rows of one activation matrix are split into sequences, each a run of
// consecutive positions of one sequence, optionally with that sequence's
// key/value storage for the layer. Full forward passes, chunked prefill and
// batched decode are all lists of these.

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/strided.hpp"

namespace cpx::cpu {

/// One sequence of a batch as its attention sees it: which rows of the batch
/// are its new tokens, how many positions its cache already holds, and this
/// layer's cache storage (head-major views; data == nullptr when the sequence
/// runs without a cache, in which case offset is 0).
template <class KV>
struct SequenceRows {
    index_t begin = 0, rows = 0, offset = 0;
    HeadRows<KV> cache_k{}, cache_v{};
};

}  // namespace cpx::cpu

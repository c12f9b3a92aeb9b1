#pragma once
// How a batch reaches an attention layer (either front end: GQA or PRISM):
// the rows of one activation matrix are split into sequences, each a run of
// consecutive positions of one sequence, optionally with that sequence's
// key/value storage for the layer. Full forward passes, chunked prefill and
// batched decode are all lists of these. QueryRows says which of those rows
// a call carries past their keys and values (a model's last layer).

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

/// The rows an attention call finishes (queries, attention, output projection).
/// Keys and values are computed, and cached, for every row whatever the choice:
/// a model's last layer needs no more than the rows whose logits the call
/// returns. `all`: output row r is batch row r. `last`: one output row per
/// sequence, row i for the last position of sequence i (no sequence may be
/// empty). `none`: no output rows.
enum class QueryRows { all, last, none };

/// Output rows of an attention call over `rows` batch rows in `sequences` sequences.
inline index_t query_output_rows(QueryRows which, index_t rows, index_t sequences) {
    return which == QueryRows::all ? rows : which == QueryRows::last ? sequences : 0;
}

/// The batch rows [first, first + count) of one sequence that a call finishes, and
/// the output row the first of them goes to.
struct QuerySlice {
    index_t first = 0, count = 0, out = 0;
};

/// Sequence `s`, the `index`-th of its call, under `which`.
template <class KV>
QuerySlice query_slice(QueryRows which, const SequenceRows<KV>& s, index_t index) {
    switch (which) {
        case QueryRows::all: return {s.begin, s.rows, s.begin};
        case QueryRows::last: return {s.begin + s.rows - 1, s.rows > 0 ? 1 : 0, index};
        case QueryRows::none: break;
    }
    return {s.begin + s.rows, 0, index};
}

}  // namespace cpx::cpu

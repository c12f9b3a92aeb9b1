#pragma once
// What both models (COMPLEXITY-DEEP and PRISM) take per call: a batch of
// token sequences of any lengths, each optionally appended to its own KV
// cache, and which positions get logits. Both check a batch with the same
// function, so bad input gets the same messages from either model.

#include <cstdint>
#include <span>

#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/strided.hpp"

namespace cpx {

/// Which positions a call returns logits for.
enum class LogitsAt {
    all,   ///< every input position, sequence after sequence
    last,  ///< the last input position of each sequence
    none,  ///< none (a prefill whose logits are not needed)
};

/// The token ids of one sequence of a batch.
using TokenSpan = std::span<const std::int64_t>;

/// Rows of logits a call over `batch` returns.
inline index_t logits_rows(std::span<const TokenSpan> batch, LogitsAt at) {
    if (at == LogitsAt::none) return 0;
    if (at == LogitsAt::last) return static_cast<index_t>(batch.size());
    index_t n = 0;
    for (const TokenSpan& t : batch) n += static_cast<index_t>(t.size());
    return n;
}

/// Checks a batch against a model's vocabulary and context (`context_name`
/// is the configuration key that sets it) and, when caches are given, against
/// each cache's capacity; then the logits block against the call's rows.
template <class Cache>
void validate_sequence_batch(std::span<const TokenSpan> batch, std::span<Cache* const> caches, LogitsAt at,
                             const StridedMatrix<float>& logits, index_t vocab, index_t max_positions,
                             const char* context_name) {
    for (std::size_t s = 0; s < batch.size(); ++s) {
        const TokenSpan& t = batch[s];
        if (!caches.empty()) require<InputError>(caches[s] != nullptr, "sequence ", s, " has no KV cache");
        const index_t offset = caches.empty() ? 0 : caches[s]->length();
        require<InputError>(!t.empty() || at != LogitsAt::last, "sequence ", s,
                            " is empty: it has no last position to return logits for");
        for (std::size_t i = 0; i < t.size(); ++i)
            if (t[i] < 0 || t[i] >= vocab)
                raise<InputError>("token id ", t[i], " at position ", offset + static_cast<index_t>(i), " of sequence ",
                                  s, " is outside the vocabulary [0, ", vocab, ")");
        const index_t end = offset + static_cast<index_t>(t.size());
        require<InputError>(end <= max_positions, "sequence ", s, " would reach position ", end, ", past the context of ",
                            max_positions, " (", context_name, ")");
        if (!caches.empty()) {
            require<InputError>(end <= caches[s]->capacity(), "the KV cache of sequence ", s, " holds ",
                                caches[s]->capacity(), " positions; ", caches[s]->length(), " cached + ", t.size(),
                                " new need ", end);
            for (std::size_t o = 0; o < s; ++o)
                require<InputError>(caches[o] != caches[s], "sequences ", o, " and ", s, " share one KV cache");
        }
    }
    const index_t rows = logits_rows(batch, at);
    require<ShapeError>(logits.rows == rows && logits.cols == vocab, "logits output is [", logits.rows, ", ",
                        logits.cols, "], the call returns [", rows, ", ", vocab, "]");
}

}  // namespace cpx

#pragma once
// The call API of both CPU sequence models (ComplexityModel, PrismModel),
// written once: whole-sequence forward, extend through KV caches (prefill,
// chunked prefill, decode), one-token decode steps and the logits-row count.
// Each model supplies one `forward_pass(batch, caches, at, logits, size)`;
// the front end validates the call first (sequence_batch.hpp: the same checks
// and messages for both models, the context named by KVCacheShape) and works
// out its size; calls of no tokens end there.
//
//   class MyModel : public SequenceModel<MyModel, Config, Cache> {
//       friend SequenceModel<MyModel, Config, Cache>;
//       void forward_pass(std::span<const TokenSpan>, std::span<Cache* const>, LogitsAt,
//                         const StridedMatrix<float>&, CallSize);
//   };

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/cpu/layers/sequence_rows.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/models/kv_cache.hpp"
#include "cpx/models/sequence_batch.hpp"

namespace cpx {

/// Where each sequence of a call sits in the call's stacked rows and, through
/// a cache, in layer `layer`'s cached keys and values (the attention layers' input).
template <class KV, class Cache>
void describe_sequences(std::span<const TokenSpan> batch, std::span<Cache* const> caches, int layer,
                        std::vector<cpu::SequenceRows<KV>>& out) {
    out.clear();
    index_t begin = 0;
    for (std::size_t s = 0; s < batch.size(); ++s) {
        cpu::SequenceRows<KV> r;
        r.begin = begin;
        r.rows = static_cast<index_t>(batch[s].size());
        if (!caches.empty()) {
            r.offset = caches[s]->length();
            r.cache_k = caches[s]->keys(layer);
            r.cache_v = caches[s]->values(layer);
        }
        out.push_back(r);
        begin += r.rows;
    }
}

/// The rows a call's last layer finishes (cpu::QueryRows): those whose logits it returns,
/// or every row when an observer that records every row of every layer is attached. Every
/// row's keys and values reach the caches whatever the choice.
inline cpu::QueryRows last_layer_queries(LogitsAt at, bool observed) {
    if (at == LogitsAt::all || observed) return cpu::QueryRows::all;
    return at == LogitsAt::last ? cpu::QueryRows::last : cpu::QueryRows::none;
}

/// The size of one validated call: tokens in total, sequences, and the most
/// keys any sequence attends to (its cache's capacity, or its own length).
struct CallSize {
    index_t rows = 0, sequences = 0, max_keys = 0;
};

template <class Model, class C, class Cache>
class SequenceModel {
public:
    using Tokens = TokenSpan;

    /// Rows of logits a call over `batch` returns.
    static index_t logits_rows(std::span<const Tokens> batch, LogitsAt at) { return cpx::logits_rows(batch, at); }

    // ---- calls without a cache

    /// Logits of a batch of independent sequences, each starting at position 0.
    /// logits: [logits_rows(batch, at), vocab].
    void forward(std::span<const Tokens> batch, LogitsAt at, const StridedMatrix<float>& logits) {
        run_(batch, std::span<Cache* const>{}, at, logits);
    }

    /// Logits of one sequence (all positions or the last), in a new vector.
    std::vector<float> forward(Tokens tokens, LogitsAt at = LogitsAt::all) {
        const Tokens batch[] = {tokens};
        std::vector<float> out(static_cast<std::size_t>(logits_rows(batch, at)) * C::vocab);
        forward(batch, at, cpu::rows_of(out.data(), logits_rows(batch, at), C::vocab));
        return out;
    }

    // ---- calls through caches

    /// Appends each sequence's tokens to its cache (prefill when the cache is
    /// empty, chunked prefill otherwise, decode for one token) and returns the
    /// logits of the new positions.
    void extend(std::span<Cache* const> caches, std::span<const Tokens> batch, LogitsAt at,
                const StridedMatrix<float>& logits) {
        require<InputError>(caches.size() == batch.size(), "extend: ", caches.size(), " caches for ", batch.size(),
                            " sequences");
        run_(batch, caches, at, logits);
    }

    void extend(Cache& cache, Tokens tokens, LogitsAt at, const StridedMatrix<float>& logits) {
        Cache* caches[] = {&cache};
        const Tokens batch[] = {tokens};
        extend(caches, batch, at, logits);
    }

    /// One decode step for each sequence: next[i] appended to caches[i];
    /// logits: [caches.size(), vocab].
    void decode(std::span<Cache* const> caches, Tokens next, const StridedMatrix<float>& logits) {
        require<InputError>(caches.size() == next.size(), "decode: ", next.size(), " tokens for ", caches.size(),
                            " caches");
        steps_.resize(next.size());
        for (std::size_t i = 0; i < next.size(); ++i) steps_[i] = next.subspan(i, 1);
        run_(steps_, caches, LogitsAt::all, logits);
    }

private:
    void run_(std::span<const Tokens> batch, std::span<Cache* const> caches, LogitsAt at,
              const StridedMatrix<float>& logits) {
        validate_sequence_batch<Cache>(batch, caches, at, logits, C::vocab, C::max_positions,
                                       KVCacheShape<C>::context_name);
        CallSize size;
        size.sequences = static_cast<index_t>(batch.size());
        for (std::size_t s = 0; s < batch.size(); ++s) {
            size.rows += static_cast<index_t>(batch[s].size());
            size.max_keys = std::max(size.max_keys, caches.empty() ? static_cast<index_t>(batch[s].size())
                                                                   : caches[s]->capacity());
        }
        if (size.rows == 0) return;  // nothing to compute, no logits rows, no cache moves
        static_cast<Model&>(*this).forward_pass(batch, caches, at, logits, size);
    }

    std::vector<Tokens> steps_;  ///< decode's one-token spans, kept to avoid an allocation per step
};

}  // namespace cpx

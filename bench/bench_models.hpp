// What the whole-model suites share (bench_complexity_model.cpp,
// bench_prism_model.cpp): case names, random prompts, and the prefill and
// decode steps through caller-owned KV caches, as a server runs them. Both
// models have the same batch API (extend / decode over KVCache pointers).
#pragma once

#include <cpx/core/tensor_view.hpp>
#include <cpx/cpu/runtime/strided.hpp>
#include <cpx/models/sequence_batch.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace cpx::bench {

template <class W>
const char* dtype_name() { return std::is_same_v<W, float> ? "f32" : "bf16"; }

/// "/prefill/batch:B/tokens:T/threads:N" and the like.
inline std::string shape_suffix(const char* what, index_t batch, const char* len_name, index_t len, int threads) {
    return std::string("/") + what + "/batch:" + std::to_string(batch) + "/" + len_name + ":" + std::to_string(len) +
           "/threads:" + std::to_string(threads);
}

/// `batch` sequences of `tokens` ids drawn uniformly from [0, vocab).
inline std::vector<std::vector<std::int64_t>> random_batch(index_t batch, index_t tokens, std::int64_t vocab,
                                                           std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<std::int64_t> dist(0, vocab - 1);
    std::vector<std::vector<std::int64_t>> b(static_cast<std::size_t>(batch));
    for (auto& s : b) {
        s.resize(static_cast<std::size_t>(tokens));
        for (auto& t : s) t = dist(gen);
    }
    return b;
}

/// Runs `fn` once before the first timed run of a case: workspaces and caches
/// are sized and first touched outside the measurement.
template <class Fn>
void warm_once(const std::string& key, Fn&& fn) {
    static std::set<std::string> warmed;
    if (warmed.insert(key).second) fn();
}

/// One cache per sequence and the pointers the batch calls take.
template <class Cache>
struct CacheBatch {
    std::vector<Cache> caches;
    std::vector<Cache*> pointers;
    std::vector<float> logits;  ///< [batch, vocab]: the last position of each sequence

    CacheBatch(index_t batch, index_t capacity, index_t vocab)
        : logits(static_cast<std::size_t>(batch * vocab)) {
        caches.reserve(static_cast<std::size_t>(batch));
        for (index_t b = 0; b < batch; ++b) caches.emplace_back(capacity);
        for (auto& c : caches) pointers.push_back(&c);
    }
    StridedMatrix<float> logit_rows(index_t vocab) {
        return cpu::rows_of(logits.data(), static_cast<index_t>(caches.size()), vocab);
    }
};

/// Prefill: every sequence of `prompts` into an empty cache, logits of the last position.
template <class Model, class Cache>
struct PrefillStep {
    Model& model;
    CacheBatch<Cache> batch;
    std::vector<std::vector<std::int64_t>> prompts;
    std::vector<TokenSpan> spans;
    index_t vocab;

    PrefillStep(Model& m, index_t sequences, index_t tokens, index_t vocab_size)
        : model(m), batch(sequences, tokens, vocab_size), prompts(random_batch(sequences, tokens, vocab_size, 5)),
          spans(prompts.begin(), prompts.end()), vocab(vocab_size) {}
    void operator()() {
        for (auto& c : batch.caches) c.clear();
        model.extend(batch.pointers, spans, LogitsAt::last, batch.logit_rows(vocab));
        benchmark::DoNotOptimize(batch.logits.data());
    }
};

/// Decode: one new token per sequence after `context - 1` cached positions
/// (zeros: the values do not change the work), the cache rolled back after each step.
template <class Model, class Cache>
struct DecodeStep {
    Model& model;
    CacheBatch<Cache> batch;
    std::vector<std::int64_t> next;
    index_t context, vocab;

    DecodeStep(Model& m, index_t sequences, index_t context_length, index_t vocab_size)
        : model(m), batch(sequences, context_length, vocab_size),
          next(random_batch(1, sequences, vocab_size, 9)[0]), context(context_length), vocab(vocab_size) {
        for (auto& c : batch.caches) c.advance(context - 1);
    }
    void operator()() {
        model.decode(batch.pointers, next, batch.logit_rows(vocab));
        for (auto& c : batch.caches) c.truncate(context - 1);
        benchmark::DoNotOptimize(batch.logits.data());
    }
};

}  // namespace cpx::bench

#pragma once
// The check every CPU model's tests share: a call that returns the last
// position's logits, or none, finishes only those rows in its last layer
// (cpu/layers/sequence_rows.hpp, QueryRows), so it must leave every cache
// exactly as a call returning every row's logits does, and its logits must be
// those rows of that call's (up to the order of fp32 sums: a product over a
// few rows may sum in another order than the same product over many).

#include <doctest/doctest.h>

#include <cpx/cpu/runtime/strided.hpp>
#include <cpx/models/sequence_batch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "test_support.hpp"

namespace cpx::testing {

/// Whether two caches hold the same keys and values, bit for bit, in every layer's filled rows.
template <class Cache>
bool same_cache(const Cache& a, const Cache& b, int layers) {
    if (a.length() != b.length()) return false;
    for (int l = 0; l < layers; ++l) {
        const auto same = [&](const auto& x, const auto& y) {
            for (index_t r = 0; r < a.length(); ++r)
                for (int h = 0; h < x.heads; ++h)
                    if (!std::equal(x.head(r, h), x.head(r, h) + x.head_dim, y.head(r, h))) return false;
            return true;
        };
        if (!same(a.keys(l), b.keys(l)) || !same(a.values(l), b.values(l))) return false;
    }
    return true;
}

/// Prefills three sequences (9, 14 and 1 tokens) through fresh caches with each LogitsAt,
/// then decodes one token from each set of caches. `logits_bound`: the relative difference
/// allowed between a last row's logits and that row of the every-row call. 1e-5 covers fp32
/// sums in another order; under bf16 arithmetic (Compute::bf16) the finished rows' attention
/// is a decode-sized problem, which runs in fp32 on the kernels that read the cache in place
/// where the every-row call runs bf16 products, so the logits differ by the bf16 bound (3e-2).
template <class Cache, class Model>
void check_last_rows_prefill(Model& model, int vocab, int layers, std::uint64_t seed, double logits_bound = 1e-5) {
    const std::vector<std::vector<std::int64_t>> seqs = {random_tokens(9, vocab, seed), random_tokens(14, vocab, seed + 1),
                                                         random_tokens(1, vocab, seed + 2)};
    const std::vector<std::span<const std::int64_t>> batch(seqs.begin(), seqs.end());
    struct Run {
        std::vector<std::unique_ptr<Cache>> caches;
        std::vector<Cache*> ptrs;
        std::vector<float> logits, next;
    };
    const LogitsAt modes[] = {LogitsAt::all, LogitsAt::last, LogitsAt::none};
    std::vector<Run> runs(3);
    const std::int64_t next[] = {5, 0, static_cast<std::int64_t>(vocab - 1)};
    for (int m = 0; m < 3; ++m) {
        Run& run = runs[static_cast<std::size_t>(m)];
        for (std::size_t s = 0; s < seqs.size(); ++s) {
            run.caches.push_back(std::make_unique<Cache>(32));
            run.ptrs.push_back(run.caches.back().get());
        }
        const index_t rows = logits_rows(batch, modes[m]);
        run.logits.assign(static_cast<std::size_t>(rows * vocab), std::numeric_limits<float>::quiet_NaN());
        model.extend(run.ptrs, batch, modes[m], cpu::rows_of(run.logits.data(), rows, vocab));
        run.next.assign(seqs.size() * static_cast<std::size_t>(vocab), std::numeric_limits<float>::quiet_NaN());
        model.decode(run.ptrs, next, cpu::rows_of(run.next.data(), static_cast<index_t>(seqs.size()), vocab));
    }
    const Run &all = runs[0], &last = runs[1], &none = runs[2];
    std::size_t end = 0;
    for (std::size_t s = 0; s < seqs.size(); ++s) {
        CAPTURE(s);
        end += seqs[s].size();
        const auto row = [&](const std::vector<float>& v, std::size_t r) {
            return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(r * vocab),
                                      v.begin() + static_cast<std::ptrdiff_t>((r + 1) * vocab));
        };
        CHECK(relative_error(row(last.logits, s), row(all.logits, end - 1)) < logits_bound);
        // The caches, and so every step after the prefill, are the same bit for bit.
        CHECK(same_cache(*last.caches[s], *all.caches[s], layers));
        CHECK(same_cache(*none.caches[s], *all.caches[s], layers));
    }
    CHECK(last.next == all.next);
    CHECK(none.next == all.next);
}

}  // namespace cpx::testing

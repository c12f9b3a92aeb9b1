#pragma once
// Top-k token routing (docs/MODELS.md §8.5): each token id has `top_k` routes,
// route r of token t being table[r * vocab + t], an expert of [0, experts).
// The authors' later checkpoints store such a [top_k, vocab] table per layer
// (mlp.topk_token_to_expert), or only the primary route (mlp.token_to_expert),
// in which case route r is (primary + r) mod experts: cyclic_routes() below.
// With top_k = 1 this is the paper's single token_to_expert table.

#include <cstdint>
#include <span>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/core/host_device.hpp"
#include "cpx/router/token_routing.hpp"

namespace cpx {

/// Non-owning [top_k, vocab] route table.
class TopKRouting {
public:
    constexpr TopKRouting() = default;

    /// Views `table` ([top_k, vocab] row-major); checks every entry is an
    /// expert of [0, experts). Routes of one token need not be distinct: the
    /// authors' code computes a repeated expert twice, and so does the layer.
    TopKRouting(std::span<const std::int32_t> table, int top_k, int experts)
        : table_(table.data()), vocab_(top_k > 0 ? table.size() / static_cast<std::size_t>(top_k) : 0),
          top_k_(top_k), experts_(experts) {
        require<InputError>(experts >= 1, "token routing: expert count must be >= 1, got ", experts);
        require<InputError>(top_k >= 1, "token routing: top_k must be >= 1, got ", top_k);
        require<InputError>(!table.empty() && table.size() % static_cast<std::size_t>(top_k) == 0,
                            "token routing: a table of ", table.size(), " entries is not ", top_k, " routes of a vocabulary");
        for (std::size_t i = 0; i < table.size(); ++i)
            if (table[i] < 0 || table[i] >= experts)
                raise<InputError>("token routing: route ", i / vocab_, " of token ", i % vocab_, " is expert ", table[i],
                                  ", outside [0, ", experts, ")");
    }

    /// The single-route table of the paper's models.
    TopKRouting(const TokenRouting& primary)  // NOLINT(google-explicit-constructor): a top-1 table is a top-k table
        : table_(primary.data()), vocab_(primary.vocab()), top_k_(1), experts_(primary.experts()) {}

    /// Views a table the caller has already validated; checks nothing.
    static TopKRouting prevalidated(std::span<const std::int32_t> table, int top_k, int experts) {
        TopKRouting r;
        r.table_ = table.data(), r.vocab_ = table.size() / static_cast<std::size_t>(top_k), r.top_k_ = top_k,
        r.experts_ = experts;
        return r;
    }

    CPX_HOST_DEVICE std::size_t vocab() const { return vocab_; }
    CPX_HOST_DEVICE int top_k() const { return top_k_; }
    CPX_HOST_DEVICE int experts() const { return experts_; }
    CPX_HOST_DEVICE const std::int32_t* data() const { return table_; }

    /// Route r as a single table.
    TokenRouting route(int r) const {
        require<InputError>(r >= 0 && r < top_k_, "token routing: route ", r, " outside [0, ", top_k_, ")");
        return TokenRouting::prevalidated({table_ + static_cast<std::size_t>(r) * vocab_, vocab_}, experts_);
    }

    /// Expert of route r of a token id the caller has validated.
    CPX_HOST_DEVICE int expert_of(std::int64_t token, int r) const {
        return table_[static_cast<std::size_t>(r) * vocab_ + static_cast<std::size_t>(token)];
    }

    /// Expert of route r of a token id, with a clear error for ids outside the vocabulary.
    int checked_expert_of(std::int64_t token, int r) const {
        if (token < 0 || static_cast<std::size_t>(token) >= vocab_)
            raise<InputError>("token id ", token, " is outside the vocabulary [0, ", vocab_, ")");
        return expert_of(token, r);
    }

private:
    const std::int32_t* table_ = nullptr;
    std::size_t vocab_ = 0;
    int top_k_ = 0;
    int experts_ = 0;
};

namespace router {

/// The [top_k, vocab] table whose route r is (primary + r) mod experts: the
/// authors' rule for checkpoints that store only the primary route. Routes of
/// a token are distinct (top_k <= experts), and each route spreads ids and
/// frequency mass exactly as the primary does, with the experts relabelled.
constexpr std::vector<std::int32_t> cyclic_routes(std::span<const std::int32_t> primary, int top_k, int experts) {
    if (experts < 1 || top_k < 1 || top_k > experts)
        raise<InputError>("cyclic routes: top_k ", top_k, " needs 1 <= top_k <= experts (", experts, ")");
    const std::size_t vocab = primary.size();
    std::vector<std::int32_t> table(vocab * static_cast<std::size_t>(top_k), 0);
    for (std::size_t t = 0; t < vocab; ++t) {
        if (primary[t] < 0 || primary[t] >= experts)
            raise<InputError>("cyclic routes: token ", t, " has primary expert ", primary[t], ", outside [0, ", experts,
                              ")");
        for (int r = 0; r < top_k; ++r)
            table[static_cast<std::size_t>(r) * vocab + t] = static_cast<std::int32_t>((primary[t] + r) % experts);
    }
    return table;
}

/// Tokens whose routes are not pairwise distinct in a [top_k, vocab] table.
constexpr std::size_t tokens_with_repeated_routes(std::span<const std::int32_t> table, int top_k) {
    const std::size_t vocab = table.size() / static_cast<std::size_t>(top_k);
    std::size_t repeated = 0;
    for (std::size_t t = 0; t < vocab; ++t) {
        bool dup = false;
        for (int a = 0; a < top_k && !dup; ++a)
            for (int b = a + 1; b < top_k && !dup; ++b)
                dup = table[static_cast<std::size_t>(a) * vocab + t] == table[static_cast<std::size_t>(b) * vocab + t];
        repeated += dup ? 1 : 0;
    }
    return repeated;
}

}  // namespace router
}  // namespace cpx

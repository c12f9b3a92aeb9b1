#pragma once
// The one interface through which a token-routed layer learns which expert a
// token id goes to. The table may be a compile-time constant (built by the
// router at build time) or loaded at run time from a checkpoint's
// `mlp.token_to_expert`; the layer sees the same non-owning view either way.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/core/host_device.hpp"

namespace cpx {

/// Non-owning token id -> expert id table (vocab entries, each in [0, experts)).
class TokenRouting {
public:
    constexpr TokenRouting() = default;

    /// Views `table`; checks every entry is a valid expert (host side, once).
    TokenRouting(std::span<const std::int32_t> table, int experts) : table_(table.data()), vocab_(table.size()), experts_(experts) {
        require<InputError>(experts >= 1, "token routing: expert count must be >= 1, got ", experts);
        require<InputError>(!table.empty(), "token routing: the table is empty");
        for (std::size_t t = 0; t < table.size(); ++t)
            if (table[t] < 0 || table[t] >= experts)
                raise<InputError>("token routing: token ", t, " maps to expert ", table[t], ", outside [0, ", experts, ")");
    }

    /// Views a table the caller has already validated (e.g. through the
    /// checking constructor when it was loaded); checks nothing.
    static TokenRouting prevalidated(std::span<const std::int32_t> table, int experts) {
        TokenRouting r;
        r.table_ = table.data(), r.vocab_ = table.size(), r.experts_ = experts;
        return r;
    }

    CPX_HOST_DEVICE std::size_t vocab() const { return vocab_; }
    CPX_HOST_DEVICE int experts() const { return experts_; }
    CPX_HOST_DEVICE const std::int32_t* data() const { return table_; }

    /// Expert of a token id the caller has already validated against the vocabulary.
    CPX_HOST_DEVICE int expert_of(std::int64_t token) const { return table_[token]; }

    /// Expert of a token id, with a clear error for ids outside the vocabulary.
    int checked_expert_of(std::int64_t token) const {
        if (token < 0 || static_cast<std::size_t>(token) >= vocab_)
            raise<InputError>("token id ", token, " is outside the vocabulary [0, ", vocab_, ")");
        return table_[token];
    }

private:
    const std::int32_t* table_ = nullptr;
    std::size_t vocab_ = 0;
    int experts_ = 0;
};

}  // namespace cpx

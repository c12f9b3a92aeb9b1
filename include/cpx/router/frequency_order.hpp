#pragma once
// The order in which the frequency-aware routers visit token ids, and the
// checks every router applies to its inputs. Everything here is constexpr:
// the same code runs in the build-time table generator, in tests and at run
// time (at compile time a failed check is a compile error). Vectors are
// built with an explicit fill value, `v(n, 0)`: clang 14 cannot evaluate
// libstdc++'s value-initialising `v(n)` in a constant expression.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "cpx/core/error.hpp"

namespace cpx::router {

/// Token ids are stored as int32 in routing tables (TokenRouting), so the vocabulary is capped there.
inline constexpr std::size_t max_routing_vocab = static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max());

namespace detail {

constexpr void check_routing_shape(const char* who, std::size_t vocab, int experts, std::size_t table_size) {
    if (experts < 1) raise<InputError>(who, ": the expert count must be at least 1, got ", experts);
    if (vocab == 0) raise<InputError>(who, ": the vocabulary is empty");
    if (vocab > max_routing_vocab)
        raise<InputError>(who, ": vocabulary of ", vocab, " ids exceeds the int32 table limit ", max_routing_vocab);
    if (table_size != vocab)
        raise<ShapeError>(who, ": the output table has ", table_size, " entries but the vocabulary has ", vocab);
}

/// Sum of the counts; every partial load is bounded by it, so it must fit in 64 bits.
constexpr std::uint64_t checked_total(const char* who, std::span<const std::uint64_t> counts) {
    std::uint64_t total = 0;
    for (std::size_t t = 0; t < counts.size(); ++t) {
        if (counts[t] > std::numeric_limits<std::uint64_t>::max() - total)
            raise<InputError>(who, ": the counts sum past 2^64 at token ", t);
        total += counts[t];
    }
    return total;
}

}  // namespace detail

/// Token ids sorted by decreasing count, equal counts by increasing id. The
/// order is total, so the result is unique (the authors sort with a
/// non-stable torch.argsort instead, which leaves equal counts in an
/// implementation-defined order: docs/MODELS.md §9.2).
constexpr void frequency_order(std::span<const std::uint64_t> counts, std::span<std::int32_t> order) {
    detail::check_routing_shape("frequency_order", counts.size(), 1, order.size());
    for (std::size_t t = 0; t < order.size(); ++t) order[t] = static_cast<std::int32_t>(t);
    std::sort(order.begin(), order.end(), [counts](std::int32_t a, std::int32_t b) {
        return counts[static_cast<std::size_t>(a)] != counts[static_cast<std::size_t>(b)]
                   ? counts[static_cast<std::size_t>(a)] > counts[static_cast<std::size_t>(b)]
                   : a < b;
    });
}

constexpr std::vector<std::int32_t> frequency_order(std::span<const std::uint64_t> counts) {
    std::vector<std::int32_t> order(counts.size(), 0);
    frequency_order(counts, order);
    return order;
}

}  // namespace cpx::router

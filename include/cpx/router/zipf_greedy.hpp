#pragma once
// Zipf greedy bin-packing, the routing COMPLEXITY-DEEP trains with (docs/MODELS.md
// §9.1; paper section 6.3, eq. 35): visit token ids by decreasing count
// and give each to the expert whose total count ("load") is smallest so far.
//
// Deterministic order: decreasing count, equal counts by increasing token id;
// the least-loaded expert with ties to the lowest expert index (as Python's
// min() in the authors' code). Loads are exact 64-bit integer sums.
//
// This reproduces the authors' algorithm except for one thing: they order
// tokens with a non-stable torch.argsort, so among equal non-zero counts
// their visiting order is implementation-defined and their map cannot be
// regenerated. A checkpoint's routing must be read from its
// `token_to_expert` buffer, never recomputed with this function.
//
// What it guarantees: max load - min load <= the largest count (each step
// raises only the smallest load, by at most that much). What it does not:
// equal token counts per expert; all zero-count tokens go to one expert,
// the lightest when they are reached (docs/MODELS.md §9.2).

#include <cstdint>
#include <span>
#include <vector>

#include "cpx/router/frequency_order.hpp"

namespace cpx::router {

constexpr void zipf_greedy_routing(std::span<const std::uint64_t> counts, int experts,
                                   std::span<std::int32_t> token_to_expert) {
    detail::check_routing_shape("zipf greedy routing", counts.size(), experts, token_to_expert.size());
    detail::checked_total("zipf greedy routing", counts);
    const std::vector<std::int32_t> order = frequency_order(counts);
    std::vector<std::uint64_t> load(static_cast<std::size_t>(experts), 0);
    for (const std::int32_t token : order) {
        std::size_t best = 0;
        for (std::size_t e = 1; e < load.size(); ++e)
            if (load[e] < load[best]) best = e;  // strict: ties stay with the lowest index
        token_to_expert[static_cast<std::size_t>(token)] = static_cast<std::int32_t>(best);
        load[best] += counts[static_cast<std::size_t>(token)];
    }
}

constexpr std::vector<std::int32_t> zipf_greedy_routing(std::span<const std::uint64_t> counts, int experts) {
    std::vector<std::int32_t> table(counts.size(), 0);
    zipf_greedy_routing(counts, experts, table);
    return table;
}

}  // namespace cpx::router

#pragma once
// How evenly a routing table spreads token ids and frequency mass over the
// experts. constexpr, so a generated table's compile-time checks and the
// report tool compute the figures with the same code.
//
// load of an expert = sum of the counts of its token ids (the "frequency
// load" F_i of Theorem 4.2); figures are exact integers except the ratios.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "cpx/router/frequency_order.hpp"

namespace cpx::router {

/// The figures the compile-time checks need, without per-expert storage (a literal type).
struct BalanceSummary {
    std::size_t vocab = 0;
    int experts = 0;
    std::size_t unrouted = 0;       ///< ids whose entry is outside [0, experts)
    std::size_t min_tokens = 0, max_tokens = 0;
    std::uint64_t min_load = 0, max_load = 0;
    std::uint64_t total_load = 0;
    std::uint64_t largest_count = 0;  ///< f_max, the bound of Theorem 4.2

    constexpr std::uint64_t load_spread() const { return max_load - min_load; }
    /// max load / min load; 1 when every load is 0, +inf when only the smallest is 0.
    constexpr double load_ratio() const {
        if (max_load == 0) return 1.0;
        if (min_load == 0) return std::numeric_limits<double>::infinity();
        return static_cast<double>(max_load) / static_cast<double>(min_load);
    }
    /// max load / mean load (1 when every load is 0).
    constexpr double max_over_mean() const {
        if (total_load == 0) return 1.0;
        return static_cast<double>(max_load) * static_cast<double>(experts) / static_cast<double>(total_load);
    }
    /// Every expert holds floor(V/n) or ceil(V/n) ids (the counts sum to V, so this is max - min <= 1).
    constexpr bool counts_balanced() const { return unrouted == 0 && max_tokens - min_tokens <= 1; }
    /// max load - min load <= the largest single count (Theorem 4.2, eq. 16).
    constexpr bool within_load_bound() const { return unrouted == 0 && load_spread() <= largest_count; }
};

struct BalanceReport {
    std::vector<std::size_t> tokens;   ///< ids per expert
    std::vector<std::uint64_t> loads;  ///< frequency mass per expert
    BalanceSummary summary;
};

/// Report of `token_to_expert` under `counts` (same length). Entries outside
/// [0, experts) are counted as unrouted rather than rejected, so a check can
/// report them; the report is then computed over the routed ids only.
constexpr BalanceReport balance_report(std::span<const std::uint64_t> counts,
                                       std::span<const std::int32_t> token_to_expert, int experts) {
    if (experts < 1) raise<InputError>("balance report: the expert count must be at least 1, got ", experts);
    if (counts.size() != token_to_expert.size())
        raise<ShapeError>("balance report: ", counts.size(), " counts but ", token_to_expert.size(), " table entries");
    const std::size_t n = static_cast<std::size_t>(experts);
    BalanceReport report{std::vector<std::size_t>(n, 0), std::vector<std::uint64_t>(n, 0), {}};
    BalanceSummary& s = report.summary;
    s.vocab = counts.size();
    s.experts = experts;
    // One pass over raw pointers: in a constant expression every checked
    // operator[] costs evaluation steps, and the generated check of a
    // V = 131072 table must stay within the compilers' default limits.
    const std::uint64_t* count = counts.data();
    const std::int32_t* expert = token_to_expert.data();
    std::size_t* tokens = report.tokens.data();
    std::uint64_t* loads = report.loads.data();
    constexpr std::uint64_t max_total = std::numeric_limits<std::uint64_t>::max();
    std::uint64_t total = 0, largest = 0;
    std::size_t unrouted = 0;
    for (std::size_t t = 0, v = counts.size(); t < v; ++t) {
        const std::uint64_t c = count[t];
        if (c > max_total - total)
            raise<InputError>("balance report: the counts sum past 2^64 at token ", t);
        total += c;
        if (c > largest) largest = c;
        const std::int32_t e = expert[t];
        if (e < 0 || e >= experts) {
            ++unrouted;
            continue;
        }
        ++tokens[e];
        loads[e] += c;
    }
    s.total_load = total;
    s.largest_count = largest;
    s.unrouted = unrouted;
    s.min_tokens = s.max_tokens = report.tokens[0];
    s.min_load = s.max_load = report.loads[0];
    for (std::size_t e = 1; e < n; ++e) {
        s.min_tokens = std::min(s.min_tokens, report.tokens[e]);
        s.max_tokens = std::max(s.max_tokens, report.tokens[e]);
        s.min_load = std::min(s.min_load, report.loads[e]);
        s.max_load = std::max(s.max_load, report.loads[e]);
    }
    return report;
}

constexpr BalanceSummary balance_summary(std::span<const std::uint64_t> counts,
                                         std::span<const std::int32_t> token_to_expert, int experts) {
    return balance_report(counts, token_to_expert, experts).summary;
}

/// Reports of each route of a [top_k, V] table (route r at r * V): with top-k
/// routing every route carries one weighted copy of each token, so each must
/// be balanced on its own. The cyclic extension of a table (route r =
/// (primary + r) mod n) relabels the experts of the primary, so every route
/// has the primary's figures.
constexpr std::vector<BalanceReport> route_balance_reports(std::span<const std::uint64_t> counts,
                                                          std::span<const std::int32_t> routes, int top_k,
                                                          int experts) {
    if (top_k < 1 || routes.size() != counts.size() * static_cast<std::size_t>(top_k))
        raise<ShapeError>("balance report: ", routes.size(), " route entries for ", top_k, " routes of ", counts.size(),
                          " token ids");
    std::vector<BalanceReport> out;
    for (int r = 0; r < top_k; ++r)
        out.push_back(balance_report(counts, routes.subspan(static_cast<std::size_t>(r) * counts.size(), counts.size()),
                                     experts));
    return out;
}

}  // namespace cpx::router

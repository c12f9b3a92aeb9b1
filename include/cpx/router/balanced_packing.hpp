#pragma once
// Balanced Zipf bin-packing: the routing the paper's Theorem 4.2 describes
// but the authors' greedy does not deliver (docs/MODELS.md §9.2 and §21.1). Each
// expert gets exactly floor(V/n) or ceil(V/n) token ids AND the frequency
// loads differ by at most the largest single count.
//
// Algorithm, two phases:
// 1. count_capped_greedy. V ids, n experts, q = floor(V/n), r = V mod n.
//    Visit ids in frequency_order (decreasing count, ties by increasing id).
//    An expert holding c ids is *open* if c < q, or c == q and fewer than r
//    experts hold q + 1. Give the id to the open expert with the smallest
//    load, ties to the lowest index. Until the first expert fills up this is
//    exactly zipf_greedy_routing; the caps act only in the tail.
// 2. refine_balance_by_swaps. Let m be the lightest expert (lowest index on
//    ties). Take the heaviest expert M (decreasing load, ties to the lowest
//    index) that holds an id a and m an id b with 0 < f(a) - f(b) < L_M - L_m,
//    choose the pair making |(L_M - L_m) - 2 (f(a) - f(b))| smallest (first
//    found in increasing (count, id) order), swap them, repeat; stop when no
//    expert has such a pair, or after 64 n swaps. Without it the caps can
//    force the last tail ids onto one expert (max/min 1.0001 on a plain Zipf
//    table, alpha 1, V 32000, n 4); with it such tables reach max - min <= 1.
//
// Proof that phase 1 balances counts. While ids remain, some expert is open:
// if none were, every expert would hold >= q ids and either r of them hold
// q + 1 (n*q + r = V ids already placed) or all hold q + 1 (more than V). An
// expert only gains ids while open, so none exceeds q + 1 and at most r reach
// it; the counts sum to V = n*q + r, so exactly r experts hold q + 1 and the
// rest q. Zero-count ids therefore spread over all experts instead of piling up.
//
// Proof that phase 1 keeps the load bound max_e L_e - min_e L_e <= f_max.
// Take M with the largest final load, m with the smallest, f(x) the count of
// id x. Being closed is permanent (counts and the number of experts at q + 1
// only grow). If M gets no id, L_M = 0 <= L_m. Otherwise let y be M's last id.
// Case A, m open when y is placed: M was then the lightest open expert, so
//   L_M - f(y) <= L_m at that moment <= final L_m.
// Case B, m closed when y is placed. Let rho be the step after which m is
// closed. (i) Every id M gets after rho counts no more than any id of m
// (visiting order is by decreasing count). (ii) c_M <= c_m: if m closed at
// q + 1 nobody holds more; if it closed at q, r experts already held q + 1,
// so later-open experts stop at q. Let D(s) = c_m(s) - c_M(s) after step s,
// D = 0 at the start. Let s* be the start if D >= 0 throughout [start, rho];
// otherwise the last step <= rho at which M received an id x and D fell to
// its minimum over [start, rho] (D only falls at M's steps). Then
// D(s) >= D(s*) for s in [s*, rho], and D(end) = c_m - c_M >= 0 >= D(s*).
// At s* (if not the start) m was open, so L_M <= L_m just before it, and
//   L_M - L_m <= f(x) + sum(M's ids after s*) - sum(m's ids after s*).
// Pair M's k-th id after s* with m's k-th id after s*: if M's was placed by
// rho, D(s) >= D(s*) says m had already received its k-th, which therefore
// counts at least as much; if after rho, m's k-th exists (D(end) >= D(s*))
// and counts at least as much by (i). So the sums cancel in m's favour and
// L_M - L_m <= f(x) <= f_max (or <= 0 when s* is the start).
//
// Phase 2 keeps both guarantees: a swap trades one id for one id (counts
// unchanged) and moves d = f(a) - f(b), 0 < d < L_M - L_m, from M to m, so
// both new loads lie strictly between L_m (the global minimum) and L_M (at
// most the global maximum): the minimum cannot fall, the maximum cannot rise.
// The sum of squared loads strictly falls with each swap, so it terminates
// even without the 64 n cap (which only bounds the work: each best swap
// typically halves a gap of at most 2^64). QED.
//
// Both proofs are also checked on many tables by tests/unit/test_router_*.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cpx/router/frequency_order.hpp"

namespace cpx::router {

/// Phase 1: greedy packing with each expert capped at floor/ceil(V/n) ids.
constexpr void count_capped_greedy(std::span<const std::uint64_t> counts, int experts,
                                   std::span<std::int32_t> token_to_expert) {
    detail::check_routing_shape("count-capped greedy", counts.size(), experts, token_to_expert.size());
    detail::checked_total("count-capped greedy", counts);
    const std::size_t n = static_cast<std::size_t>(experts);
    const std::size_t q = counts.size() / n, r = counts.size() % n;
    const std::vector<std::int32_t> order = frequency_order(counts);
    std::vector<std::uint64_t> load(n, 0);
    std::vector<std::size_t> held(n, 0);
    std::size_t at_ceiling = 0;  // experts holding q + 1 ids
    for (const std::int32_t token : order) {
        std::size_t best = n;
        for (std::size_t e = 0; e < n; ++e) {
            const bool open = held[e] < q || (held[e] == q && at_ceiling < r);
            if (open && (best == n || load[e] < load[best])) best = e;
        }
        if (held[best] == q) ++at_ceiling;
        ++held[best];
        load[best] += counts[static_cast<std::size_t>(token)];
        token_to_expert[static_cast<std::size_t>(token)] = static_cast<std::int32_t>(best);
    }
}

/// Phase 2: one-for-one swaps from heavier experts to the lightest while they
/// narrow the gap. Applies to any valid table: counts per expert never change
/// and max load - min load never grows.
constexpr void refine_balance_by_swaps(std::span<const std::uint64_t> counts, int experts,
                                       std::span<std::int32_t> token_to_expert) {
    detail::check_routing_shape("swap refinement", counts.size(), experts, token_to_expert.size());
    detail::checked_total("swap refinement", counts);
    const std::size_t n = static_cast<std::size_t>(experts);
    struct Item {
        std::uint64_t count;
        std::int32_t id;
        constexpr bool operator<(const Item& o) const { return count != o.count ? count < o.count : id < o.id; }
    };
    std::vector<std::vector<Item>> ids(n, std::vector<Item>{});  // each expert's ids by increasing (count, id)
    std::vector<std::uint64_t> load(n, 0);
    for (std::size_t t = 0; t < counts.size(); ++t) {
        const std::int32_t e = token_to_expert[t];
        if (e < 0 || static_cast<std::size_t>(e) >= n)
            raise<InputError>("swap refinement: token ", t, " maps to expert ", e, ", outside [0, ", n, ")");
        ids[static_cast<std::size_t>(e)].push_back({counts[t], static_cast<std::int32_t>(t)});
        load[static_cast<std::size_t>(e)] += counts[t];
    }
    for (auto& list : ids) std::sort(list.begin(), list.end());

    std::vector<std::size_t> by_load(n, 0);
    for (std::size_t swaps = 0; swaps < 64 * n; ++swaps) {
        for (std::size_t e = 0; e < n; ++e) by_load[e] = e;
        std::sort(by_load.begin(), by_load.end(), [&](std::size_t a, std::size_t b) {
            return load[a] != load[b] ? load[a] > load[b] : a < b;
        });
        std::size_t light = 0;
        for (std::size_t e = 1; e < n; ++e)
            if (load[e] < load[light]) light = e;
        bool swapped = false;
        for (const std::size_t heavy : by_load) {
            if (heavy == light || load[heavy] - load[light] < 2) break;  // d must lie strictly inside the gap
            const std::uint64_t gap = load[heavy] - load[light], half = gap / 2;
            const std::vector<Item>& A = ids[heavy];
            const std::vector<Item>& B = ids[light];
            std::uint64_t best_score = gap;
            std::size_t best_a = 0, best_b = 0;
            for (std::size_t i = 0; i < A.size() && best_score > 1; ++i) {
                // Moving d = f(a) - f(b): the best b has f(b) near f(a) - gap/2.
                const std::uint64_t target = A[i].count > half ? A[i].count - half : 0;
                const std::size_t at = static_cast<std::size_t>(
                    std::lower_bound(B.begin(), B.end(), Item{target, -1}) - B.begin());
                for (std::size_t j = at == 0 ? 0 : at - 1; j <= at && j < B.size(); ++j) {
                    if (B[j].count >= A[i].count || A[i].count - B[j].count >= gap) continue;
                    const std::uint64_t d = A[i].count - B[j].count, rest = gap - d;
                    const std::uint64_t score = rest > d ? rest - d : d - rest;  // |gap - 2d| without overflow
                    if (score < best_score) { best_score = score; best_a = i; best_b = j; }
                }
            }
            if (best_score == gap) continue;  // no pair narrows this gap; try the next heaviest expert
            const Item a = A[best_a], b = B[best_b];
            ids[heavy].erase(ids[heavy].begin() + static_cast<std::ptrdiff_t>(best_a));
            ids[light].erase(ids[light].begin() + static_cast<std::ptrdiff_t>(best_b));
            ids[heavy].insert(std::lower_bound(ids[heavy].begin(), ids[heavy].end(), b), b);
            ids[light].insert(std::lower_bound(ids[light].begin(), ids[light].end(), a), a);
            load[heavy] = load[heavy] - a.count + b.count;
            load[light] = load[light] - b.count + a.count;
            token_to_expert[static_cast<std::size_t>(a.id)] = static_cast<std::int32_t>(light);
            token_to_expert[static_cast<std::size_t>(b.id)] = static_cast<std::int32_t>(heavy);
            swapped = true;
            break;
        }
        if (!swapped) return;
    }
}

/// Both phases: floor/ceil(V/n) ids per expert and max - min load <= f_max.
constexpr void balanced_zipf_routing(std::span<const std::uint64_t> counts, int experts,
                                     std::span<std::int32_t> token_to_expert) {
    detail::check_routing_shape("balanced zipf routing", counts.size(), experts, token_to_expert.size());
    detail::checked_total("balanced zipf routing", counts);
    count_capped_greedy(counts, experts, token_to_expert);
    refine_balance_by_swaps(counts, experts, token_to_expert);
}

constexpr std::vector<std::int32_t> balanced_zipf_routing(std::span<const std::uint64_t> counts, int experts) {
    std::vector<std::int32_t> table(counts.size(), 0);
    balanced_zipf_routing(counts, experts, table);
    return table;
}

}  // namespace cpx::router

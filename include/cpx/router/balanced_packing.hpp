#pragma once
// Balanced Zipf bin-packing: the routing the paper's Theorem 4.2 describes
// but the authors' greedy does not deliver (spec sections 7 and 13). Each
// expert gets exactly floor(V/n) or ceil(V/n) token ids AND the frequency
// loads differ by at most the largest single count.
//
// Algorithm (count-capped greedy). V ids, n experts, q = floor(V/n),
// r = V mod n. Visit ids in frequency_order (decreasing count, ties by
// increasing id). An expert holding c ids is *open* if c < q, or c == q and
// fewer than r experts hold q + 1. Give the id to the open expert with the
// smallest load, ties to the lowest index. Until the first expert fills up
// this is exactly zipf_greedy_routing; the caps only act in the tail.
//
// Proof of the count guarantee. While ids remain, some expert is open: if
// none were, every expert would hold >= q ids and either r of them hold q + 1
// (n*q + r = V ids already placed) or all hold q + 1 (more than V). An expert
// only gains ids while open, so none exceeds q + 1 and at most r reach it;
// the counts sum to V = n*q + r, so exactly r experts hold q + 1 and the rest
// q. Zero-count ids therefore spread over all experts instead of piling up.
//
// Proof of the load bound, max_e L_e - min_e L_e <= f_max. Take M with the
// largest final load, m with the smallest, f(x) the count of id x. Being
// closed is permanent (counts and the number of experts at q + 1 only grow).
// If M gets no id, L_M = 0 <= L_m. Otherwise let y be M's last id.
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
// L_M - L_m <= f(x) <= f_max (or <= 0 when s* is the start). QED.
//
// Both proofs are also checked on many tables by tests/unit/test_router_*.

#include <cstdint>
#include <span>
#include <vector>

#include "cpx/router/frequency_order.hpp"

namespace cpx::router {

constexpr void balanced_zipf_routing(std::span<const std::uint64_t> counts, int experts,
                                     std::span<std::int32_t> token_to_expert) {
    detail::check_routing_shape("balanced zipf routing", counts.size(), experts, token_to_expert.size());
    detail::checked_total("balanced zipf routing", counts);
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

constexpr std::vector<std::int32_t> balanced_zipf_routing(std::span<const std::uint64_t> counts, int experts) {
    std::vector<std::int32_t> table(counts.size());
    balanced_zipf_routing(counts, experts, table);
    return table;
}

}  // namespace cpx::router

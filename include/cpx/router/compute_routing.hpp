#pragma once
// One entry point over the four routers, for tools and generated tables that
// choose the algorithm by name.

#include <cstdint>
#include <span>
#include <vector>

#include "cpx/router/balanced_packing.hpp"
#include "cpx/router/contiguous_routing.hpp"
#include "cpx/router/modulo_routing.hpp"
#include "cpx/router/routing_algorithm.hpp"
#include "cpx/router/zipf_greedy.hpp"

namespace cpx::router {

/// Fills token_to_expert (counts.size() entries) with `algorithm`'s routing.
/// Modulo and contiguous routing read only the vocabulary size from counts.
constexpr void compute_routing(RoutingAlgorithm algorithm, std::span<const std::uint64_t> counts, int experts,
                               std::span<std::int32_t> token_to_expert) {
    detail::check_routing_shape("compute_routing", counts.size(), experts, token_to_expert.size());
    switch (algorithm) {
        case RoutingAlgorithm::greedy: zipf_greedy_routing(counts, experts, token_to_expert); return;
        case RoutingAlgorithm::balanced: balanced_zipf_routing(counts, experts, token_to_expert); return;
        case RoutingAlgorithm::modulo: modulo_routing(experts, token_to_expert); return;
        case RoutingAlgorithm::contiguous: contiguous_routing(experts, token_to_expert); return;
    }
    raise<InputError>("compute_routing: unknown routing algorithm ", static_cast<int>(algorithm));
}

constexpr std::vector<std::int32_t> compute_routing(RoutingAlgorithm algorithm, std::span<const std::uint64_t> counts,
                                                    int experts) {
    std::vector<std::int32_t> table(counts.size(), 0);
    compute_routing(algorithm, counts, experts, table);
    return table;
}

}  // namespace cpx::router

#pragma once
// The four ways a token id can be assigned to an expert, by name, so tools,
// generated headers and the CMake function all speak of them the same way.

#include <array>
#include <optional>
#include <string_view>

namespace cpx::router {

enum class RoutingAlgorithm {
    greedy,      ///< Zipf greedy bin-packing as the authors code it (docs/MODELS.md §9.1): balances frequency mass only.
    balanced,    ///< Count-capped greedy: floor/ceil(V/n) ids per expert and the Theorem 4.2 load bound.
    modulo,      ///< expert = t mod n (the pilot paper; also the authors' fallback without frequencies).
    contiguous,  ///< Contiguous id ranges of floor/ceil(V/n) ids (the earliest README).
};

inline constexpr std::array<RoutingAlgorithm, 4> all_routing_algorithms{
    RoutingAlgorithm::greedy, RoutingAlgorithm::balanced, RoutingAlgorithm::modulo, RoutingAlgorithm::contiguous};

constexpr std::string_view name_of(RoutingAlgorithm a) {
    switch (a) {
        case RoutingAlgorithm::greedy: return "greedy";
        case RoutingAlgorithm::balanced: return "balanced";
        case RoutingAlgorithm::modulo: return "modulo";
        case RoutingAlgorithm::contiguous: return "contiguous";
    }
    return "unknown";
}

/// The algorithm with that name, or nothing.
constexpr std::optional<RoutingAlgorithm> routing_algorithm_named(std::string_view name) {
    for (RoutingAlgorithm a : all_routing_algorithms)
        if (name_of(a) == name) return a;
    return std::nullopt;
}

/// Whether the algorithm needs a frequency table (modulo and contiguous do not).
constexpr bool uses_frequencies(RoutingAlgorithm a) {
    return a == RoutingAlgorithm::greedy || a == RoutingAlgorithm::balanced;
}

/// Whether every expert is guaranteed floor(V/n) or ceil(V/n) token ids.
constexpr bool guarantees_count_balance(RoutingAlgorithm a) { return a != RoutingAlgorithm::greedy; }

/// Whether max load - min load <= the largest single count is guaranteed (Theorem 4.2's bound).
constexpr bool guarantees_load_bound(RoutingAlgorithm a) { return uses_frequencies(a); }

}  // namespace cpx::router

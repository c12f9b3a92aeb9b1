#pragma once
// Modulo routing, expert(t) = t mod n: the pilot paper's router (eq. 1) and
// the authors' fallback when no frequencies are given (docs/MODELS.md §9.1).
// Token counts are floor(V/n) or ceil(V/n) (pilot Theorem 4.1); frequency
// mass is not balanced at all.

#include <cstdint>
#include <span>
#include <vector>

#include "cpx/router/frequency_order.hpp"

namespace cpx::router {

constexpr void modulo_routing(int experts, std::span<std::int32_t> token_to_expert) {
    detail::check_routing_shape("modulo routing", token_to_expert.size(), experts, token_to_expert.size());
    for (std::size_t t = 0; t < token_to_expert.size(); ++t)
        token_to_expert[t] = static_cast<std::int32_t>(t % static_cast<std::size_t>(experts));
}

constexpr std::vector<std::int32_t> modulo_routing(std::size_t vocab, int experts) {
    std::vector<std::int32_t> table(vocab, 0);
    modulo_routing(experts, table);
    return table;
}

}  // namespace cpx::router

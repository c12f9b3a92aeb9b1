#pragma once
// Contiguous-range routing, the earliest README's router ("token ids 0-25K ->
// expert 0, 25K-50K -> expert 1, ..."): expert e owns one block of
// consecutive ids. With q = floor(V/n), r = V mod n, the first r experts own
// q + 1 ids and the others q, so counts are floor/ceil(V/n); frequency mass
// is not balanced (with frequency-ranked ids expert 0 gets the frequent ones).

#include <cstdint>
#include <span>
#include <vector>

#include "cpx/router/frequency_order.hpp"

namespace cpx::router {

constexpr void contiguous_routing(int experts, std::span<std::int32_t> token_to_expert) {
    detail::check_routing_shape("contiguous routing", token_to_expert.size(), experts, token_to_expert.size());
    const std::size_t n = static_cast<std::size_t>(experts);
    const std::size_t q = token_to_expert.size() / n, r = token_to_expert.size() % n;
    std::size_t t = 0;
    for (std::size_t e = 0; e < n; ++e)
        for (std::size_t k = 0; k < q + (e < r ? 1 : 0); ++k) token_to_expert[t++] = static_cast<std::int32_t>(e);
}

constexpr std::vector<std::int32_t> contiguous_routing(std::size_t vocab, int experts) {
    std::vector<std::int32_t> table(vocab, 0);
    contiguous_routing(experts, table);
    return table;
}

}  // namespace cpx::router

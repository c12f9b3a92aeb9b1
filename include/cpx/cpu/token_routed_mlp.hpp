#pragma once
// COMPLEXITY-DEEP's token-routed MLP (docs/MODELS.md §8):
//   MLP(x_n) = Expert_{e(t_n)}(x_n) + Shared(x_n),   e(t) = token_to_expert[t]
// with t_n the input token id at the same position; one expert per token,
// no gates, no scales, no capacity limit. Dispatch is sparse (expert_dispatch.hpp).

#include <cstdint>
#include <span>
#include <vector>

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/expert_dispatch.hpp"
#include "cpx/cpu/swiglu_mlp.hpp"
#include "cpx/router/token_routing.hpp"

namespace cpx::cpu {

/// Non-owning weights of one token-routed MLP.
template <ComplexityConfigType C, class W>
struct TokenRoutedMlpWeights {
    ExpertWeights<W> experts;  ///< E experts of width C::expert_width
    SwiGluWeights<W> shared;   ///< the shared expert (used when C::has_shared_expert)
};

template <ComplexityConfigType C, class W>
class TokenRoutedMlp {
    static_assert(C::mlp == MlpKind::token_routed, "TokenRoutedMlp needs a token_routed configuration");

public:
    void reserve(index_t rows) {
        dispatch_.reserve(rows, C::hidden, C::expert_width, C::experts);
        if constexpr (C::has_shared_expert) grow(shared_hidden_, static_cast<std::size_t>(rows * 2 * C::shared_width));
        expert_.reserve(static_cast<std::size_t>(rows));
    }

    /// residual += MLP(x) for rows whose input token ids are `tokens`.
    /// Rows per expert are added to `counts` ([experts]) when given.
    void forward(const TokenRoutedMlpWeights<C, W>& w, const RowBlock<const float>& x,
                 std::span<const std::int64_t> tokens, const TokenRouting& routing, const RowBlock<float>& residual,
                 std::span<index_t> counts = {}) {
        require<ShapeError>(static_cast<index_t>(tokens.size()) == x.rows, "token-routed MLP: ", tokens.size(),
                            " token ids for ", x.rows, " rows");
        require<ShapeError>(routing.experts() == C::experts, "token-routed MLP: the routing table has ",
                            routing.experts(), " experts, the configuration ", C::experts);
        expert_.resize(tokens.size());
        for (std::size_t r = 0; r < tokens.size(); ++r) expert_[r] = routing.checked_expert_of(tokens[r]);
        if constexpr (C::has_shared_expert) swiglu_block<W>(w.shared, x, residual, shared_hidden_, scratch_);
        dispatch_.forward(w.experts, x, expert_, {}, residual, counts);
    }

private:
    ExpertDispatch<W> dispatch_;
    AlignedVector<float> shared_hidden_;
    std::vector<std::int32_t> expert_;
    LinearScratch scratch_;
};

}  // namespace cpx::cpu

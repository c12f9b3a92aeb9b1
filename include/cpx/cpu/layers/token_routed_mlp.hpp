#pragma once
// COMPLEXITY-DEEP's token-routed MLP (docs/MODELS.md §8):
//   MLP(x_n) = g_r * sum_j w_j Expert_{route_j(t_n)}(x_n) + g_s * Shared(x_n)
// with t_n the input token id at the same position, route_j a [top_k, V]
// table lookup and the factors of math/route_mix.hpp (route weights, output
// scales or learned gates), shared with the GPU layer. The paper's
// model is top_k = 1 with unit scales: Expert_{e(t)}(x) + Shared(x). No
// capacity limit; dispatch is sparse (expert_dispatch.hpp): top_k experts per
// token, never E.

#include <cstdint>
#include <span>
#include <vector>

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/layers/expert_dispatch.hpp"
#include "cpx/cpu/layers/shared_expert.hpp"
#include "cpx/math/route_mix.hpp"
#include "cpx/router/top_k_routing.hpp"

namespace cpx::cpu {

/// Non-owning weights of one token-routed MLP.
template <ComplexityConfigType C, class W>
struct TokenRoutedMlpWeights {
    ExpertWeights<W> experts;  ///< E experts of width C::expert_width
    SwiGluWeights<W> shared;   ///< the shared expert (used when C::has_shared_expert)
    float shared_gate = 1.0f;  ///< learned gates (used when C::learned_gates)
    float routed_gate = 1.0f;
};

template <ComplexityConfigType C, class W>
class TokenRoutedMlp {
    static_assert(C::mlp == MlpKind::token_routed, "TokenRoutedMlp needs a token_routed configuration");

public:
    void reserve(index_t rows) {
        dispatch_.reserve(rows, C::hidden, C::expert_width, C::experts, C::top_k);
        if constexpr (C::has_shared_expert) shared_.reserve(rows, C::hidden, C::shared_width);
        expert_.reserve(static_cast<std::size_t>(rows * C::top_k));
        scale_.reserve(static_cast<std::size_t>(rows * C::top_k));
    }

    /// The shared expert's and each route's factors (math/route_mix.hpp).
    static RouteMix mix(const TokenRoutedMlpWeights<C, W>& w) { return route_mix<C>(w.shared_gate, w.routed_gate); }

    /// residual += MLP(x) for rows whose input token ids are `tokens`; routing:
    /// this layer's [top_k, V] table. Routes per expert are added to `counts`
    /// ([experts]) when given.
    void forward(const TokenRoutedMlpWeights<C, W>& w, const StridedMatrix<const float, C::hidden>& x,
                 std::span<const std::int64_t> tokens, const TopKRouting& routing,
                 const StridedMatrix<float, C::hidden>& residual, std::span<index_t> counts = {}) {
        require<ShapeError>(static_cast<index_t>(tokens.size()) == x.rows, "token-routed MLP: ", tokens.size(),
                            " token ids for ", x.rows, " rows");
        require<ShapeError>(routing.experts() == C::experts && routing.top_k() == C::top_k,
                            "token-routed MLP: the routing table has ", routing.top_k(), " routes to ", routing.experts(),
                            " experts, the configuration ", C::top_k, " to ", C::experts);
        constexpr int k = C::top_k;
        expert_.resize(tokens.size() * k);
        for (std::size_t r = 0; r < tokens.size(); ++r) {
            expert_[r * k] = routing.checked_expert_of(tokens[r], 0);  // the one vocabulary check
            for (int j = 1; j < k; ++j) expert_[r * k + j] = routing.expert_of(tokens[r], j);
        }
        const RouteMix m = mix(w);
        std::span<const float> scale;
        if (!m.unit_top1(k)) {
            scale_.resize(expert_.size());
            for (std::size_t p = 0; p < scale_.size(); ++p) scale_[p] = m.route(static_cast<int>(p % k));
            scale = scale_;
        }
        if constexpr (C::has_shared_expert)
            experts_and_shared<W>(dispatch_, w.experts, w.shared, x, k, expert_, scale, residual, counts, shared_,
                                  m.shared);
        else
            dispatch_.forward(w.experts, x, k, expert_, scale, residual, counts);
    }

private:
    ExpertDispatch<W> dispatch_;
    SharedExpertScratch shared_;
    std::vector<std::int32_t> expert_;
    std::vector<float> scale_;
};

}  // namespace cpx::cpu

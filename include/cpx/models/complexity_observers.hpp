#pragma once
// Observers a user attaches to a model to check the paper's claims while it
// runs: how many tokens each expert received in each layer, and how much of
// each of Q, K and V comes from mu (cpu::MuContribution).

#include <array>

#include "cpx/config/complexity_config.hpp"
#include "cpx/cpu/mu_gqa_attention.hpp"

namespace cpx {

/// Tokens routed to each expert of each layer, accumulated over calls.
template <ComplexityConfigType C>
struct ExpertLoad {
    std::array<std::array<index_t, C::experts>, C::layers> tokens{};
    void reset() { tokens = {}; }
};

/// Per layer, the mu share of the q, k and v projections, accumulated over calls.
template <ComplexityConfigType C>
struct MuContributions {
    std::array<cpu::MuContribution, C::layers> layers{};
    void reset() { layers = {}; }
};

}  // namespace cpx

#pragma once
// The CPU layers' non-owning views (the cpu::*Weights types) of the
// COMPLEXITY-DEEP layer parameters (models/complexity/layer_params.hpp), which
// hold the tensors for both backends and know nothing of Eigen. `cpu_view(p)`
// is found by argument-dependent lookup, so ComplexityWeights' per-layer
// accessors (attention(i), token_routed_mlp(i), ...) work wherever this
// header is included; the CPU model includes it.

#include "cpx/cpu/layers/expert_dispatch.hpp"
#include "cpx/cpu/layers/learned_router_mlp.hpp"
#include "cpx/cpu/layers/mu_gqa_attention.hpp"
#include "cpx/cpu/layers/mu_guidance.hpp"
#include "cpx/cpu/layers/prism_attention.hpp"
#include "cpx/cpu/layers/swiglu_mlp.hpp"
#include "cpx/cpu/layers/token_routed_mlp.hpp"
#include "cpx/models/complexity/layer_params.hpp"

namespace cpx {

template <ComplexityConfigType C, class W>
cpu::MuGqaAttentionWeights<C, W> cpu_view(const MuGqaAttentionParams<C, W>& p) {
    using P = MuGqaAttentionParams<C, W>;
    static_assert(P::input_width == cpu::MuGqaAttentionWeights<C, W>::input_width &&
                  P::qkv_width == cpu::MuGqaAttentionWeights<C, W>::qkv_width);
    return {cpu::rows_of<P::input_width, const W>(p.qkv.data(), P::qkv_width),
            cpu::rows_of<C::q_width, const W>(p.o_proj.data(), C::hidden), p.q_norm.data(), p.k_norm.data()};
}

template <ComplexityConfigType C, class W>
cpu::PrismAttentionWeights<W> cpu_view(const PrismAttentionParams<C, W>& p) {
    return {Matrix<const W>(p.u.data(), PrismAttentionParams<C, W>::u_rows, C::hidden), p.lambda};
}

/// The routed experts of a token-routed or learned-router MLP.
template <ComplexityConfigType C, class W>
cpu::ExpertWeights<W> cpu_experts_view(const RoutedExpertParams<C, W>& p) {
    return {p.gate_up.data(), p.down.data(), C::experts, C::hidden, C::expert_width};
}

/// The shared expert of a routed MLP (empty without one).
template <ComplexityConfigType C, class W>
cpu::SwiGluWeights<W> cpu_shared_expert_view(const RoutedExpertParams<C, W>& p) {
    if constexpr (!C::has_shared_expert) return {};
    else
        return {cpu::rows_of<const W>(p.shared_gate_up.data(), 2 * C::shared_width, C::hidden),
                cpu::rows_of<const W>(p.shared_down.data(), C::hidden, C::shared_width)};
}

template <ComplexityConfigType C, class W>
cpu::TokenRoutedMlpWeights<C, W> cpu_view(const TokenRoutedMlpParams<C, W>& p) {
    if constexpr (C::learned_gates)
        return {cpu_experts_view(p), cpu_shared_expert_view(p), p.shared_output_gate, p.routed_output_gate};
    else
        return {cpu_experts_view(p), cpu_shared_expert_view(p)};
}

template <ComplexityConfigType C, class W>
cpu::LearnedRouterMlpWeights<C, W> cpu_view(const LearnedRouterMlpParams<C, W>& p) {
    return {cpu::rows_of<C::hidden, const W>(p.router.data(), C::experts), cpu_experts_view(p),
            cpu_shared_expert_view(p)};
}

template <ComplexityConfigType C, class W>
cpu::SwiGluWeights<W> cpu_view(const DenseMlpParams<C, W>& p) {
    constexpr int I = C::expert_width;
    return {cpu::rows_of<const W>(p.gate_up.data(), 2 * I, C::hidden),
            cpu::rows_of<const W>(p.down.data(), C::hidden, I)};
}

template <ComplexityConfigType C, class W>
cpu::MuGuidanceWeights<W> cpu_view(const MuGuidanceParams<C, W>& p) {
    return {p.mu.data(), cpu::rows_of<const W>(p.mu_proj.data(), C::hidden, C::hidden)};
}

}  // namespace cpx

#pragma once
// How the token-routed MLP mixes its parts (docs/MODELS.md §8.5):
//   MLP(x) = g_s * Shared(x) + sum_r m_r * Expert_{route_r(t)}(x)
//   m_0 = g_r * w_0,  m_r = g_r * (1 - w_0) / (top_k - 1) for r >= 1,
// with w_0 the primary weight and g_s, g_r the configuration's output scales or,
// with use_shared_routed_gates, the layer's learned scalar gates. The paper's
// model has top_k = 1 and unit scales: every factor is 1. Written once for the
// CPU layer and the GPU layer.

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/host_device.hpp"

namespace cpx {

/// The factors of one layer's token-routed MLP.
struct RouteMix {
    float shared = 1.0f;     ///< g_s
    float primary = 1.0f;    ///< m_0
    float secondary = 0.0f;  ///< m_r, r >= 1 (every other route has the same weight)

    CPX_HD_INLINE float route(int r) const { return r == 0 ? primary : secondary; }
    /// Whether routed outputs add onto the residual unscaled: the paper's top-1 MLP.
    constexpr bool unit_top1(int top_k) const { return top_k == 1 && primary == 1.0f; }
};

/// The mix of configuration C given a layer's learned gates (read only with C::learned_gates).
template <ComplexityConfigType C>
constexpr RouteMix route_mix(float shared_gate = 1.0f, float routed_gate = 1.0f) {
    const double gs = C::learned_gates ? static_cast<double>(shared_gate) : C::dims.shared_output_scale;
    const double gr = C::learned_gates ? static_cast<double>(routed_gate) : C::dims.routed_output_scale;
    return {static_cast<float>(gs), static_cast<float>(gr * C::primary_weight),
            static_cast<float>(gr * C::secondary_weight)};
}

}  // namespace cpx

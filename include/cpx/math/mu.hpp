#pragma once
// The arithmetic of COMPLEXITY-DEEP's mu guidance (docs/MODELS.md
// §7.1), written once for the CPU and CUDA paths:
//   mu_l    = clamp(mu_param_l, param_min, param_max) + (W_mu,l h2)   per layer
//   mu_prev = clamp(mu_l, -bound, bound)                              between layers
// The constants are the configuration's (ComplexityConfig::mu_param_min,
// mu_param_max, mu_clamp: 0, 2 and 2 in the authors' code); mu_init, the first
// layer's mu_prev, is not clamped.

#include "cpx/core/host_device.hpp"

namespace cpx {

CPX_HD_INLINE float clamp_to(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

/// The mu passed to the next layer, from this layer's parameter and its projection W_mu h2.
CPX_HD_INLINE float mu_next_layer(float mu_param, float projected, float param_min, float param_max, float bound) {
    return clamp_to(clamp_to(mu_param, param_min, param_max) + projected, -bound, bound);
}

}  // namespace cpx

#pragma once
// The exact (erf) GELU of GPT-2-style MLPs, one definition for both code paths.

#include <cmath>

#include "cpx/core/host_device.hpp"

namespace cpx {

/// GELU(x) = x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2))), PyTorch's default
/// `nn.GELU()` (not the tanh approximation). 1 + erf(z) is taken as erfc(-z): for
/// negative x, 1 + erff(z) cancels to a few significant bits (GELU(-5) ~ -1.4e-6 with
/// a 4% error), where erfcf keeps its relative accuracy.
CPX_HD_INLINE float gelu_erf(float x) { return 0.5f * x * erfcf(-x * 0.70710678118654752f); }

}  // namespace cpx

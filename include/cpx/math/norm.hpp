#pragma once
// The arithmetic of the normalisations, written once for both code paths.

#include <cmath>

#include "cpx/core/host_device.hpp"

namespace cpx {

/// RMSNorm: y = w * x / sqrt(mean(x^2) + eps). Given the sum of squares of a
/// row of n values, returns the factor 1 / sqrt(sum_sq / n + eps).
CPX_HD_INLINE float rms_inverse(float sum_sq, int n, float eps) {
    return 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
}

/// LayerNorm: y = (x - mean) / sqrt(var + eps) * w + b, with the biased variance.
CPX_HD_INLINE float layernorm_inverse_std(float variance, float eps) { return 1.0f / sqrtf(variance + eps); }

}  // namespace cpx

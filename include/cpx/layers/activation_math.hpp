#pragma once
// Activation functions, written once for the CPU and CUDA paths: SiLU and the
// SwiGLU product of COMPLEXITY-DEEP's MLPs (spec/complexity-deep.md section
// 6.3), and the exact erf GELU of PRISM's MLP (spec/prism.md section 2).

#include <cmath>

#include "cpx/core/host_device.hpp"

namespace cpx {

/// SiLU(z) = z * sigmoid(z) = z / (1 + e^-z). For z -> -inf, e^-z overflows
/// to inf and the quotient goes to -0, the correct limit.
CPX_HD_INLINE float silu(float z) { return z / (1.0f + expf(-z)); }

/// SwiGLU's elementwise product: SiLU(gate) * up.
CPX_HD_INLINE float swiglu(float gate, float up) { return silu(gate) * up; }

/// GELU with the exact error function: 0.5 z (1 + erf(z / sqrt 2)).
CPX_HD_INLINE float gelu_erf(float z) { return 0.5f * z * (1.0f + erff(z * 0.70710678118654752f)); }

}  // namespace cpx

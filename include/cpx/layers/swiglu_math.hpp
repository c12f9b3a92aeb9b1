#pragma once
// SiLU and the SwiGLU product of COMPLEXITY-DEEP's MLPs (spec/complexity-deep.md
// section 6.3), written once for the CPU and CUDA paths.

#include <cmath>

#include "cpx/core/host_device.hpp"

namespace cpx {

/// SiLU(z) = z * sigmoid(z) = z / (1 + e^-z). For z -> -inf, e^-z overflows
/// to inf and the quotient goes to -0, the correct limit.
CPX_HD_INLINE float silu(float z) { return z / (1.0f + expf(-z)); }

/// SwiGLU's elementwise product: SiLU(gate) * up.
CPX_HD_INLINE float swiglu(float gate, float up) { return silu(gate) * up; }

}  // namespace cpx

#pragma once
// Activation arithmetic written once for both code paths.

#include <cmath>

#include "cpx/core/host_device.hpp"

namespace cpx {

/// SiLU(z) = z * sigmoid(z).
CPX_HD_INLINE float silu(float z) { return z / (1.0f + expf(-z)); }

/// The SwiGLU product of one hidden unit: SiLU(gate) * up.
CPX_HD_INLINE float swiglu(float gate, float up) { return silu(gate) * up; }

}  // namespace cpx

#pragma once
// The noise weight lambda of PRISM's differential attention. At inference it is
// a per-layer value read from the checkpoint (`attn.lambda_q`); training moves
// it along a cosine schedule, which is given here for users who train
// (docs/MODELS.md §17).

#include <cmath>

#include "cpx/core/host_device.hpp"

namespace cpx {

/// The reference's schedule end points (`prism_lambda_start`, `prism_lambda_end`).
inline constexpr double prism_lambda_start = 0.01;
inline constexpr double prism_lambda_end = 0.1;

/// lambda(t) = l0 + (l1 - l0) * (1 - cos(pi * t / T)) / 2. Progress t / T is
/// clamped to [0, 1] as the reference does, so steps past the end keep l1; a
/// schedule of no steps (T <= 0) is already at its end.
CPX_HD_INLINE double prism_lambda_schedule(double step, double total_steps, double lambda0 = prism_lambda_start,
                                           double lambda1 = prism_lambda_end) {
    double progress = total_steps > 0.0 ? step / total_steps : 1.0;
    progress = progress < 0.0 ? 0.0 : (progress > 1.0 ? 1.0 : progress);
    const double pi = 3.14159265358979323846;
    return lambda0 + (lambda1 - lambda0) * 0.5 * (1.0 - cos(pi * progress));
}

}  // namespace cpx

#pragma once
// RMSNorm on the CPU: each row of x is scaled by 1/rms(row) and by the weight.

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/simd_hints.hpp"
#include "cpx/math/norm.hpp"

namespace cpx::cpu {

CPX_SIMD_HINTS_BEGIN

/// y[r, :] = w * x[r, :] / sqrt(mean(x[r, :]^2) + eps). x and y may alias.
template <class In, class W, class Out>
void rmsnorm(Matrix<const In> x, Vector<const W> weight, Matrix<Out> y, float eps) {
    const index_t rows = x.extent(0), n = x.extent(1);
    require<ShapeError>(weight.extent(0) == n, "rmsnorm: weight has ", weight.extent(0), " elements for rows of ", n);
    require<ShapeError>(y.extent(0) == rows && y.extent(1) == n, "rmsnorm: output is [", y.extent(0), ", ",
                        y.extent(1), "], expected [", rows, ", ", n, "]");
    for (index_t r = 0; r < rows; ++r) {
        const In* xr = x.data() + r * n;
        // SIMD lanes for the sum (one serial chain is add-latency bound); the
        // scaling loop's lanes are independent even when y is x (see layernorm.hpp).
        float sum_sq = 0.0f;
#pragma omp simd reduction(+ : sum_sq)
        for (index_t i = 0; i < n; ++i) {
            const float v = to_float(xr[i]);
            sum_sq += v * v;
        }
        const float inv = rms_inverse(sum_sq, static_cast<int>(n), eps);
        Out* yr = y.data() + r * n;
        const W* w = weight.data();
#pragma omp simd
        for (index_t i = 0; i < n; ++i) yr[i] = from_float<Out>(to_float(w[i]) * (to_float(xr[i]) * inv));
    }
}

CPX_SIMD_HINTS_END

}  // namespace cpx::cpu

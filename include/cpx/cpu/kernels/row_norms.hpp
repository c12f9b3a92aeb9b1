#pragma once
// RMSNorm over strided rows and over the heads of a row (QK-norm), in fp32:
// y = w * x / sqrt(mean(x^2) + eps) with the arithmetic of cpx/math/norm.hpp.

#include <type_traits>

#include "cpx/core/error.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/simd_hints.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/math/norm.hpp"

namespace cpx::cpu {

CPX_SIMD_HINTS_BEGIN

namespace detail {
inline void rmsnorm_vector(const float* x, const float* w, float* y, index_t n, float eps) {
    // SIMD lanes for the sum (a serial chain is add-latency bound); the scaling
    // loop's lanes are independent even when y is x.
    float sum_sq = 0.0f;
#pragma omp simd reduction(+ : sum_sq)
    for (index_t i = 0; i < n; ++i) sum_sq += x[i] * x[i];
    const float inv = rms_inverse(sum_sq, static_cast<int>(n), eps);
#pragma omp simd
    for (index_t i = 0; i < n; ++i) y[i] = w[i] * (x[i] * inv);
}
}  // namespace detail

/// y[r] = RMSNorm(x[r]) with weight w [x.cols]; x and y may be the same rows.
/// A width fixed by either view's type is the loops' constant trip count.
template <class X, index_t XCols, index_t YCols>
void rmsnorm_rows(const StridedMatrix<X, XCols>& x, const float* w, const StridedMatrix<float, YCols>& y, float eps) {
    static_assert(std::is_same_v<std::remove_const_t<X>, float>, "rmsnorm_rows reads fp32 rows");
    static_assert(XCols == dynamic || YCols == dynamic || XCols == YCols,
                  "rmsnorm_rows: input and output have different constant widths");
    require<ShapeError>(y.rows == x.rows && y.cols == x.cols, "rmsnorm: output is [", y.rows, ", ", y.cols,
                        "], input [", x.rows, ", ", x.cols, "]");
    constexpr index_t known = XCols != dynamic ? XCols : YCols;
    if constexpr (known != dynamic) {
        // The constant is spelled inside the row body so that its loop has a known length.
        parallel_for(x.rows, x.rows * known > 65536,
                     [&](index_t r) { detail::rmsnorm_vector(x.row(r), w, y.row(r), known, eps); });
    } else {
        parallel_for(x.rows, x.rows * x.cols > 65536,
                     [&](index_t r) { detail::rmsnorm_vector(x.row(r), w, y.row(r), x.cols, eps); });
    }
}

/// Every head of every row normalised in place with the one weight vector
/// w [head_dim] that all heads share (the authors' QK-norm).
inline void rmsnorm_heads(const HeadRows<float>& x, const float* w, float eps) {
    parallel_for(x.rows, x.rows * x.heads * x.head_dim > 65536, [&](index_t r) {
        for (int h = 0; h < x.heads; ++h) detail::rmsnorm_vector(x.head(r, h), w, x.head(r, h), x.head_dim, eps);
    });
}

CPX_SIMD_HINTS_END

}  // namespace cpx::cpu

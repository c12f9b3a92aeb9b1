#pragma once
// LayerNorm on the CPU (GPT-2 / PRISM blocks): each row is centred, scaled by
// its inverse standard deviation (biased variance), then by weight, plus bias.
// fp32 rows run cpu/kernels/layernorm_avx512.hpp where vector_isa() is AVX-512,
// cpu/kernels/layernorm_avx2.hpp where it is AVX2.

#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/layernorm_avx2.hpp"
#include "cpx/cpu/kernels/layernorm_avx512.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/simd_hints.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"
#include "cpx/math/norm.hpp"

namespace cpx::cpu {

CPX_SIMD_HINTS_BEGIN

/// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias. An empty `bias`
/// view means the layer has none (the reference's `bias=False`). x and y may alias.
template <class In, class W, class Out>
void layernorm(Matrix<const In> x, Vector<const W> weight, Vector<const W> bias, Matrix<Out> y, float eps) {
    const index_t rows = x.extent(0), n = x.extent(1);
    require<ShapeError>(weight.extent(0) == n, "layernorm: weight has ", weight.extent(0), " elements for rows of ",
                        n);
    require<ShapeError>(bias.empty() || bias.extent(0) == n, "layernorm: bias has ", bias.extent(0),
                        " elements for rows of ", n);
    require<ShapeError>(y.extent(0) == rows && y.extent(1) == n, "layernorm: output is [", y.extent(0), ", ",
                        y.extent(1), "], expected [", rows, ", ", n, "]");
    const bool has_bias = !bias.empty();
    if constexpr (std::is_same_v<In, float> && std::is_same_v<W, float> && std::is_same_v<Out, float>) {
        // The vector kernel of this machine's level, one row per call.
        void (*row)(const float*, const float*, const float*, float*, index_t, float) = nullptr;
#ifdef CPX_HAVE_LAYERNORM_AVX512
        if (vector_isa() == VectorIsa::avx512) row = avx512::layernorm_row;
#endif
#ifdef CPX_HAVE_LAYERNORM_AVX2
        if (vector_isa() == VectorIsa::avx2) row = avx2::layernorm_row;
#endif
        if (row) {
            const float* b = has_bias ? bias.data() : nullptr;
            parallel_for(rows, rows * n > 65536,
                         [&](index_t r) { row(x.data() + r * n, weight.data(), b, y.data() + r * n, n, eps); });
            return;
        }
    }
    parallel_for(rows, rows * n > 65536, [&](index_t r) {
        const In* xr = x.data() + r * n;
        // Two passes (mean, then centred squares) keep the variance accurate for
        // rows with a large mean, as the reference's fp32 layer_norm does. The
        // sums run in SIMD lanes (one serial chain would be bound by the add
        // latency, several times slower than the memory).
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (index_t i = 0; i < n; ++i) sum += to_float(xr[i]);
        const float mean = sum / static_cast<float>(n);
        float sum_sq = 0.0f;
#pragma omp simd reduction(+ : sum_sq)
        for (index_t i = 0; i < n; ++i) {
            const float c = to_float(xr[i]) - mean;
            sum_sq += c * c;
        }
        const float inv = layernorm_inverse_std(sum_sq / static_cast<float>(n), eps);
        Out* yr = y.data() + r * n;
        const W* w = weight.data();
        // `omp simd`: y may be x itself, but element i is read before it is
        // written and no other element is involved, so the lanes are independent
        // (without it the compiler must assume y overlaps x, w and b: 2x slower).
        if (has_bias) {
            const W* b = bias.data();
#pragma omp simd
            for (index_t i = 0; i < n; ++i)
                yr[i] = from_float<Out>((to_float(xr[i]) - mean) * inv * to_float(w[i]) + to_float(b[i]));
        } else {
#pragma omp simd
            for (index_t i = 0; i < n; ++i) yr[i] = from_float<Out>((to_float(xr[i]) - mean) * inv * to_float(w[i]));
        }
    });
}

CPX_SIMD_HINTS_END

}  // namespace cpx::cpu

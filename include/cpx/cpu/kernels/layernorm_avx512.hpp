#pragma once
// One fp32 LayerNorm row on AVX-512: the mean, the centred sum of squares (two
// passes, as the portable path and the reference's fp32 layer_norm do, so rows
// with a large mean keep an accurate variance), then y = (x - mean) * inv * w + b.
//
// Each sum runs in four vector accumulators, masked for the row's tail. The
// portable loops (`omp simd reduction`) give one accumulator chain, bound by the
// add latency, and peel scalar iterations at both ends of each of the three
// loops. 512 rows of 512 on one Zen 4 core: 52 us instead of 71; 2048 rows on two
// threads: 98 us instead of 142 (bench_norms, data in L2 and L3).
//
// Used by cpu/layers/layernorm.hpp for fp32 rows where vector_isa() is AVX-512;
// compiled by function attribute on every x86 build.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86
#define CPX_HAVE_LAYERNORM_AVX512 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX512
#include "cpx/math/norm.hpp"

namespace cpx::cpu::avx512 {

namespace detail {
/// The first min(left, 16) lanes.
inline __mmask16 first_lanes(index_t left) {
    return left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
}

/// The sum of x[0, n) (Squares: of (x - mean)^2), in four vector accumulators; the tail's
/// missing lanes add 0.
template <bool Squares>
CPX_TARGET_AVX512 inline __m512 row_term(__m512 v, __mmask16 m, __m512 mean) {
    if constexpr (Squares) {
        const __m512 c = _mm512_maskz_sub_ps(m, v, mean);  // missing lanes stay 0, not -mean
        return _mm512_mul_ps(c, c);
    } else {
        return v;
    }
}
template <bool Squares>
CPX_TARGET_AVX512 inline float row_sum(const float* x, index_t n, __m512 mean) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    index_t i = 0;
    for (; i + 64 <= n; i += 64)
#pragma GCC unroll 4
        for (int a = 0; a < 4; ++a)
            acc[a] = _mm512_add_ps(acc[a], row_term<Squares>(_mm512_loadu_ps(x + i + 16 * a), 0xffff, mean));
    for (; i < n; i += 16) {  // the last 1-63 values
        const __mmask16 m = first_lanes(n - i);
        acc[0] = _mm512_add_ps(acc[0], row_term<Squares>(_mm512_maskz_loadu_ps(m, x + i), m, mean));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}
}  // namespace detail

/// y[0, n) = (x - mean) / sqrt(var + eps) * w + b (b null: no bias term). y may be x.
CPX_TARGET_AVX512 inline void layernorm_row(const float* x, const float* w, const float* b, float* y, index_t n,
                                            float eps) {
    const float mean = detail::row_sum<false>(x, n, _mm512_setzero_ps()) / static_cast<float>(n);
    const __m512 mv = _mm512_set1_ps(mean);
    const float sum_sq = detail::row_sum<true>(x, n, mv);
    const __m512 inv = _mm512_set1_ps(layernorm_inverse_std(sum_sq / static_cast<float>(n), eps));
    for (index_t i = 0; i < n; i += 16) {
        const __mmask16 m = detail::first_lanes(n - i);
        const __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mv), inv);
        const __m512 wv = _mm512_maskz_loadu_ps(m, w + i);
        const __m512 out = b ? _mm512_fmadd_ps(t, wv, _mm512_maskz_loadu_ps(m, b + i)) : _mm512_mul_ps(t, wv);
        _mm512_mask_storeu_ps(y + i, m, out);
    }
}

}  // namespace cpx::cpu::avx512

#endif

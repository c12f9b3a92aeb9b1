#pragma once
// One fp32 LayerNorm row on AVX2 + FMA, for CPUs without AVX-512 (cpu/kernels/
// layernorm_avx512.hpp is the AVX-512 one, with the same three passes): the mean, the
// centred sum of squares (two passes, so rows with a large mean keep an accurate
// variance, as the portable path and the reference's fp32 layer_norm do), then
// y = (x - mean) * inv * w + b.
//
// Each sum runs in four 8-lane accumulators, the row's last 1-7 values through masked
// loads, and the squares as FMAs. The portable loops (`omp simd reduction`) keep one
// accumulator chain, bound by the add latency, and peel scalar iterations at both ends
// of each of the three loops. 512 rows of 512 on one Zen 3 core: 73 us instead of 114;
// 2048 rows on two threads: 151 us instead of 236 (both alternated in one process, medians
// of 40 rounds; PyTorch 2's layer_norm in bench_norms' run: 103 and 211 us).
//
// Used by cpu/layers/layernorm.hpp for fp32 rows where vector_isa() is avx2; compiled by
// function attribute on every x86 build.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86
#define CPX_HAVE_LAYERNORM_AVX2 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX2
#include "cpx/math/norm.hpp"

namespace cpx::cpu::avx2 {

namespace layernorm_detail {
/// Lanes [0, left) of 8 set (left in 1..7), as maskload and maskstore take them.
CPX_TARGET_AVX2 inline __m256i first_lanes(index_t left) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/// acc + v (Squares: + (v - mean)^2).
template <bool Squares>
CPX_TARGET_AVX2 CPX_FORCE_INLINE __m256 add_term(__m256 acc, __m256 v, __m256 mean) {
    if constexpr (Squares) {
        const __m256 c = _mm256_sub_ps(v, mean);
        return _mm256_fmadd_ps(c, c, acc);
    } else {
        return _mm256_add_ps(acc, v);
    }
}

CPX_TARGET_AVX2 inline float sum_lanes(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/// The sum of x[0, n) (Squares: of (x - mean)^2) in four accumulators.
template <bool Squares>
CPX_TARGET_AVX2 inline float row_sum(const float* x, index_t n, __m256 mean) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    index_t i = 0;
    for (; i + 32 <= n; i += 32)
#pragma GCC unroll 4
        for (int a = 0; a < 4; ++a) acc[a] = add_term<Squares>(acc[a], _mm256_loadu_ps(x + i + 8 * a), mean);
    for (int a = 1; i + 8 <= n; i += 8, ++a) acc[a] = add_term<Squares>(acc[a], _mm256_loadu_ps(x + i), mean);  // <= 3
    if (i < n) {
        // The missing lanes load as 0; for the squares they must add 0, not mean^2.
        const __m256i m = first_lanes(n - i);
        const __m256 v = _mm256_maskload_ps(x + i, m);
        if constexpr (Squares) {
            const __m256 c = _mm256_and_ps(_mm256_sub_ps(v, mean), _mm256_castsi256_ps(m));
            acc[0] = _mm256_fmadd_ps(c, c, acc[0]);
        } else {
            acc[0] = _mm256_add_ps(acc[0], v);
        }
    }
    return sum_lanes(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

/// (x - mean) * inv * w (+ b).
template <bool Bias>
CPX_TARGET_AVX2 CPX_FORCE_INLINE __m256 normalised(__m256 x, __m256 w, __m256 b, __m256 mean, __m256 inv) {
    const __m256 t = _mm256_mul_ps(_mm256_sub_ps(x, mean), inv);
    return Bias ? _mm256_fmadd_ps(t, w, b) : _mm256_mul_ps(t, w);
}

/// y[0, n) = normalised(x[0, n)); the last 1-7 values masked.
template <bool Bias>
CPX_TARGET_AVX2 inline void write_row(const float* x, const float* w, const float* b, float* y, index_t n, __m256 mean,
                                      __m256 inv) {
    index_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, normalised<Bias>(_mm256_loadu_ps(x + i), _mm256_loadu_ps(w + i),
                                                 Bias ? _mm256_loadu_ps(b + i) : _mm256_setzero_ps(), mean, inv));
    if (i < n) {
        const __m256i m = first_lanes(n - i);
        _mm256_maskstore_ps(y + i, m,
                            normalised<Bias>(_mm256_maskload_ps(x + i, m), _mm256_maskload_ps(w + i, m),
                                             Bias ? _mm256_maskload_ps(b + i, m) : _mm256_setzero_ps(), mean, inv));
    }
}
}  // namespace layernorm_detail

/// y[0, n) = (x - mean) / sqrt(var + eps) * w + b (b null: no bias term). y may be x.
CPX_TARGET_AVX2 inline void layernorm_row(const float* x, const float* w, const float* b, float* y, index_t n,
                                          float eps) {
    namespace d = layernorm_detail;
    const float mean = d::row_sum<false>(x, n, _mm256_setzero_ps()) / static_cast<float>(n);
    const __m256 mv = _mm256_set1_ps(mean);
    const float sum_sq = d::row_sum<true>(x, n, mv);
    const __m256 inv = _mm256_set1_ps(layernorm_inverse_std(sum_sq / static_cast<float>(n), eps));
    if (b) d::write_row<true>(x, w, b, y, n, mv, inv);
    else d::write_row<false>(x, w, b, y, n, mv, inv);
}

}  // namespace cpx::cpu::avx2

#endif

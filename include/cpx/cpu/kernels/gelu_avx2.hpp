#pragma once
// The exact GELU (cpu/kernels/gelu.hpp) on AVX2 + FMA, eight values per step with every
// temporary in registers, for CPUs without AVX-512 (cpu/kernels/gelu_avx512.hpp is the
// AVX-512 one). The same two polynomials (cpu/kernels/erf_fit.hpp) and the same selection
// as the portable path,
// with exp(-z^2) from cpu/kernels/softmax_avx2.hpp's exp_nonpositive, which gives 0 below
// e^-87: erfc(|z|) is then 0 from |z| ~ 9.3 instead of 10, a change below 1e-38.
// Zen 3, alternated in one process: 1.25 ns per value instead of the Eigen blocks' 9.7
// (2,048 rows of 1,024, bias added); PRISM-mini's GELU MLP at 2,048 tokens on one thread
// spent 10% of its samples in the GELU, now 4.6% (0.06 of its products' time, was 0.14).
//
// Used where vector_isa() is avx2; compiled by function attribute on every x86 build.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86
#define CPX_HAVE_GELU_AVX2 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include <cstddef>
#include <iterator>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/erf_fit.hpp"
#include "cpx/cpu/kernels/softmax_avx2.hpp"  // exp_nonpositive
#include "cpx/cpu/runtime/vector_isa.hpp"    // CPX_TARGET_AVX2

namespace cpx::cpu::avx2 {

namespace gelu_detail {
/// 1 + erf(z), as cpu::detail::one_plus_erf_packets.
CPX_TARGET_AVX2 CPX_FORCE_INLINE __m256 one_plus_erf(__m256 z) {
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
    const __m256 u = _mm256_mul_ps(z, z);
    namespace fit = erf_fit;
    __m256 p = _mm256_set1_ps(fit::p[0]);
#pragma GCC unroll 16
    for (std::size_t i = 1; i < std::size(fit::p); ++i) p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(fit::p[i]));
    const __m256 clamped = _mm256_min_ps(_mm256_max_ps(a, _mm256_set1_ps(fit::split)), _mm256_set1_ps(fit::clamp));
    const __m256 s = _mm256_mul_ps(_mm256_sub_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), clamped),
                                                 _mm256_set1_ps(fit::s_centre)),
                                   _mm256_set1_ps(fit::s_scale));
    __m256 q = _mm256_set1_ps(fit::q[0]);
#pragma GCC unroll 16
    for (std::size_t i = 1; i < std::size(fit::q); ++i) q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(fit::q[i]));
    // erfc(|z|), 0 from |z| = 10 as on the portable path (and below e^-87, see above).
    const __m256 complement = _mm256_and_ps(_mm256_cmp_ps(a, _mm256_set1_ps(10.0f), _CMP_LT_OQ),
                                            _mm256_mul_ps(exp_nonpositive(_mm256_sub_ps(_mm256_setzero_ps(), u)), q));
    const __m256 small = _mm256_cmp_ps(a, _mm256_set1_ps(fit::split), _CMP_LT_OQ);
    const __m256 negative = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
    const __m256 large = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), complement), complement, negative);
    return _mm256_blendv_ps(large, _mm256_fmadd_ps(z, p, _mm256_set1_ps(1.0f)), small);
}

/// 0.5 x (1 + erf(x / sqrt 2)).
CPX_TARGET_AVX2 CPX_FORCE_INLINE __m256 gelu(__m256 x) {
    const __m256 e = one_plus_erf(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), e);
}
}  // namespace gelu_detail

/// v[i] = GELU(v[i] + bias[i]) for i < n; bias may be null.
CPX_TARGET_AVX2 inline void gelu_erf_inplace(float* v, const float* bias, index_t n) {
    index_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(v + i);
        if (bias) x = _mm256_add_ps(x, _mm256_loadu_ps(bias + i));
        _mm256_storeu_ps(v + i, gelu_detail::gelu(x));
    }
    if (i < n) {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 x = _mm256_maskload_ps(v + i, m);
        if (bias) x = _mm256_add_ps(x, _mm256_maskload_ps(bias + i, m));
        _mm256_maskstore_ps(v + i, m, gelu_detail::gelu(x));
    }
}

}  // namespace cpx::cpu::avx2

#endif

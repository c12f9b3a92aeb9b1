#pragma once
// The exact GELU (cpu/kernels/gelu.hpp) on AVX-512, sixteen values per step with
// every temporary in registers. 1 + erf is the portable path's: the same two
// polynomials (cpu/kernels/erf_fit.hpp) and the same selection, with exp(-z^2)
// from the softmax kernel's exp_nonpositive (cpu/kernels/softmax_avx512.hpp: range
// reduction, a degree-7 polynomial, vscalefps). The portable path builds the same arithmetic from Eigen
// array expressions over 64-value blocks, which GCC stores and reloads between
// statements: ~9% of a PRISM-mini prefill went to it.
//
// Used where vector_isa() is AVX-512; compiled by function attribute on every x86 build.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86
#define CPX_HAVE_GELU_AVX512 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include <cstddef>
#include <iterator>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/erf_fit.hpp"
#include "cpx/cpu/kernels/softmax_avx512.hpp"  // exp_nonpositive
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX512

namespace cpx::cpu::avx512 {

namespace detail {
/// 1 + erf(z), as cpu::detail::one_plus_erf_packets.
CPX_TARGET_AVX512 inline __m512 one_plus_erf(__m512 z) {
    const __m512 a = _mm512_andnot_ps(_mm512_set1_ps(-0.0f), z);
    const __m512 u = _mm512_mul_ps(z, z);
    namespace fit = erf_fit;
    __m512 p = _mm512_set1_ps(fit::p[0]);
#pragma GCC unroll 16
    for (std::size_t i = 1; i < std::size(fit::p); ++i) p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(fit::p[i]));
    const __m512 clamped = _mm512_min_ps(_mm512_max_ps(a, _mm512_set1_ps(fit::split)), _mm512_set1_ps(fit::clamp));
    const __m512 s = _mm512_mul_ps(_mm512_sub_ps(_mm512_div_ps(_mm512_set1_ps(1.0f), clamped),
                                                 _mm512_set1_ps(fit::s_centre)),
                                   _mm512_set1_ps(fit::s_scale));
    __m512 q = _mm512_set1_ps(fit::q[0]);
#pragma GCC unroll 16
    for (std::size_t i = 1; i < std::size(fit::q); ++i) q = _mm512_fmadd_ps(q, s, _mm512_set1_ps(fit::q[i]));
    // erfc(|z|), exactly 0 from |z| = 10 as on the portable path.
    const __m512 complement = _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(10.0f), _CMP_LT_OQ),
                                                  exp_nonpositive(_mm512_sub_ps(_mm512_setzero_ps(), u)), q);
    const __mmask16 small = _mm512_cmp_ps_mask(a, _mm512_set1_ps(fit::split), _CMP_LT_OQ);
    const __mmask16 negative = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 large = _mm512_mask_blend_ps(negative, _mm512_sub_ps(_mm512_set1_ps(2.0f), complement), complement);
    return _mm512_mask_blend_ps(small, large, _mm512_fmadd_ps(z, p, _mm512_set1_ps(1.0f)));
}

/// 0.5 x (1 + erf(x / sqrt 2)).
CPX_TARGET_AVX512 inline __m512 gelu(__m512 x) {
    const __m512 e = one_plus_erf(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), e);
}
}  // namespace detail

/// v[i] = GELU(v[i] + bias[i]) for i < n; bias may be null.
CPX_TARGET_AVX512 inline void gelu_erf_inplace(float* v, const float* bias, index_t n) {
    index_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(v + i);
        if (bias) x = _mm512_add_ps(x, _mm512_loadu_ps(bias + i));
        _mm512_storeu_ps(v + i, detail::gelu(x));
    }
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        __m512 x = _mm512_maskz_loadu_ps(m, v + i);
        if (bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias + i));
        _mm512_mask_storeu_ps(v + i, m, detail::gelu(x));
    }
}

}  // namespace cpx::cpu::avx512

#endif

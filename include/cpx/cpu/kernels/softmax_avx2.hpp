#pragma once
// One attention score row's max-subtracted softmax on AVX2 + FMA, in place, for CPUs
// without AVX-512 (cpu/kernels/softmax_avx512.hpp is the AVX-512 one, with the same
// passes and contract):
//   s[j] <- exp(s[j] - max) / sum_i exp(s[i] - max)   for j < valid;   s[j] <- 0 for valid <= j < n
// masked_exp_row stops before the scaling and returns the factor.
//
// exp of a non-positive argument: the AVX-512 kernel's range reduction and degree-7
// Taylor polynomial (x = k ln2 + r, |r| <= ln2 / 2, ln2 in a short high part and a low
// correction), with 2^k built in the exponent bits, since AVX2 has no vscalefps. That
// needs k >= -126, so arguments are clamped at -87 and the results of arguments below
// it set to 0 (e^-87 ~ 1.6e-38: a softmax's sum is at least 1, so this changes no
// probability by more than that); -inf gives exactly 0, a NaN stays NaN (vmaxps returns
// its second operand, the argument, when either is NaN; the ordered compare keeps it).
//
// Eigen's expressions ran the maximum, the exponentials, their sum and the scaling as
// separate passes. Zen 3, rows of 1 to 2,048 scores (a causal prefill's), alternated in one
// process: 0.51 ns per score instead of 0.80 (copying the row in included). In a one-thread
// 2,048-token prefill of 187M's attention core the softmax went from 16% to 11% of the
// samples, from 0.24 to 0.15 of the time of the block products beside it.
//
// Used by causal_attention.hpp where vector_isa() is avx2; compiled by function attribute
// on every x86 build.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86
#define CPX_HAVE_SOFTMAX_AVX2 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include <algorithm>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX2

namespace cpx::cpu::avx2 {

/// e^x lane by lane for x <= 0 (see the file comment; positive x is not supported).
CPX_TARGET_AVX2 CPX_FORCE_INLINE __m256 exp_nonpositive(__m256 x) {
    constexpr float log2e = 1.44269504088896341f;
    constexpr float ln2_hi = 0.693359375f;              // 355 / 512: 9 significant bits
    constexpr float ln2_lo = -2.12194440054690583e-4f;  // ln 2 - ln2_hi
    const __m256 underflows = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
    x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x);
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(log2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(ln2_hi), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(ln2_lo), r);
    // 1 + r + r^2/2! + ... + r^7/7!, Horner from the top.
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    // 2^k for k in [-126, 0]: (k + 127) in the exponent field.
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(underflows, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}

namespace softmax_detail {
/// Lanes [0, left) of 8 set (left in 1..7).
CPX_TARGET_AVX2 inline __m256i first_lanes(index_t left) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

CPX_TARGET_AVX2 inline float reduce_max(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

CPX_TARGET_AVX2 inline float reduce_add(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
}  // namespace softmax_detail

/// s[j] <- exp(s[j] - max) for j < valid and s[valid, n) set to 0; valid >= 1. Returns
/// 1 / the sum of the exponentials, for the caller to scale by where it is cheapest.
CPX_TARGET_AVX2 inline float masked_exp_row(float* s, index_t valid, index_t n) {
    namespace d = softmax_detail;
    const index_t body = valid / 8 * 8;
    const __m256i tail = d::first_lanes(valid - body);  // all clear when valid is a multiple of 8
    const __m256 tail_ps = _mm256_castsi256_ps(tail);
    const __m256 minus_inf = _mm256_set1_ps(-__builtin_inff());

    // Two chains for the maximum, whose steps are short.
    __m256 m0 = minus_inf, m1 = minus_inf;
    index_t j = 0;
    for (; j + 16 <= body; j += 16) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(s + j));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(s + j + 8));
    }
    if (j < body) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(s + j));
    if (body < valid) m1 = _mm256_max_ps(m1, _mm256_blendv_ps(minus_inf, _mm256_maskload_ps(s + body, tail), tail_ps));
    // A NaN score may or may not reach the maximum (vmaxps returns its second operand when
    // either is NaN); its exponential is NaN either way, and so is the sum that scales the row.
    const __m256 m = _mm256_set1_ps(d::reduce_max(_mm256_max_ps(m0, m1)));

    // One exponential per step: two interleaved ran no faster (registers spilled) and the
    // sum's chain is far shorter than an exponential.
    __m256 sum = _mm256_setzero_ps();
    for (j = 0; j < body; j += 8) {
        const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
        _mm256_storeu_ps(s + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (body < valid) {
        const __m256 e = _mm256_and_ps(tail_ps, exp_nonpositive(_mm256_sub_ps(_mm256_maskload_ps(s + body, tail), m)));
        _mm256_maskstore_ps(s + body, tail, e);
        sum = _mm256_add_ps(sum, e);
    }
    std::fill(s + valid, s + n, 0.0f);
    return 1.0f / d::reduce_add(sum);
}

/// Softmax of s[0, valid) in place and s[valid, n) set to 0; valid >= 1.
CPX_TARGET_AVX2 inline void masked_softmax_row(float* s, index_t valid, index_t n) {
    const __m256 inverse = _mm256_set1_ps(masked_exp_row(s, valid, n));
    const index_t body = valid / 8 * 8;
    for (index_t j = 0; j < body; j += 8) _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), inverse));
    if (body < valid) {
        const __m256i tail = softmax_detail::first_lanes(valid - body);
        _mm256_maskstore_ps(s + body, tail, _mm256_mul_ps(_mm256_maskload_ps(s + body, tail), inverse));
    }
}

}  // namespace cpx::cpu::avx2

#endif

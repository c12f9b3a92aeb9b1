#pragma once
// One attention score row's max-subtracted softmax on AVX-512, in place:
//   s[j] <- exp(s[j] - max) / sum_i exp(s[i] - max)   for j < valid;   s[j] <- 0 for valid <= j < n
// Three passes over the row (max; exponentials and their sum; scaling), which a
// causal prefill row of up to a few thousand scores keeps in L1. masked_exp_row
// stops before the scaling and returns the factor, for attention to scale its
// output row instead.
//
// exp of a non-positive argument (every s[j] - max is): x = k ln2 + r with
// k = round(x / ln2) and |r| <= ln2 / 2, ln2 split into a short high part
// (k * hi is exact for |k| < 2^15) and a low correction; e^r by its Taylor
// series to r^7 (truncation ~5e-9 relative at |r| = ln2 / 2, under half an
// fp32 ulp); the result scaled by 2^k with vscalefps, which flushes what
// underflows to 0. Arguments are clamped at -110 first: e^-110 is below the
// smallest fp32 denormal, and the clamp keeps -inf and huge negative values away
// from the range reduction. Against a double-precision softmax: ~1e-6 relative.
// A NaN score makes the whole row NaN, as the portable path's does.
//
// Against Eigen's vectorised exp in separate max, exp, sum and scale
// expressions: 0.25 ns per score instead of 0.34 in a one-thread bf16 prefill of
// the 187M model (512 tokens; softmax 3.5% -> 2.5% of its samples, the step
// 2% less time; Zen 5). Rows of a few hundred scores leave the per-row
// reductions and loop exits a large part of what remains.
//
// Used by causal_attention.hpp where vector_isa() is AVX-512; compiled by
// function attribute on every x86 build.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86
#define CPX_HAVE_SOFTMAX_AVX512 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include <algorithm>
#include <cstdint>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX512, CPX_TARGET_AVX512_BF16

namespace cpx::cpu::avx512 {

/// e^x lane by lane for x <= 0 (see the file comment; positive x is not supported).
CPX_TARGET_AVX512 inline __m512 exp_nonpositive(__m512 x) {
    constexpr float log2e = 1.44269504088896341f;
    constexpr float ln2_hi = 0.693359375f;         // 355 / 512: 9 significant bits
    constexpr float ln2_lo = -2.12194440054690583e-4f;  // ln 2 - ln2_hi
    x = _mm512_max_ps(_mm512_set1_ps(-110.0f), x);  // a NaN x stays NaN (vmaxps returns its second operand)
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(log2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(ln2_hi), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(ln2_lo), r);
    // 1 + r + r^2/2! + ... + r^7/7!, Horner from the top.
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, k);
}

/// max(s[0, body + popcount(tail))) in every lane: `body` a multiple of 16, `tail` the lanes
/// of the last partial vector.
CPX_TARGET_AVX512 inline __m512 row_max(const float* s, index_t body, __mmask16 tail) {
    __m512 mv = _mm512_set1_ps(-__builtin_inff());
    for (index_t j = 0; j < body; j += 16) mv = _mm512_max_ps(mv, _mm512_loadu_ps(s + j));
    mv = _mm512_mask_max_ps(mv, tail, mv, _mm512_maskz_loadu_ps(tail, s + body));
    return _mm512_set1_ps(_mm512_reduce_max_ps(mv));
}

/// s[j] <- exp(s[j] - max) for j < valid and s[valid, n) set to 0; valid >= 1. Returns
/// 1 / the sum of the exponentials: the caller scales by it where it is cheapest (attention
/// scales its output rows, dv values, instead of the probabilities, up to n).
CPX_TARGET_AVX512 inline float masked_exp_row(float* s, index_t valid, index_t n) {
    const index_t body = valid / 16 * 16;
    const __mmask16 tail = static_cast<__mmask16>((1u << (valid - body)) - 1u);
    const __m512 m = row_max(s, body, tail);

    __m512 sum = _mm512_setzero_ps();
    for (index_t j = 0; j < body; j += 16) {
        const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(s + j), m));
        _mm512_storeu_ps(s + j, e);
        sum = _mm512_add_ps(sum, e);
    }
    if (tail) {
        const __m512 e = _mm512_maskz_mov_ps(tail, exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, s + body), m)));
        _mm512_mask_storeu_ps(s + body, tail, e);
        sum = _mm512_add_ps(sum, e);
    }
    std::fill(s + valid, s + n, 0.0f);
    return 1.0f / _mm512_reduce_add_ps(sum);
}

/// masked_exp_row for bf16 products: the exponentials of s[0, valid) rounded to bf16 (to
/// nearest even, as gemm_bf16 rounds its inputs) into dst[0, valid), dst[valid, dst_n) zeroed,
/// s unchanged. Attention's P V product reads dst as its rounded inputs, so the probabilities
/// skip an fp32 row and a rounding pass; the sum is of the fp32 values, as masked_exp_row's,
/// and the result the same bits. Returns 1 / the sum; valid >= 1. Its loop repeats
/// masked_exp_row's rather than sharing it: a shared body compiled for AVX-512 could not inline
/// the AVX512_BF16 store.
CPX_TARGET_AVX512_BF16 inline float masked_exp_row_bf16(const float* s, index_t valid, std::uint16_t* dst,
                                                        index_t dst_n) {
    const index_t body = valid / 16 * 16;
    const __mmask16 tail = static_cast<__mmask16>((1u << (valid - body)) - 1u);
    const __m512 m = row_max(s, body, tail);

    __m512 sum = _mm512_setzero_ps();
    for (index_t j = 0; j < body; j += 16) {
        const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(s + j), m));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), (__m256i)_mm512_cvtneps_pbh(e));
        sum = _mm512_add_ps(sum, e);
    }
    if (tail) {
        const __m512 e = _mm512_maskz_mov_ps(tail, exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, s + body), m)));
        _mm256_mask_storeu_epi16(dst + body, tail, (__m256i)_mm512_cvtneps_pbh(e));
        sum = _mm512_add_ps(sum, e);
    }
    std::fill(dst + valid, dst + dst_n, std::uint16_t{0});
    return 1.0f / _mm512_reduce_add_ps(sum);
}

/// Softmax of s[0, valid) in place and s[valid, n) set to 0; valid >= 1.
CPX_TARGET_AVX512 inline void masked_softmax_row(float* s, index_t valid, index_t n) {
    const __m512 inverse = _mm512_set1_ps(masked_exp_row(s, valid, n));
    const index_t body = valid / 16 * 16;
    const __mmask16 tail = static_cast<__mmask16>((1u << (valid - body)) - 1u);
    for (index_t j = 0; j < body; j += 16) _mm512_storeu_ps(s + j, _mm512_mul_ps(_mm512_loadu_ps(s + j), inverse));
    if (tail) _mm512_mask_storeu_ps(s + body, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, s + body), inverse));
}

}  // namespace cpx::cpu::avx512

#endif

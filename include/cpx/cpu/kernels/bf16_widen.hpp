#pragma once
// Widening bf16 to fp32 in AVX-512 or AVX2 registers, two values per 32-bit word: the
// word's low half (the even element in memory order) is `word << 16`, its high
// half (the odd element) `word & 0xffff0000`. Exact, one instruction each; the
// kernels that read bf16 weights, panels or KV caches in fp32 arithmetic share it.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include "cpx/core/dtype.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX512, CPX_TARGET_AVX2

namespace cpx::cpu::avx512 {

/// The even (low-half) elements of 16 words of two bf16 values each, as fp32.
CPX_TARGET_AVX512 CPX_FORCE_INLINE __m512 bf16_low_halves(__m512i words) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(words, 16));
}
/// The odd (high-half) elements of 16 words of two bf16 values each, as fp32.
CPX_TARGET_AVX512 CPX_FORCE_INLINE __m512 bf16_high_halves(__m512i words) {
    return _mm512_castsi512_ps(_mm512_and_si512(words, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}

}  // namespace cpx::cpu::avx512

namespace cpx::cpu::avx2 {

/// The even (low-half) elements of 8 words of two bf16 values each, as fp32.
CPX_TARGET_AVX2 CPX_FORCE_INLINE __m256 bf16_low_halves(__m256i words) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
}
/// The odd (high-half) elements of 8 words of two bf16 values each, as fp32.
CPX_TARGET_AVX2 CPX_FORCE_INLINE __m256 bf16_high_halves(__m256i words) {
    return _mm256_castsi256_ps(_mm256_and_si256(words, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}

/// 16 consecutive values from p as two fp32 vectors: bf16, the even elements then the odd ones
/// (one load, one instruction each); fp32, p[0, 8) and p[8, 16), so that a kernel takes either.
CPX_TARGET_AVX2 CPX_FORCE_INLINE void load16_widened(const bf16* p, __m256& a, __m256& b) {
    const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&p->bits));
    a = bf16_low_halves(words);
    b = bf16_high_halves(words);
}
CPX_TARGET_AVX2 CPX_FORCE_INLINE void load16_widened(const float* p, __m256& a, __m256& b) {
    a = _mm256_loadu_ps(p);
    b = _mm256_loadu_ps(p + 8);
}

}  // namespace cpx::cpu::avx2

#endif

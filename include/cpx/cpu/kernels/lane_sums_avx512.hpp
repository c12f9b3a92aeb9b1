#pragma once
// The lane sums of eight AVX-512 vectors at once: the end of a dot product whose 16
// partial sums sit in one vector, for kernels that finish several dot products
// together (decode attention's scores, cpu/kernels/attention_decode_avx512.hpp; the
// one-row weight products, cpu/kernels/gemv_avx512.hpp). A tree of permutes and adds
// takes ~3 instructions per vector where a horizontal reduction of each takes ~8 and
// a chain of dependent steps.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include "cpx/core/host_device.hpp"        // CPX_FORCE_INLINE
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX512

namespace cpx::cpu::avx512 {

namespace lane_sums_detail {
/// Lane indices folding groups of 2g lanes of two vectors into groups of g:
/// the first (hi = false) or second half of every group, first vector's groups first.
struct FoldIndex {
    alignas(64) int lanes[16];
};
constexpr FoldIndex fold_index(int g, bool hi) {
    FoldIndex f{};
    for (int lane = 0; lane < 16; ++lane) {
        const int source = lane / 8, within = lane % 8;  // which vector, which of its 8 outputs
        f.lanes[lane] = source * 16 + within / g * 2 * g + within % g + (hi ? g : 0);
    }
    return f;
}
inline constexpr FoldIndex fold_tables[4][2] = {{fold_index(8, false), fold_index(8, true)},
                                                {fold_index(4, false), fold_index(4, true)},
                                                {fold_index(2, false), fold_index(2, true)},
                                                {fold_index(1, false), fold_index(1, true)}};
}  // namespace lane_sums_detail

/// Eight vectors -> their eight lane sums in lanes 0-7, in order (lanes 8-15 repeat them): a
/// tree of permutes and adds (8 -> 4 -> 2 -> 1 vectors, then the last folded with itself).
/// Overwrites v.
CPX_TARGET_AVX512 CPX_FORCE_INLINE __m512 sum_lanes_8(__m512 (&v)[8]) {
    using lane_sums_detail::fold_tables;
    for (int level = 0, count = 8; level < 3; ++level, count /= 2) {
        const __m512i lo = _mm512_load_si512(fold_tables[level][0].lanes);
        const __m512i hi = _mm512_load_si512(fold_tables[level][1].lanes);
        for (int k = 0; k < count / 2; ++k)
            v[k] = _mm512_add_ps(_mm512_permutex2var_ps(v[2 * k], lo, v[2 * k + 1]),
                                 _mm512_permutex2var_ps(v[2 * k], hi, v[2 * k + 1]));
    }
    const __m512i lo = _mm512_load_si512(fold_tables[3][0].lanes);
    const __m512i hi = _mm512_load_si512(fold_tables[3][1].lanes);
    return _mm512_add_ps(_mm512_permutex2var_ps(v[0], lo, v[0]), _mm512_permutex2var_ps(v[0], hi, v[0]));
}

}  // namespace cpx::cpu::avx512

#endif

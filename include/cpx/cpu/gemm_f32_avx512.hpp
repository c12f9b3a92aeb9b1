#pragma once
// The AVX-512 micro-kernel of the packed fp32 product (cpu/gemm_f32_packed.hpp):
// a tile of MR rows x one 64-column panel. Per input it loads the panel's four
// 16-column vectors once and, for each row, broadcasts the row's input and
// issues four vfmadd231ps; MR = 6 gives 24 accumulators in registers. The rows
// of x are read in place (any stride): fp32 needs no conversion.
//
// Compiled by function attribute, called only where cpu_features() reports
// AVX-512.

#if defined(__x86_64__) || defined(__i386__)
#define CPX_HAVE_GEMM_F32_AVX512 1

#include "cpx/cpu/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/packed_panels.hpp"

#define CPX_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

namespace cpx::cpu::avx512_f32 {

inline constexpr int tile_rows = 6;
inline constexpr int panel_vectors = static_cast<int>(packed_panel_cols / 16);

/// c[0:MR, 0:cols) (= | +=) a[0:MR, 0:depth) . panel over `depth` inputs.
template <int MR>
CPX_TARGET_AVX512 inline void tile(const float* a, index_t lda, const float* b, index_t depth, float* c, index_t ldc,
                                   index_t cols, bool load_c) {
    constexpr int NV = panel_vectors;
    __mmask16 mask[NV];
    for (int v = 0; v < NV; ++v) {
        const index_t left = cols - 16 * v;
        mask[v] = left >= 16 ? static_cast<__mmask16>(0xffff)
                             : static_cast<__mmask16>(left <= 0 ? 0u : (1u << left) - 1u);
    }
    __m512 acc[MR][NV];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v)
            acc[r][v] = load_c ? _mm512_maskz_loadu_ps(mask[v], c + r * ldc + 16 * v) : _mm512_setzero_ps();
    const float* arow[MR];
    for (int r = 0; r < MR; ++r) arow[r] = a + r * lda;
    for (index_t k = 0; k < depth; ++k) {
        const float* bk = b + k * packed_panel_cols;
        __m512 bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_ps(bk + 16 * v);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
            const __m512 av = _mm512_set1_ps(arow[r][k]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mask[v], acc[r][v]);
}

/// tile<rows> for 1 <= rows <= tile_rows.
CPX_TARGET_AVX512 inline void tile_rows_n(int rows, const float* a, index_t lda, const float* b, index_t depth,
                                          float* c, index_t ldc, index_t cols, bool load_c) {
    switch (rows) {
        case 6: tile<6>(a, lda, b, depth, c, ldc, cols, load_c); break;
        case 5: tile<5>(a, lda, b, depth, c, ldc, cols, load_c); break;
        case 4: tile<4>(a, lda, b, depth, c, ldc, cols, load_c); break;
        case 3: tile<3>(a, lda, b, depth, c, ldc, cols, load_c); break;
        case 2: tile<2>(a, lda, b, depth, c, ldc, cols, load_c); break;
        default: tile<1>(a, lda, b, depth, c, ldc, cols, load_c); break;
    }
}
static_assert(tile_rows == 6, "tile_rows_n covers 1..6 rows");

}  // namespace cpx::cpu::avx512_f32

#endif

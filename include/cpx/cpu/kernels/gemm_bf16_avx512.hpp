#pragma once
// The AVX512_BF16 pieces of the bf16 product (cpu/kernels/gemm_bf16.hpp): rounding
// fp32 activations to bf16, and the register-blocked micro-kernel.
//
// Compiled for AVX512_BF16 by function attribute, not by the build's flags, so
// a generic x86-64 build carries it and cpu_features() decides at run time
// whether it may be called.
//
// Micro-kernel: a tile of MR rows x one 64-column panel. Per input pair it
// loads the panel's four 16-column x 2-input vectors once and, for each row,
// broadcasts the row's two bf16 inputs (one 32-bit word) and issues four
// vdpbf16ps. MR = 6 gives 24 accumulators (plus 4 B vectors and a broadcast:
// 29 of 32 registers), enough independent chains to cover the instruction's
// latency at two per cycle, and 10 loads per 24 dot products.

#if defined(__x86_64__) || defined(__i386__)
#define CPX_HAVE_GEMM_BF16_AVX512 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include <cstdint>
#include <cstring>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/avx512_tile.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX512_BF16

namespace cpx::cpu::avx512_bf16 {

/// Rows per micro-kernel tile.
inline constexpr int tile_rows = avx512_tile::rows;

/// How many input pairs before the end of its loop a tile requests its lines of C for writing
/// (PREFETCHW). A tile streams up to 128 KiB of its panel through L1, so a request at its start
/// is gone by the stores (measured level), and the 24 stores into a cold C then stall the next
/// tile's start. Requested 32 pairs (~800 cycles) before the end, the `bf16` prefills of 512
/// tokens took 3% less time on one thread (187M 572 -> 554 ms, 384M 1,125 -> 1,089) and 0.7-2.6%
/// less on two (Zen 4, with and without the request alternated in one process, 20-25 rounds);
/// 48 and 64 pairs measured alike, 16 gained on one thread only.
inline constexpr index_t c_fetch_pairs = 32;

/// dst[0:n) = bf16(src[0:n)), rounded to nearest even (inputs below 2^-126 become 0,
/// as vcvtne2ps2bf16 treats denormals).
CPX_TARGET_AVX512_BF16 inline void round_to_bf16(const float* src, index_t n, std::uint16_t* dst) {
    index_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
        _mm512_storeu_si512(dst + i, (__m512i)v);
    }
    for (; i < n; i += 16) {
        const index_t left = n - i < 16 ? n - i : 16;
        const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
        const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
        _mm256_mask_storeu_epi16(dst + i, m, (__m256i)v);
    }
}

/// c[0:MR, 0:cols) (= | +=) a[0:MR, 0:2 pairs) . panel, over `pairs` input pairs.
/// a: bf16 rows lda values apart (4-byte aligned pairs); b: the panel at the
/// first pair, its pairs and strips `st` apart (either layout); c: fp32 rows ldc apart;
/// cols <= 64 columns are written. Ahead: `ahead` fetches its lines during the loop; else
/// the tile fetches its own stream if Own.
template <int MR, bool Ahead, bool Own = true>
CPX_TARGET_AVX512_BF16 inline void tile(const std::uint16_t* a, index_t lda, const bf16* b, PanelStrides st,
                                        index_t pairs, float* c, index_t ldc, index_t cols, bool load_c,
                                        avx512_tile::Prefetcher ahead) {
    constexpr int NV = avx512_tile::vectors;
    // The same stream distance in pairs under either layout (16 pairs: 4 KiB of rows).
    const index_t fetch_ahead = avx512_tile::stream_distance / (packed_panel_cols * 2 * 2) * st.group * 2;
    avx512_tile::Accumulators<MR> acc(c, ldc, cols, load_c);
    const std::uint16_t* arow[MR];
    for (int r = 0; r < MR; ++r) arow[r] = a + r * lda;
    const index_t fetch_c_at = pairs > c_fetch_pairs ? pairs - c_fetch_pairs : 0;
    for (index_t p = 0; p < pairs; ++p) {
        const bf16* bp = b + p * st.group;
        if (p == fetch_c_at) acc.fetch_for_stores(c, ldc);
        if constexpr (Ahead) ahead.step();
        else if constexpr (Own) avx512_tile::fetch_strips(bp, st.strip * 2, fetch_ahead);
        __m512bh bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_load_si512(bp + v * st.strip);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
            std::int32_t word;
            std::memcpy(&word, arow[r] + 2 * p, sizeof word);
            const __m512bh av = (__m512bh)_mm512_set1_epi32(word);
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc.v[r][v] = _mm512_dpbf16_ps(acc.v[r][v], av, bv[v]);
        }
    }
    acc.store(c, ldc);
}

/// tile<rows> for 1 <= rows <= tile_rows.
inline void tile_rows_n(int rows, const std::uint16_t* a, index_t lda, const bf16* b, PanelStrides st, index_t pairs,
                        float* c, index_t ldc, index_t cols, bool load_c, avx512_tile::Prefetcher ahead = {}) {
    avx512_tile::for_rows_fetching(rows, ahead, [&]<int R, bool Ahead, bool Own>() {
        tile<R, Ahead, Own>(a, lda, b, st, pairs, c, ldc, cols, load_c, ahead);
    });
}

}  // namespace cpx::cpu::avx512_bf16

#endif

#pragma once
// The AVX-512 micro-kernel of the packed fp32 product (cpu/kernels/gemm_f32_packed.hpp):
// a tile of MR rows x one 64-column panel. Per input it loads the panel's four
// 16-column vectors once and, for each row, broadcasts the row's input and
// issues four vfmadd231ps; MR = 6 gives 24 accumulators in registers. The rows
// of x are read in place (any stride): fp32 needs no conversion.
//
// The same tile also runs on bf16 panels of a weight stored in bf16 (tile_bf16):
// each 32-bit lane holds two consecutive inputs of one column, widened exactly
// in registers (cpu/kernels/bf16_widen.hpp), so the product is the fp32 product of the stored values while the
// panels, and the bytes a decode step reads, are half of fp32 panels. Per input
// pair it widens the four even vectors, runs the rows' FMAs, then reloads (L1)
// and widens the odd ones: 24 accumulators, 4 widened vectors and a broadcast.
//
// A tile that overwrites C first requests C's lines for writing: its stores come
// at the end of its loop, and a line not in cache then had to be read for
// ownership first. In a whole-model prefill C is a fresh activation buffer
// (the weights streamed since its last use evict it): one thread, 187M at 512
// tokens (Zen 5), the products ran at 223-241 GFLOP/s in the model against
// 255-262 alone, and 246-259 with the request; the step took 447-456 -> 427-438
// ms, two threads 231-241 -> 223-235; bf16 weights on two threads 234-246 ->
// 224-242 (alternated binaries). The bf16 tile (gemm_bf16_avx512.hpp) gained
// nothing from a request at its start (one thread 227-232 -> 235-238 ms) and
// makes it near the end of its loop instead (c_fetch_pairs); this tile, moved
// the same way, measured level (Zen 4), so its request stays at its start.
//
// Compiled by function attribute, called only where cpu_features() reports
// AVX-512.

#if defined(__x86_64__) || defined(__i386__)
#define CPX_HAVE_GEMM_F32_AVX512 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include "cpx/core/dtype.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/avx512_tile.hpp"
#include "cpx/cpu/kernels/bf16_widen.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"

namespace cpx::cpu::avx512_f32 {

inline constexpr int tile_rows = avx512_tile::rows;

/// c[0:MR, 0:cols) (= | +=) a[0:MR, 0:depth) . panel over `depth` inputs. Ahead:
/// `ahead` fetches its lines during the loop; else a tile of 2+ rows fetches its own stream if Own.
template <int MR, bool Ahead, bool Own = true>
CPX_TARGET_AVX512 inline void tile(const float* a, index_t lda, const float* b, index_t depth, float* c, index_t ldc,
                                   index_t cols, bool load_c, avx512_tile::Prefetcher ahead) {
    constexpr int NV = avx512_tile::vectors;
    avx512_tile::Accumulators<MR> acc(c, ldc, cols, load_c);
    if (!load_c) acc.fetch_for_stores(c, ldc);
    const float* arow[MR];
    for (int r = 0; r < MR; ++r) arow[r] = a + r * lda;
    for (index_t k = 0; k < depth; ++k) {
        const float* bk = b + k * packed_panel_cols;
        if constexpr (Ahead) ahead.step();
        else if constexpr (MR > 1 && Own) avx512_tile::fetch_stream(bk);
        __m512 bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_ps(bk + 16 * v);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
            const __m512 av = _mm512_set1_ps(arow[r][k]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc.v[r][v] = _mm512_fmadd_ps(av, bv[v], acc.v[r][v]);
        }
    }
    acc.store(c, ldc);
}

/// tile<rows> for 1 <= rows <= tile_rows.
inline void tile_rows_n(int rows, const float* a, index_t lda, const float* b, index_t depth, float* c, index_t ldc,
                        index_t cols, bool load_c, avx512_tile::Prefetcher ahead = {}) {
    avx512_tile::for_rows_fetching(rows, ahead, [&]<int R, bool Ahead, bool Own>() {
        tile<R, Ahead, Own>(a, lda, b, depth, c, ldc, cols, load_c, ahead);
    });
}

namespace detail {
/// One half of input pair p of a bf16 panel: its even (Odd = false) or odd inputs, widened.
template <int MR, bool Odd>
CPX_TARGET_AVX512 CPX_FORCE_INLINE void half_pair(avx512_tile::Accumulators<MR>& acc, const float* const (&arow)[MR],
                                                  index_t p, const bf16* bp) {
    constexpr int NV = avx512_tile::vectors;
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
        const __m512i words = _mm512_load_si512(bp + 32 * v);
        bv[v] = Odd ? avx512::bf16_high_halves(words) : avx512::bf16_low_halves(words);
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
        const __m512 av = _mm512_set1_ps(arow[r][2 * p + (Odd ? 1 : 0)]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc.v[r][v] = _mm512_fmadd_ps(av, bv[v], acc.v[r][v]);
    }
}
}  // namespace detail

/// tile() on bf16 panels: c[0:MR, 0:cols) (= | +=) a[0:MR, 0:2 pairs) . panel in fp32, each bf16
/// weight widened exactly. `half_last`: the last pair has only its even input (an odd K):
/// a[.., 2 pairs - 1] is neither read nor multiplied. Unlike tile(), a one-row tile fetches its
/// stream where Own says so (avx512_tile::one_row_tiles_fetch_stream: Intel), as the bf16
/// kernel's does on the same packs: 187M's batch-1 decode under `fp32_packed` on bf16 weights
/// (Xeon with AMX, alternated in one process) one thread 22.3-33.8 -> 18.3-26.9 ms, two threads
/// 11.1-11.6 -> 8.5-8.9 ms.
template <int MR, bool Ahead, bool Own = true>
CPX_TARGET_AVX512 inline void tile_bf16(const float* a, index_t lda, const bf16* b, index_t pairs, bool half_last,
                                        float* c, index_t ldc, index_t cols, bool load_c,
                                        avx512_tile::Prefetcher ahead) {
    avx512_tile::Accumulators<MR> acc(c, ldc, cols, load_c);
    if (!load_c) acc.fetch_for_stores(c, ldc);
    const float* arow[MR];
    for (int r = 0; r < MR; ++r) arow[r] = a + r * lda;
    const index_t full = half_last ? pairs - 1 : pairs;
    for (index_t p = 0; p < full; ++p) {
        const bf16* bp = b + p * (packed_panel_cols * 2);
        if constexpr (Ahead) ahead.step();
        else if constexpr (Own) avx512_tile::fetch_stream(bp);
        detail::half_pair<MR, false>(acc, arow, p, bp);
        detail::half_pair<MR, true>(acc, arow, p, bp);
    }
    if (half_last) detail::half_pair<MR, false>(acc, arow, full, b + full * (packed_panel_cols * 2));
    acc.store(c, ldc);
}

/// tile_bf16<rows> for 1 <= rows <= tile_rows.
inline void tile_bf16_rows_n(int rows, const float* a, index_t lda, const bf16* b, index_t pairs, bool half_last,
                             float* c, index_t ldc, index_t cols, bool load_c, avx512_tile::Prefetcher ahead = {}) {
    avx512_tile::for_rows_fetching(rows, ahead, [&]<int R, bool Ahead, bool Own>() {
        tile_bf16<R, Ahead, Own>(a, lda, b, pairs, half_last, c, ldc, cols, load_c, ahead);
    });
}

}  // namespace cpx::cpu::avx512_f32

#endif

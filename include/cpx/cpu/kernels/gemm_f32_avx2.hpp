#pragma once
// The AVX2 micro-kernel of the packed fp32 product (cpu/kernels/gemm_f32_packed.hpp), for
// CPUs with AVX2 and FMA but no AVX-512 (AMD Zen 2 and 3, Intel client cores): the same
// product as the AVX-512 kernel (cpu/kernels/gemm_f32_avx512.hpp) up to summation order.
//
// Sixteen 8-lane registers cannot hold a 64-column tile of several rows, so a tile walks its
// panel in passes over the block's inputs, each over 16 columns (a strip) or more: 6 rows x
// 16 columns (12 accumulators, 2 B vectors and a broadcast: two loads and six broadcasts per
// 12 FMAs), 2 rows x 32 columns, or 1 row x 64 columns (decode: each weight used once,
// straight from memory into its FMA). The block's B part stays in L2 between passes. A tile
// of several rows is the only reader of its block in batched decode, so it fetches the next
// block's lines over all of its passes (single_tile_ahead, below); the last block of a
// thread's share has no next one, and each pass fetches its own lines a few KiB ahead instead.
//
// Panels come in either layout (packed_panels.hpp). In rows, as the AVX-512 kernel reads
// them, a pass reads 64 bytes of every 256 (fp32): the lines of a strip fall into a quarter
// of L1's sets and the pass's stream skips three lines of four. In strips, a pass reads one
// ascending run of lines. The weights of fp32 arithmetic are packed in strips where this
// kernel runs (PackedWeight::pack; numbers there); attention's keys and values, packed per
// call, stay in rows. The tiles take a panel's two strides (from one input group to the
// next, from one strip to the next) as arguments, so one code reads both.
//
// bf16 panels (a weight stored in bf16, Compute::fp32_packed) hold two consecutive inputs of
// one column per 32-bit word: the same bytes per input pair as fp32 per input, widened
// exactly in registers (even input: word << 16, odd: word & 0xffff0000).
//
// Compiled by function attribute, called only where cpu_features() reports AVX2 and FMA.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86
#define CPX_HAVE_GEMM_F32_AVX2 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include "cpx/core/dtype.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/avx512_tile.hpp"  // Prefetcher, fetch_stream (prefetch instructions only)
#include "cpx/cpu/kernels/bf16_widen.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"    // CPX_TARGET_AVX2

namespace cpx::cpu::avx2_f32 {

/// Rows per tile (the same as the AVX-512 kernel's: panel_gemm's row blocks are multiples of it).
inline constexpr int tile_rows = 6;
/// 8-lane vectors per strip for a tile of `rows` rows: what fits 16 registers.
constexpr int strip_vectors_for(int rows) { return rows == 1 ? 8 : rows == 2 ? 4 : 2; }
template <int MR>
inline constexpr int strip_vectors = strip_vectors_for(MR);
static_assert(packed_panel_cols % 64 == 0, "a panel is whole strips of every width");
/// Strips of a full panel for a tile of `rows` rows (1, 2 or 4 passes over its inputs): the
/// factor by which the caller spreads the tile's prefetches (avx512_tile::Prefetcher) over
/// more input steps.
constexpr index_t passes(int rows) { return packed_panel_cols / (8 * strip_vectors_for(rows)); }
/// Rows from which a tile that is the only one over its block (batched decode, the routed
/// experts' few rows) fetches the next block, spread over its passes (panel_gemm::thread_share).
/// Measured on panels in rows, where the first pass read the block from memory and the others
/// from cache, and with only the first pass fetching (4 KiB ahead) memory idled during the
/// others; panels in strips keep it (see PackedWeight::pack for their steps). 187M decode steps, 512
/// cached tokens, two threads, Zen 3, alternated binaries: 4 sequences on fp32 panels
/// (`fp32_packed`) 72.7-88.8 -> 47.3-53.3 ms (the stored weights' few-row loop: 45.7-50.4),
/// on bf16 panels 36.2-38.0 -> 26.4-30.9 ms, under `bf16` 38.1-39.2 -> 29.0-29.3 ms and at 16
/// sequences 72.3-79.7 -> 63.8-65.7 ms (its experts see ~4 rows each); one sequence and fp32
/// panels at 16 level.
inline constexpr index_t single_tile_ahead = 2;
static_assert(passes(1) == 1 && passes(static_cast<int>(single_tile_ahead)) > 1,
              "single_tile_ahead: the fewest rows whose tile walks its panel more than once");

/// The accumulators of an MR-row strip of NV vectors over C's columns [0, cols) of the strip.
/// Only a strip that ends past `cols` (the last strip of a narrow panel) loads and stores C
/// under a mask: vmaskmovps stores are slow on AMD (~10% of a 256-deep product's samples on
/// Zen 3), and a shallow block (attention's 64-deep QK^T) pays them most: plain stores made a
/// [96 x 64] x [64 x 256] product 1.25-1.3x faster there.
template <int MR, int NV>
struct Accumulators {
    __m256 v[MR][NV];
    __m256i mask[NV];
    bool full;

    CPX_TARGET_AVX2 CPX_FORCE_INLINE Accumulators(const float* c, index_t ldc, index_t cols, bool load_c)
        : full(cols >= 8 * NV) {
        if (full) {
#pragma GCC unroll 8
            for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
                for (int j = 0; j < NV; ++j) v[r][j] = load_c ? _mm256_loadu_ps(c + r * ldc + 8 * j) : _mm256_setzero_ps();
            return;
        }
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        for (int j = 0; j < NV; ++j) {
            const index_t left = cols - 8 * j;
            const int valid = left >= 8 ? 8 : left <= 0 ? 0 : static_cast<int>(left);
            mask[j] = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), lane);
        }
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
            for (int j = 0; j < NV; ++j)
                v[r][j] = load_c ? _mm256_maskload_ps(c + r * ldc + 8 * j, mask[j]) : _mm256_setzero_ps();
    }
    CPX_TARGET_AVX2 CPX_FORCE_INLINE void store(float* c, index_t ldc) const {
        if (full) {
#pragma GCC unroll 8
            for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
                for (int j = 0; j < NV; ++j) _mm256_storeu_ps(c + r * ldc + 8 * j, v[r][j]);
            return;
        }
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
            for (int j = 0; j < NV; ++j) _mm256_maskstore_ps(c + r * ldc + 8 * j, mask[j], v[r][j]);
    }
};

namespace detail {
/// acc[r][.] += a[r] * b[.] for one input of the pass whose NV vectors start at `b`, NV / 2
/// strips `sstride` values apart.
template <int MR, int NV>
CPX_TARGET_AVX2 CPX_FORCE_INLINE void step(Accumulators<MR, NV>& acc, const float* const (&arow)[MR], index_t k,
                                          const float* b, index_t sstride) {
    __m256 bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = _mm256_load_ps(b + v / 2 * sstride + 8 * (v % 2));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
        const __m256 av = _mm256_broadcast_ss(arow[r] + k);
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc.v[r][v] = _mm256_fmadd_ps(av, bv[v], acc.v[r][v]);
    }
}

/// One half of a bf16 input pair: its even (Odd = false) or odd inputs, widened; `b` points
/// at the pass's words of the pair, NV / 2 strips `sstride` values apart.
template <int MR, int NV, bool Odd>
CPX_TARGET_AVX2 CPX_FORCE_INLINE void half_pair(Accumulators<MR, NV>& acc, const float* const (&arow)[MR], index_t p,
                                               const bf16* b, index_t sstride) {
    __m256 bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
        const bf16* words_at = b + v / 2 * sstride + 16 * (v % 2);
        const __m256i words = _mm256_load_si256(reinterpret_cast<const __m256i*>(words_at));
        bv[v] = Odd ? avx2::bf16_high_halves(words) : avx2::bf16_low_halves(words);
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
        const __m256 av = _mm256_broadcast_ss(arow[r] + 2 * p + (Odd ? 1 : 0));
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc.v[r][v] = _mm256_fmadd_ps(av, bv[v], acc.v[r][v]);
    }
}

/// The lines a tile without a Prefetcher fetches ahead of each input step of a pass: rows
/// layout, the first pass the whole group (avx512_tile::fetch_stream), the others none; strips,
/// every pass its own strips' lines, as far ahead.
struct StreamFetch {
    int strip_lines = 0;  ///< strips: lines per step, `stride` bytes apart
    index_t stride = 0;
    bool group = false;  ///< rows: the group's lines

    StreamFetch(int vectors, index_t pass, index_t strip_bytes, bool strips)
        : strip_lines(strips ? vectors / 2 : 0), stride(strip_bytes), group(!strips && pass == 0) {}
    void operator()(const void* step) const {
        if (group) return avx512_tile::fetch_stream(step);
        const char* p = static_cast<const char*>(step) + avx512_tile::stream_distance;
        for (int i = 0; i < strip_lines; ++i) _mm_prefetch(p + i * stride, _MM_HINT_T0);
    }
};

/// Prefetches for the input step at `step` (its first B value) of a pass.
template <int MR, bool Ahead>
inline void fetch(avx512_tile::Prefetcher& ahead, const StreamFetch& stream, const void* step) {
    if constexpr (Ahead) ahead.step();
    else if constexpr (MR > 1) stream(step);
}
}  // namespace detail

/// c[0:MR, 0:cols) (= | +=) a[0:MR, 0:depth) . panel over `depth` inputs, pass by pass.
template <int MR, bool Ahead>
CPX_TARGET_AVX2 inline void tile(const float* a, index_t lda, const float* b, PanelStrides st, index_t depth, float* c,
                                 index_t ldc, index_t cols, bool load_c, avx512_tile::Prefetcher ahead) {
    constexpr int NV = strip_vectors<MR>;
    const float* arow[MR];
    for (int r = 0; r < MR; ++r) arow[r] = a + r * lda;
    for (index_t s = 0; s * 8 * NV < cols; ++s) {
        const index_t c0 = s * 8 * NV;
        const float* bs = b + c0 / strip_cols * st.strip;
        const detail::StreamFetch stream(NV, s, st.strip * static_cast<index_t>(sizeof(float)), st.strips);
        Accumulators<MR, NV> acc(c + c0, ldc, cols - c0, load_c);
        for (index_t k = 0; k < depth; ++k) {
            const float* bk = bs + k * st.group;
            detail::fetch<MR, Ahead>(ahead, stream, bk);
            detail::step(acc, arow, k, bk, st.strip);
        }
        acc.store(c + c0, ldc);
    }
}

/// tile<rows> for 1 <= rows <= tile_rows.
inline void tile_rows_n(int rows, const float* a, index_t lda, const float* b, PanelStrides st, index_t depth, float* c,
                        index_t ldc, index_t cols, bool load_c, avx512_tile::Prefetcher ahead = {}) {
    avx512_tile::for_rows(rows, ahead, [&]<int R, bool Ahead>() {
        tile<R, Ahead>(a, lda, b, st, depth, c, ldc, cols, load_c, ahead);
    });
}

/// tile() on bf16 panels over `pairs` input pairs. `half_last`: the last pair has only its even
/// input (an odd K): a[.., 2 pairs - 1] is neither read nor multiplied.
template <int MR, bool Ahead>
CPX_TARGET_AVX2 inline void tile_bf16(const float* a, index_t lda, const bf16* b, PanelStrides st, index_t pairs,
                                      bool half_last, float* c, index_t ldc, index_t cols, bool load_c,
                                      avx512_tile::Prefetcher ahead) {
    constexpr int NV = strip_vectors<MR>;
    const float* arow[MR];
    for (int r = 0; r < MR; ++r) arow[r] = a + r * lda;
    const index_t full = half_last ? pairs - 1 : pairs;
    for (index_t s = 0; s * 8 * NV < cols; ++s) {
        const index_t c0 = s * 8 * NV;
        const bf16* bs = b + c0 / strip_cols * st.strip;
        const detail::StreamFetch stream(NV, s, st.strip * static_cast<index_t>(sizeof(bf16)), st.strips);
        Accumulators<MR, NV> acc(c + c0, ldc, cols - c0, load_c);
        for (index_t p = 0; p < full; ++p) {
            const bf16* bp = bs + p * st.group;
            detail::fetch<MR, Ahead>(ahead, stream, bp);
            detail::half_pair<MR, NV, false>(acc, arow, p, bp, st.strip);
            detail::half_pair<MR, NV, true>(acc, arow, p, bp, st.strip);
        }
        if (half_last) detail::half_pair<MR, NV, false>(acc, arow, full, bs + full * st.group, st.strip);
        acc.store(c + c0, ldc);
    }
}

/// tile_bf16<rows> for 1 <= rows <= tile_rows.
inline void tile_bf16_rows_n(int rows, const float* a, index_t lda, const bf16* b, PanelStrides st, index_t pairs,
                             bool half_last, float* c, index_t ldc, index_t cols, bool load_c,
                             avx512_tile::Prefetcher ahead = {}) {
    avx512_tile::for_rows(rows, ahead, [&]<int R, bool Ahead>() {
        tile_bf16<R, Ahead>(a, lda, b, st, pairs, half_last, c, ldc, cols, load_c, ahead);
    });
}

}  // namespace cpx::cpu::avx2_f32

#endif

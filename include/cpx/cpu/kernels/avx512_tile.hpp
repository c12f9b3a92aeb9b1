#pragma once
// What the packed-panel micro-kernels (cpu/kernels/gemm_bf16_avx512.hpp,
// cpu/kernels/gemm_f32_avx512.hpp) share: the tile's shape, its fp32 accumulators
// (loaded from C or zeroed, stored back, masked to the panel's valid columns),
// the prefetches of the next block (panel_gemm::Lookahead), and the dispatch from
// a run-time row count to the kernel compiled for it.
// Only the inner product differs between the kernels.

#if defined(__x86_64__) || defined(__i386__)

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"
#include "cpx/cpu/kernels/panel_gemm.hpp"
#include "cpx/cpu/kernels/prefetch_lines.hpp"  // LineStream
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX512

namespace cpx::cpu::avx512_tile {

/// Rows per tile: 6 x 4 accumulators leave registers for 4 B vectors and a broadcast.
inline constexpr int rows = 6;
/// 16-lane vectors per panel.
inline constexpr int vectors = static_cast<int>(packed_panel_cols / 16);
static_assert(packed_panel_cols % 16 == 0, "a packed panel is whole 16-lane vectors");

/// The MR x 64 fp32 accumulators of a tile over C's columns [0, cols).
template <int MR>
struct Accumulators {
    __m512 v[MR][vectors];
    __mmask16 mask[vectors];

    CPX_TARGET_AVX512 CPX_FORCE_INLINE Accumulators(const float* c, index_t ldc, index_t cols, bool load_c) {
        for (int j = 0; j < vectors; ++j) {
            const index_t left = cols - 16 * j;
            mask[j] = left >= 16 ? static_cast<__mmask16>(0xffff)
                                 : static_cast<__mmask16>(left <= 0 ? 0u : (1u << left) - 1u);
        }
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
            for (int j = 0; j < vectors; ++j)
                v[r][j] = load_c ? _mm512_maskz_loadu_ps(mask[j], c + r * ldc + 16 * j) : _mm512_setzero_ps();
    }
    /// Requests the tile's lines of C for writing (PREFETCHW, which every AVX-512 CPU has),
    /// to be stored at the end of its loop.
    CPX_FORCE_INLINE void fetch_for_stores(const float* c, index_t ldc) const {
        for (int r = 0; r < MR; ++r)
            for (int j = 0; j < vectors; ++j)
                if (mask[j]) prefetch_for_write(c + r * ldc + 16 * j);
    }
    CPX_TARGET_AVX512 CPX_FORCE_INLINE void store(float* c, index_t ldc) const {
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
            for (int j = 0; j < vectors; ++j) _mm512_mask_storeu_ps(c + r * ldc + 16 * j, mask[j], v[r][j]);
    }
};

/// A tile's share of the next block (panel_gemm::Lookahead), fetched toward L2 a few lines
/// per step of the tile's input loop so that the stream spreads over the whole tile.
struct Prefetcher : LineStream<false> {
    Prefetcher() = default;
    template <class T>
    Prefetcher(PackedPanelsView<T> b, const panel_gemm::Lookahead& ahead, index_t steps) {
        if (ahead.panel < 0 || steps <= 0) return;
        const index_t lines = ahead.groups * static_cast<index_t>(packed_panel_cols * sizeof(T) * b.group) / 64;
        const char* block = reinterpret_cast<const char*>(b.panel(ahead.panel, ahead.group));
        next = block + 64 * (lines * ahead.share_begin / ahead.shares);
        end = block + 64 * (lines * ahead.share_end / ahead.shares);
        per_step = static_cast<int>(((end - next) / 64 + steps - 1) / steps);
    }
};

/// What a tile of 2-6 rows without a Prefetcher (the only tile over its block: decode of 2-6
/// sequences; on AVX2 only at the end of a thread's share, panel_gemm::thread_share's
/// `single_tile_ahead`) fetches instead: its panel stream `stream_distance` bytes ahead, into
/// L1. Its loop body is mostly dot products, so the out-of-order window holds few of its loads
/// and the hardware prefetchers alone kept too few lines in flight. The 126 products of a 187M decode
/// step on one thread (Zen 5, alternated binaries): bf16 at 6 rows 5.5-6.2 -> 4.7-5.0 ms, 4
/// rows 5.3 -> 4.9-5.1 ms; fp32 panels at 4 rows 12.1-12.4 -> 9.9-10.2 ms, 6 rows 11.3 -> 10.2
/// ms; 1 and 2 KiB ahead gained less, 8 KiB no more. A one-row tile is a bare stream that the
/// hardware follows: it fetches nothing (with it: level to 3% slower). Past a block's end the
/// lines belong to the next panel, the next a thread's loop visits.
inline constexpr int stream_distance = 4096;

/// Whether the AVX-512 tiles of 2-6 rows fetch their stream (fetch_stream): on Zen 5, where it
/// was measured (above), as the decode kernels fetch into L1 there (stream_fetch_into_l1). On Zen 4
/// the hardware alone read faster: one core, 187M's products (768 x 768 to 32000 x 768 and
/// 1280 x 1536) on packs cycled from memory, 2, 4 and 6 rows, both ways alternated in one process,
/// 3-7% less time without (bf16 and fp32 panels alike; 8 KiB ahead level, into L2 4 KiB ahead
/// 13-26% slower); two threads level to 15% less.
inline bool tiles_fetch_stream() { return stream_fetch_into_l1(); }

/// Whether a one-row tile (batch-1 decode on the packs) fetches its stream too: on Intel CPUs,
/// where the hardware alone left the bf16 stream short. 187M's batch-1 decode step under `bf16`
/// (Xeon, family 6 model 0xCF, both ways alternated in one process): one thread 23.0 -> 18.6 ms,
/// two 14.0 -> 11.0 ms; the fp32 product on the same bf16 packs gained as much
/// (avx512_f32::tile_bf16), while its one-row loop on fp32 panels was level with it (33.9 / 34.0
/// ms), so that loop does not fetch. Zen 5 measured level to 3% slower with it (above).
inline bool one_row_tiles_fetch_stream() { return cpu_features().intel; }

/// Fetches the lines `stream_distance` ahead of one step's `vectors` B vectors at `step`
/// (forced inline for the reason fetch_lines is).
CPX_FORCE_INLINE void fetch_stream(const void* step) {
    const char* p = static_cast<const char*>(step) + stream_distance;
#pragma GCC unroll 4
    for (int v = 0; v < vectors; ++v) _mm_prefetch(p + 64 * v, _MM_HINT_T0);
}

/// fetch_stream for panels of either layout: the line `ahead` bytes past each of the step's
/// `vectors` B vectors at `step`, `strip_bytes` apart (64 in rows, where it is fetch_stream).
CPX_FORCE_INLINE void fetch_strips(const void* step, index_t strip_bytes, index_t ahead) {
    const char* p = static_cast<const char*>(step) + ahead;
#pragma GCC unroll 4
    for (int v = 0; v < vectors; ++v) _mm_prefetch(p + strip_bytes * v, _MM_HINT_T0);
}

/// kernel.template operator()<R, Ahead>() with R = row_count (1 <= row_count <= rows) and
/// Ahead = whether `ahead` has lines to fetch.
template <class Kernel>
void for_rows(int row_count, const Prefetcher& ahead, Kernel&& kernel) {
    static_assert(rows == 6, "for_rows covers 1..6 rows");
    const auto dispatch = [&]<bool Ahead>() {
        switch (row_count) {
            case 6: kernel.template operator()<6, Ahead>(); break;
            case 5: kernel.template operator()<5, Ahead>(); break;
            case 4: kernel.template operator()<4, Ahead>(); break;
            case 3: kernel.template operator()<3, Ahead>(); break;
            case 2: kernel.template operator()<2, Ahead>(); break;
            default: kernel.template operator()<1, Ahead>(); break;
        }
    };
    if (ahead.per_step > 0) dispatch.template operator()<true>();
    else dispatch.template operator()<false>();
}

/// for_rows for the AVX-512 tiles: kernel.template operator()<R, Ahead, Own>(), Own = whether a
/// tile without a Prefetcher fetches its own stream (tiles_fetch_stream; one_row_tiles_fetch_stream
/// for a one-row tile), a constant of the
/// instance: the same choice read at run time inside the loop cost 25% on 4-row products (Zen 4).
template <class Kernel>
void for_rows_fetching(int row_count, const Prefetcher& ahead, Kernel&& kernel) {
    const bool own = row_count > 1 ? tiles_fetch_stream() : one_row_tiles_fetch_stream();
    for_rows(row_count, ahead, [&]<int R, bool Ahead>() {
        if (Ahead || own) kernel.template operator()<R, Ahead, true>();
        else kernel.template operator()<R, false, false>();
    });
}

}  // namespace cpx::cpu::avx512_tile

#endif

#pragma once
// The AMX level of the bf16 product (cpu/kernels/gemm_bf16.hpp): TDPBF16PS on
// tile registers, for the Xeons that have AMX-BF16 and whose OS grants the tile
// state (cpu/runtime/cpu_features.hpp asks Linux for it).
//
// Eight tile registers of up to 16 rows x 64 bytes, all configured as 16 x 64
// bytes. One tile call computes 32 rows x one 64-column panel, as two halves of
// 32 columns; per half, C is 2 x 2 tiles of 16 x 16 fp32 (tmm0-3), A two tiles
// of 16 rows x 16 input pairs (tmm4-5), B two tiles of 16 pairs x 16 columns
// (tmm6-7): per 16 pairs, four tile loads feed four tile products of 16 x 16 x
// 32 multiply-adds each, the arrangement the instruction's latency and the load
// ports are balanced for. Loops: panel_gemm's, each tile of rows over 8 panels.
// A tile's 32 rows of A (up to 48 KiB: 512 pairs, or 384 at K = 768) are reused by
// the 8 panels while each panel's B passes once; B's tiles are loaded with the
// streaming hint (TILELOADDT1), so B does not push A out of L1: one core,
// [512 x 768] . [768 x 2048] 852 -> 987 GFLOP/s, [2048 x 768] . [768 x 1280]
// 618 -> 723 (medians, alternated in one process, Xeon with AMX).
// A tile of at most 16 rows (decode of 3-16 sequences, a product's last rows)
// takes one A tile (tmm4) and the panel's four 16-column C tiles (tmm0-3) in one
// pass, B through tmm5-7: each chunk's 4 KiB of B read once, in order, not as
// two halves of every 256-byte pair, with the stream fetched ahead into L1.
//
// B is read where the packed panels (cpu/kernels/packed_panels.hpp) hold it: the pair p
// of a panel's columns [16j, 16j + 16) is 64 bytes, exactly an AMX B tile row. In
// PanelLayout::rows the rows of a tile are 256 bytes apart (the four 16-column strips
// interleaved); in PanelLayout::strips, the layout bf16_panel_layout() packs weights in where
// AMX may run, a tile is 1 KiB in a row. Against rows, one core (Xeon with AMX, alternated
// binaries): 384M bf16 prefill at 512 tokens 296 -> 276 ms, 187M 152 -> 147 ms (two threads:
// 384M 168 -> 160, 187M level); the one-A-tile kernel and the one-row vdpbf16ps kernel read the
// four strips as four streams, faster than one: 187M batch-1 decode step 8.6 -> 7.4 ms, 384M
// 16.1 -> 14.7 ms (two threads). Attention packs its keys and values per call in rows.
// A is the call's bf16 copy of x, its rows padded with zero rows to whole tiles.
// Inputs: whole chunks of 16 pairs run on the tiles; a block's last pairs (fewer
// than 16) run on the AVX512_BF16 micro-kernel, which every CPU with AMX-BF16
// has, so the tiles keep one shape and B is never read past its last pair. A
// tile call with fewer rows or columns of C than its tiles goes through a
// buffer, so tile stores never write outside y.
//
// The instructions are issued through a policy type: `Hardware` here; the tests
// also run this kernel on a software model of the tile registers, so that its
// addressing and its use of the tile configuration are checked (and checked
// under AddressSanitizer) on machines without AMX.

#if (defined(__x86_64__) && !defined(__CUDACC__)) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define CPX_HAVE_GEMM_BF16_AMX 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include <algorithm>
#include <cstdint>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/gemm_bf16_avx512.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"

#define CPX_TARGET_AMX __attribute__((target("amx-tile,amx-bf16")))

namespace cpx::cpu::amx {

/// Rows per tile call: two A tiles.
inline constexpr int tile_rows = 32;
/// Input pairs per A and B tile (16 rows of B, 64 bytes of each A row).
inline constexpr index_t chunk_pairs = 16;
/// Products of at most this many rows (decode of one or two sequences) run on the AVX512_BF16
/// micro-kernel even at the AMX level. Against 32-row tile calls that kernel won up to six rows
/// (187M's decode steps under `bf16`, Xeon with AMX, alternated in one process: 5% less time for
/// one sequence, 13% for four). Against the one-A-tile kernel (tile_16x64), whose B stream is the
/// same for any rows, it is level at one and two rows and slower from three, where its
/// `vdpbf16ps` (half the fp32 FMA rate on that Xeon) no longer hides under the read: one core,
/// [4 x 768] . [768 x 32000] 4.36 -> 3.68 ms, [4 x 1024] . [1024 x 768] 142 -> 121 us, three rows
/// of the first 4.30 -> 3.61 ms; two rows 4.84 / 4.90 ms. 187M's decode step of three sequences on
/// one thread 29.2 -> 26.3 ms, of four 29.6 -> 27.1 (another run level).
inline constexpr index_t vector_max_rows = 2;
/// Panels each tile of rows runs over before the next tile (panel_gemm::thread_share): the
/// tile's 32 rows of A are reused 16 times (8 panels x 2 halves) while the 8 panels' block of B
/// (1 MiB at 512 pairs) stays in L2.
inline constexpr index_t row_tile_panels = 8;

/// The 64-byte operand of LDTILECFG (palette 1): per tile register, its bytes per row and rows.
struct alignas(64) TileConfig {
    std::uint8_t palette = 0;
    std::uint8_t start_row = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads 64 bytes");

/// The one configuration the kernel uses: tmm0-7 all 16 rows x 64 bytes.
constexpr TileConfig full_tiles() {
    TileConfig c;
    c.palette = 1;
    for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
    return c;
}

/// The AMX instructions, issued. Tile numbers are template arguments because the
/// instructions encode them; the kernel uses C = tmm0-3, A = tmm4-5, B = tmm6-7.
struct Hardware {
    CPX_TARGET_AMX static void configure(const TileConfig& c) { _tile_loadconfig(&c); }
    CPX_TARGET_AMX static void release() { _tile_release(); }
    template <int T>
    CPX_TARGET_AMX static void zero() {
        static_assert(T >= 0 && T < 4, "only C tiles are zeroed");
        if constexpr (T == 0) _tile_zero(0);
        else if constexpr (T == 1) _tile_zero(1);
        else if constexpr (T == 2) _tile_zero(2);
        else _tile_zero(3);
    }
    template <int T>
    CPX_TARGET_AMX static void load(const void* p, index_t stride) {
        if constexpr (T == 0) _tile_loadd(0, p, stride);
        else if constexpr (T == 1) _tile_loadd(1, p, stride);
        else if constexpr (T == 2) _tile_loadd(2, p, stride);
        else if constexpr (T == 3) _tile_loadd(3, p, stride);
        else if constexpr (T == 4) _tile_loadd(4, p, stride);
        else if constexpr (T == 5) _tile_loadd(5, p, stride);
        else if constexpr (T == 6) _tile_loadd(6, p, stride);
        else _tile_loadd(7, p, stride);
    }
    /// load() with the streaming hint (TILELOADDT1): the data is not kept in the near caches.
    template <int T>
    CPX_TARGET_AMX static void load_stream(const void* p, index_t stride) {
        static_assert(T == 6 || T == 7, "only B tiles are streamed");
        if constexpr (T == 6) _tile_stream_loadd(6, p, stride);
        else _tile_stream_loadd(7, p, stride);
    }
    template <int T>
    CPX_TARGET_AMX static void store(void* p, index_t stride) {
        static_assert(T >= 0 && T < 4, "only C tiles are stored");
        if constexpr (T == 0) _tile_stored(0, p, stride);
        else if constexpr (T == 1) _tile_stored(1, p, stride);
        else if constexpr (T == 2) _tile_stored(2, p, stride);
        else _tile_stored(3, p, stride);
    }
    /// tmm C += tmm A . tmm B (bf16 pairs, fp32 sums).
    template <int C, int A, int B>
    CPX_TARGET_AMX static void dot() {
        if constexpr (C == 0 && A == 4 && B == 6) _tile_dpbf16ps(0, 4, 6);
        else if constexpr (C == 1 && A == 4 && B == 7) _tile_dpbf16ps(1, 4, 7);
        else if constexpr (C == 2 && A == 5 && B == 6) _tile_dpbf16ps(2, 5, 6);
        else if constexpr (C == 3 && A == 5 && B == 7) _tile_dpbf16ps(3, 5, 7);
        else if constexpr (C == 2 && A == 4 && B == 5) _tile_dpbf16ps(2, 4, 5);  // tile_16x64
        else if constexpr (C == 3 && A == 4 && B == 6) _tile_dpbf16ps(3, 4, 6);
        else static_assert(C < 0, "the kernels' tile products only");
    }
};

/// The accumulator tiles tmm0-3 at the start of a tile call: the 16 x 16 blocks of C at c[0..3]
/// (rows `c_stride` bytes apart) when load_c, else zero.
template <class Isa>
CPX_TARGET_AMX inline void start_c(float* const (&c)[4], index_t c_stride, bool load_c) {
    if (load_c) {
        Isa::template load<0>(c[0], c_stride);
        Isa::template load<1>(c[1], c_stride);
        Isa::template load<2>(c[2], c_stride);
        Isa::template load<3>(c[3], c_stride);
    } else {
        Isa::template zero<0>();
        Isa::template zero<1>();
        Isa::template zero<2>();
        Isa::template zero<3>();
    }
}

/// tmm0-3 stored to the blocks start_c read.
template <class Isa>
CPX_TARGET_AMX inline void store_c(float* const (&c)[4], index_t c_stride) {
    Isa::template store<0>(c[0], c_stride);
    Isa::template store<1>(c[1], c_stride);
    Isa::template store<2>(c[2], c_stride);
    Isa::template store<3>(c[3], c_stride);
}

/// The first value of B tile `t` (columns [16t, 16t + 16)) of chunk q of a panel whose pairs and
/// strips are `st` apart (PanelStrides): rows 2 st.group bytes apart.
inline const bf16* b_tile(const bf16* panel, PanelStrides st, index_t q, int t) {
    return panel + q * chunk_pairs * st.group + t * st.strip;
}

/// c[0:32, 0:64) (= | +=) a[0:32, 0:32 chunks) . panel over `chunks` chunks of 16 pairs,
/// with the tiles configured by full_tiles(). a: bf16 rows `lda` values apart; panel: the
/// panel at its first pair, its pairs and strips `st` apart; c: fp32 rows `ldc` floats apart,
/// all 32 x 64 of them written. Compiled for AMX so that Hardware's instructions inline into
/// the loop.
template <class Isa>
CPX_TARGET_AMX void tile_32x64(const std::uint16_t* a, index_t lda, const bf16* panel, PanelStrides st, index_t chunks,
                               float* c, index_t ldc, bool load_c) {
    const index_t a_stride = lda * 2, c_stride = ldc * 4, b_stride = st.group * 2;
    for (int half = 0; half < 2; ++half) {
        float* c0 = c + 32 * half;
        float* const blocks[4] = {c0, c0 + 16, c0 + 16 * ldc, c0 + 16 * ldc + 16};  // 2 x 2 tiles
        const auto a_tile = [&](index_t q, int r) { return a + 2 * chunk_pairs * q + 16 * r * lda; };
        const auto b_half = [&](index_t q, int j) { return b_tile(panel, st, q, 2 * half + j); };
        start_c<Isa>(blocks, c_stride, load_c);
        Isa::template load<4>(a_tile(0, 0), a_stride);
        Isa::template load_stream<6>(b_half(0, 0), b_stride);
        Isa::template load_stream<7>(b_half(0, 1), b_stride);
        Isa::template load<5>(a_tile(0, 1), a_stride);
        // Each tile is reloaded with the next chunk's as soon as its last product of this chunk is
        // issued, so the loads run under the remaining products: one core, [512 x 768] . [768 x
        // 2048] 1,349 -> 1,458 GFLOP/s, [2048 x 768] . [768 x 1280] 1,510 -> 1,574 (medians,
        // alternated in one process, Xeon with AMX). B is loaded with the streaming hint, so that
        // it passes without evicting the tile's rows of A from L1, which the next panels reuse (the
        // file comment).
        for (index_t q = 0; q + 1 < chunks; ++q) {
            Isa::template dot<0, 4, 6>();
            Isa::template dot<1, 4, 7>();
            Isa::template load<4>(a_tile(q + 1, 0), a_stride);
            Isa::template dot<2, 5, 6>();
            Isa::template load_stream<6>(b_half(q + 1, 0), b_stride);
            Isa::template dot<3, 5, 7>();
            Isa::template load<5>(a_tile(q + 1, 1), a_stride);
            Isa::template load_stream<7>(b_half(q + 1, 1), b_stride);
        }
        Isa::template dot<0, 4, 6>();
        Isa::template dot<1, 4, 7>();
        Isa::template dot<2, 5, 6>();
        Isa::template dot<3, 5, 7>();
        store_c<Isa>(blocks, c_stride);
    }
}

/// Rows of the one-A-tile kernel (tile_16x64).
inline constexpr int half_tile_rows = 16;
/// How far ahead of its chunk tile_16x64 fetches B, in pairs (2 KiB of a panel in rows). With few
/// rows a tile call is bound by reading B: a 187M decode step of 16 sequences under `bf16` on two
/// threads took 32.7 ms on the 32-row tiles, 28.4 on this kernel without the fetch and 26.7 with
/// it (medians, alternated in one process, Xeon with AMX); [16 x 768] . [768 x 32000] on one core
/// 5.1 -> 3.9 ms, the rate at which the one-row kernel reads the same weight.
inline constexpr index_t half_tile_fetch_pairs = 8;

/// c[0:16, 0:64) (= | +=) a[0:16, 0:32 chunks) . panel over `chunks` chunks of 16 pairs (as
/// tile_32x64, for 16 rows): per chunk one A tile, four B tiles of 16 columns each. The fetches
/// past B's end are hints, which never fault.
template <class Isa>
CPX_TARGET_AMX void tile_16x64(const std::uint16_t* a, index_t lda, const bf16* panel, PanelStrides st,
                               index_t chunks, float* c, index_t ldc, bool load_c) {
    const index_t a_stride = lda * 2, c_stride = ldc * 4, b_stride = st.group * 2;
    float* const blocks[4] = {c, c + 16, c + 32, c + 48};  // 1 x 4 tiles
    start_c<Isa>(blocks, c_stride, load_c);
    for (index_t q = 0; q < chunks; ++q) {
        const std::uint16_t* aq = a + 2 * chunk_pairs * q;
        // Each tile's 16 rows, half_tile_fetch_pairs ahead: in rows, the chunk's 4 KiB shifted by 2 KiB.
        // One line per row, b_stride apart, so not fetch_lines' contiguous stretch (GCC 12 emits all
        // 64 prefetches in the Hardware instance, unrolled).
        for (int t = 0; t < 4; ++t) {
            const bf16* tile_ahead = b_tile(panel, st, q, t) + half_tile_fetch_pairs * st.group;
            const char* ahead = reinterpret_cast<const char*>(tile_ahead);
            for (int r = 0; r < 16; ++r) _mm_prefetch(ahead + b_stride * r, _MM_HINT_T0);
        }
        Isa::template load<4>(aq, a_stride);
        Isa::template load<6>(b_tile(panel, st, q, 0), b_stride);
        Isa::template dot<0, 4, 6>();
        Isa::template load<7>(b_tile(panel, st, q, 1), b_stride);
        Isa::template dot<1, 4, 7>();
        Isa::template load<5>(b_tile(panel, st, q, 2), b_stride);
        Isa::template dot<2, 4, 5>();
        Isa::template load<6>(b_tile(panel, st, q, 3), b_stride);
        Isa::template dot<3, 4, 6>();
    }
    store_c<Isa>(blocks, c_stride);
}

/// kernel(c, ldc) computes a tile of `Rows` rows x 64 columns into c, loading it first when
/// load_c; for a tile of C smaller than that, through a buffer, so that tile stores never write
/// outside y.
template <int Rows, class Kernel>
void through_buffer(int rows, float* c, index_t ldc, index_t cols, bool load_c, Kernel&& kernel) {
    if (rows == Rows && cols == packed_panel_cols) return kernel(c, ldc);
    alignas(64) float buffer[Rows * packed_panel_cols];
    if (load_c) {
        std::fill(std::begin(buffer), std::end(buffer), 0.0f);
        for (int r = 0; r < rows; ++r) std::copy_n(c + r * ldc, cols, buffer + r * packed_panel_cols);
    }
    kernel(buffer, packed_panel_cols);
    for (int r = 0; r < rows; ++r) std::copy_n(buffer + r * packed_panel_cols, cols, c + r * ldc);
}

/// c[0:rows, 0:cols) (= | +=) a[0:rows, 0:2 pairs) . panel, rows <= 32, cols <= 64: whole
/// chunks on the tiles (tile_16x64 for up to 16 rows, else tile_32x64), the rest on the
/// AVX512_BF16 micro-kernel. a must have whole tiles of readable rows (zero past `rows`) of
/// at least 2 * pairs values rounded up to whole chunks; the panel's pairs and strips `st` apart.
template <class Isa>
void tile_rows_n(int rows, const std::uint16_t* a, index_t lda, const bf16* panel, PanelStrides st, index_t pairs,
                 float* c, index_t ldc, index_t cols, bool load_c) {
    const index_t chunks = pairs / chunk_pairs, rest = pairs - chunks * chunk_pairs;
    if (chunks > 0 && rows <= half_tile_rows) {
        through_buffer<half_tile_rows>(rows, c, ldc, cols, load_c, [&](float* cc, index_t ld) {
            tile_16x64<Isa>(a, lda, panel, st, chunks, cc, ld, load_c);
        });
    } else if (chunks > 0) {
        through_buffer<tile_rows>(rows, c, ldc, cols, load_c, [&](float* cc, index_t ld) {
            tile_32x64<Isa>(a, lda, panel, st, chunks, cc, ld, load_c);
        });
    }
    if (rest > 0) {
        const index_t done = chunks * chunk_pairs;
        for (int r = 0; r < rows; r += avx512_bf16::tile_rows)
            avx512_bf16::tile_rows_n(std::min(avx512_bf16::tile_rows, rows - r), a + r * lda + 2 * done, lda,
                                     panel + done * st.group, st, rest, c + r * ldc, ldc, cols,
                                     load_c || chunks > 0);
    }
}

}  // namespace cpx::cpu::amx

#endif

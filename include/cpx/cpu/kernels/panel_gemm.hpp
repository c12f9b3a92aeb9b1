#pragma once
// The loop nest shared by the products over packed weight panels
// (cpu/kernels/packed_panels.hpp): bf16 (cpu/kernels/gemm_bf16.hpp) and fp32
// (cpu/kernels/gemm_f32_packed.hpp). It decides which thread computes what and in
// which order; the caller's `tile` computes one register tile.
//
// Blocking: the input dimension in blocks of `block_depth` groups (the
// kernels choose it: deep blocks whose panel part stays in L2, so a tile's
// accumulators are loaded and stored once per block); `block_rows` rows x
// `block_panels` panels of output per block, so C stays in L2 across the input
// blocks and is read and written once per input block. Threads take a grid of
// row ranges x panel ranges, panels first (each thread then reads only its
// share of B). A kernel whose tile is expensive to refill from L2 (AMX) can
// instead walk each tile of rows over a few panels before the next tile
// (`row_tile_panels`).

#include <algorithm>
#include <limits>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/parallel.hpp"

namespace cpx::cpu::panel_gemm {

inline constexpr index_t block_rows = 192;  // a multiple of every kernel's tile rows
inline constexpr index_t block_panels = 4;

/// Threads for an [m x n] output over k inputs: all, but none idle on tiny products. A thread
/// pays for itself with 4096 outputs or 64 Ki weights to read: a one-row product (decode) is
/// bound by reading its [k x n] weight, which two threads split even when it has few outputs.
/// (A fork and join costs ~0.5 us; one core reads 64 Ki bf16 weights in ~4 us. With 256 Ki,
/// the experts' [512 -> 768] down projections ran on one thread while the other waited, 14% of
/// a 187M bf16 decode step; on two threads each took 13-19 us instead of 20-21, Zen 5.)
inline int threads_for(index_t m, index_t n, index_t k) {
    return static_cast<int>(std::min<index_t>(max_threads(), std::max<index_t>(1, m * n / 4096 + n * k / 65536)));
}

/// Splits `count` items into `parts` near-equal ranges, each a multiple of `unit` but the last.
inline void split(index_t count, int parts, int part, index_t unit, index_t& begin, index_t& end) {
    const Share units = equal_share((count + unit - 1) / unit, parts, part);
    begin = std::min(count, units.begin * unit);
    end = std::min(count, units.end * unit);
}

/// The part of the next block a tile brings toward L2 while it computes: groups
/// [group, group + groups) of `panel`, its share [share_begin, share_end) of `shares`
/// (panel < 0: nothing).
struct Lookahead {
    index_t panel = -1, group = 0, groups = 0;
    index_t share_begin = 0, share_end = 0, shares = 1;
};

/// Thread `t` of `team`'s share of an [m rows x panels] output over `depth` input groups (a
/// product of one tile of rows on several threads: the panels `claims` gives it, each over all
/// its blocks, without lookahead):
/// tile(row, rows, panel, first_group, groups, first_block, lookahead) for every tile of its
/// share, where rows <= tile_rows and first_block tells whether this is the first input block
/// (C not yet written by this call).
///
/// row_tile_panels > 0: per block of that many panels and input block, each tile of rows runs
/// over the block's panels in turn before the next tile, so its rows of A are read from L2 once
/// for all of them while the panels' block stays in L2 (no lookahead). The AMX kernel's order:
/// its tile product reads 1 KiB of A or B per 16 x 16 x 32 product, and the 187M bf16-compute
/// prefill at 512 tokens on one core took 5% less time (185 vs 196 ms, alternated in one process,
/// Xeon with AMX) than in the order below.
///
/// Lookahead: the first tile over a block of B reads it from memory and the others from L2,
/// so with only a few tiles per block (batched decode) memory idled while the
/// later tiles computed. Wherever a thread has more than one tile of rows, each tile fetches
/// its rows' share of the block the thread computes next, spread over its loop, and the
/// stream overlaps all of the block's compute. The 126 bf16 products of a 187M decode step
/// (two threads, Zen 5, alternated): 16 rows 5.8-8.1 -> 4.9-6.6 ms, 32 rows 9.1 -> 7.3 ms,
/// fp32 panels at 16 rows 12.8-15.8 -> 10.9-12.2 ms; whole-model fp32_packed prefill at 512
/// tokens on two threads 259-278 -> 244-252 ms, bf16 prefill level. A share of one tile of
/// rows (<= tile_rows: decode of a few sequences) streams B panel by panel under the hardware
/// prefetchers, unless it has at least `single_tile_ahead` rows: a kernel whose tile walks its panel in
/// several passes (the AVX2 fp32 tile, cpu/kernels/gemm_f32_avx2.hpp) reads the block from
/// memory in its first pass only, so it fetches the next block over all of them as well.
template <class Tile>
void thread_share(int t, int team, index_t m, index_t panels, index_t depth, index_t block_depth, int tile_rows,
                  RangeClaims& claims, Tile&& tile,
                  index_t single_tile_ahead = std::numeric_limits<index_t>::max(), index_t row_tile_panels = 0) {
    // One tile of rows [r, r + rows): no tile reuses a block of B, so each panel's blocks run in
    // turn and B is read as one ascending stream, without lookahead.
    const auto whole_panel = [&](index_t r, index_t rows, index_t p) {
        for (index_t g = 0; g < depth; g += block_depth)
            tile(r, static_cast<int>(rows), p, g, std::min(block_depth, depth - g), g == 0, Lookahead{});
    };
    if (team > 1 && m <= tile_rows && m < single_tile_ahead && claims.serves(team)) {
        for (index_t p; (p = claims.next(t)) >= 0;) whole_panel(0, m, p);
        return;
    }
    const int tn = static_cast<int>(std::min<index_t>(team, panels));
    const int tm = team / tn;
    if (t >= tn * tm) return;
    index_t p0, p1, r0, r1;
    split(panels, tn, t % tn, 1, p0, p1);
    split(m, tm, t / tn, tile_rows, r0, r1);
    const bool ahead = r1 - r0 > tile_rows || r1 - r0 >= single_tile_ahead;
    if (!ahead) {
        // One tile of rows: panel by panel, where the blocked order below hopped between the
        // blocks of four panels. Products of 1-6 rows over more than one input block, one core,
        // packs cycled from memory, both orders alternated in one process (Zen 4): 2,048 inputs
        // 8-11% less time for one row, 5-7% for four (bf16 and widened panels alike).
        if (r0 < r1)
            for (index_t p = p0; p < p1; ++p) whole_panel(r0, r1 - r0, p);
        return;
    }
    if (row_tile_panels > 0) {
        for (index_t pb = p0; pb < p1; pb += row_tile_panels) {
            const index_t pe = std::min(p1, pb + row_tile_panels);
            for (index_t g = 0; g < depth; g += block_depth) {
                const index_t gn = std::min(block_depth, depth - g);
                for (index_t r = r0; r < r1; r += tile_rows) {
                    const int rows = static_cast<int>(std::min<index_t>(tile_rows, r1 - r));
                    for (index_t p = pb; p < pe; ++p) tile(r, rows, p, g, gn, g == 0, Lookahead{});
                }
            }
        }
        return;
    }
    for (index_t mb = r0; mb < r1; mb += block_rows) {
        const index_t me = std::min(r1, mb + block_rows);
        for (index_t pb = p0; pb < p1; pb += block_panels) {
            const index_t pe = std::min(p1, pb + block_panels);
            for (index_t g = 0; g < depth; g += block_depth) {
                const index_t gn = std::min(block_depth, depth - g);
                for (index_t p = pb; p < pe; ++p) {
                    Lookahead next;
                    if (ahead) {  // the (panel, block) after (p, g) in this loop order
                        if (p + 1 < pe) next.panel = p + 1, next.group = g;
                        else if (g + block_depth < depth) next.panel = pb, next.group = g + block_depth;
                        else if (pe < p1) next.panel = pe, next.group = 0;
                        else if (me < r1) next.panel = p0, next.group = 0;
                        next.groups = std::min(block_depth, depth - next.group);
                        next.shares = me - mb;
                    }
                    for (index_t r = mb; r < me; r += tile_rows) {
                        const int rows = static_cast<int>(std::min<index_t>(tile_rows, me - r));
                        next.share_begin = r - mb, next.share_end = r - mb + rows;
                        tile(r, rows, p, g, gn, g == 0, static_cast<const Lookahead&>(next));
                    }
                }
            }
        }
    }
}

}  // namespace cpx::cpu::panel_gemm

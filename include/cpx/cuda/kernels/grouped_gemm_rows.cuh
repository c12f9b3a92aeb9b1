#pragma once
// The grouped expert GEMMs for a few rows (decoding): the same arguments, tile
// schedule and epilogue as the tiled kernels of grouped_gemm.cuh, shaped for
// reading weights rather than reusing them.
//
// A 64 x 64 tile walks K 16 rows at a time with a barrier per step; with one
// token per expert 63 of its rows are empty and the step latency is all there
// is to its time. Here a block takes a segment tile of up to `rows_bm` rows of
// one expert and 64 output columns; its 16 warps split K (warp w takes rows
// k = w, w + 16, ...), each lane holds two adjacent columns of every row, and
// the loads of `rows_unroll` weight rows are issued before their sums, so many
// loads are in flight per block. The warps' partial sums meet in shared
// memory, added in warp order: the result does not depend on timing.

#include <cstdint>

#include "cpx/core/dtype.hpp"
#include "cpx/cuda/kernels/grouped_gemm_args.cuh"
#include "cpx/cuda/kernels/segment_tiles.hpp"
#include "cpx/math/activation.hpp"

namespace cpx::cuda::kernels {

inline constexpr int rows_bm = 4, rows_bn = 64, rows_warps = 16, rows_threads = rows_warps * 32, rows_unroll = 4;

template <class TA, class TW, class TO, bool SwiGLU>
__global__ void __launch_bounds__(rows_threads) grouped_gemm_rows(GroupedGemmArgs<TA, TW, TO> a) {
    constexpr int NW = SwiGLU ? 2 : 1, BM = rows_bm, BN = rows_bn;
    static_assert(BN == 64, "each lane holds two of the block's 64 columns");
    SegmentTile tile;
    if (!find_segment_tile(a.offsets, a.experts, blockIdx.x, BM, tile)) return;  // whole block: no barrier skipped
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int n0 = static_cast<int>(blockIdx.y) * BN, n = n0 + 2 * lane;
    const bool has0 = n < a.N, has1 = n + 1 < a.N;

    // Rows past the tile's last read that last row again (their sums are never stored).
    const TA* x[BM];
#pragma unroll
    for (int r = 0; r < BM; ++r) {
        const int sorted_row = tile.row_begin + (r < tile.rows ? r : tile.rows - 1);
        x[r] = a.x + (a.gather ? a.gather[sorted_row] : sorted_row) * a.x_ld;
    }
    const TW* w[NW];
    w[0] = a.w0 + tile.expert * a.w_expert_stride;
    if constexpr (SwiGLU) w[1] = a.w1 + tile.expert * a.w_expert_stride;

    float acc[NW][BM][2];
#pragma unroll
    for (int b = 0; b < NW; ++b)
#pragma unroll
        for (int r = 0; r < BM; ++r) acc[b][r][0] = acc[b][r][1] = 0.0f;

    for (int k0 = warp; k0 < a.K; k0 += rows_warps * rows_unroll) {
        float wv[rows_unroll][NW][2], xv[rows_unroll][BM];
#pragma unroll
        for (int u = 0; u < rows_unroll; ++u) {
            const int k = k0 + u * rows_warps;
            const bool in = k < a.K;
#pragma unroll
            for (int b = 0; b < NW; ++b) {
                const TW* row = w[b] + static_cast<index_t>(in ? k : 0) * a.w_ld;
                wv[u][b][0] = in && has0 ? to_float(row[n]) : 0.0f;
                wv[u][b][1] = in && has1 ? to_float(row[n + 1]) : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < BM; ++r) xv[u][r] = in ? to_float(x[r][k]) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < rows_unroll; ++u)
#pragma unroll
            for (int b = 0; b < NW; ++b)
#pragma unroll
                for (int r = 0; r < BM; ++r) {
                    acc[b][r][0] = fmaf(xv[u][r], wv[u][b][0], acc[b][r][0]);
                    acc[b][r][1] = fmaf(xv[u][r], wv[u][b][1], acc[b][r][1]);
                }
    }

    __shared__ float partial[rows_warps][NW][BM][BN];
#pragma unroll
    for (int b = 0; b < NW; ++b)
#pragma unroll
        for (int r = 0; r < BM; ++r) {
            partial[warp][b][r][2 * lane] = acc[b][r][0];
            partial[warp][b][r][2 * lane + 1] = acc[b][r][1];
        }
    __syncthreads();
    for (int o = static_cast<int>(threadIdx.x); o < BM * BN; o += rows_threads) {
        const int r = o / BN, c = o % BN;
        if (r >= tile.rows || n0 + c >= a.N) continue;
        float s[NW];
#pragma unroll
        for (int b = 0; b < NW; ++b) {
            s[b] = 0.0f;
            for (int v = 0; v < rows_warps; ++v) s[b] += partial[v][b][r][c];
        }
        if constexpr (SwiGLU) store_grouped(a, tile.row_begin + r, n0 + c, ::cpx::swiglu(s[0], s[1]));
        else store_grouped(a, tile.row_begin + r, n0 + c, s[0]);
    }
}

}  // namespace cpx::cuda::kernels

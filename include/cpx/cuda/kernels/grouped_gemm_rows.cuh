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
//
// One decoding token touches one tile per expert: N / 64 blocks (8 for a
// 512-wide expert) would stream its weights through 8 multiprocessors. With
// Split, K is cut into gridDim.z chunks, one per block of a thread-block
// cluster (compute capability 9.0+); each block sums its chunk as above, and
// the cluster adds the blocks' sums through distributed shared memory in rank
// order: deterministic, with no workspace, second launch or atomics.

#include <cooperative_groups.h>

#include <cstdint>

#include "cpx/core/dtype.hpp"
#include "cpx/cuda/kernels/grouped_gemm_args.cuh"
#include "cpx/cuda/kernels/segment_tiles.hpp"
#include "cpx/math/activation.hpp"

namespace cpx::cuda::kernels {

inline constexpr int rows_bm = 4, rows_bn = 64, rows_warps = 16, rows_threads = rows_warps * 32, rows_unroll = 4;

template <class TA, class TW, class TO, bool SwiGLU, bool Split = false>
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

    // Split: this block's chunk of K (the cluster's blocks differ only in blockIdx.z).
    int k_begin = 0, k_end = a.K;
    if constexpr (Split) {
        const int chunk = (a.K + static_cast<int>(gridDim.z) - 1) / static_cast<int>(gridDim.z);
        k_begin = static_cast<int>(blockIdx.z) * chunk;
        k_end = min(a.K, k_begin + chunk);
    }
    for (int k0 = k_begin + warp; k0 < k_end; k0 += rows_warps * rows_unroll) {
        float wv[rows_unroll][NW][2], xv[rows_unroll][BM];
#pragma unroll
        for (int u = 0; u < rows_unroll; ++u) {
            const int k = k0 + u * rows_warps;
            const bool in = k < k_end;
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
    if constexpr (!Split) {
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
    } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        // This block's sums of its K chunk, then each block of the cluster finishes every
        // parts-th output, adding the blocks' sums in rank order from their shared memory.
        __shared__ float block_sum[NW][BM][BN];
        for (int o = static_cast<int>(threadIdx.x); o < BM * BN; o += rows_threads) {
            const int r = o / BN, c = o % BN;
#pragma unroll
            for (int b = 0; b < NW; ++b) {
                float s = 0.0f;
                for (int v = 0; v < rows_warps; ++v) s += partial[v][b][r][c];
                block_sum[b][r][c] = s;
            }
        }
        namespace cg = ::cooperative_groups;
        const cg::cluster_group cluster = cg::this_cluster();
        cluster.sync();  // every block's sums are written
        const int parts = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
        for (int o = rank + parts * static_cast<int>(threadIdx.x); o < BM * BN; o += parts * rows_threads) {
            const int r = o / BN, c = o % BN;
            if (r >= tile.rows || n0 + c >= a.N) continue;
            float s[NW];
#pragma unroll
            for (int b = 0; b < NW; ++b) s[b] = 0.0f;
            for (int p = 0; p < parts; ++p) {
                const float* sums = cluster.map_shared_rank(&block_sum[0][0][0], p);
#pragma unroll
                for (int b = 0; b < NW; ++b) s[b] += sums[(b * BM + r) * BN + c];
            }
            if constexpr (SwiGLU) store_grouped(a, tile.row_begin + r, n0 + c, ::cpx::swiglu(s[0], s[1]));
            else store_grouped(a, tile.row_begin + r, n0 + c, s[0]);
        }
        cluster.sync();  // no block leaves while another still reads its shared memory
#else
        __trap();  // the host launches Split only where the kernel was built for 9.0+ (detail::row_split_device)
#endif
    }
}

}  // namespace cpx::cuda::kernels

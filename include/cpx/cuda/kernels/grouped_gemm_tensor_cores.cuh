#pragma once
// The grouped expert GEMM on tensor cores (bf16 or fp16 operands, fp32
// accumulation) through WMMA 16x16x16 fragments; sm_80 or newer. Same device-
// side tile schedule, gather, epilogues (SwiGLU, scatter-add, row gate) and
// results as the SIMT kernel in grouped_gemm.cuh, which it can replace for
// 16-bit storage (GroupedGemmKernel::tensor_cores).
//
// Block: 128 threads = 4 warps in a 2 x 2 grid over a 64 x 64 output tile, each
// warp 32 x 32 = 2 x 2 fragments. K advances 32 at a time through shared memory
// (operands copied as raw 16-bit values, rows padded by 8 elements: WMMA wants
// 32-byte aligned fragment pointers and leading dimensions that are multiples
// of 8). After the K loop the accumulators go through shared memory (reusing
// the operand space) so the epilogue can address each element by (row, column).

#include <mma.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/cuda/kernels/grouped_gemm_args.cuh"
#include "cpx/cuda/kernels/segment_tiles.hpp"
#include "cpx/math/activation.hpp"

namespace cpx::cuda::kernels {

template <class T>
using wmma_type = std::conditional_t<std::is_same_v<T, bf16>, __nv_bfloat16, __half>;

inline constexpr int tc_bm = 64, tc_bn = 64, tc_bk = 32, tc_threads = 128;
inline constexpr int tc_a_ld = tc_bk + 8, tc_b_ld = tc_bn + 8, tc_c_ld = tc_bn + 4;

template <bool SwiGLU>
constexpr int tc_smem_bytes() {
    constexpr int nw = SwiGLU ? 2 : 1;
    constexpr int operands = (tc_bm * tc_a_ld + nw * tc_bk * tc_b_ld) * 2;
    constexpr int results = nw * tc_bm * tc_c_ld * 4;
    return operands > results ? operands : results;
}

template <class GroupedArgs, class T, class TO, bool SwiGLU>
// At most 128 registers (4 blocks per multiprocessor): the loads are unrolled only 4 deep so
// the operand loads in flight do not crowd out the accumulators.
__global__ void __launch_bounds__(tc_threads, 4) grouped_gemm_tensor_cores(GroupedArgs a) {
    static_assert(std::is_same_v<T, bf16> || std::is_same_v<T, fp16>, "tensor cores take bf16 or fp16 operands");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();  // the host launcher refuses devices below compute capability 8.0
#else
    namespace wmma = nvcuda::wmma;
    using WT = wmma_type<T>;
    constexpr int BM = tc_bm, BN = tc_bn, BK = tc_bk, NW = SwiGLU ? 2 : 1;
    constexpr int ALD = tc_a_ld, BLD = tc_b_ld, CLD = tc_c_ld;
    static_assert((BM * BK) % tc_threads == 0 && (BK * BN) % tc_threads == 0 && (BM * BN) % tc_threads == 0,
                  "tile loads must divide evenly");
    static_assert(ALD % 8 == 0 && BLD % 8 == 0 && CLD % 4 == 0, "WMMA leading dimensions");

    SegmentTile tile;
    if (!find_segment_tile(a.offsets, a.experts, blockIdx.x, BM, tile)) return;  // whole block
    const int n0 = static_cast<int>(blockIdx.y) * BN;
    const int tid = threadIdx.x, warp = tid / 32;
    const int wm = warp / 2, wn = warp % 2;  // this warp's 32 x 32 quarter of the tile

    __shared__ __align__(128) unsigned char smem[tc_smem_bytes<SwiGLU>()];
    auto* As = reinterpret_cast<std::uint16_t*>(smem);       // [BM][ALD]
    auto* Bs = As + BM * ALD;                                // [NW][BK][BLD]; offset 5120 bytes: 32-aligned
    auto* Cs = reinterpret_cast<float*>(smem);               // [NW][BM][CLD], after the K loop

    const T* w[NW];
    w[0] = a.w0 + tile.expert * a.w_expert_stride;
    if constexpr (SwiGLU) w[1] = a.w1 + tile.expert * a.w_expert_stride;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[NW][2][2];
#pragma unroll
    for (int b = 0; b < NW; ++b)
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[b][i][j], 0.0f);

    for (int k0 = 0; k0 < a.K; k0 += BK) {
#pragma unroll 4
        for (int l = 0; l < BM * BK / tc_threads; ++l) {
            const int idx = tid + l * tc_threads, m = idx / BK, k = idx % BK;
            std::uint16_t v = 0;  // +0.0 in both formats
            if (m < tile.rows && k0 + k < a.K) {
                const int sorted_row = tile.row_begin + m;
                const index_t src = a.gather ? a.gather[sorted_row] : sorted_row;
                v = a.x[src * a.x_ld + k0 + k].bits;
            }
            As[m * ALD + k] = v;
        }
#pragma unroll
        for (int b = 0; b < NW; ++b)
#pragma unroll 4
            for (int l = 0; l < BK * BN / tc_threads; ++l) {
                const int idx = tid + l * tc_threads, k = idx / BN, n = idx % BN;
                Bs[(b * BK + k) * BLD + n] = (k0 + k < a.K && n0 + n < a.N)
                                                 ? w[b][static_cast<index_t>(k0 + k) * a.w_ld + n0 + n].bits
                                                 : std::uint16_t{0};
            }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, WT, wmma::row_major> af[2];
#pragma unroll
            for (int i = 0; i < 2; ++i)
                wmma::load_matrix_sync(af[i], reinterpret_cast<const WT*>(As + (wm * 32 + i * 16) * ALD + kk), ALD);
#pragma unroll
            for (int b = 0; b < NW; ++b) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, WT, wmma::row_major> bf[2];
#pragma unroll
                for (int j = 0; j < 2; ++j)
                    wmma::load_matrix_sync(bf[j], reinterpret_cast<const WT*>(Bs + (b * BK + kk) * BLD + wn * 32 + j * 16),
                                           BLD);
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[b][i][j], af[i], bf[j], acc[b][i][j]);
            }
        }
        __syncthreads();  // operands consumed (and, after the last step, their space is free for Cs)
    }

#pragma unroll
    for (int b = 0; b < NW; ++b)
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j)
                wmma::store_matrix_sync(Cs + (b * BM + wm * 32 + i * 16) * CLD + wn * 32 + j * 16, acc[b][i][j], CLD,
                                        wmma::mem_row_major);
    __syncthreads();

    for (int idx = tid; idx < BM * BN; idx += tc_threads) {
        const int m = idx / BN, n = n0 + idx % BN;
        if (m >= tile.rows || n >= a.N) continue;
        float v = Cs[m * CLD + idx % BN];
        if constexpr (SwiGLU) v = ::cpx::swiglu(v, Cs[(BM + m) * CLD + idx % BN]);
        store_grouped(a, tile.row_begin + m, n, v);
    }
#endif
}

}  // namespace cpx::cuda::kernels

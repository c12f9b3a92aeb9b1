#pragma once
// Grouped expert GEMMs over the segments of an ExpertDispatch, reading the
// segment offsets on the device (so no host synchronisation and a capturable
// launch; see segment_tiles.hpp for the schedule). Expert weights are stored
// input-major, [experts, K, N] (or the gate/up halves of [experts, K, 2N]),
// and applied as x . W[e] (docs/MODELS.md §8.1).
//
//   grouped_swiglu: act[i, :] = SiLU(x[src[i]] . G[e]) * (x[src[i]] . U[e])
//       for each sorted position i of expert e, src[i] its token row: the
//       gate and up products of one tile share the A tile, and SwiGLU is their
//       epilogue. act is in sorted order.
//   grouped_scatter_add: y[perm[i], :] (+)= scale[perm[i]] * (act[i] . D[e])
//       the down product, scattered back to its (token, route) pair, which
//       with one route is the token row; with accumulate, added onto what y
//       holds (the residual plus the shared expert's output, written before):
//       the inverse permutation fused with the sum of the routed and shared
//       experts. Each row of y belongs to exactly one sorted position, so no
//       atomics are needed.
//
// The kernel is a plain SIMT tiling (64 x 64 output tile, K step 16, 256
// threads, 4 x 4 outputs per thread, fp32 accumulation in registers, operands
// widened to fp32 in shared memory); grouped_gemm_tensor_cores.cuh has its WMMA
// twin, and calls of at most GroupedGemmChoice::row_kernel_max rows (decoding)
// take grouped_gemm_rows.cuh instead. CPU twin: the loop in the test and the
// CPU token-routed MLP, which gather, multiply and scatter per expert.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/kernels/expert_dispatch.cuh"
#include "cpx/cuda/kernels/grouped_gemm_args.cuh"
#include "cpx/cuda/kernels/grouped_gemm_rows.cuh"
#include "cpx/cuda/kernels/grouped_gemm_tensor_cores.cuh"
#include "cpx/cuda/runtime/kernel_choice.cuh"
#include "cpx/cuda/kernels/segment_tiles.hpp"
#include "cpx/math/activation.hpp"

namespace cpx::cuda {

namespace kernels {

inline constexpr int grouped_bm = 64, grouped_bn = 64, grouped_bk = 16, grouped_threads = 256;

template <class TA, class TW, class TO, bool SwiGLU>
__global__ void __launch_bounds__(grouped_threads) grouped_gemm(GroupedGemmArgs<TA, TW, TO> a) {
    constexpr int BM = grouped_bm, BN = grouped_bn, BK = grouped_bk, NW = SwiGLU ? 2 : 1;
    static_assert(BM * BK % grouped_threads == 0 && BK * BN % grouped_threads == 0, "tile loads must divide evenly");
    static_assert(BM == 64 && BN == 64 && grouped_threads == 256, "the 16 x 16 thread grid covers 64 x 64 outputs");

    SegmentTile tile;
    if (!find_segment_tile(a.offsets, a.experts, blockIdx.x, BM, tile)) return;  // whole block: no barrier skipped
    const int n0 = static_cast<int>(blockIdx.y) * BN;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;

    __shared__ float As[BK][BM + 4];  // A transposed; the pad spreads the transposing stores over banks
    __shared__ float Bs[NW][BK][BN];

    const TW* w[NW];
    w[0] = a.w0 + tile.expert * a.w_expert_stride;
    if constexpr (SwiGLU) w[1] = a.w1 + tile.expert * a.w_expert_stride;

    float acc[NW][4][4];
#pragma unroll
    for (int b = 0; b < NW; ++b)
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[b][i][j] = 0.0f;

    for (int k0 = 0; k0 < a.K; k0 += BK) {
#pragma unroll
        for (int l = 0; l < BM * BK / grouped_threads; ++l) {
            const int idx = tid + l * grouped_threads, m = idx / BK, k = idx % BK;
            float v = 0.0f;
            if (m < tile.rows && k0 + k < a.K) {
                const int sorted_row = tile.row_begin + m;
                const index_t src = a.gather ? a.gather[sorted_row] : sorted_row;
                v = to_float(a.x[src * a.x_ld + k0 + k]);
            }
            As[k][m] = v;
        }
#pragma unroll
        for (int b = 0; b < NW; ++b)
#pragma unroll
            for (int l = 0; l < BK * BN / grouped_threads; ++l) {
                const int idx = tid + l * grouped_threads, k = idx / BN, n = idx % BN;
                Bs[b][k][n] = (k0 + k < a.K && n0 + n < a.N)
                                  ? to_float(w[b][static_cast<index_t>(k0 + k) * a.w_ld + n0 + n])
                                  : 0.0f;
            }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float av[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) av[i] = As[k][ty + 16 * i];
#pragma unroll
            for (int b = 0; b < NW; ++b) {
                float bv[4];
#pragma unroll
                for (int j = 0; j < 4; ++j) bv[j] = Bs[b][k][tx + 16 * j];
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) acc[b][i][j] = fmaf(av[i], bv[j], acc[b][i][j]);
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int m = ty + 16 * i;
        if (m >= tile.rows) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int n = n0 + tx + 16 * j;
            if (n >= a.N) continue;
            if constexpr (SwiGLU) store_grouped(a, tile.row_begin + m, n, ::cpx::swiglu(acc[0][i][j], acc[1][i][j]));
            else store_grouped(a, tile.row_begin + m, n, acc[0][i][j]);
        }
    }
}

}  // namespace kernels

namespace detail {
/// Whether the current device runs the row kernel's cluster split, and its multiprocessor count.
/// Clusters need compute capability 9.0, and the kernel itself built for 9.0 or newer: a 9.0
/// device running code the driver compiled from older PTX has no cluster code in it. Read once
/// per device (the first call, normally an eager one before any graph capture).
struct RowSplitDevice {
    bool clusters = false;
    int multiprocessors = 0;
};
template <class Kernel>
RowSplitDevice row_split_device(Kernel split_kernel) {
    constexpr int cached = 64;
    static std::atomic<int> known[cached] = {};  // 0: not read; else multiprocessors * 2 + clusters
    int id = 0;
    CPX_CUDA_CHECK(cudaGetDevice(&id));
    if (id < cached) {
        if (const int v = known[id].load(std::memory_order_relaxed); v != 0) return {(v & 1) != 0, v >> 1};
    }
    RowSplitDevice d;
    int major = 0;
    CPX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, id));
    CPX_CUDA_CHECK(cudaDeviceGetAttribute(&d.multiprocessors, cudaDevAttrMultiProcessorCount, id));
    if (major >= 9) {
        cudaFuncAttributes attributes{};
        CPX_CUDA_CHECK(cudaFuncGetAttributes(&attributes, split_kernel));
        d.clusters = attributes.binaryVersion >= 90;
    }
    if (id < cached) known[id].store(d.multiprocessors * 2 + (d.clusters ? 1 : 0), std::memory_order_relaxed);
    return d;
}

/// The row kernel's automatic K split for a call of `count` rows: doubled (up to 8) while the
/// blocks with rows stay within 1.5 blocks per multiprocessor and each block keeps 64 or more rows
/// of K (4 per warp). The tiles with rows are estimated as ceil(count / 4) plus one partial tile per
/// further segment (the exact split is known on the device only). The 1.5 is measured: on an H200,
/// 187M's decode steps at 1, 4 and 16 sequences were fastest at the ways this rule picks
/// (docs/CUDA.md, "Results on an H200 (2026-11-28): the row kernel's K split").
inline int row_split_ways(long long count, int experts, int K, long long n_tiles, int multiprocessors) {
    constexpr int min_rows_per_block = 64;
    const long long segments = std::min<long long>(count, experts);
    const long long tiles = std::min<long long>(count, (count + kernels::rows_bm - 1) / kernels::rows_bm + segments - 1);
    const long long blocks = std::max<long long>(1, tiles) * n_tiles;
    int ways = 1;
    while (ways < expert_row_split_max && 2 * blocks * (2 * ways) <= 3LL * multiprocessors &&
           K / (ways * 2) >= min_rows_per_block)
        ways *= 2;
    return ways;
}

template <class TA, class TW, class TO, bool SwiGLU>
void launch_rows(const kernels::GroupedGemmArgs<TA, TW, TO>& a, int count, int split, cudaStream_t stream) {
    // Tiles of at most min(count, experts) non-empty segments; blocks past the last tile return at once.
    const long long tiles = max_segment_tiles(count, std::min(a.experts, count), kernels::rows_bm);
    const long long n_tiles = (a.N + kernels::rows_bn - 1) / kernels::rows_bn;
    require<ShapeError>(tiles <= 0x7fffffff && n_tiles <= 65535, "grouped GEMM: ", count, " rows x ", a.N,
                        " columns exceed one launch");
    const auto split_kernel = kernels::grouped_gemm_rows<TA, TW, TO, SwiGLU, true>;
    int ways = 1;
    if (split != 1) {
        const RowSplitDevice device = row_split_device(split_kernel);
        require<ShapeError>(split == expert_row_split_auto || device.clusters, "grouped GEMM: a ", split,
                            "-way split of the row kernel needs thread-block clusters (compute capability 9.0 and "
                            "code built for it); this device or build has none");
        if (split != expert_row_split_auto) ways = split;
        else if (device.clusters) ways = row_split_ways(count, a.experts, a.K, n_tiles, device.multiprocessors);
    }
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(n_tiles), static_cast<unsigned>(ways));
    if (ways == 1) {
        kernels::grouped_gemm_rows<TA, TW, TO, SwiGLU, false><<<grid, kernels::rows_threads, 0, stream>>>(a);
        CPX_CUDA_CHECK_LAUNCH();
        return;
    }
    // One cluster per (tile, column tile): its `ways` blocks take the chunks of K.
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = dim3(kernels::rows_threads);
    config.dynamicSmemBytes = 0;
    config.stream = stream;
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = 1;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = static_cast<unsigned>(ways);
    config.attrs = &cluster;
    config.numAttrs = 1;
    CPX_CUDA_CHECK(cudaLaunchKernelEx(&config, split_kernel, a));
    CPX_CUDA_CHECK_LAUNCH();
}

template <class TA, class TW, class TO, bool SwiGLU>
void launch_grouped(const kernels::GroupedGemmArgs<TA, TW, TO>& a, int count, GroupedGemmChoice choice,
                    cudaStream_t stream) {
    constexpr bool sixteen_bit = std::is_same_v<TA, TW> && (std::is_same_v<TA, bf16> || std::is_same_v<TA, fp16>);
    // A choice the operand types cannot take is refused whatever the row count.
    require<ShapeError>(choice.kernel != GroupedGemmKernel::tensor_cores || sixteen_bit,
                        "grouped GEMM: tensor-core kernels need bf16 or fp16 activations and weights of one type");
    require<ShapeError>(choice.row_kernel_max >= 0, "grouped GEMM: row_kernel_max must be 0 or more, got ",
                        choice.row_kernel_max);
    require<ShapeError>(choice.row_kernel_split >= 0 && choice.row_kernel_split <= expert_row_split_max,
                        "grouped GEMM: row_kernel_split must be 0 (automatic) to ", expert_row_split_max, ", got ",
                        choice.row_kernel_split);
    if (count == 0 || a.N == 0) return;
    if (count <= choice.row_kernel_max) {
        launch_rows<TA, TW, TO, SwiGLU>(a, count, choice.row_kernel_split, stream);
        return;
    }
    const GroupedGemmKernel kernel = choice.kernel;
    // Both kernels use 64 x 64 output tiles, so the grid is the same.
    static_assert(kernels::grouped_bm == kernels::tc_bm && kernels::grouped_bn == kernels::tc_bn);
    const long long tiles = max_segment_tiles(count, a.experts, kernels::grouped_bm);
    const long long n_tiles = (a.N + kernels::grouped_bn - 1) / kernels::grouped_bn;
    require<ShapeError>(tiles <= 0x7fffffff && n_tiles <= 65535, "grouped GEMM: ", count, " rows x ", a.N,
                        " columns exceed one launch");
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(n_tiles));
    if (kernel == GroupedGemmKernel::tensor_cores) {
        if constexpr (sixteen_bit) {
            const CurrentDevice device = current_device();
            require<Error>(device.major >= 8, "grouped GEMM: tensor-core kernels need compute capability 8.0 or newer, "
                           "device ", device.id, " has ", device.major, ".x");
            kernels::grouped_gemm_tensor_cores<kernels::GroupedGemmArgs<TA, TW, TO>, TA, TO, SwiGLU>
                <<<grid, kernels::tc_threads, 0, stream>>>(a);
        }
    } else {
        kernels::grouped_gemm<TA, TW, TO, SwiGLU><<<grid, kernels::grouped_threads, 0, stream>>>(a);
    }
    CPX_CUDA_CHECK_LAUNCH();
}
}  // namespace detail

/// Expert weights on the device, input-major: expert e maps K inputs to N
/// outputs, element (k, n) at data[e * expert_stride + k * ld + n]. Contiguous
/// [experts, K, N] tensors have ld = N and expert_stride = K * N (the defaults,
/// taken when ld and expert_stride are 0); the gate and up halves of a fused
/// [experts, K, 2N] tensor are the same data with ld = 2N, the up half offset by N.
template <class TW>
struct ExpertWeights {
    const TW* data = nullptr;
    int experts = 0, k = 0, n = 0;
    index_t ld = 0, expert_stride = 0;
    index_t row_stride() const { return ld ? ld : n; }
    index_t stride() const { return expert_stride ? expert_stride : static_cast<index_t>(k) * row_stride(); }
};

namespace detail {
template <class TW>
void check_expert_weights(const ExpertWeights<TW>& w, const char* what) {
    require<ShapeError>(w.data != nullptr && w.experts >= 1 && w.k >= 1 && w.n >= 1, "grouped GEMM: ", what,
                        " weights are missing or empty");
    require<ShapeError>(w.row_stride() >= w.n && w.stride() >= static_cast<index_t>(w.k - 1) * w.row_stride() + w.n,
                        "grouped GEMM: ", what, " strides (", w.row_stride(), ", ", w.stride(),
                        ") overlap rows or experts of [", w.k, ", ", w.n, "]");
}
}  // namespace detail

/// act[i, :] = SiLU(x[src[i]] . gate[e]) * (x[src[i]] . up[e]) for the sorted
/// positions i < dispatch.count() of each expert e, src = dispatch.sources().
/// x: [tokens, K] in original order; act: [count, N] in sorted order (count =
/// tokens x routes).
template <class TA, class TW, class TO>
void grouped_swiglu(const ExpertDispatch& dispatch, StridedMatrix<const TA> x, ExpertWeights<TW> gate,
                    ExpertWeights<TW> up, StridedMatrix<TO> act, cudaStream_t stream,
                    GroupedGemmChoice kernel = {}) {
    x.validate("grouped_swiglu input");
    act.validate("grouped_swiglu output");
    const int count = dispatch.count();
    require<ShapeError>(gate.experts == dispatch.experts() && up.experts == gate.experts && up.k == gate.k &&
                            up.n == gate.n,
                        "grouped_swiglu: gate [", gate.experts, ", ", gate.k, ", ", gate.n, "] and up [", up.experts,
                        ", ", up.k, ", ", up.n, "] must agree with each other and with ", dispatch.experts(),
                        " experts");
    require<ShapeError>(x.rows == dispatch.tokens() && x.cols == gate.k, "grouped_swiglu: input is [", x.rows, ", ",
                        x.cols, "], expected [", dispatch.tokens(), ", ", gate.k, "]");
    require<ShapeError>(act.rows == count && act.cols == gate.n, "grouped_swiglu: output is [", act.rows, ", ", act.cols,
                        "], expected [", count, ", ", gate.n, "]");
    detail::check_expert_weights(gate, "gate");
    detail::check_expert_weights(up, "up");
    require<ShapeError>(up.row_stride() == gate.row_stride() && up.stride() == gate.stride(),
                        "grouped_swiglu: gate and up weights must share their strides");
    kernels::GroupedGemmArgs<TA, TW, TO> a{x.data,   x.ld,    dispatch.sources(),     dispatch.offsets(),
                                           gate.experts, gate.data, up.data,          gate.k,
                                           gate.n,   gate.row_stride(), gate.stride(), act.data,
                                           act.ld,   nullptr, nullptr,                false};
    detail::launch_grouped<TA, TW, TO, true>(a, count, kernel, stream);
}

/// y[perm[i], :] = (accumulate ? y[perm[i], :] : 0) + scale[perm[i]] * (act[i] . down[e])
/// for the sorted positions i of each expert e. act: [count, K] in sorted order;
/// y: [count, N] in pair order (with one route, the tokens' order); row_scale
/// ([count], device) may be null.
template <class TA, class TW, class TO>
void grouped_scatter_add(const ExpertDispatch& dispatch, StridedMatrix<const TA> act, ExpertWeights<TW> down,
                         StridedMatrix<TO> y, bool accumulate, const float* row_scale, cudaStream_t stream,
                         GroupedGemmChoice kernel = {}) {
    act.validate("grouped_scatter_add input");
    y.validate("grouped_scatter_add output");
    const int count = dispatch.count();
    require<ShapeError>(down.experts == dispatch.experts(), "grouped_scatter_add: ", down.experts,
                        " expert weights for ", dispatch.experts(), " experts");
    require<ShapeError>(act.rows == count && act.cols == down.k, "grouped_scatter_add: input is [", act.rows, ", ",
                        act.cols, "], expected [", count, ", ", down.k, "]");
    require<ShapeError>(y.rows == count && y.cols == down.n, "grouped_scatter_add: output is [", y.rows, ", ", y.cols,
                        "], expected [", count, ", ", down.n, "]");
    detail::check_expert_weights(down, "down");
    kernels::GroupedGemmArgs<TA, TW, TO> a{act.data,  act.ld,           nullptr,       dispatch.offsets(),
                                           down.experts, down.data,     nullptr,       down.k,
                                           down.n,    down.row_stride(), down.stride(), y.data,
                                           y.ld,      dispatch.permutation(), row_scale, accumulate};
    detail::launch_grouped<TA, TW, TO, false>(a, count, kernel, stream);
}

}  // namespace cpx::cuda

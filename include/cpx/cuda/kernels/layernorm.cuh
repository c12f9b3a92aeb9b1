#pragma once
// LayerNorm on the GPU (PRISM's ln_1, ln_2, ln_f): one block per row; the mean,
// then the biased variance of the row around it, each reduced across the block.
// CPU twin: the PRISM CPU layer norm, with layernorm_inverse_std from math/norm.hpp.

#include "cpx/core/dtype.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/kernels/reduce.cuh"
#include "cpx/math/norm.hpp"

namespace cpx::cuda {

namespace kernels {
// x and y may alias: each element is read and then written by the same thread,
// and the two block reductions finish all reads before any write.
template <int Threads, class In, class W, class Out>
__global__ void __launch_bounds__(Threads) layernorm_rows(const In* x, index_t x_ld, const W* __restrict__ w,
                                                          const W* __restrict__ b, Out* y, index_t y_ld, int n,
                                                          float eps) {
    const In* xr = x + static_cast<index_t>(blockIdx.x) * x_ld;
    Out* yr = y + static_cast<index_t>(blockIdx.x) * y_ld;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += Threads) sum += to_float(xr[i]);
    const float mean = block_sum<Threads>(sum) / static_cast<float>(n);
    float sum_sq = 0.0f;
    for (int i = threadIdx.x; i < n; i += Threads) {
        const float d = to_float(xr[i]) - mean;
        sum_sq += d * d;
    }
    const float inv = layernorm_inverse_std(block_sum<Threads>(sum_sq) / static_cast<float>(n), eps);
    for (int i = threadIdx.x; i < n; i += Threads) {
        const float v = (to_float(xr[i]) - mean) * inv * to_float(w[i]);
        yr[i] = from_float<Out>(b ? v + to_float(b[i]) : v);
    }
}
}  // namespace kernels

/// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias (bias may be null).
template <class In, class W, class Out>
void layernorm(StridedMatrix<const In> x, const W* weight, const W* bias, StridedMatrix<Out> y, float eps,
               cudaStream_t stream = nullptr) {
    x.validate("cuda::layernorm input");
    y.validate("cuda::layernorm output");
    require<ShapeError>(weight != nullptr, "cuda::layernorm: the weight is required");
    require<ShapeError>(y.rows == x.rows && y.cols == x.cols, "cuda::layernorm: output is [", y.rows, ", ", y.cols,
                        "], expected [", x.rows, ", ", x.cols, "]");
    require<ShapeError>(x.rows <= 0x7fffffff, "cuda::layernorm: too many rows");
    if (x.rows == 0 || x.cols == 0) return;
    constexpr int threads = 256;
    kernels::layernorm_rows<threads><<<static_cast<unsigned>(x.rows), threads, 0, stream>>>(
        x.data, x.ld, weight, bias, y.data, y.ld, static_cast<int>(x.cols), eps);
    CPX_CUDA_CHECK_LAUNCH();
}

}  // namespace cpx::cuda

#pragma once
// RMSNorm on the GPU: one block per row; the row's sum of squares is reduced
// in registers, then across warps through shared memory.

#include "cpx/core/dtype.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cuda/check.cuh"
#include "cpx/layers/norm_math.hpp"

namespace cpx::cuda {

namespace kernels {
template <int Threads>
__device__ inline float block_sum(float v) {
    static_assert(Threads % 32 == 0 && Threads <= 1024, "block size must be whole warps");
    __shared__ float partial[Threads / 32];
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < Threads / 32; ++w) total += partial[w];
    __syncthreads();  // partial may be reused by the caller's next reduction
    return total;
}

template <int Threads, class In, class W, class Out>
__global__ void __launch_bounds__(Threads)
    rmsnorm_rows(const In* __restrict__ x, const W* __restrict__ w, Out* __restrict__ y, int n, float eps) {
    const In* xr = x + static_cast<index_t>(blockIdx.x) * n;
    Out* yr = y + static_cast<index_t>(blockIdx.x) * n;
    float sum_sq = 0.0f;
    for (int i = threadIdx.x; i < n; i += Threads) {
        const float v = to_float(xr[i]);
        sum_sq += v * v;
    }
    const float inv = rms_inverse(block_sum<Threads>(sum_sq), n, eps);
    for (int i = threadIdx.x; i < n; i += Threads) yr[i] = from_float<Out>(to_float(w[i]) * (to_float(xr[i]) * inv));
}
}  // namespace kernels

/// y[r, :] = w * x[r, :] / sqrt(mean(x[r, :]^2) + eps) for every row, on `stream`.
template <class In, class W, class Out>
void rmsnorm(Matrix<const In> x, Vector<const W> weight, Matrix<Out> y, float eps, cudaStream_t stream = nullptr) {
    const index_t rows = x.extent(0), n = x.extent(1);
    require<ShapeError>(weight.extent(0) == n, "cuda::rmsnorm: weight has ", weight.extent(0), " elements for rows of ",
                        n);
    require<ShapeError>(y.extent(0) == rows && y.extent(1) == n, "cuda::rmsnorm: output shape mismatch");
    if (rows == 0) return;
    constexpr int threads = 256;
    kernels::rmsnorm_rows<threads><<<static_cast<unsigned>(rows), threads, 0, stream>>>(
        x.data(), weight.data(), y.data(), static_cast<int>(n), eps);
    CPX_CUDA_CHECK_LAUNCH();
}

}  // namespace cpx::cuda

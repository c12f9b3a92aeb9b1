#pragma once
// RMSNorm on the GPU: one block per row; the row's sum of squares is reduced
// in registers, then across warps through shared memory. CPU twin:
// cpu::rmsnorm (same rms_inverse from math/norm.hpp).

#include "cpx/core/dtype.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/kernels/reduce.cuh"
#include "cpx/math/norm.hpp"

namespace cpx::cuda {

namespace kernels {
// x and y may alias (in place): each element is read and then written by the same thread.
template <int Threads, class In, class W, class Out>
__global__ void __launch_bounds__(Threads)
    rmsnorm_rows(const In* x, index_t x_ld, const W* __restrict__ w, Out* y, index_t y_ld, int n, float eps) {
    const In* xr = x + static_cast<index_t>(blockIdx.x) * x_ld;
    Out* yr = y + static_cast<index_t>(blockIdx.x) * y_ld;
    float sum_sq = 0.0f;
    for (int i = threadIdx.x; i < n; i += Threads) {
        const float v = to_float(xr[i]);
        sum_sq += v * v;
    }
    const float inv = rms_inverse(block_sum<Threads>(sum_sq), n, eps);
    for (int i = threadIdx.x; i < n; i += Threads) yr[i] = from_float<Out>(to_float(w[i]) * (to_float(xr[i]) * inv));
}
}  // namespace kernels

/// y[r, :] = w * x[r, :] / sqrt(mean(x[r, :]^2) + eps) for every row, on `stream`;
/// x and y may be column blocks of wider buffers, and may be the same memory.
template <class In, class W, class Out>
void rmsnorm(StridedMatrix<const In> x, Vector<const W> weight, StridedMatrix<Out> y, float eps,
             cudaStream_t stream = nullptr) {
    x.validate("cuda::rmsnorm input");
    y.validate("cuda::rmsnorm output");
    const index_t rows = x.rows, n = x.cols;
    require<ShapeError>(weight.extent(0) == n, "cuda::rmsnorm: weight has ", weight.extent(0), " elements for rows of ",
                        n);
    require<ShapeError>(y.rows == rows && y.cols == n, "cuda::rmsnorm: output is [", y.rows, ", ", y.cols,
                        "], expected [", rows, ", ", n, "]");
    require<ShapeError>(rows <= 0x7fffffff, "cuda::rmsnorm: ", rows, " rows exceed one launch");
    if (rows == 0 || n == 0) return;
    constexpr int threads = 256;
    kernels::rmsnorm_rows<threads><<<static_cast<unsigned>(rows), threads, 0, stream>>>(
        x.data, x.ld, weight.data(), y.data, y.ld, static_cast<int>(n), eps);
    CPX_CUDA_CHECK_LAUNCH();
}

/// Contiguous rows.
template <class In, class W, class Out>
void rmsnorm(Matrix<const In> x, Vector<const W> weight, Matrix<Out> y, float eps, cudaStream_t stream = nullptr) {
    rmsnorm(StridedMatrix<const In>(x.data(), x.extent(0), x.extent(1), x.extent(1)), weight,
            StridedMatrix<Out>(y), eps, stream);
}

}  // namespace cpx::cuda

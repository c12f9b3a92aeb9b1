#pragma once
// mu guidance on the GPU: the per-token mu lives in the right half of the
// [a, mu] buffer that feeds the fused QKV product. The first layer's mu is
// mu_init broadcast to every row; each later one is W_mu h2 (a cuBLAS product
// written straight into that half) finished in place by mu_finish with the
// layer's clamped parameter and the between-layer clamp (math/mu.hpp).
// Also: convert, the elementwise storage-type change that feeds the fp32
// residual stream to a 16-bit W_mu product.

#include "cpx/core/dtype.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/runtime/launch.cuh"
#include "cpx/math/mu.hpp"

namespace cpx::cuda {

namespace kernels {
template <class T, bool Finish>
__global__ void mu_rows(T* mu, index_t ld, const float* __restrict__ vec, long long rows, int cols, float param_min,
                        float param_max, float bound) {
    const long long total = rows * cols;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const long long r = idx / cols;
        const int c = static_cast<int>(idx % cols);
        T& v = mu[r * ld + c];
        v = from_float<T>(Finish ? mu_next_layer(vec[c], to_float(v), param_min, param_max, bound) : vec[c]);
    }
}

template <class From, class To>
__global__ void convert_rows(const From* x, index_t x_ld, To* y, index_t y_ld, long long rows, int cols) {
    const long long total = rows * cols;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const long long r = idx / cols;
        const int c = static_cast<int>(idx % cols);
        y[r * y_ld + c] = from_float<To>(to_float(x[r * x_ld + c]));
    }
}
}  // namespace kernels

/// mu[r, :] = mu_init for every row (mu_init: [cols] fp32 on the device).
template <class T>
void mu_broadcast(const float* mu_init, StridedMatrix<T> mu, cudaStream_t stream) {
    mu.validate("mu_broadcast");
    const long long total = mu.rows * mu.cols;
    if (total == 0) return;
    kernels::mu_rows<T, false><<<detail::grid_stride_blocks(total, 256), 256, 0, stream>>>(
        mu.data, mu.ld, mu_init, mu.rows, static_cast<int>(mu.cols), 0.0f, 0.0f, 0.0f);
    CPX_CUDA_CHECK_LAUNCH();
}

/// mu[r, c] = clamp(clamp(mu_param[c], param_min, param_max) + mu[r, c], -bound, bound)
/// in place, where mu holds W_mu h2 (mu_param: [cols] fp32 on the device).
template <class T>
void mu_finish(const float* mu_param, StridedMatrix<T> mu, float param_min, float param_max, float bound,
               cudaStream_t stream) {
    mu.validate("mu_finish");
    const long long total = mu.rows * mu.cols;
    if (total == 0) return;
    kernels::mu_rows<T, true><<<detail::grid_stride_blocks(total, 256), 256, 0, stream>>>(
        mu.data, mu.ld, mu_param, mu.rows, static_cast<int>(mu.cols), param_min, param_max, bound);
    CPX_CUDA_CHECK_LAUNCH();
}

/// y = x converted elementwise to y's storage type (round to nearest even).
template <class From, class To>
void convert(StridedMatrix<const From> x, StridedMatrix<To> y, cudaStream_t stream) {
    x.validate("convert input");
    y.validate("convert output");
    require<ShapeError>(x.rows == y.rows && x.cols == y.cols, "convert: [", x.rows, ", ", x.cols, "] into [", y.rows,
                        ", ", y.cols, "]");
    const long long total = x.rows * x.cols;
    if (total == 0) return;
    kernels::convert_rows<<<detail::grid_stride_blocks(total, 256), 256, 0, stream>>>(x.data, x.ld, y.data, y.ld, x.rows,
                                                                                      static_cast<int>(x.cols));
    CPX_CUDA_CHECK_LAUNCH();
}

}  // namespace cpx::cuda

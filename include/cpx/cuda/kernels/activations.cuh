#pragma once
// Elementwise epilogues of the MLPs, after a cuBLAS product:
//   swiglu:    act = SiLU(gate) * up      (COMPLEXITY-DEEP dense and shared SwiGLU)
//   bias_gelu: x = GELU_erf(x + bias)     (PRISM's c_fc)
//   add_bias:  y = y + bias               (PRISM's c_proj after the residual add)
// The scalar functions come from math/activation.hpp and math/gelu.hpp,
// shared with the CPU path.

#include "cpx/core/dtype.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/runtime/launch.cuh"
#include "cpx/math/gelu.hpp"
#include "cpx/math/activation.hpp"

namespace cpx::cuda {

namespace kernels {
template <class T>
__global__ void swiglu_rows(const T* gate, index_t gate_ld, const T* up, index_t up_ld, T* out, index_t out_ld,
                            long long rows, int cols) {
    const long long total = rows * cols;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const long long r = idx / cols;
        const int c = static_cast<int>(idx % cols);
        out[r * out_ld + c] = from_float<T>(::cpx::swiglu(to_float(gate[r * gate_ld + c]), to_float(up[r * up_ld + c])));
    }
}

template <class T, class B, bool Gelu>
__global__ void bias_rows(T* x, index_t ld, const B* bias, long long rows, int cols) {
    const long long total = rows * cols;
    for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<long long>(gridDim.x) * blockDim.x) {
        const long long r = idx / cols;
        const int c = static_cast<int>(idx % cols);
        float v = to_float(x[r * ld + c]);
        if (bias) v += to_float(bias[c]);
        x[r * ld + c] = from_float<T>(Gelu ? ::cpx::gelu_erf(v) : v);
    }
}
}  // namespace kernels

/// out = SiLU(gate) * up elementwise; gate and up are usually the two column
/// halves of one fused [gate | up] product. out may be gate's memory.
template <class T>
void swiglu(StridedMatrix<const T> gate, StridedMatrix<const T> up, StridedMatrix<T> out, cudaStream_t stream = nullptr) {
    gate.validate("cuda::swiglu gate");
    up.validate("cuda::swiglu up");
    out.validate("cuda::swiglu output");
    require<ShapeError>(up.rows == gate.rows && up.cols == gate.cols && out.rows == gate.rows && out.cols == gate.cols,
                        "cuda::swiglu: gate [", gate.rows, ", ", gate.cols, "], up [", up.rows, ", ", up.cols,
                        "] and output [", out.rows, ", ", out.cols, "] must agree");
    const long long total = gate.rows * gate.cols;
    if (total == 0) return;
    kernels::swiglu_rows<<<detail::grid_stride_blocks(total, 256), 256, 0, stream>>>(
        gate.data, gate.ld, up.data, up.ld, out.data, out.ld, gate.rows, static_cast<int>(gate.cols));
    CPX_CUDA_CHECK_LAUNCH();
}

/// x = GELU_erf(x + bias) in place; bias ([cols], device) may be null.
template <class T, class B>
void bias_gelu(StridedMatrix<T> x, const B* bias, cudaStream_t stream = nullptr) {
    x.validate("cuda::bias_gelu");
    const long long total = x.rows * x.cols;
    if (total == 0) return;
    kernels::bias_rows<T, B, true><<<detail::grid_stride_blocks(total, 256), 256, 0, stream>>>(
        x.data, x.ld, bias, x.rows, static_cast<int>(x.cols));
    CPX_CUDA_CHECK_LAUNCH();
}

/// y = y + bias in place, bias [cols] on the device.
template <class T, class B>
void add_bias(StridedMatrix<T> y, const B* bias, cudaStream_t stream = nullptr) {
    y.validate("cuda::add_bias");
    require<ShapeError>(bias != nullptr, "cuda::add_bias: the bias is required");
    const long long total = y.rows * y.cols;
    if (total == 0) return;
    kernels::bias_rows<T, B, false><<<detail::grid_stride_blocks(total, 256), 256, 0, stream>>>(
        y.data, y.ld, bias, y.rows, static_cast<int>(y.cols));
    CPX_CUDA_CHECK_LAUNCH();
}

}  // namespace cpx::cuda

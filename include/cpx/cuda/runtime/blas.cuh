#pragma once
// Dense products on cuBLAS: y = alpha * x . W^T + beta * y (nn.Linear layout,
// W is [out, in]) or y = alpha * x . W + beta * y (input-major layout, W is
// [in, out], as COMPLEXITY-DEEP stores its expert weights and PRISM applies U
// as its output map). Inputs fp32, bf16 or fp16; accumulation is always fp32.
//
// Row-major through column-major cuBLAS: a row-major [r, c] matrix is a
// column-major [c, r] one, so y^T = W x^T is computed with W as the left
// operand (transposed for the [out, in] layout) and x^T as the right one.
//
// Graph capture: the handle gets its workspace from us (cublasSetStream resets
// it to cuBLAS's internal pool, so both are set before every call), and alpha
// and beta are host values read when the call is enqueued.

#include <cublas_v2.h>
#include <library_types.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/runtime/device_buffer.cuh"

namespace cpx::cuda {

/// How a weight matrix is stored.
enum class WeightLayout {
    out_in,  ///< [out, in], y = x . W^T (nn.Linear)
    in_out,  ///< [in, out], y = x . W  (expert weights, PRISM's U as output map)
};

/// fp32 products: exact fp32 arithmetic (1e-5 class) or TF32 tensor cores (5e-4 class).
enum class Fp32Math { exact, tf32 };

/// RAII cuBLAS handle with its own workspace.
class Blas {
public:
    /// 32 MiB: what cuBLAS recommends for Hopper (4 MiB suffices elsewhere).
    static constexpr std::size_t default_workspace_bytes = std::size_t{32} << 20;

    explicit Blas(Fp32Math fp32_math = Fp32Math::exact, std::size_t workspace_bytes = default_workspace_bytes)
        : workspace_(workspace_bytes), fp32_math_(fp32_math) {
        CPX_CUDA_CHECK(cublasCreate(&handle_));
    }
    Blas(const Blas&) = delete;
    Blas& operator=(const Blas&) = delete;
    ~Blas() {
        if (handle_) cublasDestroy(handle_);  // teardown errors cannot be reported usefully
    }

    /// The handle bound to `stream` and to our workspace, ready for one call.
    cublasHandle_t bind(cudaStream_t stream) {
        CPX_CUDA_CHECK(cublasSetStream(handle_, stream));
        CPX_CUDA_CHECK(cublasSetWorkspace(handle_, workspace_.data(), workspace_.size()));
        return handle_;
    }
    Fp32Math fp32_math() const { return fp32_math_; }

private:
    cublasHandle_t handle_ = nullptr;
    DeviceBuffer<std::byte> workspace_;
    Fp32Math fp32_math_;
};

namespace detail {
template <class T> constexpr cudaDataType_t cuda_type();
template <> constexpr cudaDataType_t cuda_type<float>() { return CUDA_R_32F; }
template <> constexpr cudaDataType_t cuda_type<bf16>() { return CUDA_R_16BF; }
template <> constexpr cudaDataType_t cuda_type<fp16>() { return CUDA_R_16F; }

inline int blas_int(index_t v, const char* what) {
    require<ShapeError>(v >= 0 && v <= std::numeric_limits<int>::max(), "cuda::linear: ", what, " = ", v,
                        " does not fit cuBLAS's 32-bit sizes");
    return static_cast<int>(v);
}
}  // namespace detail

/// y = alpha * x . op(W) + beta * y, op(W) = W^T for WeightLayout::out_in and W
/// for in_out. x is [M, K]; W is [N, K] (out_in) or [K, N] (in_out); y is
/// [M, N]. Out is either the input type or float. With beta != 0, y is read
/// first (residual adds in place); with beta == 0 it is never read.
template <class In, class Out>
void linear(Blas& blas, StridedMatrix<const In> x, StridedMatrix<const In> w, WeightLayout layout,
            StridedMatrix<Out> y, float alpha = 1.0f, float beta = 0.0f, cudaStream_t stream = nullptr) {
    static_assert(std::is_same_v<In, float> || std::is_same_v<In, bf16> || std::is_same_v<In, fp16>,
                  "cuda::linear takes fp32, bf16 or fp16 inputs");
    static_assert(std::is_same_v<Out, In> || std::is_same_v<Out, float>,
                  "cuda::linear writes the input type or fp32 (the combinations cuBLAS supports)");
    x.validate("cuda::linear input");
    w.validate("cuda::linear weight");
    y.validate("cuda::linear output");
    const index_t m = x.rows, k = x.cols;
    const index_t n = layout == WeightLayout::out_in ? w.rows : w.cols;
    const index_t w_in = layout == WeightLayout::out_in ? w.cols : w.rows;
    require<ShapeError>(w_in == k, "cuda::linear: weight [", w.rows, ", ", w.cols, "] does not take inputs of width ", k,
                        layout == WeightLayout::out_in ? " (layout [out, in])" : " (layout [in, out])");
    require<ShapeError>(y.rows == m && y.cols == n, "cuda::linear: output is [", y.rows, ", ", y.cols, "], expected [",
                        m, ", ", n, "]");
    if (m == 0 || n == 0) return;
    if (k == 0) {
        require<ShapeError>(beta == 0.0f && y.ld == n, "cuda::linear: an empty inner dimension needs beta = 0 and a contiguous output");
        CPX_CUDA_CHECK(cudaMemsetAsync(y.data, 0, static_cast<std::size_t>(m * n) * sizeof(Out), stream));
        return;
    }
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    if constexpr (std::is_same_v<In, float>)
        if (blas.fp32_math() == Fp32Math::tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    // Column-major view: C[n, m] = op_a(A)[n, k] * B[k, m] with A = W, B = x^T, C = y^T.
    const cublasOperation_t op_a = layout == WeightLayout::out_in ? CUBLAS_OP_T : CUBLAS_OP_N;
    CPX_CUDA_CHECK(cublasGemmEx(blas.bind(stream), op_a, CUBLAS_OP_N, detail::blas_int(n, "N"), detail::blas_int(m, "M"),
                                detail::blas_int(k, "K"), &alpha, w.data, detail::cuda_type<In>(),
                                detail::blas_int(w.ld, "weight stride"), x.data, detail::cuda_type<In>(),
                                detail::blas_int(x.ld, "input stride"), &beta, y.data, detail::cuda_type<Out>(),
                                detail::blas_int(y.ld, "output stride"), compute, CUBLAS_GEMM_DEFAULT));
}

/// Contiguous operands.
template <class In, class Out>
void linear(Blas& blas, Matrix<const In> x, Matrix<const In> w, WeightLayout layout, Matrix<Out> y,
            float alpha = 1.0f, float beta = 0.0f, cudaStream_t stream = nullptr) {
    linear(blas, StridedMatrix<const In>(x.data(), x.extent(0), x.extent(1), x.extent(1)),
           StridedMatrix<const In>(w.data(), w.extent(0), w.extent(1), w.extent(1)), layout, StridedMatrix<Out>(y),
           alpha, beta, stream);
}

}  // namespace cpx::cuda

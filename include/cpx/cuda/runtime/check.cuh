#pragma once
// Every CUDA runtime and cuBLAS call goes through these checks: a failure
// becomes a cpx::CudaError naming the call, the place and the error string.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cpx/core/error.hpp"

namespace cpx::cuda {

inline void check(cudaError_t status, const char* call, const char* file, int line) {
    if (status != cudaSuccess)
        raise<CudaError>(call, " failed at ", file, ":", line, ": ", cudaGetErrorName(status), " (",
                         cudaGetErrorString(status), ")");
}

inline void check(cublasStatus_t status, const char* call, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS)
        raise<CudaError>(call, " failed at ", file, ":", line, ": ", cublasGetStatusName(status), " (",
                         cublasGetStatusString(status), ")");
}

}  // namespace cpx::cuda

#define CPX_CUDA_CHECK(call) ::cpx::cuda::check((call), #call, __FILE__, __LINE__)
/// After a kernel launch: reports launch-configuration errors at once.
#define CPX_CUDA_CHECK_LAUNCH() ::cpx::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

#pragma once
// Whether this process can use a CUDA device: the GPU test and benchmark
// programs report a skip with the reason instead of failing where none exists.
// Host code only (no kernels), so plain C++ translation units may include it.

#include <cuda_runtime_api.h>

#include <string>

namespace cpx::cuda {

/// Empty if a CUDA device is usable; otherwise why not, in words.
inline std::string no_device_reason() {
    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess) return cudaGetErrorString(status);
    if (devices == 0) return "device count is 0";
    return {};
}

}  // namespace cpx::cuda

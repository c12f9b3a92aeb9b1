#pragma once
// Helpers of the GPU tests: storage-type conversions, uploads of rounded
// inputs and reads of poisoned outputs. The references stay on the host.

#include <cstdint>
#include <vector>

#include <cpx/core/dtype.hpp>
#include <cpx/cuda/runtime/device_buffer.cuh>

namespace cpx::testing {

/// Values rounded to storage type T (the exact inputs a T kernel sees).
template <class T>
std::vector<T> to_storage(const std::vector<float>& v) {
    std::vector<T> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = from_float<T>(v[i]);
    return out;
}

/// Storage values widened to float.
template <class T>
std::vector<float> to_floats(const std::vector<T>& v) {
    std::vector<float> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = to_float(v[i]);
    return out;
}

/// v rounded through T and back: the inputs a reference should use for a T kernel.
template <class T>
std::vector<float> rounded(const std::vector<float>& v) { return to_floats(to_storage<T>(v)); }

/// A device buffer holding v rounded to T.
template <class T>
cuda::DeviceBuffer<T> upload_as(const std::vector<float>& v) { return cuda::DeviceBuffer<T>(to_storage<T>(v)); }

/// A device buffer of n elements filled with NaN (all bits set), so unwritten outputs show.
template <class T>
cuda::DeviceBuffer<T> poisoned_device(std::size_t n) {
    cuda::DeviceBuffer<T> b(n);
    b.fill_bytes(0xff);
    return b;
}

/// A device buffer's contents as floats.
template <class T>
std::vector<float> download_floats(const cuda::DeviceBuffer<T>& b) { return to_floats(b.download()); }

/// The relative error tolerance of the issue for a storage type: fp32 1e-5, bf16/fp16 2e-2.
template <class T>
constexpr double tolerance() { return sizeof(T) == 4 ? 1e-5 : 2e-2; }

}  // namespace cpx::testing

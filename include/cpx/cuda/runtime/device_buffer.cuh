#pragma once
// RAII ownership of device memory. Buffers are allocated once (model load,
// cache creation) and reused, never per decoded token.

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cuda/runtime/check.cuh"

namespace cpx::cuda {

template <class T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t count) : count_(count) {
        if (count_ > 0) CPX_CUDA_CHECK(cudaMalloc(&data_, count_ * sizeof(T)));
    }
    explicit DeviceBuffer(std::span<const T> host) : DeviceBuffer(host.size()) { upload(host); }
    explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(std::span<const T>(host)) {}
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
        if (this != &other) {
            release_();
            data_ = std::exchange(other.data_, nullptr);
            count_ = std::exchange(other.count_, 0);
        }
        return *this;
    }
    ~DeviceBuffer() { release_(); }

    T* data() const { return data_; }
    std::size_t size() const { return count_; }

    void upload(std::span<const T> host) {
        require<ShapeError>(host.size() == count_, "DeviceBuffer::upload: ", host.size(), " elements into a buffer of ",
                            count_);
        if (count_) CPX_CUDA_CHECK(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
    }
    std::vector<T> download() const {
        std::vector<T> host(count_);
        if (count_) CPX_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
        return host;
    }
    /// Fills every byte with `byte` (tests poison outputs with 0xFF = NaN before a launch).
    void fill_bytes(int byte, cudaStream_t stream = nullptr) {
        if (count_) CPX_CUDA_CHECK(cudaMemsetAsync(data_, byte, count_ * sizeof(T), stream));
    }

private:
    void release_() noexcept {
        if (data_) cudaFree(data_);  // errors at teardown cannot be reported usefully
        data_ = nullptr;
    }
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

/// NaN (0xFF bytes) in every element of each buffer: a model's activation buffers start so,
/// and a kernel that reads what no kernel wrote shows as NaN in the logits.
template <class... B>
void poison(B&... buffers) {
    (buffers.fill_bytes(0xff), ...);
}

}  // namespace cpx::cuda

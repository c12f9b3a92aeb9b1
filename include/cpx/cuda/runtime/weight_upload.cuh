#pragma once
// How the GPU models receive their parameters: the host weights of the one
// tensor description (models/complexity/weights.hpp, models/prism/weights.hpp),
// buffer by buffer, converted to the device storage type on the host (round to
// nearest even; a plain copy when the types are equal) and uploaded once.

#include <span>
#include <type_traits>
#include <vector>

#include "cpx/core/dtype.hpp"
#include "cpx/cuda/runtime/device_buffer.cuh"

namespace cpx::cuda {

/// A host buffer (float, bf16 or fp16 values) on the device as T.
template <class T, class W, class A>
DeviceBuffer<T> upload_weights(const std::vector<W, A>& host) {
    if constexpr (std::is_same_v<T, W>) {
        return DeviceBuffer<T>(std::span<const T>(host));  // straight from the (aligned) host buffer
    } else {
        std::vector<T> converted(host.size());
        for (std::size_t i = 0; i < host.size(); ++i) converted[i] = from_float<T>(to_float(host[i]));
        return DeviceBuffer<T>(converted);
    }
}

}  // namespace cpx::cuda

#pragma once
// How the GPU models receive their parameters: from any `source(name, out)`
// that fills `out` (a std::span<float> of the expected element count) with the
// named tensor's fp32 values, or throws. A checkpoint reader, a CPU model's
// tensor enumeration or a test's map all fit, and the GPU models never include
// CPU (Eigen) headers. Values are converted to the device storage type on the
// host (round to nearest even) and uploaded once.

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cpx/core/dtype.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cuda/device_buffer.cuh"

namespace cpx::cuda {

/// A parameter source: fills `out` with the named tensor's values.
template <class S>
concept WeightSource = requires(S& s, std::string_view name, std::span<float> out) { s(name, out); };

/// The named tensor's fp32 values, `count` of them.
template <WeightSource S>
std::vector<float> read_weights(S& source, std::string_view name, index_t count) {
    std::vector<float> host(static_cast<std::size_t>(count));
    source(name, std::span<float>(host));
    return host;
}

/// The named tensor on the device, in storage type T.
template <class T, WeightSource S>
DeviceBuffer<T> upload_weights(S& source, std::string_view name, index_t count) {
    const auto host = read_weights(source, name, count);
    std::vector<T> converted(host.size());
    for (std::size_t i = 0; i < host.size(); ++i) converted[i] = from_float<T>(host[i]);
    return DeviceBuffer<T>(converted);
}

/// Several named tensors stacked along their first dimension into one device
/// buffer (the fused projections: [gate; up], [W_q; W_k; W_v]).
template <class T, WeightSource S>
DeviceBuffer<T> upload_stacked(S& source, std::initializer_list<std::pair<std::string, index_t>> parts) {
    std::vector<T> all;
    for (const auto& [name, count] : parts) {
        const auto host = read_weights(source, name, count);
        for (float v : host) all.push_back(from_float<T>(v));
    }
    return DeviceBuffer<T>(all);
}

}  // namespace cpx::cuda

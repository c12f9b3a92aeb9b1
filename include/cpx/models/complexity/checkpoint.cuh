#pragma once
// A COMPLEXITY-DEEP checkpoint onto the GPU: the CPU loader
// (models/complexity/checkpoint.hpp: config.json checked against the compiled
// preset, single or sharded safetensors, every accepted layout, every problem
// reported at once) fills the host weights, which the GPU model uploads. One
// loader, one set of tensor names, one mismatch report for both backends.
//
//   auto model = cpx::cuda::load_complexity_model<Preset, cpx::bf16>("ckpt/", max_batch, max_rows);
//
// Storage: with T = bf16 the host copy is bf16, so a bf16 checkpoint reaches
// the device bit for bit; fp32 and fp16 models are loaded through fp32.

#include <cstdint>
#include <filesystem>
#include <span>
#include <type_traits>

#include "cpx/models/complexity/model.cuh"
#include "cpx/models/complexity/checkpoint.hpp"

namespace cpx::cuda {

/// The host storage type through which a checkpoint reaches a GPU model storing T.
template <class T>
using HostWeightType = std::conditional_t<std::is_same_v<T, bf16>, bf16, float>;

/// Loads a checkpoint (directory, shard index or .safetensors file) into a GPU
/// model sized for `max_batch` sequences and `max_rows` tokens per call.
/// `report`, `routing` and `options` are those of load_complexity_checkpoint.
template <ComplexityConfigType C, class T = float>
ComplexityModel<C, T> load_complexity_model(const std::filesystem::path& path, int max_batch, int max_rows,
                                            CheckpointReport* report = nullptr,
                                            std::span<const std::int32_t> routing = {},
                                            const LoadOptions& options = {}) {
    return ComplexityModel<C, T>(load_complexity_checkpoint<C, HostWeightType<T>>(path, report, routing, options),
                                 max_batch, max_rows);
}

}  // namespace cpx::cuda

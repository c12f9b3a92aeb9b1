#pragma once
// A PRISM checkpoint onto the GPU: the CPU loader (models/prism/checkpoint.hpp:
// config.json checked against the compiled preset, single or sharded
// safetensors, an lm_head-only embedding, every problem reported at once)
// fills the host weights, which the GPU model uploads.
//
//   auto model = cpx::cuda::load_prism_model<Preset, cpx::bf16>("ckpt/", max_batch, max_rows);
//
// With T = bf16 the host copy is bf16, so a bf16 checkpoint reaches the device
// bit for bit; fp32 and fp16 models are loaded through fp32.

#include <filesystem>
#include <string>
#include <vector>

#include "cpx/models/complexity/checkpoint.cuh"  // HostWeightType
#include "cpx/models/prism/model.cuh"
#include "cpx/models/prism/checkpoint.hpp"

namespace cpx::cuda {

/// Loads a checkpoint (directory, shard index or .safetensors file) into a GPU
/// PRISM model sized for `max_batch` sequences and `max_rows` tokens per call.
template <PrismConfigType C, class T = float>
PrismModel<C, T> load_prism_model(const std::filesystem::path& path, int max_batch, int max_rows,
                                  std::vector<std::string>* config_keys_not_interpreted = nullptr) {
    return PrismModel<C, T>(load_prism_checkpoint<C, HostWeightType<T>>(path, config_keys_not_interpreted), max_batch,
                            max_rows);
}

}  // namespace cpx::cuda

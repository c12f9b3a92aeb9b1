#pragma once
// Which kernels run where a tensor-core variant exists: attention of prefill-
// sized launches and the token-routed experts' grouped GEMMs. KernelChoice{} is
// the SIMT kernels, which every storage type and head dim can take; the
// tensor-core ones (WMMA) take bf16/fp16 storage on compute capability 8.0+.
// A model starts with preferred_kernels() and takes another choice through
// use_kernels(). Calls of few expert rows take the row kernel whichever is chosen.

#include <cuda_runtime_api.h>

#include <type_traits>

#include "cpx/core/error.hpp"
#include "cpx/cuda/runtime/check.cuh"

namespace cpx::cuda {

/// Attention kernel of launches with at least 16 queries per sequence: the SIMT
/// kernel, or WMMA tensor cores (head dims 64 and 128). Decode and small chunks
/// always take the SIMT kernel (with key splits).
enum class AttentionKernel { simt, tensor_cores };

/// Grouped-GEMM kernel: the SIMT fp32 kernel (any storage type), or WMMA tensor
/// cores (bf16 or fp16 activations and weights).
enum class GroupedGemmKernel { simt, tensor_cores };

/// (token, route) rows up to which the grouped GEMMs take the row kernel
/// (grouped_gemm_rows.cuh) instead of the tiled one. Measured on an H100 against the WMMA tiled
/// kernel (docs/CUDA.md): the row kernel is faster up to 512 rows in every model measured, and
/// slower at 1,024 rows of 187M's 512-wide experts (tr-moe-306's 64-wide ones gain up to 2,048).
inline constexpr int default_expert_row_kernel_max = 512;

/// The row kernel's split of K over the blocks of a thread-block cluster (compute capability
/// 9.0+; grouped_gemm_rows.cuh): 0 lets each call choose from its rows, K and the device's
/// multiprocessors (grouped_gemm.cuh, row_split_ways: 8 ways for one decoding token's expert, none
/// once the tiles fill the device; unsplit where clusters are missing), 1 never splits, 2 to 8
/// split that many ways whenever the row kernel runs (refused on devices without clusters).
inline constexpr int expert_row_split_auto = 0, expert_row_split_max = 8;

/// The grouped-GEMM kernels of one call: `kernel` above `row_kernel_max` rows, the
/// row kernel at or below it (0: never), its K split by `row_kernel_split` (above).
struct GroupedGemmChoice {
    GroupedGemmKernel kernel = GroupedGemmKernel::simt;
    int row_kernel_max = default_expert_row_kernel_max;
    int row_kernel_split = expert_row_split_auto;
    constexpr GroupedGemmChoice() = default;
    constexpr GroupedGemmChoice(GroupedGemmKernel k, int rows_max = default_expert_row_kernel_max,  // NOLINT: implicit
                                int split = expert_row_split_auto)
        : kernel(k), row_kernel_max(rows_max), row_kernel_split(split) {}
};

struct KernelChoice {
    AttentionKernel attention = AttentionKernel::simt;
    GroupedGemmKernel experts = GroupedGemmKernel::simt;
    int expert_row_kernel_max = default_expert_row_kernel_max;  ///< see GroupedGemmChoice
    int expert_row_kernel_split = expert_row_split_auto;        ///< see GroupedGemmChoice

    constexpr GroupedGemmChoice expert_choice() const {
        return {experts, expert_row_kernel_max, expert_row_kernel_split};
    }

    static constexpr KernelChoice tensor_cores() {
        return {AttentionKernel::tensor_cores, GroupedGemmKernel::tensor_cores, default_expert_row_kernel_max,
                expert_row_split_auto};
    }
};

/// What a model of storage type T and attention head dim `head_dim` starts with on a device of
/// compute capability `compute_major`.x: tensor cores wherever they take the case (16-bit storage,
/// 8.0+; attention at head dims 64 and 128), SIMT elsewhere. Measured on the H100 and H200
/// (docs/CUDA.md): whole-model prefill 2.4-2.6x faster, decode and generation unchanged.
template <class T>
constexpr KernelChoice preferred_kernels(int head_dim, int compute_major) {
    KernelChoice k;
    if (!std::is_same_v<T, float> && compute_major >= 8) {
        k.experts = GroupedGemmKernel::tensor_cores;
        if (head_dim == 64 || head_dim == 128) k.attention = AttentionKernel::tensor_cores;
    }
    return k;
}

/// The current device and its compute capability (major): what the defaults and the
/// tensor-core launchers' checks read.
struct CurrentDevice {
    int id = 0, major = 0;
};
inline CurrentDevice current_device() {
    CurrentDevice d;
    CPX_CUDA_CHECK(cudaGetDevice(&d.id));
    CPX_CUDA_CHECK(cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, d.id));
    return d;
}

/// Refuses, where it is set, a choice the model's storage type or head dim cannot take.
template <class T>
void check_kernel_choice(const KernelChoice& k, int head_dim, const char* model) {
    const bool any_tensor_cores =
        k.attention == AttentionKernel::tensor_cores || k.experts == GroupedGemmKernel::tensor_cores;
    require<ShapeError>(!any_tensor_cores || !std::is_same_v<T, float>, model,
                        ": tensor-core kernels take bf16 or fp16 storage, this model stores fp32");
    require<ShapeError>(k.expert_row_kernel_max >= 0, model, ": expert_row_kernel_max must be 0 or more, got ",
                        k.expert_row_kernel_max);
    require<ShapeError>(k.expert_row_kernel_split >= 0 && k.expert_row_kernel_split <= expert_row_split_max, model,
                        ": expert_row_kernel_split must be 0 (automatic) to ", expert_row_split_max, ", got ",
                        k.expert_row_kernel_split);
    require<ShapeError>(k.attention != AttentionKernel::tensor_cores || head_dim == 64 || head_dim == 128, model,
                        ": tensor-core attention is compiled for head dims 64 and 128, this model has ", head_dim);
}

}  // namespace cpx::cuda

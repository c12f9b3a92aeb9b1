#pragma once
// Which kernels run where a tensor-core variant exists: attention of prefill-
// sized launches and the token-routed experts' grouped GEMMs. Both default to
// the SIMT kernels; the tensor-core ones (WMMA, bf16/fp16 storage, compute
// capability 8.0+) are opt-in until they have passed on a device. A model takes
// a KernelChoice through use_kernels().

#include <type_traits>

#include "cpx/core/error.hpp"

namespace cpx::cuda {

/// Attention kernel of launches with at least 16 queries per sequence: the SIMT
/// kernel, or WMMA tensor cores (head dims 64 and 128). Decode and small chunks
/// always take the SIMT kernel (with key splits).
enum class AttentionKernel { simt, tensor_cores };

/// Grouped-GEMM kernel: the SIMT fp32 kernel (any storage type), or WMMA tensor
/// cores (bf16 or fp16 activations and weights).
enum class GroupedGemmKernel { simt, tensor_cores };

struct KernelChoice {
    AttentionKernel attention = AttentionKernel::simt;
    GroupedGemmKernel experts = GroupedGemmKernel::simt;

    static constexpr KernelChoice tensor_cores() {
        return {AttentionKernel::tensor_cores, GroupedGemmKernel::tensor_cores};
    }
};

/// Refuses, where it is set, a choice the model's storage type or head dim cannot take.
template <class T>
void check_kernel_choice(const KernelChoice& k, int head_dim, const char* model) {
    const bool any_tensor_cores =
        k.attention == AttentionKernel::tensor_cores || k.experts == GroupedGemmKernel::tensor_cores;
    require<ShapeError>(!any_tensor_cores || !std::is_same_v<T, float>, model,
                        ": tensor-core kernels take bf16 or fp16 storage, this model stores fp32");
    require<ShapeError>(k.attention != AttentionKernel::tensor_cores || head_dim == 64 || head_dim == 128, model,
                        ": tensor-core attention is compiled for head dims 64 and 128, this model has ", head_dim);
}

}  // namespace cpx::cuda

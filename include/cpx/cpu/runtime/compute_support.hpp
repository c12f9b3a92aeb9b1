#pragma once
// Which arithmetic (cpu/runtime/compute.hpp) this machine can run: a choice whose
// kernels the CPU lacks runs fp32. One rule for the models' choice
// (models/compute_choice.hpp) and the attention core's.

#include "cpx/cpu/runtime/compute.hpp"
#include "cpx/cpu/kernels/gemm_bf16.hpp"
#include "cpx/cpu/kernels/gemm_f32_packed.hpp"

namespace cpx::cpu {

/// `wanted`, or fp32 where this CPU lacks its kernels (bf16: a bf16 level, gemm_bf16.hpp;
/// fp32_packed: AVX2 and FMA, or AVX-512).
inline Compute runnable_compute(Compute wanted) {
    switch (wanted) {
        case Compute::bf16: return best_bf16_level() != Bf16Level::none ? wanted : Compute::fp32;
        case Compute::fp32_packed: return gemm_f32_packed_available() ? wanted : Compute::fp32;
        default: return Compute::fp32;
    }
}

}  // namespace cpx::cpu

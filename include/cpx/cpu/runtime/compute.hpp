#pragma once
// The arithmetic of a model's matrix products, the user's choice
// (docs/BF16.md):
//   fp32         stored weights (the default; no packed copy): prefill-sized products pack
//                the weight during the call, a chunk at a time, for our AVX-512 or AVX2
//                kernel (cpu/kernels/gemm_repacked.hpp), and prefill attention packs keys
//                and values per call as fp32_packed does; Eigen's products elsewhere
//   fp32_packed  fp32 arithmetic on weights packed once into panels for our
//                AVX-512 or AVX2 kernel: the same values up to summation order, faster
//                prefill, 4 bytes per matrix element on top of fp32 weights, 2 on
//                top of bf16 ones (bf16 panels, widened exactly by the kernel)
//   bf16         bf16 inputs, fp32 sums, on weights packed once as bf16 panels
//                (2 bytes per matrix element on top of the weights)
// Both packed choices cover every product, decode steps included
// (cpu/kernels/linear.hpp); decode attention reads the KV cache as stored.

#include <cstdint>
#include <string_view>

#include "cpx/core/error.hpp"

namespace cpx::cpu {

enum class Compute : std::uint8_t { fp32, fp32_packed, bf16 };

constexpr std::string_view compute_name(Compute c) {
    switch (c) {
        case Compute::fp32_packed: return "fp32_packed";
        case Compute::bf16: return "bf16";
        default: return "fp32";
    }
}

/// "fp32", "fp32_packed" or "bf16"; anything else is an InputError naming the choices.
inline Compute parse_compute(std::string_view s) {
    for (Compute c : {Compute::fp32, Compute::fp32_packed, Compute::bf16})
        if (s == compute_name(c)) return c;
    raise<InputError>("unknown arithmetic '", s, "': expected fp32, fp32_packed or bf16");
}

}  // namespace cpx::cpu

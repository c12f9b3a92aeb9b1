#pragma once
// Which vector instruction set the automatically chosen CPU kernels use (the
// few-row products of decode, decode's attention products, the packed fp32
// product's micro-kernel), decided at run time: portable < avx2 < avx512.
//
// Those kernels are compiled by function attribute (CPX_TARGET_AVX512,
// CPX_TARGET_AVX2), not by the build's flags, so a build for generic x86-64
// carries them and calls them only where cpu_features() reports the set. A
// process-wide cap lets one process run the narrower kernels too: the tests
// check every level the machine has, and a benchmark can time them side by side.
//
// Compute::bf16 keeps its own availability check (its levels, gemm_bf16.hpp); the
// cap does not touch it, except that the widened level's fp32 product follows it.
// Compute::fp32_packed needs AVX2 at least and runs the AVX-512 tile where the
// capped set is avx512, the AVX2 tile otherwise.

#include <atomic>
#include <cstdint>
#include <string_view>

#include "cpx/core/host_device.hpp"  // CPX_FORCE_INLINE
#include "cpx/cpu/runtime/cpu_features.hpp"
#include "cpx/cpu/runtime/scoped_setting.hpp"

#ifdef CPX_X86
/// Compile one function for AVX-512 F/BW/DQ/VL whatever the build's -march, with FMA3 for the
/// 256-bit FMAs of the lane kernels (every AVX-512 CPU has it; GCC does not imply it).
#define CPX_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
/// AVX2 with FMA3 (the 256-bit kernels for CPUs without AVX-512).
#define CPX_TARGET_AVX2 __attribute__((target("avx2,fma")))
/// AVX-512 plus AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16).
#define CPX_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,avx512bf16")))
#endif
// A kernel's helpers that work on its register arrays (accumulators, loaded vectors) are
// CPX_FORCE_INLINE. Left to GCC, whether such a helper was inlined followed the size of the whole
// source file: adding unrelated code to the products' loop nest made the fp32 tiles on bf16
// panels call their accumulators' constructor, keep the accumulators in memory, and run a 187M
// decode step of four sequences in 8.1 ms instead of 5.5 (Zen 5, GCC 12); some 2-4-row tiles
// already did so before.

namespace cpx::cpu {

/// Vector instruction sets of the automatically chosen kernels, in increasing order.
enum class VectorIsa : std::uint8_t { portable, avx2, avx512 };

constexpr std::string_view vector_isa_name(VectorIsa isa) {
    return isa == VectorIsa::avx512 ? "avx512" : isa == VectorIsa::avx2 ? "avx2" : "portable";
}

namespace detail {
inline std::atomic<VectorIsa>& vector_isa_cap() {
    static std::atomic<VectorIsa> cap{VectorIsa::avx512};
    return cap;
}
}  // namespace detail

/// The widest set this build carries kernels for and this machine (CPU and OS) runs.
inline VectorIsa machine_vector_isa() {
#ifdef CPX_X86
    const CpuFeatures& f = cpu_features();
    return f.avx512f ? VectorIsa::avx512 : f.avx2 ? VectorIsa::avx2 : VectorIsa::portable;
#else
    return VectorIsa::portable;
#endif
}

/// The set the kernels use now: the machine's, capped by limit_vector_isa().
inline VectorIsa vector_isa() {
    const VectorIsa machine = machine_vector_isa(), cap = detail::vector_isa_cap().load(std::memory_order_relaxed);
    return cap < machine ? cap : machine;
}

/// Caps the set for the whole process from now on; returns the previous cap.
/// Meant for tests and comparisons, between calls (a call in flight keeps the
/// kernels it chose).
inline VectorIsa limit_vector_isa(VectorIsa cap) { return detail::vector_isa_cap().exchange(cap); }

/// limit_vector_isa() for a scope.
using VectorIsaLimit = ScopedSetting<VectorIsa, limit_vector_isa>;

}  // namespace cpx::cpu

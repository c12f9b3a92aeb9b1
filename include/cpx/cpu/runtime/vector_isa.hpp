#pragma once
// Which vector instruction set the automatically chosen CPU kernels use (the
// few-row products of decode, decode's attention products), decided at run time.
//
// Those kernels are compiled by function attribute (CPX_TARGET_AVX512), not by
// the build's flags, so a build for generic x86-64 carries them and calls them
// only where cpu_features() reports AVX-512. A process-wide cap lets one process
// run the portable kernels too: the tests check both on an AVX-512 machine, and
// a benchmark can time both.
//
// The packed products (Compute::fp32_packed, Compute::bf16) are the user's
// explicit choice and keep their own availability checks; the cap does not
// touch them.

#include <atomic>
#include <cstdint>
#include <string_view>

#include "cpx/cpu/runtime/cpu_features.hpp"

#ifdef CPX_X86
/// Compile one function for AVX-512 F/BW/DQ/VL whatever the build's -march, with FMA3 for the
/// 256-bit FMAs of the lane kernels (every AVX-512 CPU has it; GCC does not imply it).
#define CPX_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
/// The same plus AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16).
#define CPX_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,avx512bf16")))
#endif

namespace cpx::cpu {

/// Vector instruction sets of the automatically chosen kernels, in increasing order.
enum class VectorIsa : std::uint8_t { portable, avx512 };

constexpr std::string_view vector_isa_name(VectorIsa isa) { return isa == VectorIsa::avx512 ? "avx512" : "portable"; }

namespace detail {
inline std::atomic<VectorIsa>& vector_isa_cap() {
    static std::atomic<VectorIsa> cap{VectorIsa::avx512};
    return cap;
}
}  // namespace detail

/// The widest set this build carries kernels for and this machine (CPU and OS) runs.
inline VectorIsa machine_vector_isa() {
#ifdef CPX_X86
    return cpu_features().avx512f ? VectorIsa::avx512 : VectorIsa::portable;
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
class VectorIsaLimit {
public:
    explicit VectorIsaLimit(VectorIsa cap) : previous_(limit_vector_isa(cap)) {}
    ~VectorIsaLimit() { limit_vector_isa(previous_); }
    VectorIsaLimit(const VectorIsaLimit&) = delete;
    VectorIsaLimit& operator=(const VectorIsaLimit&) = delete;

private:
    VectorIsa previous_;
};

}  // namespace cpx::cpu

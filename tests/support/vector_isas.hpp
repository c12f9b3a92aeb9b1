#pragma once
// The vector instruction sets whose kernels the tests run side by side on this
// machine: the portable kernels always, the AVX-512 ones where the CPU has them
// (an absent set is reported, not failed).
#include <doctest/doctest.h>

#include <cpx/cpu/runtime/vector_isa.hpp>

#include <vector>

namespace cpx::testing {

inline std::vector<cpu::VectorIsa> vector_isas() {
    std::vector<cpu::VectorIsa> isas{cpu::VectorIsa::portable};
    if (cpu::machine_vector_isa() == cpu::VectorIsa::avx512) isas.push_back(cpu::VectorIsa::avx512);
    else if (static bool reported = false; !reported) {
        reported = true;
        MESSAGE("avx512 kernels skipped: this machine lacks AVX-512 (", cpu::cpu_features().summary(), ")");
    }
    return isas;
}

}  // namespace cpx::testing

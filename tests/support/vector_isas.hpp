#pragma once
// The vector instruction sets whose kernels the tests run side by side on this
// machine: the portable kernels always, the AVX2 and AVX-512 ones where the CPU
// has them (an absent set is reported, not failed).
#include <doctest/doctest.h>

#include <cpx/cpu/runtime/vector_isa.hpp>

#include <vector>

namespace cpx::testing {

inline std::vector<cpu::VectorIsa> vector_isas() {
    const cpu::VectorIsa machine = cpu::machine_vector_isa();
    std::vector<cpu::VectorIsa> isas{cpu::VectorIsa::portable};
    for (cpu::VectorIsa isa : {cpu::VectorIsa::avx2, cpu::VectorIsa::avx512})
        if (isa <= machine) isas.push_back(isa);
    if (static bool reported = false; !reported && machine != cpu::VectorIsa::avx512) {
        reported = true;
        MESSAGE("kernels above ", cpu::vector_isa_name(machine), " skipped: this machine lacks them (",
                cpu::cpu_features().summary(), ")");
    }
    return isas;
}

}  // namespace cpx::testing

#pragma once
// The vector instruction sets whose kernels the tests run side by side on this
// machine: the portable kernels always, the AVX2 and AVX-512 ones where the CPU
// has them (an absent set is reported, not failed).
#include <doctest/doctest.h>

#include <cpx/cpu/runtime/vector_isa.hpp>
#ifdef CPX_X86
#include <cpx/cpu/kernels/prefetch_lines.hpp>
#endif

#include <optional>
#include <string>
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

/// A kernel family and, at the AVX-512 level, where the decode kernels' stream fetches go: they
/// are chosen per microarchitecture (into L1 on Zen 5 and Intel's, not elsewhere:
/// cpu/kernels/prefetch_lines.hpp), and both are run so that every machine checks both.
struct KernelVariant {
    cpu::VectorIsa isa = cpu::VectorIsa::portable;
    std::optional<bool> fetch_into_l1;  // empty: the machine's choice
    std::string name() const {
        std::string n(cpu::vector_isa_name(isa));
        if (fetch_into_l1) n += *fetch_into_l1 ? ", fetch into L1" : ", no L1 fetch";
        return n;
    }
};

/// vector_isas(), the AVX-512 level twice (both fetch choices).
inline std::vector<KernelVariant> kernel_variants() {
    std::vector<KernelVariant> variants;
    for (cpu::VectorIsa isa : vector_isas()) {
#ifdef CPX_X86
        if (isa == cpu::VectorIsa::avx512) {
            variants.push_back({isa, false});
            variants.push_back({isa, true});
            continue;
        }
#endif
        variants.push_back({isa, std::nullopt});
    }
    return variants;
}

/// Runs the kernels of a variant for a scope.
class KernelVariantLimit {
public:
    explicit KernelVariantLimit(const KernelVariant& v)
        : isa_(v.isa)
#ifdef CPX_X86
          ,
          fetch_(!v.fetch_into_l1   ? cpu::StreamFetch::machine
                 : *v.fetch_into_l1 ? cpu::StreamFetch::into_l1
                                    : cpu::StreamFetch::not_into_l1)
#endif
    {
    }

private:
    cpu::VectorIsaLimit isa_;
#ifdef CPX_X86
    cpu::StreamFetchChoice fetch_;
#endif
};

}  // namespace cpx::testing

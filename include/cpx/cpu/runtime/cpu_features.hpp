#pragma once
// What the processor and the operating system let this process run, read at
// run time (CPUID, XGETBV, Linux arch_prctl), so that one binary built for a
// generic x86-64 picks the best kernels of whichever machine it lands on.
//
// A feature counts only when both the CPU has it and the OS saves its register
// state: AVX-512 needs the opmask and ZMM state enabled in XCR0; AMX needs the
// tile state in XCR0 and, on Linux, a per-process permission
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) that a VM or an old
// kernel may refuse. A refusal is not an error: the AMX level is then absent.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#define CPX_X86 1
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(CPX_X86)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace cpx::cpu {

struct CpuFeatures {
    std::string model;        ///< the CPU's brand string
    bool amd = false;         ///< vendor "AuthenticAMD"
    bool intel = false;       ///< vendor "GenuineIntel"
    unsigned family = 0;      ///< CPUID's display family (base + extended): 0x19 Zen 3/4, 0x1A Zen 5
    unsigned model_number = 0;  ///< CPUID's display model within the family (e.g. 0x11: Zen 4 EPYC)
    bool avx2 = false;        ///< AVX2 + FMA, OS-enabled
    bool avx512f = false;     ///< AVX-512 F/BW/VL/DQ and FMA, OS-enabled (what our AVX-512 kernels use)
    bool avx512_bf16 = false; ///< vdpbf16ps / vcvtne2ps2bf16 on top of avx512f
    bool amx_bf16 = false;    ///< AMX tiles with bf16, in the CPU and in XCR0
    bool amx_permitted = false;  ///< the OS granted this process the AMX tile state

    /// "avx2 avx512f avx512_bf16 amx_bf16(permitted)" style summary for reports.
    std::string summary() const {
        std::string s;
        auto add = [&s](bool on, const char* name) {
            if (!on) return;
            if (!s.empty()) s += ' ';
            s += name;
        };
        add(avx2, "avx2");
        add(avx512f, "avx512f");
        add(avx512_bf16, "avx512_bf16");
        if (amx_bf16) add(true, amx_permitted ? "amx_bf16" : "amx_bf16(not-permitted-by-os)");
        return s.empty() ? std::string("baseline") : s;
    }
    /// "AMD family 0x19 model 0x11": which microarchitecture, where the brand string does not say.
    std::string id() const {
        if (family == 0) return "unidentified";  // not x86, or CPUID unread
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s family 0x%x model 0x%x", amd ? "AMD" : "x86", family, model_number);
        return buf;
    }
};

namespace detail {
#ifdef CPX_X86
struct Regs {
    unsigned a = 0, b = 0, c = 0, d = 0;
};
inline Regs cpuid(unsigned leaf, unsigned sub = 0) {
    Regs r;
    if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return Regs{};
    return r;
}
inline std::uint64_t xcr0() {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (std::uint64_t{hi} << 32) | lo;
}
inline bool bit(unsigned v, int b) { return (v >> b) & 1u; }

/// Linux: ask for the AMX tile data state for this process. Idempotent.
inline bool request_amx_permission() {
#if defined(__linux__)
    constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
#else
    return false;
#endif
}

inline CpuFeatures detect() {
    CpuFeatures f;
    const Regs l0 = cpuid(0), l1 = cpuid(1);
    const unsigned max_leaf = l0.a;
    f.amd = l0.b == 0x68747541u && l0.d == 0x69746e65u && l0.c == 0x444d4163u;  // "Auth" "enti" "cAMD"
    f.intel = l0.b == 0x756e6547u && l0.d == 0x49656e69u && l0.c == 0x6c65746eu;  // "Genu" "ineI" "ntel"
    const unsigned base_family = (l1.a >> 8) & 0xfu;
    f.family = base_family == 0xfu ? base_family + ((l1.a >> 20) & 0xffu) : base_family;
    const unsigned base_model = (l1.a >> 4) & 0xfu;
    f.model_number = base_family == 0xfu || base_family == 6u ? base_model + (((l1.a >> 16) & 0xfu) << 4) : base_model;
    const bool osxsave = bit(l1.c, 27);
    const std::uint64_t xcr = osxsave ? xcr0() : 0;
    const bool os_avx = (xcr & 0x6) == 0x6;          // XMM + YMM state
    const bool os_avx512 = os_avx && (xcr & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
    const bool os_amx = (xcr & 0x60000) == 0x60000;  // XTILECFG + XTILEDATA
    if (max_leaf >= 7) {
        const Regs l7 = cpuid(7, 0), l71 = cpuid(7, 1);
        f.avx2 = os_avx && bit(l7.b, 5) && bit(l1.c, 12);
        f.avx512f = os_avx512 && bit(l1.c, 12) && bit(l7.b, 16) && bit(l7.b, 17) && bit(l7.b, 30) && bit(l7.b, 31);
        f.avx512_bf16 = f.avx512f && bit(l71.a, 5);
        f.amx_bf16 = os_amx && bit(l7.d, 24) && bit(l7.d, 22) && f.avx512f;
        f.amx_permitted = f.amx_bf16 && request_amx_permission();
    }
    if (cpuid(0x80000000).a >= 0x80000004) {
        char brand[49] = {};
        for (unsigned i = 0; i < 3; ++i) {
            const Regs r = cpuid(0x80000002 + i);
            std::memcpy(brand + 16 * i, &r, 16);
        }
        f.model = brand;
        const auto first = f.model.find_first_not_of(' ');
        const auto last = f.model.find_last_not_of(' ');
        f.model = first == std::string::npos ? std::string() : f.model.substr(first, last - first + 1);
    }
    return f;
}
#else
inline CpuFeatures detect() { return CpuFeatures{}; }
#endif
}  // namespace detail

/// The features of the machine this process runs on, read once.
inline const CpuFeatures& cpu_features() {
    static const CpuFeatures features = detail::detect();
    return features;
}

}  // namespace cpx::cpu

// What cpu/runtime/cpu_features.hpp reads from CPUID: the levels the kernels dispatch on imply
// each other as the hardware does, and the vendor and family a kernel's tuning may depend on
// agree with the brand string and with what Linux reads (/proc/cpuinfo).
#include <doctest/doctest.h>

#include <cpx/cpu/runtime/cpu_features.hpp>

#include <fstream>
#include <string>

using namespace cpx;

TEST_CASE("cpu features: levels imply the ones below, vendor and family agree with the brand string") {
    const cpu::CpuFeatures& f = cpu::cpu_features();
    MESSAGE("this machine: ", f.model, " (", f.id(), ": ", f.summary(), ")");
    if (f.avx512_bf16) CHECK(f.avx512f);
    if (f.amx_bf16) CHECK(f.avx512f);
    if (f.amx_permitted) CHECK(f.amx_bf16);
#ifdef CPX_X86
    CHECK(f.family >= 6);  // every x86-64 CPU reports family 6 (Intel) or 0xF plus an extension
    if (f.model.find("AMD") != std::string::npos) {
        CHECK(f.amd);
        if (f.avx2) CHECK(f.family >= 0x15);  // AMD's first AVX2 parts (Excavator) are family 0x15
    }
    if (f.model.find("Intel") != std::string::npos) CHECK(f.intel);
    CHECK_FALSE((f.amd && f.intel));
    // Linux decodes the same CPUID fields for every processor it lists: the first one's must match.
    std::ifstream info("/proc/cpuinfo");
    int seen = 0;
    for (std::string line; seen < 3 && std::getline(info, line);) {
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
        const std::string value = line.substr(colon + 1);
        if (key == "vendor_id") {
            CHECK(f.amd == (value.find("AuthenticAMD") != std::string::npos));
            CHECK(f.intel == (value.find("GenuineIntel") != std::string::npos));
            ++seen;
        } else if (key == "cpu family") {
            CHECK(f.family == std::stoul(value));
            ++seen;
        } else if (key == "model") {
            CHECK(f.model_number == std::stoul(value));
            ++seen;
        }
    }
    if (seen < 3) MESSAGE("not compared with /proc/cpuinfo: not readable here");
#else
    CHECK_FALSE(f.amd);
    CHECK_FALSE(f.intel);
    CHECK(f.family == 0);
    CHECK(f.model_number == 0);
#endif
}

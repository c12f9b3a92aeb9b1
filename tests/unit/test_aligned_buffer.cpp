// Storage of weights, caches and workspaces: cache-line alignment for small
// buffers, huge-page alignment and the huge-page advice for large ones.
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

#include "cpx/cpu/runtime/aligned_buffer.hpp"

#include "test_support.hpp"

namespace {

using cpx::cpu::cache_line;
using cpx::cpu::huge_page;
using cpx::testing::address;
constexpr std::size_t MiB = std::size_t{1} << 20;

/// The VmFlags line of the mapping of this process that holds `p` ("" when none is found).
std::string vm_flags_of(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        std::uintptr_t begin = 0, end = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> begin >> dash >> end && dash == '-') {  // a mapping's first line
            inside = address(p) >= begin && address(p) < end;
            continue;
        }
        if (inside && line.rfind("VmFlags:", 0) == 0) return line;
    }
    return "";
}

bool kernel_has_transparent_huge_pages() {
    std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
    return mode.good();
}

}  // namespace

TEST_CASE("storage: small buffers start on a cache line, large ones on a huge page") {
    static_assert(cpx::cpu::storage_alignment(huge_page - 1) == cache_line);
    static_assert(cpx::cpu::storage_alignment(huge_page) == huge_page);
    cpx::cpu::AlignedVector<float> small(1000, 1.0f);
    CHECK(address(small.data()) % cache_line == 0);
    cpx::cpu::AlignedVector<float> large(3 * MiB / sizeof(float) + 5, 2.0f);
    CHECK(address(large.data()) % huge_page == 0);
    // The storage is ordinary memory: every element written is read back.
    std::iota(large.begin(), large.end(), 0.0f);
    CHECK(large.front() == 0.0f);
    CHECK(large.back() == static_cast<float>(large.size() - 1));
    large.resize(large.size() * 2, 3.0f);  // reallocates: the old storage is returned with its alignment
    CHECK(address(large.data()) % huge_page == 0);
    CHECK(large.back() == 3.0f);
}

TEST_CASE("storage: a large buffer is rounded up to whole huge pages only where that costs at most an eighth") {
    using cpx::cpu::storage_bytes;
    CHECK(storage_bytes(1000) == 1000);
    CHECK(storage_bytes(huge_page - 1) == huge_page - 1);      // small: as asked
    CHECK(storage_bytes(huge_page) == huge_page);
    CHECK(storage_bytes(huge_page + 1) == huge_page + 1);      // rounding would nearly double it
    CHECK(storage_bytes(3 * MiB) == 3 * MiB);                  // 4 MiB would add a third
    CHECK(storage_bytes(15 * MiB) == 16 * MiB);                // adds 1/15
    CHECK(storage_bytes(14 * MiB + 1) == 14 * MiB + 1);        // 16 MiB would add more than 1/8
    CHECK(storage_bytes(16 * MiB + 1) == 18 * MiB);            // adds just under 1/8
    CHECK(storage_bytes(17 * MiB) == 18 * MiB);
}

TEST_CASE("storage: a large buffer's huge pages are advised to the kernel") {
#ifndef CPX_HUGE_PAGES
    MESSAGE("skipped: built without huge-page advice (not Linux, or CPX_NO_HUGE_PAGES)");
#else
    if (!kernel_has_transparent_huge_pages()) {
        MESSAGE("skipped: this kernel has no transparent huge pages");
        return;
    }
    // The small buffer first: memory once advised keeps the advice after it is freed.
    cpx::cpu::AlignedVector<float> small(1000, 1.0f);
    cpx::cpu::AlignedVector<float> large(4 * MiB / sizeof(float), 1.0f);
    const std::string flags = vm_flags_of(large.data());
    INFO("VmFlags of the buffer's mapping: '", flags, "'");
    REQUIRE(!flags.empty());
    CHECK(flags.find(" hg") != std::string::npos);  // MADV_HUGEPAGE
    CHECK(vm_flags_of(small.data()).find(" hg") == std::string::npos);
#endif
}

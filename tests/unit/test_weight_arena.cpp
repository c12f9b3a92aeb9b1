// Weight storage: pieces side by side in huge-page slabs, each slab returned when
// its last piece is freed; WeightVector as an ordinary vector.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "cpx/cpu/runtime/weight_arena.hpp"
#include "cpx/core/dtype.hpp"

#include "test_support.hpp"

namespace {

using cpx::cpu::cache_line;
using cpx::cpu::huge_page;
using cpx::cpu::WeightArena;
using cpx::testing::address;

}  // namespace

TEST_CASE("weight arena: small pieces share one huge-page slab, in order, on cache lines") {
    WeightArena arena;
    CHECK(arena.slabs() == 0);
    // 1.2 MB and 0.8 MB: as separate allocations both would sit on 4 KiB pages.
    char* a = static_cast<char*>(arena.allocate(1179648));
    char* b = static_cast<char*>(arena.allocate(786432 + 3));  // not a whole line: the next piece is rounded up
    char* c = static_cast<char*>(arena.allocate(1));
    CHECK(arena.slabs() == 1);
    CHECK(address(a) % huge_page == 0);  // the slab's start
    CHECK(b == a + 1179648);
    CHECK(c == b + 786432 + cache_line);
    // Ordinary memory: every byte written is read back, pieces do not overlap.
    std::memset(a, 1, 1179648);
    std::memset(b, 2, 786432 + 3);
    *c = 3;
    CHECK(a[1179647] == 1);
    CHECK(b[0] == 2);
    CHECK(b[786432 + 2] == 2);
    CHECK(*c == 3);
    arena.deallocate(b, 786432 + 3);
    arena.deallocate(a, 1179648);
    CHECK(arena.slabs() == 1);  // c still lives there
    arena.deallocate(c, 1);
    CHECK(arena.slabs() == 0);  // the last piece took the slab with it
}

TEST_CASE("weight arena: a full slab starts another; a large piece gets a slab of its own") {
    WeightArena arena;
    const std::size_t half = WeightArena::slab_bytes / 2;
    void* a = arena.allocate(half);
    void* b = arena.allocate(half);  // fills the first slab exactly
    void* c = arena.allocate(cache_line);
    CHECK(arena.slabs() == 2);
    CHECK(address(b) == address(a) + half);
    CHECK(address(c) % huge_page == 0);  // the start of the second slab
    void* big = arena.allocate(half + 1);  // more than half a slab: its own, whole huge pages
    CHECK(arena.slabs() == 3);
    CHECK(address(big) % huge_page == 0);
    void* d = arena.allocate(cache_line);  // small pieces go on in the second slab
    CHECK(address(d) == address(c) + cache_line);
    arena.deallocate(big, half + 1);
    CHECK(arena.slabs() == 2);
    arena.deallocate(a, half), arena.deallocate(b, half);
    arena.deallocate(c, cache_line), arena.deallocate(d, cache_line);
    CHECK(arena.slabs() == 0);
    // After the current slab was returned, the next piece starts a new one.
    void* e = arena.allocate(100);
    CHECK(arena.slabs() == 1);
    arena.deallocate(e, 100);
}

#ifdef CPX_HUGE_PAGES
TEST_CASE("weight arena: a piece freed while its slab lives gives its whole pages back, its neighbours keep theirs") {
    WeightArena arena;
    constexpr std::size_t page = 4096, piece = 4 * huge_page + 3 * page;
    char* before = static_cast<char*>(arena.allocate(cache_line));
    char* freed = static_cast<char*>(arena.allocate(piece));
    char* after = static_cast<char*>(arena.allocate(cache_line));
    std::memset(before, 1, cache_line);
    std::memset(freed, 2, piece);
    std::memset(after, 3, cache_line);
    // The pages wholly inside the piece: it starts a line after the slab's start.
    char* first = before + page;
    const std::size_t pages = (address(freed) + piece) / page - address(first) / page;
    const auto resident = [&] {
        std::vector<unsigned char> in(pages);
        REQUIRE(::mincore(first, pages * page, in.data()) == 0);
        return std::count_if(in.begin(), in.end(), [](unsigned char c) { return (c & 1) != 0; });
    };
    CHECK(resident() == static_cast<std::ptrdiff_t>(pages));
    arena.deallocate(freed, piece);
    CHECK(arena.slabs() == 1);
    CHECK(resident() == 0);
    CHECK(before[cache_line - 1] == 1);
    CHECK(after[0] == 3);
    arena.deallocate(before, cache_line), arena.deallocate(after, cache_line);
    CHECK(arena.slabs() == 0);
}
#endif

TEST_CASE("weight vector: an ordinary vector on cache lines, copied and freed like one") {
    cpx::cpu::WeightVector<cpx::bf16> w(1000, cpx::from_float<cpx::bf16>(1.5f));
    CHECK(address(w.data()) % cache_line == 0);
    cpx::cpu::WeightVector<float> f(300000);
    std::iota(f.begin(), f.end(), 0.0f);
    CHECK(address(f.data()) % cache_line == 0);
    auto copy = f;
    CHECK(copy.data() != f.data());
    CHECK(copy.back() == 299999.0f);
    f.resize(700000, -1.0f);  // moves to a new piece; the old one is freed
    CHECK(f[299999] == 299999.0f);
    CHECK(f.back() == -1.0f);
    cpx::cpu::WeightVector<float> empty;
    CHECK(empty.empty());
    CHECK(to_float(w[999]) == 1.5f);
    std::vector<cpx::cpu::WeightVector<float>> many(50, cpx::cpu::WeightVector<float>(40000, 2.0f));
    for (const auto& v : many) CHECK(v[39999] == 2.0f);
}

// The grouped-GEMM tile schedule (pure arithmetic, run on the CPU): every
// sorted row is covered by exactly one tile of its own expert, and the launch
// bound is never exceeded.
#include <doctest/doctest.h>

#include <cpx/cuda/kernels/segment_tiles.hpp>

#include <vector>

#include "test_support.hpp"

using namespace cpx;

namespace {
// Checks one split: counts per expert -> offsets -> tiles.
void check_split(const std::vector<int>& counts, int tile_rows) {
    const int experts = static_cast<int>(counts.size());
    std::vector<std::int32_t> offsets(experts + 1, 0);
    for (int e = 0; e < experts; ++e) offsets[e + 1] = offsets[e] + counts[e];
    const int tokens = offsets[experts];
    std::vector<int> covered(tokens, 0);
    long long tiles = 0;
    cuda::SegmentTile t;
    while (cuda::find_segment_tile(offsets.data(), experts, tiles, tile_rows, t)) {
        REQUIRE(t.expert >= 0);
        REQUIRE(t.expert < experts);
        CHECK(t.rows >= 1);
        CHECK(t.rows <= tile_rows);
        CHECK(t.row_begin >= offsets[t.expert]);
        CHECK(t.row_begin + t.rows <= offsets[t.expert + 1]);
        for (int r = t.row_begin; r < t.row_begin + t.rows; ++r) ++covered[r];
        ++tiles;
    }
    for (int r = 0; r < tokens; ++r) CHECK(covered[r] == 1);
    CHECK(tiles <= cuda::max_segment_tiles(tokens, experts, tile_rows));
    // The first tile past the end, and any later one, is reported as absent.
    CHECK_FALSE(cuda::find_segment_tile(offsets.data(), experts, tiles + 5, tile_rows, t));
}
}  // namespace

TEST_CASE("segment tiles cover every sorted row exactly once, in its expert's segment") {
    check_split({5, 0, 130, 64}, 64);
    check_split({0, 0, 0, 1}, 64);
    check_split({64, 64, 64, 64}, 64);
    check_split({1}, 16);
    check_split({0, 0}, 8);
}

TEST_CASE("segment tiles stay within the launch bound on random splits") {
    for (int trial = 0; trial < 50; ++trial) {
        const auto sizes = testing::random_ints(1 + trial % 9, 0, 300, 100 + trial);
        check_split(sizes, trial % 2 ? 64 : 32);
    }
}

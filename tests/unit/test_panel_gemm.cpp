// The loop nest of the packed-panel products (cpu/kernels/panel_gemm.hpp): which
// thread computes which tile, in which order, and which block of B each tile
// fetches ahead. The products' results are checked in test_gemm_bf16.cpp and
// test_gemm_f32_packed.cpp; this checks the schedule itself, on every split of
// rows and panels over 1 to 3 threads.
#include <doctest/doctest.h>

#include <cpx/cpu/kernels/panel_gemm.hpp>
#if defined(__x86_64__) || defined(__i386__)
#define CPX_TEST_PREFETCHER 1
#include <cpx/cpu/kernels/avx512_tile.hpp>
#endif

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

using namespace cpx;
namespace pg = cpx::cpu::panel_gemm;

namespace {

struct Call {
    index_t row, panel, group, groups;
    int rows;
    bool first_block;
    pg::Lookahead next;
};

std::vector<Call> calls_of(int t, int team, index_t m, index_t panels, index_t depth, index_t block_depth, int tile_rows,
                           cpu::RangeClaims& claims) {
    std::vector<Call> calls;
    pg::thread_share(t, team, m, panels, depth, block_depth, tile_rows, claims,
                     [&](index_t r, int rows, index_t p, index_t g, index_t gn, bool first, const pg::Lookahead& next) {
                         calls.push_back(Call{r, p, g, gn, rows, first, next});
                     });
    return calls;
}

}  // namespace

TEST_CASE("panel schedule: every tile of every input block once; each tile fetches its share of the next block") {
    constexpr int tile_rows = 6;
    constexpr index_t block_depth = 512;
    for (int team : {1, 2, 3})
        for (index_t m : {1, 6, 7, 16, 47, 200, 400})
            for (index_t panels : {1, 2, 3, 9})
                for (index_t depth : {1, 300, 512, 1100}) {
                    CAPTURE(team);
                    CAPTURE(m);
                    CAPTURE(panels);
                    CAPTURE(depth);
                    std::map<std::tuple<index_t, index_t, index_t>, int> seen;  // (row, panel, group) -> count
                    cpu::RangeClaims claims(panels, team);  // one-tile products: the threads here run in turn
                    for (int t = 0; t < team; ++t) {
                        const auto calls = calls_of(t, team, m, panels, depth, block_depth, tile_rows, claims);
                        index_t lo = m, hi = 0;
                        for (const Call& c : calls) {
                            CHECK(c.rows >= 1);
                            CHECK(c.rows <= tile_rows);
                            CHECK(c.groups == std::min(block_depth, depth - c.group));
                            CHECK(c.first_block == (c.group == 0));
                            for (index_t r = c.row; r < c.row + c.rows; ++r) ++seen[{r, c.panel, c.group}];
                            lo = std::min(lo, c.row), hi = std::max(hi, c.row + c.rows);
                        }
                        // The thread's blocks in visiting order: runs of calls on one (row block, panel, group).
                        const auto row_block = [&](const Call& c) { return (c.row - lo) / pg::block_rows; };
                        std::vector<std::pair<std::size_t, std::size_t>> runs;
                        for (std::size_t i = 0; i < calls.size(); ++i)
                            if (i == 0 || calls[i].panel != calls[i - 1].panel || calls[i].group != calls[i - 1].group ||
                                row_block(calls[i]) != row_block(calls[i - 1]))
                                runs.push_back({i, i + 1});
                            else
                                runs.back().second = i + 1;
                        const bool ahead = hi - lo > tile_rows;
                        if (!ahead) {  // one tile: each panel's blocks in turn, ascending, the panel not revisited
                            std::set<index_t> done;
                            for (std::size_t i = 0; i < calls.size(); ++i) {
                                if (i > 0 && calls[i].panel == calls[i - 1].panel) {
                                    CHECK(calls[i].group > calls[i - 1].group);
                                } else {
                                    CHECK(calls[i].group == 0);
                                    CHECK(done.insert(calls[i].panel).second);
                                }
                            }
                        }
                        for (std::size_t b = 0; b < runs.size(); ++b) {
                            index_t covered = 0;
                            for (std::size_t i = runs[b].first; i < runs[b].second; ++i) {
                                const pg::Lookahead& next = calls[i].next;
                                if (!ahead || b + 1 == runs.size()) {
                                    CHECK(next.panel == -1);  // one tile per block, or nothing left to fetch
                                    continue;
                                }
                                const Call& following = calls[runs[b + 1].first];
                                CHECK(next.panel == following.panel);
                                CHECK(next.group == following.group);
                                CHECK(next.groups == following.groups);
                                CHECK(next.share_begin == covered);  // the shares tile [0, shares) in order
                                CHECK(next.share_end - next.share_begin == calls[i].rows);
                                covered = next.share_end;
                                CHECK(next.share_end <= next.shares);
                            }
                            if (ahead && b + 1 < runs.size()) CHECK(covered == calls[runs[b].first].next.shares);
                        }
                    }
                    const index_t blocks = (depth + block_depth - 1) / block_depth;
                    CHECK(seen.size() == static_cast<std::size_t>(m * panels * blocks));
                    CHECK(std::all_of(seen.begin(), seen.end(), [](const auto& e) { return e.second == 1; }));
                }
}

#ifdef CPX_TEST_PREFETCHER
TEST_CASE("panel schedule: the tiles' prefetch ranges cover the next block's bytes exactly once") {
    // A packed bf16 weight of 3 panels over 700 inputs (350 pairs): blocks of 100 pairs.
    std::vector<float> w(150 * 700, 1.0f);
    const auto packed = cpu::PackedBf16::pack(cpu::rows_of<const float>(w.data(), 150, 700), cpu::WeightOrientation::out_in);
    const auto view = packed.view();
    for (index_t shares : {7, 16, 47}) {
        CAPTURE(shares);
        const char* block = reinterpret_cast<const char*>(view.panel(2, 300));
        const index_t bytes = 50 * cpu::packed_panel_cols * 2 * 2;  // the last, short block: 50 pairs
        const char* expected = block;
        for (index_t begin = 0; begin < shares; begin += 6) {
            const pg::Lookahead next{2, 300, 50, begin, std::min<index_t>(shares, begin + 6), shares};
            const cpu::avx512_tile::Prefetcher fetch(view, next, /*steps=*/100);
            CHECK(fetch.next == expected);
            CHECK(fetch.per_step * 100 >= (fetch.end - fetch.next) / 64);  // spread over the tile's steps
            expected = fetch.end;
        }
        CHECK(expected == block + bytes);
    }
    CHECK(cpu::avx512_tile::Prefetcher(view, pg::Lookahead{}, 100).per_step == 0);
}
#endif

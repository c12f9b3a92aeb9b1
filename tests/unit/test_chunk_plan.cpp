// Chunked prefill under a token budget (models/chunk_plan.hpp): every token runs
// once and in order, no round exceeds the budget, every round but the last is
// full (so the call takes the fewest rounds), and shares are equal up to one
// token among the sequences that still need more.
#include <doctest/doctest.h>

#include <cpx/models/chunk_plan.hpp>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <random>
#include <vector>

using namespace cpx;

namespace {

struct Rounds {
    std::vector<std::vector<std::size_t>> counts;  ///< per round, per sequence
};

/// Runs next_chunk to the end, checking the invariants of every round.
Rounds plan(const std::vector<std::size_t>& lengths, std::size_t budget) {
    Rounds r;
    std::vector<std::size_t> done(lengths.size(), 0), count(lengths.size(), 12345);
    const std::size_t total = std::accumulate(lengths.begin(), lengths.end(), std::size_t{0});
    std::size_t ran = 0;
    for (;;) {
        const std::size_t n = next_chunk(lengths, done, budget, count);
        CHECK(n == std::accumulate(count.begin(), count.end(), std::size_t{0}));
        if (n == 0) break;
        REQUIRE(n <= budget);
        // Full rounds until the rest fits.
        CHECK(n == std::min(budget, total - ran));
        // Equal shares up to one token among the sequences cut short this round.
        std::size_t smallest_cut = static_cast<std::size_t>(-1), largest = 0;
        for (std::size_t b = 0; b < lengths.size(); ++b) {
            REQUIRE(done[b] + count[b] <= lengths[b]);
            largest = std::max(largest, count[b]);
            if (done[b] + count[b] < lengths[b]) smallest_cut = std::min(smallest_cut, count[b]);
        }
        if (smallest_cut != static_cast<std::size_t>(-1)) CHECK(largest <= smallest_cut + 1);
        for (std::size_t b = 0; b < lengths.size(); ++b) done[b] += count[b];
        ran += n;
        r.counts.push_back(count);
        REQUIRE(r.counts.size() <= total);  // each round runs at least one token
    }
    CHECK(ran == total);
    CHECK(done == lengths);
    CHECK(r.counts.size() == (total + budget - 1) / budget);
    return r;
}

}  // namespace

TEST_CASE("one long prompt among short ones: the short ones pass their share on") {
    const Rounds r = plan({2000, 10, 10, 10}, 2048);
    REQUIRE(r.counts.size() == 1);  // a fixed 2048 / 4 share per sequence would take 4 rounds
    CHECK(r.counts[0] == std::vector<std::size_t>{2000, 10, 10, 10});

    const Rounds two = plan({3000, 5, 40}, 1024);
    REQUIRE(two.counts.size() == 3);
    CHECK(two.counts[0] == std::vector<std::size_t>{979, 5, 40});
    CHECK(two.counts[1] == std::vector<std::size_t>{1024, 0, 0});
    CHECK(two.counts[2] == std::vector<std::size_t>{997, 0, 0});
}

TEST_CASE("equal sequences get equal shares; odd tokens go to the first sequences") {
    const Rounds r = plan({10, 10, 10}, 8);
    REQUIRE(r.counts.size() == 4);
    CHECK(r.counts[0] == std::vector<std::size_t>{3, 3, 2});
    CHECK(r.counts[1] == std::vector<std::size_t>{3, 3, 2});
    CHECK(r.counts[2] == std::vector<std::size_t>{3, 3, 2});
    CHECK(r.counts[3] == std::vector<std::size_t>{1, 1, 4});
}

TEST_CASE("a budget below the number of sequences still makes progress every round") {
    const Rounds r = plan({3, 3, 3, 3, 3}, 2);
    CHECK(r.counts.size() == 8);
    CHECK(r.counts[0] == std::vector<std::size_t>{1, 1, 0, 0, 0});
}

TEST_CASE("empty sequences and empty calls") {
    CHECK(plan({}, 16).counts.empty());
    CHECK(plan({0, 0}, 16).counts.empty());
    const Rounds r = plan({0, 7, 0}, 4);
    REQUIRE(r.counts.size() == 2);
    CHECK(r.counts[0] == std::vector<std::size_t>{0, 4, 0});
}

TEST_CASE("random calls keep every invariant") {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
        std::vector<std::size_t> lengths(1 + rng() % 9);
        for (auto& l : lengths) l = rng() % 4 == 0 ? 0 : rng() % (rng() % 2 ? 40 : 3000);
        plan(lengths, 1 + rng() % 700);
    }
}

TEST_CASE("bad arguments are clear errors") {
    std::vector<std::size_t> lengths{4, 4}, done{0, 0}, count(2);
    CHECK_THROWS_AS(next_chunk(lengths, done, 0, count), ShapeError);
    std::vector<std::size_t> short_count(1);
    CHECK_THROWS_AS(next_chunk(lengths, done, 4, short_count), ShapeError);
    std::vector<std::size_t> overrun{5, 0};
    CHECK_THROWS_AS(next_chunk(lengths, overrun, 4, count), ShapeError);
}

// The four routers and the balance report on small tables whose answers are
// worked out by hand in the comments (docs/MODELS.md §9.1).
#include <doctest/doctest.h>

#include <cpx/router/balance_report.hpp>
#include <cpx/router/compute_routing.hpp>
#include <cpx/router/token_routing.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace cpx::router;
using Table = std::vector<std::int32_t>;

namespace {
// Visiting order: id 1 (9), id 2 (9), id 0 (5), id 5 (3), id 3 (1), id 4 (0), id 6 (0).
constexpr std::array<std::uint64_t, 7> small_counts{5, 9, 9, 1, 0, 3, 0};

constexpr std::array<std::int32_t, 7> greedy_small = [] {
    std::array<std::int32_t, 7> t{};
    zipf_greedy_routing(small_counts, 2, t);
    return t;
}();
}  // namespace

TEST_CASE("frequency order: decreasing count, equal counts by increasing id") {
    CHECK(frequency_order(small_counts) == Table{1, 2, 0, 5, 3, 4, 6});
    static_assert(frequency_order(small_counts)[2] == 0, "usable in constant expressions");
}

TEST_CASE("greedy follows the authors' loop: least-loaded expert, ties to the lowest index") {
    // loads (e0, e1): id1->e0 (9,0); id2->e1 (9,9); id0->e0 on the tie (14,9); id5->e1 (14,12);
    // id3->e1 (14,13); the zero-count ids 4 and 6 both go to the lighter e1.
    CHECK(zipf_greedy_routing(small_counts, 2) == Table{0, 0, 1, 1, 1, 1, 1});
}

TEST_CASE("greedy gives the same table at compile time and at run time") {
    static_assert(greedy_small == std::array<std::int32_t, 7>{0, 0, 1, 1, 1, 1, 1});
    const Table runtime = zipf_greedy_routing(small_counts, 2);
    CHECK(Table(greedy_small.begin(), greedy_small.end()) == runtime);
}

TEST_CASE("greedy with equal counts deals ids round-robin from expert 0") {
    const std::vector<std::uint64_t> ones(6, 1);
    CHECK(zipf_greedy_routing(ones, 4) == Table{0, 1, 2, 3, 0, 1});
}

TEST_CASE("greedy puts every zero-count id on one expert, as the authors' code does") {
    const std::vector<std::uint64_t> counts{7, 0, 0, 3, 0, 4, 0, 0};
    const Table t = zipf_greedy_routing(counts, 3);
    // 0 (7) -> e0, 5 (4) -> e1, 3 (3) -> e2; loads (7, 4, 3): all zeros go to e2.
    CHECK(t == Table{0, 2, 2, 2, 2, 1, 2, 2});
}

TEST_CASE("balanced caps each expert at floor/ceil(V/n) ids and otherwise packs greedily") {
    // V = 7, n = 2: q = 3, r = 1. Same as greedy up to id 3 (loads 14, 13; e1 holds 3 ids).
    // id4 (0): e1 is still open (holds q and nobody holds q + 1), lighter -> e1, now at q + 1.
    // id6 (0): e1 is closed, so e0. Counts 3 and 4; loads 14 and 13.
    CHECK(balanced_zipf_routing(small_counts, 2) == Table{0, 0, 1, 1, 1, 1, 0});
    static_assert([] {
        std::array<std::int32_t, 7> t{};
        balanced_zipf_routing(small_counts, 2, t);
        return t;
    }() == std::array<std::int32_t, 7>{0, 0, 1, 1, 1, 1, 0});
}

TEST_CASE("balanced spreads zero-count ids instead of piling them on one expert") {
    const std::vector<std::uint64_t> counts{7, 0, 0, 3, 0, 4, 0, 0, 0};
    const Table t = balanced_zipf_routing(counts, 3);
    // q = 3: after 0 -> e0, 5 -> e1, 3 -> e2 each expert takes two of the six zeros.
    const BalanceSummary s = balance_summary(counts, t, 3);
    CHECK(s.min_tokens == 3);
    CHECK(s.max_tokens == 3);
    CHECK(t == Table{0, 2, 2, 2, 1, 1, 1, 0, 0});
}

TEST_CASE("modulo routing is t mod n") {
    CHECK(modulo_routing(7, 3) == Table{0, 1, 2, 0, 1, 2, 0});
}

TEST_CASE("contiguous routing gives the first V mod n experts one extra id") {
    CHECK(contiguous_routing(7, 3) == Table{0, 0, 0, 1, 1, 2, 2});
    CHECK(contiguous_routing(8, 4) == Table{0, 0, 1, 1, 2, 2, 3, 3});
    // V < n: the first V experts get one id each.
    CHECK(contiguous_routing(2, 4) == Table{0, 1});
}

TEST_CASE("compute_routing dispatches by algorithm name") {
    for (const RoutingAlgorithm a : all_routing_algorithms) {
        CAPTURE(name_of(a));
        CHECK(routing_algorithm_named(name_of(a)) == a);
    }
    CHECK_FALSE(routing_algorithm_named("round_robin").has_value());
    CHECK(compute_routing(RoutingAlgorithm::greedy, small_counts, 2) == zipf_greedy_routing(small_counts, 2));
    CHECK(compute_routing(RoutingAlgorithm::balanced, small_counts, 2) == balanced_zipf_routing(small_counts, 2));
    CHECK(compute_routing(RoutingAlgorithm::modulo, small_counts, 3) == modulo_routing(7, 3));
    CHECK(compute_routing(RoutingAlgorithm::contiguous, small_counts, 3) == contiguous_routing(7, 3));
}

TEST_CASE("more experts than ids: every id gets its own expert under balanced routing") {
    const std::vector<std::uint64_t> counts{2, 8, 5};
    CHECK(balanced_zipf_routing(counts, 5) == Table{2, 0, 1});
    CHECK(zipf_greedy_routing(counts, 5) == Table{2, 0, 1});
}

TEST_CASE("routers reject impossible inputs with messages") {
    Table out(7);
    CHECK_THROWS_WITH_AS(zipf_greedy_routing(small_counts, 0, out),
                         "zipf greedy routing: the expert count must be at least 1, got 0", cpx::InputError);
    Table short_out(6);
    CHECK_THROWS_WITH_AS(balanced_zipf_routing(small_counts, 2, short_out),
                         "balanced zipf routing: the output table has 6 entries but the vocabulary has 7",
                         cpx::ShapeError);
    CHECK_THROWS_WITH_AS(zipf_greedy_routing(std::span<const std::uint64_t>{}, 2),
                         "zipf greedy routing: the vocabulary is empty", cpx::InputError);
    const std::vector<std::uint64_t> huge{std::numeric_limits<std::uint64_t>::max(), 1};
    CHECK_THROWS_WITH_AS(balanced_zipf_routing(huge, 2), "balanced zipf routing: the counts sum past 2^64 at token 1",
                         cpx::InputError);
    CHECK_THROWS_AS(modulo_routing(4, -1), cpx::InputError);
}

TEST_CASE("the token routing view checks its table once and every token id it is asked for") {
    const Table table{1, 0, 2, 1};
    const cpx::TokenRouting routing(table, 3);
    CHECK(routing.vocab() == 4);
    CHECK(routing.experts() == 3);
    CHECK(routing.checked_expert_of(2) == 2);
    CHECK(routing.expert_of(3) == 1);
    CHECK_THROWS_WITH_AS(routing.checked_expert_of(4), "token id 4 is outside the vocabulary [0, 4)", cpx::InputError);
    CHECK_THROWS_WITH_AS(routing.checked_expert_of(-1), "token id -1 is outside the vocabulary [0, 4)", cpx::InputError);
    CHECK_THROWS_WITH_AS(cpx::TokenRouting(table, 2), "token routing: token 2 maps to expert 2, outside [0, 2)",
                         cpx::InputError);
    CHECK_THROWS_WITH_AS(cpx::TokenRouting(Table{0, -1}, 2), "token routing: token 1 maps to expert -1, outside [0, 2)",
                         cpx::InputError);
    CHECK_THROWS_WITH_AS(cpx::TokenRouting(table, 0), "token routing: expert count must be >= 1, got 0", cpx::InputError);
    CHECK_THROWS_WITH_AS(cpx::TokenRouting(Table{}, 2), "token routing: the table is empty", cpx::InputError);
}

TEST_CASE("balance report counts ids and mass per expert") {
    const Table t = zipf_greedy_routing(small_counts, 2);
    const BalanceReport r = balance_report(small_counts, t, 2);
    CHECK(r.tokens == std::vector<std::size_t>{2, 5});
    CHECK(r.loads == std::vector<std::uint64_t>{14, 13});
    const BalanceSummary& s = r.summary;
    CHECK(s.vocab == 7);
    CHECK(s.total_load == 27);
    CHECK(s.largest_count == 9);
    CHECK(s.load_spread() == 1);
    CHECK(s.load_ratio() == doctest::Approx(14.0 / 13.0).epsilon(1e-15));
    CHECK(s.max_over_mean() == doctest::Approx(14.0 / 13.5).epsilon(1e-15));
    CHECK_FALSE(s.counts_balanced());
    CHECK(s.within_load_bound());
}

TEST_CASE("balance report is usable in constant expressions") {
    constexpr BalanceSummary s = balance_summary(small_counts, greedy_small, 2);
    static_assert(s.max_load == 14 && s.min_load == 13 && s.largest_count == 9);
    static_assert(s.within_load_bound() && !s.counts_balanced());
    CHECK(s.load_spread() == 1);
}

TEST_CASE("balance report flags entries outside [0, experts) instead of failing") {
    const std::vector<std::uint64_t> counts{1, 2, 3, 4};
    const BalanceSummary s = balance_summary(counts, Table{0, -1, 2, 1}, 2);
    CHECK(s.unrouted == 2);
    CHECK_FALSE(s.counts_balanced());
    CHECK_FALSE(s.within_load_bound());
    CHECK_THROWS_AS(balance_summary(counts, Table{0, 1}, 2), cpx::ShapeError);
}

TEST_CASE("load ratio is 1 with no mass and infinite when only some expert is empty") {
    const std::vector<std::uint64_t> zeros(4, 0), one_hot{0, 0, 5, 0};
    CHECK(balance_summary(zeros, Table{0, 1, 0, 1}, 2).load_ratio() == 1.0);
    CHECK(std::isinf(balance_summary(one_hot, Table{0, 1, 0, 1}, 2).load_ratio()));
    CHECK(balance_summary(one_hot, Table{0, 1, 0, 1}, 2).within_load_bound());
}

TEST_CASE("the algorithms' guarantees are declared per algorithm") {
    CHECK(guarantees_load_bound(RoutingAlgorithm::greedy));
    CHECK_FALSE(guarantees_count_balance(RoutingAlgorithm::greedy));
    CHECK(guarantees_load_bound(RoutingAlgorithm::balanced));
    CHECK(guarantees_count_balance(RoutingAlgorithm::balanced));
    CHECK_FALSE(guarantees_load_bound(RoutingAlgorithm::modulo));
    CHECK(guarantees_count_balance(RoutingAlgorithm::contiguous));
}

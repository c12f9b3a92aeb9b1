// Routing tables computed at build time by cpx_add_routing_table (see
// tests/CMakeLists.txt) equal the same tables computed at run time, and both
// serve the token-routed layer through the same TokenRouting view.
#include <doctest/doctest.h>

#include <cpx/io/frequency_table.hpp>
#include <cpx/router/compute_routing.hpp>
#include <cpx/router/balance_report.hpp>
#include <cpx/router/token_routing.hpp>
#include <cpx/router/top_k_routing.hpp>

#include <cstdint>
#include <vector>

#include "contiguous_no_table.hpp"
#include "text_balanced.hpp"
#include "text_greedy.hpp"
#include "zipf_balanced.hpp"
#include "zipf_balanced_top3.hpp"
#include "zipf_modulo.hpp"

using namespace cpx_test::routing;
using Counts = std::vector<std::uint64_t>;
using Table = std::vector<std::int32_t>;

namespace {
const char* const text_table = CPX_SOURCE_DIR "/data/text_frequency_v32000.txt";
const char* const zipf_table = CPX_TEST_DATA_DIR "/zipf_v1000_a1.1_f32.npy";

template <class Generated>
void check_same_as_runtime(const Counts& counts) {
    static_assert(Generated::token_to_expert.size() == Generated::vocab);
    REQUIRE(counts.size() == Generated::vocab);
    const Table runtime = cpx::router::compute_routing(Generated::algorithm, counts, Generated::experts);
    const Table compiled(Generated::token_to_expert.begin(), Generated::token_to_expert.end());
    CHECK(compiled == runtime);

    const cpx::TokenRouting from_build = Generated::routing();
    const cpx::TokenRouting from_runtime(runtime, Generated::experts);
    CHECK(from_build.data() == Generated::token_to_expert.data());  // a view of the constant, not a copy
    CHECK(from_build.vocab() == Generated::vocab);
    CHECK(from_build.experts() == Generated::experts);
    CHECK(from_runtime.vocab() == from_build.vocab());
    std::size_t differ = 0;
    for (std::size_t t = 0; t < Generated::vocab; ++t)
        differ += from_build.checked_expert_of(static_cast<std::int64_t>(t)) !=
                  from_runtime.checked_expert_of(static_cast<std::int64_t>(t));
    CHECK(differ == 0);
}
}  // namespace

TEST_CASE("the generated headers describe their tables at compile time") {
    static_assert(text_greedy::vocab == 32000 && text_greedy::experts == 4);
    static_assert(text_greedy::algorithm == cpx::router::RoutingAlgorithm::greedy);
    static_assert(text_balanced::algorithm == cpx::router::RoutingAlgorithm::balanced);
    static_assert(zipf_modulo::token_to_expert[13] == 13 % 8);
    static_assert(contiguous_no_table::token_to_expert[999] == 7);
    CHECK(text_balanced::source == "text_frequency_v32000.txt");
    CHECK(zipf_balanced::source == "zipf_v1000_a1.1_f32.npy");
}

TEST_CASE("greedy table from the real-text table: build time equals run time") {
    check_same_as_runtime<text_greedy>(cpx::io::read_frequency_table(text_table, 32000));
}

TEST_CASE("balanced table from the real-text table: build time equals run time") {
    check_same_as_runtime<text_balanced>(cpx::io::read_frequency_table(text_table, 32000));
}

TEST_CASE("balanced and modulo tables from a float32 .npy Zipf table: build time equals run time") {
    const Counts counts = cpx::io::read_frequency_table(zipf_table, 1000);
    check_same_as_runtime<zipf_balanced>(counts);
    check_same_as_runtime<zipf_modulo>(counts);
}

TEST_CASE("contiguous table without a frequency table: build time equals run time") {
    check_same_as_runtime<contiguous_no_table>(Counts(1000, 0));
}

TEST_CASE("a top-k table at build time: k distinct experts per token, every route as balanced as the primary") {
    using G = zipf_balanced_top3;
    static_assert(G::top_k == 3 && G::routes.size() == 3 * G::vocab);
    static_assert(zipf_balanced::top_k == 1);
    const Counts counts = cpx::io::read_frequency_table(zipf_table, 1000);
    check_same_as_runtime<G>(counts);
    const Table primary(G::token_to_expert.begin(), G::token_to_expert.end());
    CHECK(Table(G::routes.begin(), G::routes.end()) == cpx::router::cyclic_routes(primary, 3, G::experts));
    CHECK(cpx::router::tokens_with_repeated_routes(G::routes, 3) == 0);
    const cpx::TopKRouting view = G::top_k_routing();
    CHECK(view.top_k() == 3);
    CHECK(view.expert_of(17, 2) == (G::token_to_expert[17] + 2) % G::experts);
    // Each route spreads ids and frequency mass exactly as the primary does, experts relabelled.
    const auto reports = cpx::router::route_balance_reports(counts, G::routes, 3, G::experts);
    REQUIRE(reports.size() == 3);
    for (int r = 1; r < 3; ++r) {
        CHECK(reports[r].summary.load_spread() == reports[0].summary.load_spread());
        CHECK(reports[r].summary.counts_balanced());
        CHECK(reports[r].summary.within_load_bound());
        for (int e = 0; e < G::experts; ++e)
            CHECK(reports[r].loads[static_cast<std::size_t>(e)] ==
                  reports[0].loads[static_cast<std::size_t>((e - r + G::experts) % G::experts)]);
    }
    CHECK_THROWS_AS((void)cpx::router::route_balance_reports(counts, G::token_to_expert, 3, G::experts),
                    cpx::ShapeError);
}

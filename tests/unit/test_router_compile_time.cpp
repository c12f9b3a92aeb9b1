// Routing tables computed at build time by cpx_add_routing_table (see
// tests/CMakeLists.txt) equal the same tables computed at run time, and both
// serve the token-routed layer through the same TokenRouting view.
#include <doctest/doctest.h>

#include <cpx/io/frequency_table.hpp>
#include <cpx/router/compute_routing.hpp>
#include <cpx/router/token_routing.hpp>

#include <cstdint>
#include <vector>

#include "contiguous_no_table.hpp"
#include "text_balanced.hpp"
#include "text_greedy.hpp"
#include "zipf_balanced.hpp"
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

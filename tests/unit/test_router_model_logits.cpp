// The model with a routing table computed at build time (cpx_add_routing_table,
// see tests/CMakeLists.txt) gives the same logits as the same model given the
// table computed at run time from the same frequency file.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/io/frequency_table.hpp>
#include <cpx/models/complexity/model.hpp>
#include <cpx/router/balanced_packing.hpp>
#include <cpx/router/modulo_routing.hpp>

#include <cstdint>
#include <vector>

#include "tiny_balanced.hpp"

using Config = cpx::presets::TinyComplexity;
static_assert(cpx_test::routing::tiny_balanced::vocab == Config::vocab);
static_assert(cpx_test::routing::tiny_balanced::experts == Config::experts);

namespace {
std::vector<float> logits_with(const std::vector<std::int32_t>& table, const std::vector<std::int64_t>& tokens) {
    auto weights = cpx::ComplexityWeights<Config>::random(11);
    weights.set_routing(table);
    cpx::ComplexityModel<Config> model(std::move(weights));
    return model.forward(tokens);
}
}  // namespace

TEST_CASE("build-time and run-time routing tables give identical logits") {
    const auto& built = cpx_test::routing::tiny_balanced::token_to_expert;
    const std::vector<std::int32_t> compile_time(built.begin(), built.end());
    const auto counts =
        cpx::io::read_frequency_table(CPX_TEST_DATA_DIR "/zipf_v257_a1.1_shuffled.txt", Config::vocab);
    const auto run_time = cpx::router::balanced_zipf_routing(counts, Config::experts);
    REQUIRE(run_time == compile_time);

    std::vector<std::int64_t> tokens;
    for (int t = 0; t < Config::vocab; t += 7) tokens.push_back(t);  // every expert sees tokens
    const auto a = logits_with(compile_time, tokens);
    const auto b = logits_with(run_time, tokens);
    CHECK(a == b);  // same table, same weights: bit-identical

    // The routing matters: the modulo table sends some of these tokens elsewhere
    // and changes the logits, so the equality above is not vacuous.
    const auto modulo = cpx::router::modulo_routing(static_cast<std::size_t>(Config::vocab), Config::experts);
    REQUIRE(modulo != compile_time);
    CHECK(logits_with(modulo, tokens) != a);
}

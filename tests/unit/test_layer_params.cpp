// Each COMPLEXITY-DEEP layer used alone: its owning parameters initialised as
// the whole model initialises that layer, run against the double-precision
// reference, and loaded from one layer of a saved checkpoint.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/checkpoint.hpp>
#include <cpx/models/complexity/cpu_views.hpp>
#include <cpx/models/complexity/weights.hpp>
#include <cpx/models/layer_params_io.hpp>

#include <filesystem>
#include <string>

#include "complexity_reference.hpp"
#include "complexity_test_weights.hpp"
#include "error_message.hpp"
#include "temp_dir.hpp"
#include "test_support.hpp"

using namespace cpx;
using cpx::testing::random_normal;
using cpx::testing::random_tokens;
using cpx::testing::relative_error;
namespace fs = std::filesystem;
using cpx::testing::message_of;
using cpx::testing::TempDir;

namespace {
using Routed = presets::TinyComplexity;
using Dense = presets::TinyDense;
using Learned = presets::TinyLearnedRouter;
using PrismDecoder = presets::TinyComplexityPrism;

/// Every tensor of two parameter sets, compared through their slots.
template <class P>
bool same_values(const P& a, const P& b, int layer) {
    const auto sa = layer_slots(a, layer), sb = layer_slots(b, layer);
    if (sa.size() != sb.size()) return false;
    for (std::size_t i = 0; i < sa.size(); ++i) {
        std::vector<float> x(static_cast<std::size_t>(sa[i].elements())), y(x.size());
        sa[i].extract(x), sb[i].extract(y);
        if (sa[i].name != sb[i].name || x != y) return false;
    }
    return true;
}

}  // namespace

TEST_CASE("random_layer draws exactly the layer the whole model's random() draws") {
    const auto routed = ComplexityWeights<Routed>::random(11);
    CHECK(same_values(random_layer<MuGqaAttentionParams<Routed>>(11, 2), routed.layers[2].attention, 2));
    CHECK(same_values(random_layer<TokenRoutedMlpParams<Routed>>(11, 1), routed.layers[1].mlp, 1));
    CHECK(same_values(random_layer<MuGuidanceParams<Routed>>(11, 0), routed.layers[0].mu_guidance, 0));
    CHECK(!same_values(random_layer<TokenRoutedMlpParams<Routed>>(11, 0), routed.layers[1].mlp, 1));
    const auto dense = ComplexityWeights<Dense>::random(12);
    CHECK(same_values(random_layer<DenseMlpParams<Dense>>(12, 2), dense.layers[2].mlp, 2));
    CHECK(same_values(random_layer<MuGqaAttentionParams<Dense>>(12, 1), dense.layers[1].attention, 1));
    const auto learned = ComplexityWeights<Learned>::random(13);
    CHECK(same_values(random_layer<LearnedRouterMlpParams<Learned>>(13, 1), learned.layers[1].mlp, 1));
    const auto prism = ComplexityWeights<PrismDecoder>::random(14);
    CHECK(same_values(random_layer<PrismAttentionParams<PrismDecoder>>(14, 1), prism.layers[1].attention, 1));
    CHECK(message_of([] { (void)random_layer<DenseMlpParams<Dense>>(1, Dense::layers); }).find("outside [0, 3)") !=
          std::string::npos);
}

TEST_CASE("a token-routed MLP alone, from its own parameters, matches the reference and the model's layer") {
    using C = Routed;
    // Test-scaled values (not the 0.02 initialisation) so the comparison sees every term.
    const auto whole = cpx::testing::test_weights<C>(5);
    TokenRoutedMlpParams<C> params = whole.layers[2].mlp;  // an owning copy of one layer
    const std::vector<std::int32_t> table = modulo_routing<C>();
    auto ref = cpx::testing::reference_weights(whole);
    ref.tables.clear();  // the reference routes by the same table
    ref.token_to_expert.assign(table.begin(), table.end());
    const TopKRouting routing(table, C::top_k, C::experts);
    const int N = 37;  // not a multiple of any tile
    const auto x = random_normal(N * C::hidden, 7);
    const auto tokens = random_tokens(N, C::vocab, 8);
    const auto before = random_normal(N * C::hidden, 9);
    auto residual = before;  // the layer adds MLP(x) into its residual argument
    cpu::TokenRoutedMlp<C, float> mlp;
    mlp.forward(cpu_view(params), cpu::rows_of<const float>(x.data(), N, C::hidden), tokens, routing,
                cpu::rows_of(residual.data(), N, C::hidden));
    std::vector<double> want;
    for (int r = 0; r < N; ++r) {
        const std::vector<double> row(x.begin() + r * C::hidden, x.begin() + (r + 1) * C::hidden);
        const auto y = cpx::testing::reference_mlp<C>(ref, "layers.2.", row, tokens[r]);
        for (int i = 0; i < C::hidden; ++i) want.push_back(y[i] + before[r * C::hidden + i]);
    }
    CHECK(relative_error(residual, want) < 1e-5);
}

TEST_CASE("load_layer reads one layer of a saved checkpoint, in the split and the nn.Linear expert layouts") {
    TempDir dir;
    const auto w = cpx::testing::test_weights<Routed>(9);
    save_complexity_checkpoint(w, dir.path());
    CHECK(same_values(load_layer<TokenRoutedMlpParams<Routed>>(dir.path(), 1), w.layers[1].mlp, 1));
    CHECK(same_values(load_layer<MuGqaAttentionParams<Routed>>(dir.path(), 2), w.layers[2].attention, 2));
    CHECK(same_values(load_layer<MuGuidanceParams<Routed>>(dir.path(), 0), w.layers[0].mu_guidance, 0));
    CHECK(load_layer_routing<Routed>(dir.path(), 2) == w.layers[2].routes);
    // bf16 storage of the loaded layer rounds each value once.
    const auto bf = load_layer<TokenRoutedMlpParams<Routed, bf16>>(dir.path(), 1);
    CHECK(bf.down[17].bits == bf16::from_float(w.layers[1].mlp.down[17]).bits);

    TempDir dense_dir, learned_dir;
    const auto wd = cpx::testing::test_weights<Dense>(10);
    save_complexity_checkpoint(wd, dense_dir.path());
    CHECK(same_values(load_layer<DenseMlpParams<Dense>>(dense_dir.path(), 2), wd.layers[2].mlp, 2));
    const auto wl = cpx::testing::test_weights<Learned>(11);
    save_complexity_checkpoint(wl, learned_dir.path());
    CHECK(same_values(load_layer<LearnedRouterMlpParams<Learned>>(learned_dir.path(), 1), wl.layers[1].mlp, 1));
}

TEST_CASE("load_layer errors: layer out of range, another configuration, missing tensors named") {
    TempDir dir;
    save_complexity_checkpoint(cpx::testing::test_weights<Routed>(12), dir.path());
    CHECK(message_of([&] { (void)load_layer<TokenRoutedMlpParams<Routed>>(dir.path(), 3); }).find("outside [0, 3)") !=
          std::string::npos);
    // A dense layer asked of a token-routed checkpoint: config.json disagrees.
    CHECK(message_of([&] { (void)load_layer<DenseMlpParams<Dense>>(dir.path(), 0); }).find("mlp") != std::string::npos);
    // Without config.json, the missing tensors are named.
    fs::remove(dir.path() / "config.json");
    const std::string m = message_of([&] { (void)load_layer<DenseMlpParams<Dense>>(dir.path(), 0); });
    CHECK(m.find("missing tensor 'layers.0.mlp.gate_proj.weight'") != std::string::npos);
    CHECK(m.find("layers.0.mlp.down_proj.weight") != std::string::npos);
    CHECK(m.find("ComplexityDims{.hidden_size = 64") != std::string::npos);  // the configuration, by field
}

// The authors' later token-routed MLP (docs/MODELS.md §8.5): top-k routes per
// token from per-layer tables, route weights, output scales and learned gates,
// against the double reference, through checkpoints and config.json.
#include <doctest/doctest.h>

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/checkpoint.hpp>
#include <cpx/models/complexity/model.hpp>
#include <cpx/models/layer_params_io.hpp>
#include <cpx/router/top_k_routing.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "checkpoint_rewrite.hpp"
#include "complexity_test_weights.hpp"
#include "error_message.hpp"
#include "temp_dir.hpp"

using namespace cpx;
using cpx::testing::ends_with;
using cpx::testing::reference_logits;
using cpx::testing::reference_weights;
using cpx::testing::relative_error;
using cpx::testing::rewrite;
using cpx::testing::Tensor;
using cpx::testing::TempDir;

namespace {
constexpr ComplexityDims tiny{.hidden_size = 48, .num_hidden_layers = 2, .num_attention_heads = 4,
                              .num_key_value_heads = 2, .intermediate_size = 96, .vocab_size = 131,
                              .max_position_embeddings = 32, .mlp = MlpKind::token_routed, .num_experts = 4,
                              .shared_expert = true, .use_mu_guidance = false};
constexpr ComplexityDims with(ComplexityDims d, int top_k, double primary, double routed_scale = 1.0,
                              double shared_scale = 1.0, bool gates = false, bool shared = true) {
    d.top_k = top_k, d.top_k_primary_weight = primary, d.routed_output_scale = routed_scale;
    d.shared_output_scale = shared_scale, d.use_shared_routed_gates = gates, d.shared_expert = shared;
    return d;
}
using Top1 = ComplexityConfig<with(tiny, 1, -1.0)>;                            // the paper's MLP
using Top2 = ComplexityConfig<with(tiny, 2, 0.5)>;                             // tr-moe-306's weights
using Top2Default = ComplexityConfig<with(tiny, 2, -1.0, 1.7, 0.4)>;           // 0.95 / 0.05, scales
using TopE = ComplexityConfig<with(tiny, 4, 0.4, 0.8)>;                        // every expert
using Gated = presets::TinyTopK;                                               // gates, mu, 0.7 / 0.3
using NoShared = ComplexityConfig<with(tiny, 3, 0.6, 2.0, 1.0, false, false)>;  // routed scale alone

const std::vector<std::int64_t> probe = {5, 17, 130, 3, 3, 99, 0, 42, 120, 7, 64, 77, 1};

template <class C>
std::vector<float> logits_of(ComplexityWeights<C> w) {
    return ComplexityModel<C>(std::move(w)).forward(probe);
}
}  // namespace

TEST_CASE("route weights follow the authors' rule") {
    CHECK(Top1::primary_weight == 1.0);
    CHECK(Top2::primary_weight == 0.5);
    CHECK(Top2::secondary_weight == 0.5);
    CHECK(Top2Default::primary_weight == 0.95);
    CHECK(Top2Default::secondary_weight == doctest::Approx(0.05));
    CHECK(TopE::secondary_weight == doctest::Approx(0.2));
    CHECK(presets::TrMoe306::learned_gates);
}

TEST_CASE("cyclic routes: route r is (primary + r) mod E, distinct per token, each route as balanced as the primary") {
    const std::vector<std::int32_t> primary = {0, 3, 2, 1, 1, 0, 2};
    const auto table = router::cyclic_routes(primary, 3, 4);
    REQUIRE(table.size() == 21);
    for (std::size_t t = 0; t < primary.size(); ++t)
        for (int r = 0; r < 3; ++r) CHECK(table[r * primary.size() + t] == (primary[t] + r) % 4);
    CHECK(router::tokens_with_repeated_routes(table, 3) == 0);
    const TopKRouting view(table, 3, 4);
    CHECK(view.vocab() == 7);
    CHECK(view.expert_of(1, 2) == 1);
    CHECK(cpx::testing::message_of([&] { (void)view.checked_expert_of(7, 0); }).find("outside the vocabulary") !=
          std::string::npos);
    std::vector<std::int32_t> bad = table;
    bad[9] = 4;
    CHECK(cpx::testing::message_of([&] { (void)TopKRouting(bad, 3, 4); }) ==
          "token routing: route 1 of token 2 is expert 4, outside [0, 4)");
    CHECK(cpx::testing::message_of([&] { (void)router::cyclic_routes(primary, 5, 4); }) ==
          "cyclic routes: top_k 5 needs 1 <= top_k <= experts (4)");
    CHECK(cpx::testing::message_of([&] { (void)router::cyclic_routes(primary, 0, 4); }) ==
          "cyclic routes: top_k 0 needs 1 <= top_k <= experts (4)");
    CHECK(cpx::testing::message_of([&] { (void)router::cyclic_routes(std::vector<std::int32_t>{0, 4, 1}, 2, 4); }) ==
          "cyclic routes: token 1 has primary expert 4, outside [0, 4)");
    CHECK_THROWS_AS((void)router::cyclic_routes(primary, 5, 4), InputError);
    std::vector<std::int32_t> repeated = {1, 2, 1, 3};  // [2, 2]: token 0 routed to expert 1 twice
    CHECK(router::tokens_with_repeated_routes(repeated, 2) == 1);
}

TEST_CASE_TEMPLATE("top-k models with per-layer tables match the double reference within 1e-4", C, Top1, Top2,
                   Top2Default, TopE, Gated, NoShared) {
    const auto w = cpx::testing::test_weights<C>(3);
    if constexpr (C::top_k > 1) CHECK_FALSE(w.routes_shared_by_layers());  // the tables differ between layers
    const auto ref = reference_weights(w);
    ComplexityModel<C> model(w);
    for (std::uint64_t seed : {1u, 2u}) {
        const auto tokens = cpx::testing::random_tokens(seed == 1 ? 23 : 9, C::vocab, seed);
        CHECK(relative_error(model.forward(tokens), reference_logits<C>(ref, tokens)) < 1e-4);
    }
}

TEST_CASE("repeated routes of one token compute the expert twice, as the authors' code does") {
    using C = Top2;
    auto w = cpx::testing::test_weights<C>(4);
    std::vector<std::int32_t> table(2 * C::vocab);
    for (int t = 0; t < C::vocab; ++t) table[t] = table[C::vocab + t] = t % C::experts;  // route 1 = route 0
    w.set_layer_routes(1, table);
    const auto ref = reference_weights(w);
    CHECK(relative_error(ComplexityModel<C>(w).forward(probe), reference_logits<C>(ref, probe)) < 1e-4);
}

TEST_CASE("dispatch runs top_k experts per token: the expert load counts T * top_k routes") {
    using C = TopE;
    const auto w = cpx::testing::test_weights<C>(5);
    ComplexityModel<C> model(w);
    ExpertLoad<C> load;
    model.attach(load);
    model.forward(probe);
    for (int l = 0; l < C::layers; ++l) {
        index_t total = 0;
        for (index_t n : load.tokens[l]) total += n;
        CHECK(total == static_cast<index_t>(probe.size()) * C::top_k);
    }
}

TEST_CASE_TEMPLATE("a top-k model saves and reloads with its per-layer tables and gates", C, Top2, Gated, NoShared) {
    TempDir dir;
    const auto w = cpx::testing::test_weights<C>(6);
    const auto want = logits_of(w);
    save_complexity_checkpoint(w, dir.path());
    const auto ckpt = io::Checkpoint::open(dir.path());
    CHECK(ckpt.get("layers.1.mlp.topk_token_to_expert").shape == std::vector<std::int64_t>{C::top_k, C::vocab});
    CHECK(ckpt.get("layers.1.mlp.token_to_expert").shape == std::vector<std::int64_t>{C::vocab});
    CHECK(ckpt.contains("layers.0.mlp.shared_output_gate") == C::learned_gates);
    CheckpointReport report;
    auto loaded = load_complexity_checkpoint<C>(dir.path(), &report);
    CHECK(report.routing_top_k_tables);
    CHECK(report.routing_per_layer);
    CHECK(report.config_keys_not_interpreted.empty());
    for (int l = 0; l < C::layers; ++l) CHECK(loaded.layers[l].routes == w.layers[l].routes);
    if constexpr (C::learned_gates) CHECK(loaded.layers[1].mlp.routed_output_gate == w.layers[1].mlp.routed_output_gate);
    CHECK(logits_of(std::move(loaded)) == want);
    CHECK(load_layer_routing<C>(dir.path(), 1) == w.layers[1].routes);
}

TEST_CASE("a checkpoint with only the primary tables routes by the cyclic rule, per layer") {
    using C = Top2;
    TempDir dir, primary_only;
    auto w = cpx::testing::test_weights<C>(7);
    for (int l = 0; l < C::layers; ++l) {  // per-layer primaries, extended cyclically
        const auto primary = cpx::testing::random_ints(C::vocab, 0, C::experts - 1, 50 + l);
        w.set_layer_routes(l, router::cyclic_routes(std::vector<std::int32_t>(primary.begin(), primary.end()),
                                                    C::top_k, C::experts));
    }
    const auto want = logits_of(w);
    save_complexity_checkpoint(w, dir.path());
    rewrite(dir.path(), primary_only.path(), [](Tensor& t, std::vector<Tensor>&) {
        if (ends_with(t.name, "topk_token_to_expert")) t.name.clear();
    });
    CheckpointReport report;
    auto loaded = load_complexity_checkpoint<C>(primary_only.path(), &report);
    CHECK(report.routing_from_checkpoint);
    CHECK_FALSE(report.routing_top_k_tables);
    CHECK(report.routing_per_layer);
    CHECK(loaded.routes_cyclic());
    // The reference derives the routes itself from the primary tables alone.
    auto ref = reference_weights(w);
    ref.tables.clear();
    for (int l = 0; l < C::layers; ++l) {
        const auto p = w.primary_routes(l);
        ref.tables["layers." + std::to_string(l) + ".mlp.token_to_expert"].assign(p.begin(), p.end());
    }
    CHECK(relative_error(logits_of(std::move(loaded)), reference_logits<C>(ref, probe)) < 1e-4);
    CHECK(logits_of(load_complexity_checkpoint<C>(primary_only.path())) == want);
}

TEST_CASE("a top-k checkpoint loads from every accepted expert layout to the same logits") {
    using C = Gated;
    TempDir dir, fused, linear;
    const auto w = cpx::testing::test_weights<C>(8);
    const auto want = logits_of(w);
    save_complexity_checkpoint(w, dir.path());
    rewrite(dir.path(), fused.path(), cpx::testing::fuse_experts(C::experts, C::hidden, C::expert_width));
    rewrite(dir.path(), linear.path(), cpx::testing::per_expert_linear(C::experts, C::hidden, C::expert_width));
    CheckpointReport report;
    CHECK(logits_of(load_complexity_checkpoint<C>(fused.path(), &report)) == want);
    CHECK(report.expert_layout == ExpertLayout::fused_input_major);
    CHECK(logits_of(load_complexity_checkpoint<C>(linear.path(), &report)) == want);
    CHECK(report.expert_layout == ExpertLayout::per_expert_linear);
}

TEST_CASE("a top-k table that agrees with token_to_expert loads silently; one that disagrees wins with a note") {
    using C = Top2;
    TempDir dir, disagree;
    const auto w = cpx::testing::test_weights<C>(9);
    save_complexity_checkpoint(w, dir.path());
    CheckpointReport report;
    (void)load_complexity_checkpoint<C>(dir.path(), &report);
    CHECK(report.notes.empty());
    rewrite(dir.path(), disagree.path(), [](Tensor& t, std::vector<Tensor>&) {
        if (t.name == "layers.1.mlp.token_to_expert") t.i[5] = (t.i[5] + 1) % C::experts;
    });
    const auto loaded = load_complexity_checkpoint<C>(disagree.path(), &report);
    CHECK(loaded.layers[1].routes == w.layers[1].routes);
    REQUIRE(report.notes.size() == 1);
    CHECK(report.notes[0] ==
          "'layers.1.mlp.token_to_expert' differs from route 0 of 'layers.1.mlp.topk_token_to_expert' for 1 tokens; "
          "the top-k table is used");
}

TEST_CASE("bad top-k checkpoints are clear errors naming the tensor or key") {
    using C = Top2;
    TempDir dir, shape, range, missing_gate, hash;
    const auto w = cpx::testing::test_weights<C>(10);
    save_complexity_checkpoint(w, dir.path());
    const auto text = [](const std::filesystem::path& p) {
        std::ifstream in(p / "config.json");
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const auto put = [](const std::filesystem::path& p, const std::string& s) { std::ofstream(p / "config.json") << s; };

    rewrite(dir.path(), shape.path(), [](Tensor& t, std::vector<Tensor>&) {
        if (t.name == "layers.0.mlp.topk_token_to_expert") {
            t.shape = {1, C::vocab};
            t.i.resize(C::vocab);
        }
    });
    std::string msg = cpx::testing::message_of([&] { (void)load_complexity_checkpoint<C>(shape.path()); });
    CHECK(msg.find("layers.0.mlp.topk_token_to_expert") != std::string::npos);
    CHECK(msg.find("[2, 131]") != std::string::npos);

    rewrite(dir.path(), range.path(), [](Tensor& t, std::vector<Tensor>&) {
        if (t.name == "layers.1.mlp.topk_token_to_expert") t.i[C::vocab + 9] = -1;
    });
    msg = cpx::testing::message_of([&] { (void)load_complexity_checkpoint<C>(range.path()); });
    CHECK(msg.find("'layers.1.mlp.topk_token_to_expert' routes token 9 (route 1) to expert -1, outside [0, 4)") !=
          std::string::npos);

    // top_k of config.json against the compiled preset.
    std::string config = text(dir.path());
    const auto at = config.find("\"top_k\": 2");
    REQUIRE(at != std::string::npos);
    put(dir.path(), config.substr(0, at) + "\"top_k\": 3" + config.substr(at + 10));
    msg = cpx::testing::message_of([&] { (void)load_complexity_checkpoint<C>(dir.path()); });
    CHECK(msg.find("top_k: checkpoint 3, compiled 2") != std::string::npos);
    put(dir.path(), config);

    // A hash-routed model must carry its tables.
    rewrite(dir.path(), hash.path(), [](Tensor& t, std::vector<Tensor>&) {
        if (ends_with(t.name, "topk_token_to_expert")) t.name.clear();
    });
    const auto brace = config.rfind('}');
    put(hash.path(), config.substr(0, brace) + ", \"routing_strategy\": \"token_id_balanced_hash\"}\n");
    msg = cpx::testing::message_of([&] { (void)load_complexity_checkpoint<C>(hash.path()); });
    CHECK(msg.find("routing_strategy \"token_id_balanced_hash\" needs every layer's mlp.topk_token_to_expert") !=
          std::string::npos);

    // Learned gates are parameters: a checkpoint without them is incomplete.
    TempDir gated;
    save_complexity_checkpoint(cpx::testing::test_weights<Gated>(11), gated.path());
    rewrite(gated.path(), missing_gate.path(), [](Tensor& t, std::vector<Tensor>&) {
        if (t.name == "layers.2.mlp.routed_output_gate") t.name.clear();
    });
    msg = cpx::testing::message_of([&] { (void)load_complexity_checkpoint<Gated>(missing_gate.path()); });
    CHECK(msg.find("layers.2.mlp.routed_output_gate") != std::string::npos);

    // One layer's routing alone (load_layer_routing) has no rule to fall back on: without either
    // table it is an error naming both (the whole-model load routes such layers by the modulo rule).
    TempDir no_tables;
    rewrite(dir.path(), no_tables.path(), [](Tensor& t, std::vector<Tensor>&) {
        if (ends_with(t.name, "token_to_expert")) t.name.clear();
    });
    msg = cpx::testing::message_of([&] { (void)load_layer_routing<C>(no_tables.path(), 1); });
    CHECK(msg.find("routing table of layer 1") != std::string::npos);
    CHECK(msg.find("missing tensor 'layers.1.mlp.token_to_expert' (or 'layers.1.mlp.topk_token_to_expert')") !=
          std::string::npos);
}

TEST_CASE("config.json: the later models' keys are read, written and checked against the compiled preset") {
    const auto c = io::complexity_json_config<presets::TrMoe306>();
    CHECK(c.top_k == 2);
    CHECK(c.top_k_primary_weight == 0.5);
    CHECK(c.use_shared_routed_gates == true);
    CHECK(c.shared_gate_init == 0.5);
    CHECK(io::config_mismatches<presets::TrMoe306>(c).empty());
    CHECK(io::parse_complexity_config(io::to_json(c).dump()) == c);
    // Absent weight: 0.95 for top_k > 1, reported as such.
    auto absent = io::complexity_json_config<Top2>();
    absent.top_k_primary_weight.reset();
    const auto m = io::config_mismatches<Top2>(absent);
    REQUIRE(m.size() == 1);
    CHECK(m[0] == "top_k_primary_weight: checkpoint 0.95 (absent: 0.95), compiled 0.5");
    // A weight outside [0, 1] is clamped, as their code does, and the line says so.
    auto outside = io::complexity_json_config<Top2>();
    outside.top_k_primary_weight = 1.5;
    CHECK(io::config_mismatches<Top2>(outside) ==
          std::vector<std::string>{"top_k_primary_weight: checkpoint 1.0 (clamped to [0, 1]), compiled 0.5"});
    outside.top_k_primary_weight = -0.25;
    CHECK(io::config_mismatches<Top2>(outside) ==
          std::vector<std::string>{"top_k_primary_weight: checkpoint 0.0 (clamped to [0, 1]), compiled 0.5"});
    outside.top_k_primary_weight = 0.75;
    CHECK(io::config_mismatches<Top2>(outside) ==
          std::vector<std::string>{"top_k_primary_weight: checkpoint 0.75, compiled 0.5"});
    // Gates against scales, and scales against scales.
    auto scales = io::complexity_json_config<Top2Default>();
    CHECK(io::config_mismatches<Top2Default>(scales).empty());
    scales.routed_output_scale = 2.0;
    CHECK(io::config_mismatches<Top2Default>(scales) ==
          std::vector<std::string>{"routed_output_scale: checkpoint 2.0, compiled 1.7"});
    scales.use_shared_routed_gates = true;
    CHECK(io::config_mismatches<Top2Default>(scales) ==
          std::vector<std::string>{"use_shared_routed_gates: checkpoint true, compiled false"});
    // The paper's configurations write none of these keys.
    const std::string paper = io::complexity_config_json<presets::TinyComplexity>();
    CHECK(paper.find("top_k") == std::string::npos);
    // A paper model rejects a top-2 file.
    auto two = io::complexity_json_config<presets::TinyComplexity>();
    two.top_k = 2;
    CHECK(io::config_mismatches<presets::TinyComplexity>(two) ==
          std::vector<std::string>{"top_k: checkpoint 2, compiled 1"});
}

TEST_CASE("the authors' later presets have the parameter counts they publish") {
    // "306.5M" for tr-moe-306 and dense-306 (vllm-i64's registry and the paper's table).
    CHECK(live_parameter_count<presets::TrMoe306>() == 306'486'564);
    CHECK(live_parameter_count<presets::Dense306>() == 306'486'528);
    CHECK(std::llround(live_parameter_count<presets::TrMoe306>() / 1e5) == 3065);
    CHECK(std::llround(live_parameter_count<presets::Dense306>() / 1e5) == 3065);
    // Stored MLP width 4096 in both; the routed model runs 3840 + 2 x 64 per token.
    CHECK(presets::TrMoe306::shared_width + presets::TrMoe306::experts * presets::TrMoe306::expert_width == 4096);
    CHECK(mlp_flops_per_token<presets::TrMoe306>() == 2 * 3 * 1024 * (3840 + 2 * 64));
}

// config.json of COMPLEXITY-DEEP (the authors' ModelConfig keys) and of PRISM
// (the reference GPTConfig keys): reading, writing compiled presets, and the
// list of every contradiction with a compiled configuration.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/io/complexity_config_json.hpp>
#include <cpx/io/prism_config_json.hpp>

#include "temp_dir.hpp"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using cpx::FormatError;
using cpx::ShapeError;
using cpx::io::ComplexityJsonConfig;
using cpx::io::Json;
using cpx::io::PrismJsonConfig;
namespace presets = cpx::presets;

namespace {

// run2 "Full" (187M) as docs/MODELS.md §13 lists it, in the authors' key order.
constexpr std::string_view run2_json =
    R"({"hidden_size": 768, "num_hidden_layers": 18, "intermediate_size": 2048, "vocab_size": 32000,)"
    R"( "num_attention_heads": 12, "num_key_value_heads": 4, "attention_type": "gqa", "attention_dropout": 0.0,)"
    R"( "use_qk_norm": true, "sliding_window": null, "max_position_embeddings": 2048, "rope_theta": 10000.0,)"
    R"( "rope_type": "standard", "mlp_type": "token_routed", "hidden_act": "silu", "num_experts": 4,)"
    R"( "shared_expert": true, "shared_intermediate_size": null, "use_mu_guidance": true,)"
    R"( "use_mu_projection": false, "disable_mu_guidance": false, "norm_type": "rmsnorm", "norm_eps": 1e-06,)"
    R"( "tie_word_embeddings": true, "use_sdpa": true, "use_cache": true, "initializer_range": 0.02,)"
    R"( "extra_config": {}})";

using Edits = std::initializer_list<std::pair<std::string, Json>>;

/// run2's config.json with keys replaced or added (`edits`) and keys removed (`removed`).
ComplexityJsonConfig run2_with(Edits edits, std::initializer_list<std::string> removed = {}) {
    Json doc = cpx::io::parse_json(run2_json);
    for (const auto& [k, v] : edits) doc.set(k, v);
    auto& members = doc.as_object();
    for (const auto& k : removed)
        std::erase_if(members, [&](const Json::Member& m) { return m.first == k; });
    return cpx::io::parse_complexity_config(doc.dump());
}

using Lines = std::vector<std::string>;

// Variants of the tiny preset exercising what the named presets do not.
using TinyWideShared = cpx::ComplexityConfig<cpx::ComplexityDims{
    .hidden_size = 64, .num_hidden_layers = 3, .num_attention_heads = 4, .num_key_value_heads = 2,
    .intermediate_size = 128, .vocab_size = 257, .max_position_embeddings = 64,
    .mlp = cpx::MlpKind::token_routed, .num_experts = 4, .shared_expert = true, .shared_intermediate_size = 96}>;
using TinyLinearRope = cpx::ComplexityConfig<cpx::ComplexityDims{
    .hidden_size = 64, .num_hidden_layers = 3, .num_attention_heads = 4, .num_key_value_heads = 2,
    .intermediate_size = 128, .vocab_size = 257, .max_position_embeddings = 64,
    .mlp = cpx::MlpKind::token_routed, .num_experts = 4, .rope_theta = 500000.0, .rope_scaling = 2.0,
    .norm_eps = 1e-5}>;
using TinyPrismAttention = cpx::ComplexityConfig<cpx::ComplexityDims{
    .hidden_size = 64, .num_hidden_layers = 2, .num_attention_heads = 4, .num_key_value_heads = 4,
    .intermediate_size = 128, .vocab_size = 257, .max_position_embeddings = 64,
    .mlp = cpx::MlpKind::token_routed, .num_experts = 4, .use_mu_guidance = false,
    .attention = cpx::AttentionKind::prism, .prism_expansion_ratio = 3, .prism_freq_multiplier = 2.0}>;

template <class C>
void check_round_trip() {
    const std::string text = cpx::io::complexity_config_json<C>();
    const ComplexityJsonConfig back = cpx::io::parse_complexity_config(text);
    CHECK(back == cpx::io::complexity_json_config<C>());
    CHECK(cpx::io::config_mismatches<C>(back).empty());
    CHECK(cpx::io::to_json(back).dump(2) + "\n" == text);
}

}  // namespace

// ------------------------------------------------------------------ COMPLEXITY-DEEP: reading

TEST_CASE("run2's config.json reads into every field") {
    const ComplexityJsonConfig c = cpx::io::parse_complexity_config(run2_json);
    CHECK(c.hidden_size == 768);
    CHECK(c.num_hidden_layers == 18);
    CHECK(c.intermediate_size == 2048);
    CHECK(c.vocab_size == 32000);
    CHECK(c.num_attention_heads == 12);
    CHECK(c.num_key_value_heads == 4);
    CHECK(c.attention_type == "gqa");
    CHECK(c.attention_dropout == 0.0);
    CHECK(c.use_qk_norm == true);
    CHECK_FALSE(c.sliding_window.has_value());
    CHECK(c.max_position_embeddings == 2048);
    CHECK(c.rope_theta == 10000.0);
    CHECK(c.rope_type == "standard");
    CHECK(c.mlp_type == "token_routed");
    CHECK(c.hidden_act == "silu");
    CHECK(c.num_experts == 4);
    CHECK(c.shared_expert == true);
    CHECK_FALSE(c.shared_intermediate_size.has_value());
    CHECK(c.use_mu_guidance == true);
    CHECK(c.use_mu_projection == false);
    CHECK(c.disable_mu_guidance == false);
    CHECK(c.norm_type == "rmsnorm");
    CHECK(c.norm_eps == 1e-6);
    CHECK(c.tie_word_embeddings == true);
    CHECK(c.use_sdpa == true);
    CHECK(c.use_cache == true);
    CHECK(c.initializer_range == 0.02);
    CHECK(c.extra_config == Json::object());
    CHECK(c.unrecognized.size() == 0);
}

TEST_CASE("run2's config.json matches ComplexityDeep187M with no mismatch") {
    const ComplexityJsonConfig c = cpx::io::parse_complexity_config(run2_json);
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(c).empty());
    CHECK_NOTHROW(cpx::io::check_config<presets::ComplexityDeep187M>(c));
}

TEST_CASE("run2's config.json against ComplexityDeep384M lists exactly the differing dimensions") {
    const ComplexityJsonConfig c = cpx::io::parse_complexity_config(run2_json);
    const Lines expected{
        "hidden_size: checkpoint 768, compiled 1024",
        "num_hidden_layers: checkpoint 18, compiled 20",
        "intermediate_size: checkpoint 2048, compiled 3200",
        "num_attention_heads: checkpoint 12, compiled 16",
        "max_position_embeddings: checkpoint 2048, compiled 4096",
    };
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep384M>(c) == expected);
    std::string message = "run2/config.json does not match the compiled configuration (5 problems):";
    for (const auto& line : expected) message += "\n  " + line;
    CHECK_THROWS_WITH_AS(cpx::io::check_config<presets::ComplexityDeep384M>(c, "run2/config.json"), message.c_str(),
                         ShapeError);
}

TEST_CASE("the dense and ablation configs of the spec match their presets, and not each other") {
    const auto run1 = run2_with({{"intermediate_size", 2416}, {"mlp_type", "swiglu"}, {"num_experts", 1},
                                 {"use_mu_guidance", false}});
    CHECK(cpx::io::config_mismatches<presets::ComplexityDense171M>(run1).empty());
    const auto dense384 = run2_with({{"hidden_size", 1024}, {"num_hidden_layers", 20}, {"num_attention_heads", 16},
                                     {"intermediate_size", 4358}, {"max_position_embeddings", 4096},
                                     {"mlp_type", "swiglu"}, {"num_experts", 1}, {"shared_expert", false},
                                     {"use_mu_guidance", false}});
    CHECK(cpx::io::config_mismatches<presets::ComplexityDense384M>(dense384).empty());
    const auto run3 = run2_with({{"use_mu_guidance", false}});
    CHECK(cpx::io::config_mismatches<presets::ComplexityNoMu177M>(run3).empty());
    const auto run4 = run2_with({{"mlp_type", "mixtral"}});
    CHECK(cpx::io::config_mismatches<presets::ComplexityLearnedRouter187M>(run4).empty());

    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(run1) ==
          Lines{"intermediate_size: checkpoint 2416, compiled 2048",
                "mlp_type: checkpoint \"swiglu\", compiled \"token_routed\"",
                "num_experts: checkpoint 1, compiled 4",
                "use_mu_guidance: checkpoint false, compiled true"});
    CHECK(cpx::io::config_mismatches<presets::ComplexityLearnedRouter187M>(run3) ==
          Lines{"mlp_type: checkpoint \"token_routed\", compiled \"mixtral\"",
                "use_mu_guidance: checkpoint false, compiled true"});
}

TEST_CASE("the inference code's key names are accepted: rms_norm_eps, use_token_routed_mlp, model_type") {
    const auto vi = run2_with({{"model_type", "deep"}, {"rms_norm_eps", 1e-6}, {"use_token_routed_mlp", true}},
                              {"norm_eps", "mlp_type"});
    CHECK(vi.norm_eps == 1e-6);
    CHECK(vi.model_type == "deep");
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(vi).empty());
    const auto vi_dense = run2_with({{"use_token_routed_mlp", false}}, {"mlp_type"});
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(vi_dense) ==
          Lines{"mlp_type: checkpoint \"swiglu\", compiled \"token_routed\""});
    const auto both = run2_with({{"use_token_routed_mlp", false}});
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(both) ==
          Lines{"mlp_type: \"token_routed\" contradicts use_token_routed_mlp false"});
    CHECK_THROWS_WITH_AS(run2_with({{"rms_norm_eps", 1e-5}}), "config.json: norm_eps 1e-06 and rms_norm_eps 1e-05 disagree",
                         FormatError);
}

TEST_CASE("rope_scaling's newer name rope_type is read for type, and the two must agree") {
    const auto scaled = run2_with({{"rope_type", "linear"},
                                   {"rope_scaling", Json(Json::Object{{"rope_type", "linear"}, {"factor", 2.0}})}});
    CHECK(scaled.rope_scaling_type == "linear");
    CHECK(scaled.rope_scaling_factor == 2.0);
    CHECK_THROWS_WITH_AS(
        run2_with({{"rope_scaling", Json(Json::Object{{"type", "linear"}, {"rope_type", "yarn"}, {"factor", 2.0}})}}),
        "config.json rope_scaling: type \"linear\" and rope_type \"yarn\" disagree", FormatError);
}

TEST_CASE("each family's key table names every key once, and the writer writes exactly its keys") {
    auto names = [](const auto& table) {
        std::vector<std::string> out;
        std::apply([&](const auto&... k) { (out.emplace_back(k.name), ...); }, table);
        return out;
    };
    for (auto table_names : {names(cpx::io::complexity_keys), names(cpx::io::prism_keys)}) {
        std::vector<std::string> sorted = table_names;
        std::sort(sorted.begin(), sorted.end());
        CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
    }
    // Every member set: the written keys are the table's, minus the read-only alias, in table order.
    ComplexityJsonConfig every = cpx::io::complexity_json_config<TinyLinearRope>();
    every.model_type = "deep";
    every.use_token_routed_mlp = true;
    every.sliding_window = 16;
    every.prism_expansion_ratio = 2;
    every.prism_freq_multiplier = 3.0;
    every.top_k = 1;
    every.top_k_primary_weight = 1.0;
    every.use_shared_routed_gates = false;
    every.shared_gate_init = 1.0;
    every.routed_gate_init = 1.0;
    every.shared_output_scale = 1.0;
    every.routed_output_scale = 1.0;
    every.routing_strategy = "modulo_cyclic";
    every.source_mlp_type = "token_routed";
    auto keys_of = [](const Json& object) {
        std::vector<std::string> out;
        for (const auto& member : object.as_object()) out.push_back(member.first);
        return out;
    };
    std::vector<std::string> expected = names(cpx::io::complexity_keys);
    std::erase(expected, "rms_norm_eps");
    CHECK(keys_of(cpx::io::to_json(every)) == expected);
    CHECK(cpx::io::parse_complexity_config(cpx::io::to_json(every).dump()) == every);

    PrismJsonConfig prism = cpx::io::prism_json_config<presets::PrismMini>();
    prism.prism_lambda_start = 0.8;
    prism.prism_lambda_end = 0.2;
    prism.rope_theta = 500000.0;
    prism.layer_norm_eps = 1e-6;
    CHECK(keys_of(cpx::io::to_json(prism)) == names(cpx::io::prism_keys));
    CHECK(cpx::io::parse_prism_config(cpx::io::to_json(prism).dump()) == prism);
}

TEST_CASE("a key of the wrong type is a FormatError naming the key") {
    CHECK_THROWS_WITH_AS(run2_with({{"hidden_size", "768"}}),
                         "config.json: key 'hidden_size' must be an integer, found string \"768\"", FormatError);
    CHECK_THROWS_WITH_AS(run2_with({{"num_experts", 4.0}}),
                         "config.json: key 'num_experts' must be an integer, found number 4.0", FormatError);
    CHECK_THROWS_WITH_AS(run2_with({{"use_qk_norm", 1}}),
                         "config.json: key 'use_qk_norm' must be true or false, found number 1", FormatError);
    CHECK_THROWS_WITH_AS(run2_with({{"rope_theta", "1e4"}}),
                         "config.json: key 'rope_theta' must be a number, found string \"1e4\"", FormatError);
    CHECK_THROWS_WITH_AS(run2_with({{"mlp_type", Json(Json::Array{})}}),
                         "config.json: key 'mlp_type' must be a string, found array []", FormatError);
    CHECK_THROWS_WITH_AS(run2_with({{"extra_config", 3}}),
                         "config.json: key 'extra_config' must be an object, found number 3", FormatError);
    CHECK_THROWS_WITH_AS(cpx::io::parse_complexity_config("[1]"),
                         "config.json: expected a JSON object at the top level, found array", FormatError);
    CHECK_THROWS_WITH_AS(cpx::io::parse_complexity_config("{\"a\": }"),
                         "config.json:1:7: syntax error while parsing value - unexpected '}'; expected '[', '{', or a literal",
                         FormatError);
}

// ------------------------------------------------------------------ COMPLEXITY-DEEP: what is checked

TEST_CASE("values the library cannot run are reported as unsupported") {
    const auto c = run2_with({{"attention_type", "mla"}, {"use_qk_norm", false}, {"sliding_window", 4096},
                              {"rope_type", "yarn"}, {"hidden_act", "gelu"}, {"norm_type", "layernorm"},
                              {"tie_word_embeddings", false}, {"mlp_type", "gelu"}});
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(c) ==
          Lines{"attention_type: \"mla\" is not supported (only gqa, mha, mqa and prism)",
                "use_qk_norm: false is not supported (the library always applies QK-norm, as the trained models do)",
                "sliding_window: 4096 is not supported (only full causal attention)",
                "rope_type: \"yarn\" is not supported (only standard and linear)",
                "mlp_type: \"gelu\" is not supported (only token_routed, swiglu and mixtral)",
                "hidden_act: \"gelu\" is not supported (the SwiGLU experts use silu)",
                "norm_type: \"layernorm\" is not supported (only rmsnorm)",
                "tie_word_embeddings: false is not supported (the output head is the tied embedding)"});
}

TEST_CASE("keys that do not change inference are not checked") {
    const auto c = run2_with({{"attention_dropout", 0.1}, {"use_sdpa", false}, {"use_cache", false},
                              {"initializer_range", 0.5}, {"attention_type", "mha"},
                              {"extra_config", Json(Json::Object{{"note", "x"}})}, {"model_type", "deep"}});
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(c).empty());
}

TEST_CASE("absent dimensions are reported; other absent keys take the framework's defaults") {
    const auto bare = cpx::io::parse_complexity_config(
        R"({"hidden_size": 768, "num_hidden_layers": 18, "intermediate_size": 2048, "vocab_size": 32000,)"
        R"( "num_attention_heads": 12, "num_key_value_heads": 4, "max_position_embeddings": 2048,)"
        R"( "mlp_type": "token_routed", "num_experts": 4, "use_mu_guidance": true})");
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(bare).empty());
    const auto empty = cpx::io::parse_complexity_config("{}");
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(empty) ==
          Lines{"hidden_size: absent, compiled 768", "num_hidden_layers: absent, compiled 18",
                "intermediate_size: absent, compiled 2048", "vocab_size: absent, compiled 32000",
                "num_attention_heads: absent, compiled 12", "num_key_value_heads: absent, compiled 4",
                "max_position_embeddings: absent, compiled 2048", "mlp_type: absent, compiled \"token_routed\"",
                "num_experts: checkpoint 1 (absent: the default), compiled 4",
                "use_mu_guidance: checkpoint false (absent: the default), compiled true"});
    // null reads as absent
    CHECK(run2_with({{"hidden_size", nullptr}}).hidden_size == std::nullopt);
}

TEST_CASE("mu guidance runs when use_mu_guidance or use_mu_projection is set and disable_mu_guidance is not") {
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(
              run2_with({{"use_mu_guidance", false}, {"use_mu_projection", true}}))
              .empty());
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(run2_with({{"disable_mu_guidance", true}})) ==
          Lines{"use_mu_guidance: checkpoint false (use_mu_guidance true, use_mu_projection false, "
                "disable_mu_guidance true), compiled true"});
    CHECK(cpx::io::config_mismatches<presets::ComplexityNoMu177M>(run2_with({{"disable_mu_guidance", true}})).empty());
}

TEST_CASE("shared_intermediate_size null means the expert width") {
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(run2_with({{"shared_intermediate_size", 512}}))
              .empty());
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(run2_with({{"shared_intermediate_size", 768}})) ==
          Lines{"shared_intermediate_size: checkpoint 768, compiled 512"});
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(run2_with({{"shared_expert", false}})) ==
          Lines{"shared_expert: checkpoint false, compiled true"});

    const auto tiny = cpx::io::complexity_json_config<TinyWideShared>();
    CHECK(tiny.shared_intermediate_size == 96);
    auto tiny_null = tiny;
    tiny_null.shared_intermediate_size.reset();
    CHECK(cpx::io::config_mismatches<TinyWideShared>(tiny_null) ==
          Lines{"shared_intermediate_size: checkpoint null (the expert width), compiled 96"});
}

TEST_CASE("linear RoPE scaling is written as rope_type linear with a rope_scaling factor, and checked") {
    const auto c = cpx::io::complexity_json_config<TinyLinearRope>();
    CHECK(c.rope_type == "linear");
    CHECK(c.rope_scaling_type == "linear");
    CHECK(c.rope_scaling_factor == 2.0);
    const std::string text = cpx::io::complexity_config_json<TinyLinearRope>();
    CHECK(text.find("\"rope_theta\": 500000.0,\n  \"rope_type\": \"linear\",\n  \"rope_scaling\": {\n"
                    "    \"type\": \"linear\",\n    \"factor\": 2.0\n  },") != std::string::npos);
    CHECK(text.find("\"norm_eps\": 1e-05") != std::string::npos);
    check_round_trip<TinyLinearRope>();

    auto unscaled = c;
    unscaled.rope_type = "standard";
    unscaled.rope_scaling_type.reset();
    unscaled.rope_scaling_factor.reset();
    CHECK(cpx::io::config_mismatches<TinyLinearRope>(unscaled) ==
          Lines{"rope_scaling.factor: checkpoint 1.0, compiled 2.0"});
    auto no_factor = unscaled;
    no_factor.rope_type = "linear";
    CHECK(cpx::io::config_mismatches<TinyLinearRope>(no_factor) ==
          Lines{"rope_type: \"linear\" needs rope_scaling.factor, which is absent"});
    auto dynamic = c;  // another interpolation than the linear one the library runs
    dynamic.rope_scaling_type = "dynamic";
    CHECK(cpx::io::config_mismatches<TinyLinearRope>(dynamic) ==
          Lines{"rope_scaling: \"dynamic\" is not supported (only linear position interpolation)"});
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(run2_with({{"rope_theta", 500000.0}})) ==
          Lines{"rope_theta: checkpoint 500000.0, compiled 10000.0"});
    CHECK_THROWS_WITH_AS(run2_with({{"rope_scaling", Json(Json::Object{{"factor", 2.0}})}}),
                         "config.json: key 'rope_scaling' needs \"type\" and \"factor\", found {\"factor\":2.0}",
                         FormatError);
}

TEST_CASE("PRISM attention in a COMPLEXITY-DEEP stack is written as attention_type prism with its parameters") {
    const auto c = cpx::io::complexity_json_config<TinyPrismAttention>();
    CHECK(c.attention_type == "prism");
    CHECK(c.prism_expansion_ratio == 3);
    CHECK(c.prism_freq_multiplier == 2.0);
    check_round_trip<TinyPrismAttention>();
    auto other = c;
    other.prism_expansion_ratio = 2;
    other.prism_freq_multiplier.reset();
    CHECK(cpx::io::config_mismatches<TinyPrismAttention>(other) ==
          Lines{"prism_expansion_ratio: checkpoint 2, compiled 3",
                "prism_freq_multiplier: checkpoint 3.1415926535 (absent: the default), compiled 2.0"});
    auto gqa = c;
    gqa.attention_type = "gqa";
    CHECK(cpx::io::config_mismatches<TinyPrismAttention>(gqa) ==
          Lines{"attention_type: checkpoint \"gqa\", compiled \"prism\""});
    // And the other way: a PRISM checkpoint's config against a model compiled with GQA.
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(run2_with({{"attention_type", "prism"}})) ==
          Lines{"attention_type: checkpoint \"prism\", compiled \"gqa\""});
}

// ------------------------------------------------------------------ COMPLEXITY-DEEP: writing

TEST_CASE("ComplexityDeep187M is written exactly as run2's config.json, in the authors' key order") {
    // Python 3.11: json.dumps(run2, indent=2) + "\n", run2 being docs/MODELS.md §13's dict.
    CHECK(cpx::io::complexity_config_json<presets::ComplexityDeep187M>() ==
          "{\n  \"hidden_size\": 768,\n  \"num_hidden_layers\": 18,\n  \"intermediate_size\": 2048,\n"
          "  \"vocab_size\": 32000,\n  \"num_attention_heads\": 12,\n  \"num_key_value_heads\": 4,\n"
          "  \"attention_type\": \"gqa\",\n  \"attention_dropout\": 0.0,\n  \"use_qk_norm\": true,\n"
          "  \"sliding_window\": null,\n  \"max_position_embeddings\": 2048,\n  \"rope_theta\": 10000.0,\n"
          "  \"rope_type\": \"standard\",\n  \"mlp_type\": \"token_routed\",\n  \"hidden_act\": \"silu\",\n"
          "  \"num_experts\": 4,\n  \"shared_expert\": true,\n  \"shared_intermediate_size\": null,\n"
          "  \"use_mu_guidance\": true,\n  \"use_mu_projection\": false,\n  \"disable_mu_guidance\": false,\n"
          "  \"norm_type\": \"rmsnorm\",\n  \"norm_eps\": 1e-06,\n  \"tie_word_embeddings\": true,\n"
          "  \"use_sdpa\": true,\n  \"use_cache\": true,\n  \"initializer_range\": 0.02,\n  \"extra_config\": {}\n}\n");
    CHECK(cpx::io::parse_complexity_config(cpx::io::complexity_config_json<presets::ComplexityDeep187M>()) ==
          cpx::io::parse_complexity_config(run2_json));
}

TEST_CASE("every COMPLEXITY-DEEP preset's config.json parses back to the same values with no mismatch") {
    check_round_trip<presets::ComplexityDeep187M>();
    check_round_trip<presets::ComplexityDense171M>();
    check_round_trip<presets::ComplexityNoMu177M>();
    check_round_trip<presets::ComplexityLearnedRouter187M>();
    check_round_trip<presets::ComplexityDeep384M>();
    check_round_trip<presets::ComplexityDense384M>();
    check_round_trip<presets::ComplexityPilot1_5B>();
    check_round_trip<presets::TinyComplexity>();
    check_round_trip<presets::TinyDense>();
    check_round_trip<presets::TinyLearnedRouter>();
    check_round_trip<TinyWideShared>();
    const auto router = cpx::io::complexity_json_config<presets::ComplexityLearnedRouter187M>();
    CHECK(router.mlp_type == "mixtral");
    const auto dense = cpx::io::complexity_json_config<presets::ComplexityDense171M>();
    CHECK(dense.mlp_type == "swiglu");
    CHECK(dense.num_experts == 1);
    CHECK(dense.shared_expert == true);  // run1 keeps the unused default, as the spec records
    CHECK(cpx::io::complexity_json_config<presets::ComplexityDense384M>().shared_expert == false);
}

TEST_CASE("unrecognised keys are kept in order and written back after the known ones") {
    const auto c = run2_with({{"route_hash_count", 2}, {"lsh_routing", "zipf"}});
    CHECK(c.unrecognized.dump() == "{\"route_hash_count\":2,\"lsh_routing\":\"zipf\"}");
    const std::string out = cpx::io::to_json(c).dump();
    CHECK(out.ends_with("\"extra_config\":{},\"route_hash_count\":2,\"lsh_routing\":\"zipf\"}"));
    CHECK(cpx::io::config_mismatches<presets::ComplexityDeep187M>(c).empty());
}

TEST_CASE("config files are read from disk with errors naming the path") {
    cpx::testing::TempDir dir;
    const auto good = dir.write("config.json", cpx::io::complexity_config_json<presets::ComplexityDeep384M>());
    CHECK(cpx::io::check_config_file<presets::ComplexityDeep384M>(good).hidden_size == 1024);
    CHECK_THROWS_WITH_AS(cpx::io::check_config_file<presets::ComplexityDeep187M>(good),
                         (good.string() +
                          " does not match the compiled configuration (5 problems):\n"
                          "  hidden_size: checkpoint 1024, compiled 768\n"
                          "  num_hidden_layers: checkpoint 20, compiled 18\n"
                          "  intermediate_size: checkpoint 3200, compiled 2048\n"
                          "  num_attention_heads: checkpoint 16, compiled 12\n"
                          "  max_position_embeddings: checkpoint 4096, compiled 2048")
                             .c_str(),
                         ShapeError);
    const auto bad = dir.write("bad.json", "{\"hidden_size\": true}");
    CHECK_THROWS_WITH_AS(cpx::io::read_complexity_config(bad),
                         (bad.string() + ": key 'hidden_size' must be an integer, found boolean true").c_str(),
                         FormatError);
    CHECK_THROWS_AS(cpx::io::read_complexity_config(dir / "missing.json"), cpx::Error);
}

// ------------------------------------------------------------------ PRISM

namespace {
// The reference training config (config/train_prism_tiny.py) as a checkpoint's model_args.
constexpr std::string_view prism_mini_json =
    R"({"n_layer": 8, "n_head": 8, "n_embd": 512, "block_size": 512, "bias": true, "vocab_size": 50304,)"
    R"( "dropout": 0.1, "prism_expansion_ratio": 2, "prism_freq_multiplier": 3.1415926535,)"
    R"( "prism_lambda_start": 0.01, "prism_lambda_end": 0.1})";
}  // namespace

TEST_CASE("the reference PRISM-mini config matches PrismMini; dropout and the lambda schedule are not checked") {
    const PrismJsonConfig c = cpx::io::parse_prism_config(prism_mini_json);
    CHECK(c.n_layer == 8);
    CHECK(c.n_head == 8);
    CHECK(c.n_embd == 512);
    CHECK(c.block_size == 512);
    CHECK(c.vocab_size == 50304);
    CHECK(c.bias == true);
    CHECK(c.dropout == 0.1);
    CHECK(c.prism_expansion_ratio == 2);
    CHECK(c.prism_freq_multiplier == 3.1415926535);
    CHECK(c.prism_lambda_start == 0.01);
    CHECK(c.prism_lambda_end == 0.1);
    CHECK(c.unrecognized.size() == 0);
    CHECK(cpx::io::config_mismatches<presets::PrismMini>(c).empty());
    CHECK_NOTHROW(cpx::io::check_config<presets::PrismMini>(c));
}

TEST_CASE("the PRISM-mini config against TinyPrism lists every differing key") {
    const PrismJsonConfig c = cpx::io::parse_prism_config(prism_mini_json);
    const Lines expected{"block_size: checkpoint 512, compiled 48", "vocab_size: checkpoint 50304, compiled 101",
                         "n_layer: checkpoint 8, compiled 2", "n_head: checkpoint 8, compiled 2",
                         "n_embd: checkpoint 512, compiled 32"};
    CHECK(cpx::io::config_mismatches<presets::TinyPrism>(c) == expected);
    CHECK_THROWS_AS(cpx::io::check_config<presets::TinyPrism>(c), ShapeError);
}

TEST_CASE("PrismMini is written in GPTConfig's key order and parses back to the same values") {
    // Python 3.11: json.dumps(dict in GPTConfig order, indent=2) + "\n".
    CHECK(cpx::io::prism_config_json<presets::PrismMini>() ==
          "{\n  \"block_size\": 512,\n  \"vocab_size\": 50304,\n  \"n_layer\": 8,\n  \"n_head\": 8,\n"
          "  \"n_embd\": 512,\n  \"dropout\": 0.0,\n  \"bias\": true,\n  \"prism_expansion_ratio\": 2,\n"
          "  \"prism_freq_multiplier\": 3.1415926535\n}\n");
    for (const std::string& text :
         {cpx::io::prism_config_json<presets::PrismMini>(), cpx::io::prism_config_json<presets::TinyPrism>()}) {
        const auto back = cpx::io::parse_prism_config(text);
        CHECK(cpx::io::to_json(back).dump(2) + "\n" == text);
    }
    CHECK(cpx::io::parse_prism_config(cpx::io::prism_config_json<presets::TinyPrism>()) ==
          cpx::io::prism_json_config<presets::TinyPrism>());
    CHECK(cpx::io::config_mismatches<presets::TinyPrism>(cpx::io::prism_json_config<presets::TinyPrism>()).empty());
}

TEST_CASE("PRISM settings beyond the reference code are written as extension keys and checked") {
    using NoBiasTheta = cpx::PrismConfig<cpx::PrismDims{
        .n_layer = 2, .n_head = 2, .n_embd = 32, .vocab_size = 101, .block_size = 48, .prism_expansion_ratio = 1,
        .prism_freq_multiplier = 2.0, .rope_theta = 50000.0, .bias = false, .layer_norm_eps = 1e-6}>;
    const auto c = cpx::io::prism_json_config<NoBiasTheta>();
    CHECK(c.rope_theta == 50000.0);
    CHECK(c.layer_norm_eps == 1e-6);
    CHECK(cpx::io::config_mismatches<NoBiasTheta>(c).empty());
    const auto reference = cpx::io::parse_prism_config(
        R"({"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 48, "vocab_size": 101})");
    CHECK(cpx::io::config_mismatches<NoBiasTheta>(reference) ==
          Lines{"bias: checkpoint true (absent: the reference's value), compiled false",
                "prism_expansion_ratio: checkpoint 2 (absent: the reference's value), compiled 1",
                "prism_freq_multiplier: checkpoint 3.1415926535 (absent: the reference's value), compiled 2.0",
                "rope_theta: checkpoint 10000.0 (absent: the reference's value), compiled 50000.0",
                "layer_norm_eps: checkpoint 1e-05 (absent: the reference's value), compiled 1e-06"});
    using RotateHalf = cpx::PrismConfig<cpx::PrismDims{
        .n_layer = 2, .n_head = 2, .n_embd = 32, .vocab_size = 101, .block_size = 48,
        .rope_convention = cpx::RopeConvention::rotate_half}>;
    CHECK(cpx::io::config_mismatches<RotateHalf>(cpx::io::prism_json_config<RotateHalf>()) ==
          Lines{"rope convention: checkpoint interleaved pairs (fixed by the reference code), compiled rotate_half"});
}

TEST_CASE("PRISM config keys of the wrong type or absent dimensions are reported by name") {
    CHECK_THROWS_WITH_AS(cpx::io::parse_prism_config(R"({"n_head": "8"})"),
                         "config.json: key 'n_head' must be an integer, found string \"8\"", FormatError);
    CHECK_THROWS_WITH_AS(cpx::io::parse_prism_config(R"({"bias": "yes"})", "ckpt/config.json"),
                         "ckpt/config.json: key 'bias' must be true or false, found string \"yes\"", FormatError);
    const auto partial = cpx::io::parse_prism_config(R"({"n_layer": 2, "n_head": 2, "n_embd": 32, "extra": 1})");
    CHECK(partial.unrecognized.dump() == "{\"extra\":1}");
    CHECK(cpx::io::config_mismatches<presets::TinyPrism>(partial) ==
          Lines{"block_size: absent, compiled 48", "vocab_size: absent, compiled 101"});
    cpx::testing::TempDir dir;
    const auto path = dir.write("config.json", cpx::io::prism_config_json<presets::TinyPrism>());
    CHECK(cpx::io::check_config_file<presets::TinyPrism>(path).n_embd == 32);
    CHECK_THROWS_AS(cpx::io::check_config_file<presets::PrismMini>(path), ShapeError);
}

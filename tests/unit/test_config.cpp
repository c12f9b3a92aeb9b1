// Configuration types and their derived figures, checked against the spec's counts.
#include <doctest/doctest.h>

#include <cpx/config/model_counts.hpp>
#include <cpx/config/describe.hpp>
#include <cpx/config/presets.hpp>

using namespace cpx;
using namespace cpx::presets;

// Parameter counts from docs/MODELS.md §3.
static_assert(parameter_count<ComplexityDeep187M>() == 187'412'736);
static_assert(parameter_count<ComplexityDense171M>() == 170'809'344);
static_assert(parameter_count<ComplexityNoMu177M>() == 176'781'312);
static_assert(parameter_count<ComplexityLearnedRouter187M>() == 187'468'032);
static_assert(parameter_count<ComplexityDeep384M>() == 383'451'648);
static_assert(parameter_count<ComplexityDense384M>() == 384'454'144);

TEST_CASE("parameter counts match the spec for every paper configuration") {
    CHECK(parameter_count<ComplexityDeep187M>() == 187'412'736);
    CHECK(parameter_count<ComplexityDense171M>() == 170'809'344);
    CHECK(parameter_count<ComplexityNoMu177M>() == 176'781'312);
    CHECK(parameter_count<ComplexityLearnedRouter187M>() == 187'468'032);
    CHECK(parameter_count<ComplexityDeep384M>() == 383'451'648);
    CHECK(parameter_count<ComplexityDense384M>() == 384'454'144);
}

TEST_CASE("active parameters of the 384M token-routed model match the spec (236.0M / 203.2M)") {
    // docs/MODELS.md §3: 1 of 4 experts + shared + attention + mu = 236.0M with embeddings, 203.2M without.
    CHECK(active_parameters<ComplexityDeep384M>(true) == 235'995'648);
    CHECK(active_parameters<ComplexityDeep384M>(false) == 203'227'648);
    // A dense model touches all its live weights; the dead mu_to_* are not live.
    CHECK(active_parameters<ComplexityDense384M>() ==
          parameter_count<ComplexityDense384M>() - 20LL * 1024 * (1024 + 2 * 256));
}

TEST_CASE("the pilot and PRISM-mini presets are the sizes their papers state") {
    // The pilot's shapes in the final paper's modules: 1.52B live weights plus the 151M mu_to_*
    // projections the final code always instantiates (the pilot paper rounds to "1.5B").
    CHECK(parameter_count<ComplexityPilot1_5B>() == 1'676'255'232);
    CHECK(active_parameters<ComplexityPilot1_5B>() + 24LL * 3 * (3 * 2048 * 2048) ==
          1'525'260'288);
    // PRISM paper: ~50M parameters for the 8-layer, d=512, R=2 model.
    CHECK(parameter_count<PrismMini>() > 49'000'000);
    CHECK(parameter_count<PrismMini>() < 53'000'000);
}

TEST_CASE("derived dimensions") {
    using C = ComplexityDeep187M;
    CHECK(C::head_dim == 64);
    CHECK(C::groups == 3);
    CHECK(C::expert_width == 512);
    CHECK(C::shared_width == 512);
    CHECK(C::kv_width == 256);
    CHECK(ComplexityDeep384M::groups == 4);
    CHECK(ComplexityDeep384M::expert_width == 800);
    CHECK(ComplexityDense171M::shared_width == 0);  // dense models carry no shared expert
    CHECK(PrismMini::head_dim == 128);
    CHECK(PrismMini::u_rows == 2048);
    CHECK(PrismMini::signal_rope.theta == doctest::Approx(31415.926535));
    CHECK(PrismMini::noise_rope.theta == doctest::Approx(3183.0988618));
}

TEST_CASE("FLOPs per token: twice the active GEMM weights plus attention") {
    using C = ComplexityDeep187M;
    // Hand count for run2 at context 1: per layer q,k,v (+ mu terms) and o, one expert + shared,
    // attention 2*heads*hd*ctx MACs; plus the tied head and 17 mu projections.
    const count_t d = 768, qkv = d * (768 + 2 * 256);
    const count_t per_layer = 2 * qkv + 768 * d + 2 * 3 * 512 * d + 2 * 12 * 64 * 1;
    const count_t expected = 2 * (18 * per_layer + 32000 * d + 17 * d * d);
    CHECK(flops_per_token<C>(1) == expected);
    // Attention cost grows linearly with context: 4 * heads * hd FLOPs per layer per key.
    CHECK(flops_per_token<C>(1025) - flops_per_token<C>(1) == 18LL * 4 * 12 * 64 * 1024);
}

TEST_CASE("describe() writes a configuration with its field names, numbers read back exactly") {
    const std::string c = cpx::describe(cpx::presets::TinyComplexity::dims);
    CHECK(c.starts_with("ComplexityDims{.hidden_size = 64, .num_hidden_layers = 3, .num_attention_heads = 4"));
    CHECK(c.find(".mlp = MlpKind::token_routed, .num_experts = 4") != std::string::npos);
    CHECK(c.find(".norm_eps = 1e-06") != std::string::npos);
    CHECK(c.find("prism_") == std::string::npos);  // PRISM fields only for PRISM attention
    CHECK(cpx::describe(cpx::presets::TinyComplexityPrism::dims).find(".prism_expansion_ratio = 2") != std::string::npos);
    const std::string p = cpx::describe(cpx::presets::TinyPrism::dims);
    CHECK(p == "PrismDims{.n_layer = 2, .n_head = 2, .n_embd = 32, .vocab_size = 101, .block_size = 48, "
               ".prism_expansion_ratio = 2, .prism_freq_multiplier = 3.1415926535, .rope_theta = 10000, "
               ".rope_convention = RopeConvention::interleaved_pairs, .bias = true, .layer_norm_eps = 1e-05}");
}

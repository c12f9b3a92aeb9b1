// Layer-by-layer FLOP counts: they add up to the whole-model count of every
// preset, and each one is the hand count of its layer. Decode bytes: the active
// parameters plus the KV cache.
#include <doctest/doctest.h>

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>

#include <initializer_list>

using namespace cpx;
using namespace cpx::presets;

namespace {

template <ComplexityConfigType C>
constexpr count_t sum_of_layers(count_t context) {
    return C::layers * (attention_flops_per_token<C>(context) + mlp_flops_per_token<C>()) +
           (C::layers - 1) * mu_guidance_flops_per_token<C>() + head_flops_per_token<C>();
}

template <PrismConfigType C>
constexpr count_t sum_of_layers(count_t context) {
    return C::layers * (attention_flops_per_token<PrismAttentionOf<C>>(context) + mlp_flops_per_token<C>()) +
           head_flops_per_token<C>();
}

template <class C>
constexpr bool adds_up() {
    for (count_t ctx : {1, 17, 512, 2048})
        if (sum_of_layers<C>(ctx) != flops_per_token<C>(ctx)) return false;
    return true;
}

// A COMPLEXITY-DEEP-style decoder with PRISM attention (the layer counts must cover it too).
using ComplexityWithPrism = ComplexityConfig<ComplexityDims{
    .hidden_size = 256, .num_hidden_layers = 2, .num_attention_heads = 4, .num_key_value_heads = 4,
    .intermediate_size = 512, .vocab_size = 1000, .max_position_embeddings = 128,
    .mlp = MlpKind::token_routed, .num_experts = 4, .use_mu_guidance = false, .attention = AttentionKind::prism}>;

}  // namespace

TEST_CASE("layer FLOPs add up to the whole-model FLOPs of every preset") {
    static_assert(adds_up<ComplexityDeep187M>());
    static_assert(adds_up<ComplexityDense171M>());
    static_assert(adds_up<ComplexityNoMu177M>());
    static_assert(adds_up<ComplexityLearnedRouter187M>());
    static_assert(adds_up<ComplexityDeep384M>());
    static_assert(adds_up<ComplexityDense384M>());
    static_assert(adds_up<ComplexityPilot1_5B>());
    static_assert(adds_up<ComplexityWithPrism>());
    static_assert(adds_up<PrismMini>());
    static_assert(adds_up<TinyPrism>());
    CHECK(adds_up<TinyComplexity>());
    CHECK(adds_up<TinyLearnedRouter>());
}

TEST_CASE("the 384M MLPs of Table 3: one routed expert + shared vs the dense MLP") {
    // Token-routed: 3 matrices of 800 x 1024 for the expert and again for the shared one.
    CHECK(mlp_flops_per_token<ComplexityDeep384M>() == 2LL * 2 * 3 * 800 * 1024);
    CHECK(mlp_flops_per_token<ComplexityDense384M>() == 2LL * 3 * 4358 * 1024);
    // The active-FLOP ratio the paper's iso-parameter comparison rests on: 1600 / 4358.
    const double ratio = static_cast<double>(mlp_flops_per_token<ComplexityDeep384M>()) /
                         static_cast<double>(mlp_flops_per_token<ComplexityDense384M>());
    CHECK(ratio == doctest::Approx(1600.0 / 4358.0));
    // The learned router adds its E x d logits.
    CHECK(mlp_flops_per_token<ComplexityLearnedRouter187M>() - mlp_flops_per_token<ComplexityDeep187M>() ==
          2LL * 4 * 768);
}

TEST_CASE("attention FLOPs: projections (mu doubles q/k/v) plus 4 * heads * head_dim per key") {
    using Mu = ComplexityDeep187M;
    using NoMu = ComplexityNoMu177M;
    const count_t qkv = 768LL * (768 + 2 * 256), o = 768LL * 768;
    CHECK(attention_flops_per_token<Mu>(0) == 2 * (2 * qkv + o));
    CHECK(attention_flops_per_token<NoMu>(0) == 2 * (qkv + o));
    CHECK(attention_flops_per_token<Mu>(100) - attention_flops_per_token<Mu>(0) == 4LL * 12 * 64 * 100);
    // PRISM-mini: U is [2HD, d] = [2048, 512], used twice; 2H = 16 heads of D = 128.
    using P = PrismAttentionOf<PrismMini>;
    CHECK(attention_flops_per_token<P>(0) == 2LL * 2 * 2048 * 512);
    CHECK(attention_flops_per_token<P>(10) - attention_flops_per_token<P>(0) == 4LL * 16 * 128 * 10);
    CHECK(mu_guidance_flops_per_token<Mu>() == 2LL * 768 * 768);
    CHECK(mu_guidance_flops_per_token<NoMu>() == 0);
    CHECK(head_flops_per_token<PrismMini>() == 2LL * 50304 * 512);
}

TEST_CASE("an unfinished last-layer row needs its layer's keys and values alone (PRISM: the whole h projection)") {
    using Mu = ComplexityDeep187M;
    const count_t kv = 2LL * 2 * 768 * (2 * 256);  // the k and v rows of the stacked [a | mu] product
    for (count_t ctx : {1, 300, 2048}) {
        CHECK(unfinished_row_flops<Mu>(ctx) ==
              attention_flops_per_token<Mu>(ctx) + mlp_flops_per_token<Mu>() - kv);
        CHECK(unfinished_row_flops<ComplexityNoMu177M>(ctx) ==
              attention_flops_per_token<ComplexityNoMu177M>(ctx) + mlp_flops_per_token<ComplexityNoMu177M>() -
                  2LL * 768 * (2 * 256));
        CHECK(unfinished_row_flops<ComplexityWithPrism>(ctx) ==
              attention_flops_per_token<ComplexityWithPrism>(ctx) + mlp_flops_per_token<ComplexityWithPrism>() -
                  2LL * (2 * ComplexityWithPrism::heads * ComplexityWithPrism::prism_head_dim) * 256);
        using P = PrismAttentionOf<PrismMini>;
        CHECK(unfinished_row_flops<PrismMini>(ctx) ==
              attention_flops_per_token<P>(ctx) + mlp_flops_per_token<PrismMini>() - 2LL * 2048 * 512);
    }
}

TEST_CASE("decode bytes: the active parameters a step reads (not the last mu projection) plus the KV cache") {
    auto check = [](auto config) {
        using C = decltype(config);
        const count_t unused_mu = C::use_mu ? count_t{C::hidden} * C::hidden : 0;
        CHECK(decode_step_bytes<C>(1, 0, 0, 4) == 4.0 * double(active_parameters<C>() - unused_mu));
        const double kv = 3.0 * C::layers * 2 * C::kv_width * 100 * 2;  // 3 sequences, 100 positions, bf16
        CHECK(decode_step_bytes<C>(1, 3, 100, 2) - decode_step_bytes<C>(1, 0, 0, 2) == kv);
        // bf16 packs of fp32 weights beside an fp32 cache: the matrices at 2 bytes, the cache at 4.
        CHECK(decode_step_bytes<C>(1, 3, 100, 2, 4) - decode_step_bytes<C>(1, 0, 0, 2) == 2 * kv);
    };
    check(ComplexityDeep187M{});
    check(ComplexityNoMu177M{});
    check(ComplexityDense384M{});
    check(ComplexityDeep384M{});
    // Each further distinct expert of a batch adds one expert's three matrices.
    using C = ComplexityDeep187M;
    CHECK(decode_step_bytes<C>(3, 4, 0, 2) - decode_step_bytes<C>(1, 4, 0, 2) ==
          2.0 * 2 * C::layers * 3.0 * C::expert_width * C::hidden);
}

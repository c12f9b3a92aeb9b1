// The composition: a COMPLEXITY-DEEP decoder (RMSNorm, token-routed MLP with a
// shared expert) whose attention is PRISM's, chosen by template arguments
// alone, against the double-precision references of both architectures.
#include <doctest/doctest.h>

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/checkpoint.hpp>
#include <cpx/models/complexity/model.hpp>

#include "complexity_reference.hpp"
#include "complexity_test_weights.hpp"
#include "last_rows_check.hpp"
#include "temp_dir.hpp"
#include "test_support.hpp"

using namespace cpx;
using C = presets::TinyComplexityPrism;

static_assert(C::attention == AttentionKind::prism);
static_assert(KVCacheShape<C>::heads == 8 && KVCacheShape<C>::head_dim == 32, "2H heads of D = (d/H) R");

TEST_CASE("the PRISM-attention decoder matches the double reference within 1e-4") {
    ComplexityModel<C> model(testing::test_weights<C>(1));
    const auto ref = testing::reference_weights(model.weights());
    for (std::size_t t : {1u, 23u, 64u}) {
        const auto tokens = testing::random_tokens(t, C::vocab, 2 + t);
        // fp32, two layers, 4 + 4 heads over <= 64 keys, routed experts: ~1e-6 observed.
        CHECK_MESSAGE(testing::relative_error(model.forward(tokens), testing::reference_logits<C>(ref, tokens)) < 1e-4,
                      "length ", t);
    }
}

TEST_CASE("bf16 weights compute in fp32 from the rounded values") {
    ComplexityModel<C, bf16> model(testing::test_weights<C, bf16>(3));
    const auto ref = testing::reference_weights(model.weights());
    const auto tokens = testing::random_tokens(30, C::vocab, 4);
    CHECK(testing::relative_error(model.forward(tokens), testing::reference_logits<C>(ref, tokens)) < 1e-4);
}

TEST_CASE("decode through the KV cache and chunked prefill equal the full forward pass") {
    ComplexityModel<C> model(testing::test_weights<C>(5));
    const auto tokens = testing::random_tokens(40, C::vocab, 6);
    const auto full = model.forward(tokens);
    KVCache<C> stepwise(64), chunked(64);
    std::vector<float> a(40 * C::vocab), b(40 * C::vocab);
    for (std::size_t t = 0; t < 40; ++t)
        model.extend(stepwise, TokenSpan(tokens).subspan(t, 1), LogitsAt::all,
                     cpu::rows_of(a.data() + t * C::vocab, 1, C::vocab));
    std::size_t at = 0;
    for (std::size_t len : {9u, 30u, 1u}) {
        model.extend(chunked, TokenSpan(tokens).subspan(at, len), LogitsAt::all,
                     cpu::rows_of(b.data() + at * C::vocab, static_cast<index_t>(len), C::vocab));
        at += len;
    }
    CHECK(testing::relative_error(a, full) < 1e-5);
    CHECK(testing::relative_error(b, full) < 1e-5);
}

TEST_CASE("a prefill returning the last logits or none fills the caches as one returning every row") {
    ComplexityModel<C> model(testing::test_weights<C>(7));
    testing::check_last_rows_prefill<KVCache<C>>(model, C::vocab, C::layers, 8);
}

TEST_CASE("its weights: U orthogonal at init, lambda at the schedule's start, parameters as counted") {
    const auto w = ComplexityWeights<C>::random(7);
    const int rows = 2 * C::heads * C::prism_head_dim, d = C::hidden;
    const auto& u = w.layers[1].attention.u;
    double worst = 0;
    for (int a = 0; a < d; ++a)
        for (int b = 0; b < d; ++b) {
            double dot = 0;
            for (int r = 0; r < rows; ++r) dot += double(u[r * d + a]) * u[r * d + b];
            worst = std::max(worst, std::abs(dot - (a == b ? 1.0 : 0.0)));
        }
    CHECK(worst < 1e-5);
    CHECK(w.layers[0].attention.lambda == doctest::Approx(0.01));
    static_assert(std::is_same_v<ComplexityWeights<C>::AttentionParams, cpx::PrismAttentionParams<C, float>>);
    count_t total = 0;
    int lambdas = 0;
    for (const auto& s : w.slots()) {
        total += s.elements();
        lambdas += s.name.ends_with("lambda_q");
    }
    CHECK(lambdas == C::layers);
    CHECK(total - lambdas == parameter_count<C>());
}

TEST_CASE("the attention-distance observer works on the composed decoder too") {
    ComplexityModel<C> model(testing::test_weights<C>(9));
    cpu::AttentionDistance distance(C::layers, 2 * C::heads);
    model.attach(distance);
    const auto tokens = testing::random_tokens(16, C::vocab, 10);
    model.forward(tokens, LogitsAt::last);
    for (int l = 0; l < C::layers; ++l)
        for (int h = 0; h < 2 * C::heads; ++h) CHECK(distance.queries(l, h) == 16);
    cpu::AttentionDistance wrong(C::layers + 1, 2 * C::heads);
    CHECK_THROWS_AS(model.attach(wrong), ShapeError);
}

TEST_CASE("its checkpoints save and load U and lambda_q with the rest, to identical logits") {
    const auto w = testing::test_weights<C>(11);
    testing::TempDir dir;
    save_complexity_checkpoint(w, dir.path());
    const auto back = load_complexity_checkpoint<C>(dir.path());
    CHECK(back.layers[1].attention.u == w.layers[1].attention.u);
    CHECK(back.layers[1].attention.lambda == w.layers[1].attention.lambda);
    ComplexityModel<C> a(w), b(back);
    const auto tokens = testing::random_tokens(12, C::vocab, 12);
    CHECK(a.forward(tokens) == b.forward(tokens));
    const auto config = io::read_complexity_config(dir / "config.json");
    CHECK(config.attention_type == "prism");
}

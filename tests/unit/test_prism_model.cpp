// The GPT-2-style PRISM model against a naive double-precision reference.
#include <doctest/doctest.h>

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/models/prism_model.hpp>

#include <random>

#include "prism_reference.hpp"
#include "test_support.hpp"

using namespace cpx;

namespace {

using Tiny = presets::TinyPrism;  // 2 layers, d 32, H 2, R 2, vocab 101, context 48
using TinyNoBias = PrismConfig<PrismDims{.n_layer = 2, .n_head = 4, .n_embd = 32, .vocab_size = 67,
                                         .block_size = 24, .prism_expansion_ratio = 1, .bias = false}>;

/// Random weights at scales where every part matters: the spec's init, then
/// LayerNorm weights and biases, all biases and lambda randomised, and the
/// embeddings larger than 0.02 so the logits are not all near zero.
template <class C>
PrismWeights<C> test_weights(std::uint64_t seed) {
    auto w = PrismWeights<C>::random(seed);
    std::mt19937_64 gen(seed + 1);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (auto& v : w.wte) v *= 25.0f;
    for (auto& v : w.wpe) v *= 10.0f;
    const auto jitter = [&](auto& vec, float mean, float sd) {
        for (auto& v : vec) v = mean + sd * n(gen);
    };
    jitter(w.ln_f_weight, 1.0f, 0.2f);
    jitter(w.ln_f_bias, 0.0f, 0.2f);
    float lambda = 0.05f;
    for (auto& l : w.layers) {
        jitter(l.ln_1_weight, 1.0f, 0.2f);
        jitter(l.ln_1_bias, 0.0f, 0.2f);
        jitter(l.ln_2_weight, 1.0f, 0.2f);
        jitter(l.ln_2_bias, 0.0f, 0.2f);
        jitter(l.c_fc_bias, 0.0f, 0.1f);
        jitter(l.c_proj_bias, 0.0f, 0.1f);
        for (auto& v : l.c_fc_weight) v *= 5.0f;
        for (auto& v : l.c_proj_weight) v *= 5.0f;
        for (auto& v : l.u) v *= 2.0f;
        l.lambda = (lambda += 0.3f);
    }
    return w;
}

template <class C>
std::vector<double> reference_logits(const PrismWeights<C>& w, const std::vector<std::int32_t>& tokens) {
    return reference::prism_model<PrismAttentionOf<C>>(w, tokens, C::hidden, C::vocab, C::dims.layer_norm_eps);
}

std::vector<std::int32_t> random_tokens(std::size_t n, int vocab, std::uint64_t seed) {
    const auto v = testing::random_ints(n, 0, vocab - 1, seed);
    return std::vector<std::int32_t>(v.begin(), v.end());
}

template <class C>
std::vector<float> all_logits(PrismModel<C>& m, const std::vector<std::int32_t>& tokens, index_t batch = 1) {
    auto logits = testing::poisoned<float>(tokens.size() * C::vocab);
    m.forward(tokens, batch, Matrix<float>(logits.data(), static_cast<index_t>(tokens.size()), C::vocab));
    return logits;
}

/// The model's logits rows [first, first + count) of a flat logits buffer.
std::vector<float> rows_of(const std::vector<float>& v, std::size_t first, std::size_t count, std::size_t width) {
    return std::vector<float>(v.begin() + first * width, v.begin() + (first + count) * width);
}

}  // namespace

TEST_CASE("TinyPrism logits match the double reference within 1e-4") {
    PrismModel<Tiny> model(test_weights<Tiny>(11));
    for (std::size_t t : {1u, 9u, 48u}) {
        const auto tokens = random_tokens(t, Tiny::vocab, 12 + t);
        // fp32 throughout, two layers, softmax over <= 48 keys: ~1e-6 observed.
        CHECK_MESSAGE(testing::relative_error(all_logits(model, tokens), reference_logits(model.weights(), tokens)) < 1e-4,
                      "sequence length ", t);
    }
}

TEST_CASE("a configuration without biases (and R = 1) matches the reference") {
    PrismModel<TinyNoBias> model(test_weights<TinyNoBias>(21));
    CHECK(model.weights().ln_f_bias.empty());
    const auto tokens = random_tokens(24, TinyNoBias::vocab, 22);
    CHECK(testing::relative_error(all_logits(model, tokens), reference_logits(model.weights(), tokens)) < 1e-4);
}

TEST_CASE("a batch of sequences gives each sequence's own logits") {
    PrismModel<Tiny> model(test_weights<Tiny>(31));
    const int T = 17;
    const auto tokens = random_tokens(3 * T, Tiny::vocab, 32);
    const auto batched = all_logits(model, tokens, 3);
    for (int b = 0; b < 3; ++b) {
        const std::vector<std::int32_t> one(tokens.begin() + b * T, tokens.begin() + (b + 1) * T);
        CHECK(testing::relative_error(rows_of(batched, b * T, T, Tiny::vocab), reference_logits(model.weights(), one)) <
              1e-4);
    }
}

TEST_CASE("the spec's initialisation: N(0, 0.02), c_proj scaled by 1/sqrt(2L), U orthogonal, lambda at 0.01") {
    // Mid-sized so the statistics are tight yet the test stays fast under sanitizers.
    using Mid = PrismConfig<PrismDims{.n_layer = 4, .n_head = 4, .n_embd = 128, .vocab_size = 4096, .block_size = 64}>;
    const auto w = PrismWeights<Mid>::random(5);
    const auto sd = [](const auto& v) {
        double s = 0;
        for (float x : v) s += double(x) * x;
        return std::sqrt(s / v.size());
    };
    // 65K-524K samples: the sample deviation is within 0.3% (one sigma) of the target; 1.5% is five sigma.
    CHECK(sd(w.wte) == doctest::Approx(0.02).epsilon(0.015));
    CHECK(sd(w.wpe) == doctest::Approx(0.02).epsilon(0.015));
    CHECK(sd(w.layers[3].c_fc_weight) == doctest::Approx(0.02).epsilon(0.015));
    CHECK(sd(w.layers[3].c_proj_weight) == doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.015));
    CHECK(w.layers[2].lambda == doctest::Approx(0.01));
    CHECK(w.layers[0].ln_2_weight[17] == 1.0f);
    CHECK(w.layers[0].c_fc_bias[17] == 0.0f);
    // U^T U = I in double over every column pair.
    const auto& u = w.layers[1].u;
    double worst = 0;
    for (int a = 0; a < 128; ++a)
        for (int b = 0; b < 128; ++b) {
            double dot = 0;
            for (int r = 0; r < Mid::u_rows; ++r) dot += double(u[r * 128 + a]) * u[r * 128 + b];
            worst = std::max(worst, std::abs(dot - (a == b ? 1.0 : 0.0)));
        }
    CHECK(worst < 1e-5);
    // The enumeration holds the configuration's parameters plus one lambda per layer.
    count_t total = 0;
    w.for_each_tensor([&](const NamedTensor<const float>& t) { total += t.size(); });
    CHECK(total - Mid::layers == parameter_count<Mid>());
}

TEST_CASE("token ids outside the vocabulary and sequences past the context are rejected with clear errors") {
    PrismModel<Tiny> model(PrismWeights<Tiny>::random(41));
    std::vector<float> logits(49 * Tiny::vocab);
    std::vector<std::int32_t> tokens{1, 2, 101, 3};
    CHECK_THROWS_WITH_AS(model.forward(tokens, 1, Matrix<float>(logits.data(), 4, Tiny::vocab)),
                         doctest::Contains("token id 101 at index 2 is outside the vocabulary [0, 101)"), InputError);
    tokens[2] = -1;
    CHECK_THROWS_AS(model.forward(tokens, 1, Matrix<float>(logits.data(), 4, Tiny::vocab)), InputError);
    const std::vector<std::int32_t> too_long(49, 7);
    CHECK_THROWS_WITH_AS(model.forward(too_long, 1, Matrix<float>(logits.data(), 49, Tiny::vocab)),
                         doctest::Contains("exceed the context length (block_size) 48"), InputError);
    const std::vector<std::int32_t> ok(4, 7);
    CHECK_THROWS_AS(model.forward(ok, 1, Matrix<float>(logits.data(), 4, Tiny::vocab - 1)), ShapeError);
    CHECK_THROWS_AS(model.forward(ok, 3, Matrix<float>(logits.data(), 4, Tiny::vocab)), InputError);
}

TEST_CASE("the attention-distance table gets every layer's queries for each head") {
    PrismModel<Tiny> model(test_weights<Tiny>(51));
    cpu::AttentionDistance distance(Tiny::layers, 2 * Tiny::heads);
    const auto tokens = random_tokens(2 * 20, Tiny::vocab, 52);
    std::vector<float> logits(tokens.size() * Tiny::vocab);
    model.forward(tokens, 2, Matrix<float>(logits.data(), 40, Tiny::vocab), &distance);
    for (int l = 0; l < Tiny::layers; ++l)
        for (int h = 0; h < 2 * Tiny::heads; ++h) {
            CHECK(distance.queries(l, h) == 40);
            // A query at position i has distance in [0, i]; the mean over 0..19 is at most 9.5.
            CHECK(distance.mean(l, h) >= 0.0);
            CHECK(distance.mean(l, h) <= 9.5);
        }
    cpu::AttentionDistance wrong(Tiny::layers, Tiny::heads);
    CHECK_THROWS_AS(model.forward(tokens, 2, Matrix<float>(logits.data(), 40, Tiny::vocab), &wrong), ShapeError);
}

// Observers: tokens per expert per layer, the mu share of Q, K and V, and the time per part and layer.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/model.hpp>

#include <chrono>
#include <cmath>
#include <span>
#include <vector>

#include "complexity_reference.hpp"
#include "complexity_test_weights.hpp"

using namespace cpx;
using Routed = presets::TinyComplexity;
using Learned = presets::TinyLearnedRouter;

TEST_CASE("expert load counts each token once per layer, at its table's expert, across calls") {
    const auto w = cpx::testing::test_weights<Routed>(1);
    const auto table = w.primary_routes(0);
    ComplexityModel<Routed> model(w);
    ExpertLoad<Routed> load;
    model.attach(load);
    const auto a = cpx::testing::random_tokens(30, Routed::vocab, 2), b = cpx::testing::random_tokens(11, Routed::vocab, 3);
    model.forward(a);
    model.forward(b);
    std::array<index_t, Routed::experts> want{};
    for (auto t : a) ++want[table[t]];
    for (auto t : b) ++want[table[t]];
    for (int l = 0; l < Routed::layers; ++l) CHECK(load.tokens[l] == want);
    model.detach_observers();
    model.forward(a);
    for (int l = 0; l < Routed::layers; ++l) CHECK(load.tokens[l] == want);
}

TEST_CASE("with an observer attached the last layer runs every row, also for the last position's logits") {
    const auto w = cpx::testing::test_weights<Routed>(13);
    const auto table = w.primary_routes(0);
    ComplexityModel<Routed> plain(w), observed(w);
    ExpertLoad<Routed> load;
    observed.attach(load);
    const auto tokens = cpx::testing::random_tokens(21, Routed::vocab, 14);
    const auto logits = observed.forward(tokens, LogitsAt::last);
    std::array<index_t, Routed::experts> want{};
    for (auto t : tokens) ++want[table[t]];
    for (int l = 0; l < Routed::layers; ++l) CHECK(load.tokens[l] == want);
    // Without the observer the last layer finishes the last row alone: the same logits up to fp32 rounding.
    CHECK(cpx::testing::relative_error(plain.forward(tokens, LogitsAt::last), logits) < 1e-5);
}

TEST_CASE("expert load of the learned router sums to the tokens in every layer") {
    ComplexityModel<Learned> model(cpx::testing::test_weights<Learned>(4));
    ExpertLoad<Learned> load;
    model.attach(load);
    model.forward(cpx::testing::random_tokens(25, Learned::vocab, 5));
    for (int l = 0; l < Learned::layers; ++l) {
        index_t total = 0;
        for (index_t c : load.tokens[l]) total += c;
        CHECK(total == 25);
    }
}

TEST_CASE("the mu contribution ratio of the attention layer matches its definition") {
    using C = Routed;
    const auto w = cpx::testing::test_weights<C>(6);
    const auto ref = cpx::testing::reference_weights(w);
    const int T = 9, in = 2 * C::hidden;
    const auto input = cpx::testing::random_normal(T * in, 7);
    std::vector<float> residual(T * C::hidden, 0.0f);
    cpu::MuGqaAttention<C, float> attention;
    cpu::MuContribution mu;
    const cpu::SequenceRows<float> seq{0, T, 0, {}, {}};
    attention.forward(w.attention(0), cpu::rows_of<const float>(input.data(), T, in), std::span(&seq, 1),
                      cpu::rows_of(residual.data(), T, C::hidden), &mu);
    double q = 0, k = 0, v = 0;
    for (int t = 0; t < T; ++t) {
        const std::vector<double> a(input.begin() + t * in, input.begin() + t * in + C::hidden);
        const std::vector<double> m(input.begin() + t * in + C::hidden, input.begin() + (t + 1) * in);
        const auto share = [&](const char* proj, const char* mu_proj, std::size_t out) {
            const auto x = cpx::testing::ref::linear(ref[std::string("layers.0.self_attn.") + proj], a, out);
            const auto y = cpx::testing::ref::linear(ref[std::string("layers.0.self_attn.") + mu_proj], m, out);
            double nx = 0, ny = 0;
            for (std::size_t i = 0; i < out; ++i) nx += x[i] * x[i], ny += y[i] * y[i];
            return std::sqrt(ny) / (std::sqrt(nx) + std::sqrt(ny));
        };
        q += share("q_proj.weight", "mu_to_q.weight", C::q_width);
        k += share("k_proj.weight", "mu_to_k.weight", C::kv_width);
        v += share("v_proj.weight", "mu_to_v.weight", C::kv_width);
    }
    CHECK(mu.tokens == T);
    CHECK(mu.mean_q() == doctest::Approx(q / T).epsilon(1e-5));
    CHECK(mu.mean_k() == doctest::Approx(k / T).epsilon(1e-5));
    CHECK(mu.mean_v() == doctest::Approx(v / T).epsilon(1e-5));
}

TEST_CASE("in the model, the first layer's mu share is zero for the spec's mu_init of zero, and later ones are not") {
    ComplexityModel<Routed> model(ComplexityWeights<Routed>::random(8));
    MuContributions<Routed> mu;
    model.attach(mu);
    model.forward(cpx::testing::random_tokens(12, Routed::vocab, 9));
    CHECK(mu.layers[0].tokens == 12);
    CHECK(mu.layers[0].mean_k() == 0.0);
    for (int l = 1; l < Routed::layers; ++l) {
        CHECK(mu.layers[l].mean_k() > 0.0);
        CHECK(mu.layers[l].mean_k() < 1.0);
        CHECK(mu.layers[l].mean_q() > 0.0);
        CHECK(mu.layers[l].mean_v() > 0.0);
    }
}

TEST_CASE("observers do not change the logits") {
    const auto w = cpx::testing::test_weights<Routed>(10);
    ComplexityModel<Routed> plain(w), observed(w);
    ExpertLoad<Routed> load;
    MuContributions<Routed> mu;
    observed.attach(load);
    observed.attach(mu);
    const auto tokens = cpx::testing::random_tokens(15, Routed::vocab, 11);
    CHECK(plain.forward(tokens) == observed.forward(tokens));
}

TEST_CASE("step times: each part of each layer timed, within the calls' wall time, the logits unchanged") {
    const auto w = cpx::testing::test_weights<Routed>(21);
    ComplexityModel<Routed> plain(w), timed(w);
    StepTimes<Routed::layers> times;
    timed.attach(times);
    const auto tokens = cpx::testing::random_tokens(17, Routed::vocab, 22);
    const auto start = std::chrono::steady_clock::now();
    // The last position's logits: the timer, unlike the observers above, keeps the last layer
    // to the rows that get logits, so the result is bit for bit the untimed model's.
    const auto got = timed.forward(tokens, LogitsAt::last);
    KVCache<Routed> cache(32);
    std::vector<float> step(Routed::vocab);
    for (std::int64_t t : {std::int64_t{3}, std::int64_t{5}})
        timed.extend(cache, std::span(&t, 1), LogitsAt::all, cpu::rows_of(step.data(), 1, Routed::vocab));
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(got == plain.forward(tokens, LogitsAt::last));
    CHECK(times.calls == 3);
    for (int l = 0; l < Routed::layers; ++l) {
        CAPTURE(l);
        CHECK(times.attention[l] > 0.0);
        CHECK(times.mlp[l] > 0.0);
        // mu-guidance feeds the next layer: none after the last.
        if (l + 1 < Routed::layers) CHECK(times.mu[l] > 0.0);
        else CHECK(times.mu[l] == 0.0);
    }
    CHECK(times.embed > 0.0);
    CHECK(times.head > 0.0);
    CHECK(times.total() <= wall);
    double attention = 0, mlp = 0, mu = 0;
    for (int l = 0; l < Routed::layers; ++l) attention += times.attention[l], mlp += times.mlp[l], mu += times.mu[l];
    CHECK(times.attention_total() == doctest::Approx(attention));
    CHECK(times.mlp_total() == doctest::Approx(mlp));
    CHECK(times.mu_total() == doctest::Approx(mu));
    CHECK(times.total() == doctest::Approx(times.embed + times.head + attention + mlp + mu));

    times.reset();
    CHECK(times.calls == 0);
    CHECK(times.total() == 0.0);
    ComplexityModel<Routed> copy = timed;  // a copy starts with no observers
    copy.forward(tokens, LogitsAt::last);
    CHECK(times.calls == 0);
    timed.detach_observers();
    timed.forward(tokens, LogitsAt::last);
    CHECK(times.calls == 0);
    CHECK(times.total() == 0.0);
}

TEST_CASE("step times of a model without mu-guidance leave mu at zero") {
    using Dense = presets::TinyDense;
    ComplexityModel<Dense> model(cpx::testing::test_weights<Dense>(23));
    StepTimes<Dense::layers> times;
    model.attach(times);
    model.forward(cpx::testing::random_tokens(9, Dense::vocab, 24));
    CHECK(times.calls == 1);
    for (int l = 0; l < Dense::layers; ++l) {
        CHECK(times.attention[l] > 0.0);
        CHECK(times.mlp[l] > 0.0);
        CHECK(times.mu[l] == 0.0);
    }
}

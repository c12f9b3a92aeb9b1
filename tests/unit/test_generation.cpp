// Greedy decoding and seeded sampling (temperature, top-k, top-p).
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/model.hpp>
#include <cpx/models/generation.hpp>

#include <cmath>
#include <set>

#include "complexity_test_weights.hpp"

using namespace cpx;
using C = presets::TinyComplexity;

namespace {
// Logits whose softmax is exactly the given probabilities.
std::vector<float> logits_for(const std::vector<double>& p) {
    std::vector<float> z;
    for (double x : p) z.push_back(static_cast<float>(std::log(x)));
    return z;
}
}  // namespace

TEST_CASE("greedy generation picks, at every step, the argmax of the full forward's last logits") {
    ComplexityModel<C> model(cpx::testing::test_weights<C>(1));
    KVCache<C> cache(40);
    const auto prompt = cpx::testing::random_tokens(6, C::vocab, 2);
    const auto generated = generate(model, cache, prompt, 10);
    REQUIRE(generated.size() == 10);
    std::vector<std::int64_t> context = prompt;
    for (std::int64_t token : generated) {
        const auto last = model.forward(context, LogitsAt::last);
        CHECK(token == greedy_token(last));
        context.push_back(token);
    }
    CHECK(cache.length() == 6 + 9);  // the last token is returned, not yet fed back
}

TEST_CASE("sampling is reproducible from its seed") {
    ComplexityModel<C> model(cpx::testing::test_weights<C>(3));
    const auto prompt = cpx::testing::random_tokens(4, C::vocab, 4);
    // A high temperature: the test weights give peaked distributions.
    const SamplingParams p{.temperature = 20.0f, .top_k = 100, .top_p = 0.99f, .seed = 77};
    KVCache<C> a(40), b(40), c(40);
    const auto first = generate(model, a, prompt, 20, p);
    const auto again = generate(model, b, prompt, 20, p);
    auto other = p;
    other.seed = 78;
    const auto different = generate(model, c, prompt, 20, other);
    CHECK(first == again);
    CHECK(first != different);
}

TEST_CASE("top_k = 1 and a vanishing temperature are greedy") {
    const auto z = cpx::testing::random_normal(300, 5, 3.0f);
    const auto best = greedy_token(z);
    TokenSampler k1({.temperature = 5.0f, .top_k = 1, .seed = 1}, 300);
    TokenSampler cold({.temperature = 1e-6f, .seed = 2}, 300);
    for (int i = 0; i < 50; ++i) {
        CHECK(k1(z) == best);
        CHECK(cold(z) == best);
    }
}

TEST_CASE("top-k draws only among the k most likely tokens") {
    const auto z = cpx::testing::random_normal(100, 6);
    std::vector<int> order(100);
    for (int i = 0; i < 100; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return z[a] > z[b]; });
    const std::set<std::int64_t> top3(order.begin(), order.begin() + 3);
    TokenSampler s({.temperature = 10.0f, .top_k = 3, .seed = 3}, 100);
    std::set<std::int64_t> seen;
    for (int i = 0; i < 2000; ++i) seen.insert(s(z));
    CHECK(seen == top3);
}

TEST_CASE("top-p keeps the smallest most-likely set reaching p") {
    const auto z = logits_for({0.1, 0.5, 0.3, 0.1});
    TokenSampler half({.temperature = 1.0f, .top_p = 0.5f, .seed = 4}, 4);
    TokenSampler most({.temperature = 1.0f, .top_p = 0.75f, .seed = 5}, 4);
    std::set<std::int64_t> a, b;
    for (int i = 0; i < 2000; ++i) {
        a.insert(half(z));
        b.insert(most(z));
    }
    CHECK(a == std::set<std::int64_t>{1});
    CHECK(b == std::set<std::int64_t>{1, 2});
}

TEST_CASE("at temperature 1 without cuts, draws follow the softmax probabilities") {
    const std::vector<double> p = {0.05, 0.25, 0.4, 0.3};
    const auto z = logits_for(p);
    TokenSampler s({.temperature = 1.0f, .seed = 6}, 4);
    std::vector<int> counts(4, 0);
    const int n = 40000;
    for (int i = 0; i < n; ++i) ++counts[static_cast<std::size_t>(s(z))];
    // Binomial standard deviation at n = 40000 is at most 0.0025: allow 4 of them.
    for (int i = 0; i < 4; ++i) CHECK(std::abs(counts[i] / double(n) - p[i]) < 0.01);
}

TEST_CASE("temperature flattens the distribution") {
    const auto z = logits_for({0.9, 0.1});
    TokenSampler hot({.temperature = 100.0f, .seed = 7}, 2);
    int ones = 0;
    for (int i = 0; i < 4000; ++i) ones += hot(z) == 1;
    CHECK(ones > 1700);  // near 1/2 instead of 1/10
}

TEST_CASE("generation stops after the stop token and refuses to overflow the cache") {
    ComplexityModel<C> model(cpx::testing::test_weights<C>(8));
    const auto prompt = cpx::testing::random_tokens(5, C::vocab, 9);
    KVCache<C> probe_cache(40);
    const auto free_run = generate(model, probe_cache, prompt, 8);
    KVCache<C> cache(40);
    const auto stopped = generate(model, cache, prompt, {.max_new_tokens = 8, .stop_token = free_run[2]});
    CHECK(stopped.size() <= 3);
    CHECK(stopped.back() == free_run[2]);
    KVCache<C> small(10);
    CHECK_THROWS_AS(generate(model, small, prompt, 7), InputError);
    CHECK_THROWS_AS(TokenSampler({.top_p = 0.0f}, 10), InputError);
    CHECK_THROWS_AS(TokenSampler({.top_k = -1}, 10), InputError);
}

TEST_CASE("generation reports token counts and timings") {
    ComplexityModel<C> model(cpx::testing::test_weights<C>(10));
    KVCache<C> cache(40);
    GenerationStats stats;
    const auto prompt = cpx::testing::random_tokens(7, C::vocab, 11);
    generate(model, cache, prompt, {.max_new_tokens = 5, .stats = &stats});
    CHECK(stats.prompt_tokens == 7);
    CHECK(stats.generated_tokens == 5);
    CHECK(stats.prefill_seconds > 0.0);
    CHECK(stats.decode_tokens_per_second() > 0.0);
}

TEST_CASE("a warm-up pass leaves the tokens and the cache as without it") {
    ComplexityModel<C> model(cpx::testing::test_weights<C>(12));
    const auto prompt = cpx::testing::random_tokens(9, C::vocab, 13);
    KVCache<C> cold(20), warm(20);
    GenerationStats stats;
    const auto a = generate(model, cold, prompt, {.max_new_tokens = 6});
    const auto b = generate(model, warm, prompt, {.max_new_tokens = 6, .warm_up = true, .stats = &stats});
    CHECK(a == b);
    CHECK(warm.length() == cold.length());
    CHECK(warm.length() == 9 + 6 - 1);
    CHECK(stats.prompt_tokens == 9);
    // A prompt that fills the cache exactly still generates one token (it is never fed back).
    KVCache<C> exact(9);
    CHECK(generate(model, exact, prompt, {.max_new_tokens = 1, .warm_up = true}).size() == 1);
    KVCache<C> none(9);
    CHECK(generate(model, none, prompt, {.max_new_tokens = 0}).empty());
}

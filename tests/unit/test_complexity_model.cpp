// The whole COMPLEXITY-DEEP model against the plain double-precision forward
// pass of tests/support/complexity_reference.hpp, for each MLP kind.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/model.hpp>

#include <cmath>

#include "complexity_reference.hpp"
#include "complexity_test_weights.hpp"
#include "last_rows_check.hpp"
#include "test_support.hpp"

using namespace cpx;
using cpx::testing::random_tokens;
using cpx::testing::reference_logits;
using cpx::testing::reference_weights;
using cpx::testing::relative_error;
using cpx::testing::test_weights;

TEST_CASE_TEMPLATE("fp32 logits match the double reference within 1e-4", C, presets::TinyComplexity,
                   presets::TinyDense, presets::TinyLearnedRouter) {
    auto weights = test_weights<C>(1);
    const auto ref = reference_weights(weights);
    ComplexityModel<C> model(std::move(weights));
    for (std::size_t len : {1u, 5u, 40u}) {
        CAPTURE(len);
        const auto tokens = random_tokens(len, C::vocab, 10 + len);
        // Accumulations of a few hundred fp32 terms through a few layers: ~1e-6 relative.
        CHECK(relative_error(model.forward(tokens), reference_logits<C>(ref, tokens)) < 1e-4);
    }
}

TEST_CASE_TEMPLATE("bf16-stored weights compute in fp32 on the stored values", C, presets::TinyComplexity,
                   presets::TinyDense, presets::TinyLearnedRouter) {
    const auto fp32 = test_weights<C>(2);
    auto bf = convert_weights<bf16>(fp32);
    const auto rounded_ref = reference_weights(bf);
    const auto exact_ref = reference_weights(fp32);
    ComplexityModel<C, bf16> model(std::move(bf));
    const auto tokens = random_tokens(24, C::vocab, 3);
    const auto logits = model.forward(tokens);
    // Against the reference on the same (rounded) weights: fp32 arithmetic, as above.
    CHECK(relative_error(logits, reference_logits<C>(rounded_ref, tokens)) < 1e-4);
    // Against the unrounded fp32 weights: bf16's 2^-9 relative rounding per weight,
    // averaging out over dot products; a few percent at most through the layers.
    CHECK(relative_error(logits, reference_logits<C>(exact_ref, tokens)) < 5e-2);
}

TEST_CASE("the last-position logits are the last row of the all-position logits") {
    using C = presets::TinyComplexity;
    ComplexityModel<C> model(test_weights<C>(3));
    const auto tokens = random_tokens(9, C::vocab, 4);
    const auto all = model.forward(tokens, LogitsAt::all);
    const auto last = model.forward(tokens, LogitsAt::last);
    REQUIRE(last.size() == static_cast<std::size_t>(C::vocab));
    // One row goes through the head as a GEMV, nine as a GEMM: rounding-level differences only.
    CHECK(relative_error(last, std::vector<float>(all.end() - C::vocab, all.end())) < 1e-6);
}

TEST_CASE_TEMPLATE("decoding token by token through the cache equals the full forward within 1e-5", C,
                   presets::TinyComplexity, presets::TinyDense, presets::TinyLearnedRouter) {
    ComplexityModel<C> model(test_weights<C>(4));
    const auto tokens = random_tokens(30, C::vocab, 5);
    const auto full = model.forward(tokens);
    KVCache<C> cache(48);
    std::vector<float> step(C::vocab);
    std::vector<float> decoded;
    for (std::int64_t t : tokens) {
        model.extend(cache, std::span(&t, 1), LogitsAt::all, cpu::rows_of(step.data(), 1, C::vocab));
        decoded.insert(decoded.end(), step.begin(), step.end());
    }
    CHECK(cache.length() == 30);
    // Same math, different GEMM shapes (GEMV per token vs GEMM per prompt).
    CHECK(relative_error(decoded, full) < 1e-5);
}

TEST_CASE_TEMPLATE("chunked prefill equals one-shot prefill", C, presets::TinyComplexity, presets::TinyDense,
                   presets::TinyLearnedRouter) {
    ComplexityModel<C> model(test_weights<C>(5));
    const auto tokens = random_tokens(37, C::vocab, 6);
    KVCache<C> one(64), chunked(64);
    std::vector<float> a(37 * C::vocab), b(37 * C::vocab);
    model.extend(one, tokens, LogitsAt::all, cpu::rows_of(a.data(), 37, C::vocab));
    // Chunks of 16, 1, 20 at offsets 0, 16, 17: each needs the offset causal mask.
    std::size_t at = 0;
    for (std::size_t len : {16u, 1u, 20u}) {
        model.extend(chunked, std::span(tokens).subspan(at, len), LogitsAt::all,
                     cpu::rows_of(b.data() + at * C::vocab, static_cast<index_t>(len), C::vocab));
        at += len;
    }
    CHECK(relative_error(b, a) < 1e-5);
    // The caches then continue identically.
    std::vector<float> next_one(C::vocab), next_chunked(C::vocab);
    const std::int64_t t = 7;
    model.extend(one, std::span(&t, 1), LogitsAt::all, cpu::rows_of(next_one.data(), 1, C::vocab));
    model.extend(chunked, std::span(&t, 1), LogitsAt::all, cpu::rows_of(next_chunked.data(), 1, C::vocab));
    CHECK(relative_error(next_chunked, next_one) < 1e-5);
}

TEST_CASE_TEMPLATE("a prefill returning the last logits or none fills the caches as one returning every row", C,
                   presets::TinyComplexity, presets::TinyDense, presets::TinyLearnedRouter) {
    ComplexityModel<C> model(test_weights<C>(12));
    cpx::testing::check_last_rows_prefill<KVCache<C>>(model, C::vocab, C::layers, 40);
}

TEST_CASE("a bf16 KV cache decodes close to the fp32 cache") {
    using C = presets::TinyComplexity;
    const auto w = test_weights<C>(6);
    ComplexityModel<C, float, float> exact(w);
    ComplexityModel<C, float, bf16> compact(w);
    const auto tokens = random_tokens(20, C::vocab, 7);
    KVCache<C, float> c32(32);
    KVCache<C, bf16> c16(32);
    std::vector<float> a(20 * C::vocab), b(20 * C::vocab);
    exact.extend(c32, tokens, LogitsAt::all, cpu::rows_of(a.data(), 20, C::vocab));
    compact.extend(c16, tokens, LogitsAt::all, cpu::rows_of(b.data(), 20, C::vocab));
    // Keys and values rounded to bf16 (2^-9 relative) before attention.
    CHECK(relative_error(b, a) < 3e-2);
    CHECK(relative_error(b, a) > 0.0);
}

TEST_CASE("results are bit-identical run to run") {
    using C = presets::TinyComplexity;
    ComplexityModel<C> first(test_weights<C>(7)), second(test_weights<C>(7));
    const auto tokens = random_tokens(50, C::vocab, 8);
    const auto a = first.forward(tokens);
    const auto b = first.forward(tokens);
    const auto c = second.forward(tokens);
    REQUIRE(a.size() == b.size());
    bool same = true;
    for (std::size_t i = 0; i < a.size(); ++i) same = same && a[i] == b[i] && a[i] == c[i];
    CHECK(same);
}

TEST_CASE_TEMPLATE("a batch of sequences of different lengths equals the sequences run alone", C,
                   presets::TinyComplexity, presets::TinyLearnedRouter) {
    ComplexityModel<C> model(test_weights<C>(8));
    const std::vector<std::vector<std::int64_t>> seqs = {random_tokens(3, C::vocab, 1), random_tokens(17, C::vocab, 2),
                                                         random_tokens(1, C::vocab, 3), random_tokens(9, C::vocab, 4)};
    std::vector<std::span<const std::int64_t>> batch(seqs.begin(), seqs.end());
    const index_t rows = ComplexityModel<C>::logits_rows(batch, LogitsAt::all);
    std::vector<float> all(rows * C::vocab), last(seqs.size() * C::vocab);
    model.forward(batch, LogitsAt::all, cpu::rows_of(all.data(), rows, C::vocab));
    model.forward(batch, LogitsAt::last, cpu::rows_of(last.data(), static_cast<index_t>(seqs.size()), C::vocab));
    std::size_t at = 0;
    for (std::size_t s = 0; s < seqs.size(); ++s) {
        const auto alone = model.forward(seqs[s]);
        std::vector<float> part(all.begin() + at * C::vocab, all.begin() + (at + seqs[s].size()) * C::vocab);
        CHECK(relative_error(part, alone) < 1e-5);
        std::vector<float> last_alone(alone.end() - C::vocab, alone.end());
        std::vector<float> last_part(last.begin() + s * C::vocab, last.begin() + (s + 1) * C::vocab);
        CHECK(relative_error(last_part, last_alone) < 1e-5);
        at += seqs[s].size();
    }
}

TEST_CASE("batched decode through several caches equals decoding each sequence alone") {
    using C = presets::TinyComplexity;
    ComplexityModel<C> model(test_weights<C>(9));
    const auto p0 = random_tokens(5, C::vocab, 11), p1 = random_tokens(12, C::vocab, 12);
    KVCache<C> a(32), b(32), a_alone(32), b_alone(32);
    std::vector<float> scratch(12 * C::vocab);
    model.extend(a, p0, LogitsAt::none, cpu::rows_of(scratch.data(), 0, C::vocab));
    model.extend(b, p1, LogitsAt::none, cpu::rows_of(scratch.data(), 0, C::vocab));
    model.extend(a_alone, p0, LogitsAt::none, cpu::rows_of(scratch.data(), 0, C::vocab));
    model.extend(b_alone, p1, LogitsAt::none, cpu::rows_of(scratch.data(), 0, C::vocab));
    KVCache<C>* caches[] = {&a, &b};
    const std::int64_t next[] = {3, 250};
    std::vector<float> both(2 * C::vocab), x(C::vocab), y(C::vocab);
    model.decode(caches, next, cpu::rows_of(both.data(), 2, C::vocab));
    model.extend(a_alone, std::span(&next[0], 1), LogitsAt::all, cpu::rows_of(x.data(), 1, C::vocab));
    model.extend(b_alone, std::span(&next[1], 1), LogitsAt::all, cpu::rows_of(y.data(), 1, C::vocab));
    CHECK(relative_error(std::vector<float>(both.begin(), both.begin() + C::vocab), x) < 1e-5);
    CHECK(relative_error(std::vector<float>(both.begin() + C::vocab, both.end()), y) < 1e-5);
    CHECK(a.length() == 6);
    CHECK(b.length() == 13);
}

TEST_CASE("the seeded initialisation follows the spec and does not depend on the thread count") {
    using C = presets::TinyComplexity;
    const auto a = ComplexityWeights<C>::random(42);
    const auto b = testing::on_one_thread([] { return ComplexityWeights<C>::random(42); });
    const auto c = ComplexityWeights<C>::random(43);
    CHECK(a.embed_tokens == b.embed_tokens);
    CHECK(a.layers[2].attention.qkv == b.layers[2].attention.qkv);
    CHECK(a.embed_tokens != c.embed_tokens);
    // Spec section 8: N(0, 0.02) matrices, N(0, 0.02/sqrt(2L)) residual projections, ones, mu = 1, mu_init = 0.
    const auto stddev = [](const auto& v) {
        double s = 0;
        for (float x : v) s += double(x) * x;
        return std::sqrt(s / static_cast<double>(v.size()));
    };
    CHECK(stddev(a.embed_tokens) == doctest::Approx(0.02).epsilon(0.02));
    CHECK(stddev(a.layers[0].attention.o_proj) == doctest::Approx(0.02 / std::sqrt(2.0 * C::layers)).epsilon(0.05));
    CHECK(stddev(a.layers[0].mlp.down) == doctest::Approx(0.02 / std::sqrt(2.0 * C::layers)).epsilon(0.05));
    CHECK(stddev(a.layers[0].mlp.shared_down) == doctest::Approx(0.02).epsilon(0.05));
    CHECK(stddev(a.layers[1].mu_guidance.mu_proj) == doctest::Approx(0.02).epsilon(0.05));
    for (float x : a.layers[1].mu_guidance.mu) CHECK(x == 1.0f);
    for (float x : a.mu_init) CHECK(x == 0.0f);
    for (float x : a.layers[0].attention.q_norm) CHECK(x == 1.0f);
    for (float x : a.norm) CHECK(x == 1.0f);
}

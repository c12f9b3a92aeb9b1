// The GPT-2-style PRISM model against a naive double-precision reference.
#include <doctest/doctest.h>

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/models/generation.hpp>
#include <cpx/models/prism/model.hpp>

#include <chrono>
#include <utility>

#include "last_rows_check.hpp"
#include "prism_reference.hpp"
#include "prism_test_weights.hpp"
#include "test_support.hpp"

using namespace cpx;
using cpx::testing::random_tokens;

namespace {

using Tiny = presets::TinyPrism;  // 2 layers, d 32, H 2, R 2, vocab 101, context 48
using TinyNoBias = PrismConfig<PrismDims{.n_layer = 2, .n_head = 4, .n_embd = 32, .vocab_size = 67,
                                         .block_size = 24, .prism_expansion_ratio = 1, .bias = false}>;

using cpx::testing::prism_test_weights;

template <class C>
std::vector<double> reference_logits(const PrismWeights<C>& w, const std::vector<std::int64_t>& tokens) {
    return reference::prism_model<PrismAttentionOf<C>>(w, tokens, C::hidden, C::vocab, C::dims.layer_norm_eps);
}

/// The model's logits rows [first, first + count) of a flat logits buffer.
std::vector<float> rows_of(const std::vector<float>& v, std::size_t first, std::size_t count, std::size_t width) {
    return std::vector<float>(v.begin() + first * width, v.begin() + (first + count) * width);
}

}  // namespace

TEST_CASE("TinyPrism logits match the double reference within 1e-4") {
    PrismModel<Tiny> model(prism_test_weights<Tiny>(11));
    for (std::size_t t : {1u, 9u, 48u}) {
        const auto tokens = random_tokens(t, Tiny::vocab, 12 + t);
        // fp32 throughout, two layers, softmax over <= 48 keys: ~1e-6 observed.
        CHECK_MESSAGE(testing::relative_error(model.forward(tokens), reference_logits(model.weights(), tokens)) < 1e-4,
                      "sequence length ", t);
    }
}

TEST_CASE("a configuration without biases (and R = 1) matches the reference") {
    PrismModel<TinyNoBias> model(prism_test_weights<TinyNoBias>(21));
    CHECK(model.weights().ln_f_bias.empty());
    const auto tokens = random_tokens(24, TinyNoBias::vocab, 22);
    CHECK(testing::relative_error(model.forward(tokens), reference_logits(model.weights(), tokens)) < 1e-4);
}

TEST_CASE("bf16 weights compute in fp32 from the rounded values") {
    PrismModel<Tiny, bf16> model(convert_weights<bf16>(prism_test_weights<Tiny>(25)));
    const auto rounded = convert_weights<float>(model.weights());  // exact: bf16 -> fp32
    const auto tokens = random_tokens(30, Tiny::vocab, 26);
    CHECK(testing::relative_error(model.forward(tokens), reference_logits(rounded, tokens)) < 1e-4);
}

TEST_CASE("a batch of sequences of different lengths gives each sequence its own logits") {
    PrismModel<Tiny> model(prism_test_weights<Tiny>(31));
    const std::vector<std::vector<std::int64_t>> seqs{random_tokens(17, Tiny::vocab, 32),
                                                      random_tokens(3, Tiny::vocab, 33),
                                                      random_tokens(30, Tiny::vocab, 34)};
    const std::vector<TokenSpan> batch(seqs.begin(), seqs.end());
    std::vector<float> all(50 * Tiny::vocab), last(3 * Tiny::vocab);
    model.forward(batch, LogitsAt::all, cpu::rows_of(all.data(), 50, Tiny::vocab));
    model.forward(batch, LogitsAt::last, cpu::rows_of(last.data(), 3, Tiny::vocab));
    std::size_t row = 0;
    for (std::size_t b = 0; b < seqs.size(); ++b) {
        const auto want = reference_logits(model.weights(), seqs[b]);
        CHECK(testing::relative_error(rows_of(all, row, seqs[b].size(), Tiny::vocab), want) < 1e-4);
        const std::vector<double> want_last(want.end() - Tiny::vocab, want.end());
        CHECK(testing::relative_error(rows_of(last, b, 1, Tiny::vocab), want_last) < 1e-4);
        row += seqs[b].size();
    }
}

TEST_CASE("decoding token by token through the KV cache equals the full forward pass") {
    PrismModel<Tiny> model(prism_test_weights<Tiny>(35));
    const auto tokens = random_tokens(48, Tiny::vocab, 36);
    const auto full = model.forward(tokens);
    KVCache<Tiny> cache;
    std::vector<float> stepwise(tokens.size() * Tiny::vocab);
    for (std::size_t t = 0; t < tokens.size(); ++t)
        model.extend(cache, TokenSpan(tokens).subspan(t, 1), LogitsAt::all,
                     cpu::rows_of(stepwise.data() + t * Tiny::vocab, 1, Tiny::vocab));
    CHECK(cache.length() == 48);
    // Same arithmetic, different GEMM shapes (1 row vs 48): fp32 rounding only.
    CHECK(testing::relative_error(stepwise, full) < 1e-5);
}

TEST_CASE("step times: attention and MLP of each layer, embedding and head timed; the logits unchanged") {
    const auto w = prism_test_weights<Tiny>(62);
    PrismModel<Tiny> plain(w), timed(w);
    StepTimes<Tiny::layers> times;
    timed.attach(times);
    const auto tokens = random_tokens(20, Tiny::vocab, 63);
    const auto start = std::chrono::steady_clock::now();
    const auto got = timed.forward(tokens, LogitsAt::last);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(got == plain.forward(tokens, LogitsAt::last));
    CHECK(times.calls == 1);
    for (int l = 0; l < Tiny::layers; ++l) {
        CHECK(times.attention[l] > 0.0);
        CHECK(times.mlp[l] > 0.0);
        CHECK(times.mu[l] == 0.0);  // PRISM has no mu-guidance
    }
    CHECK(times.embed > 0.0);
    CHECK(times.head > 0.0);
    CHECK(times.total() <= wall);
    timed.detach_observers();
    timed.forward(tokens, LogitsAt::last);
    CHECK(times.calls == 1);
}

TEST_CASE("a prefill returning the last logits or none fills the caches as one returning every row") {
    PrismModel<Tiny> model(prism_test_weights<Tiny>(60));
    testing::check_last_rows_prefill<KVCache<Tiny>>(model, Tiny::vocab, Tiny::layers, 61);
}

TEST_CASE("chunked prefill equals one-shot prefill, and decoding continues identically") {
    PrismModel<Tiny> model(prism_test_weights<Tiny>(37));
    const auto tokens = random_tokens(41, Tiny::vocab, 38);
    KVCache<Tiny> one(48), chunked(48);
    std::vector<float> a(41 * Tiny::vocab), b(41 * Tiny::vocab);
    model.extend(one, tokens, LogitsAt::all, cpu::rows_of(a.data(), 41, Tiny::vocab));
    std::size_t at = 0;
    for (std::size_t len : {7u, 1u, 16u, 17u}) {
        model.extend(chunked, TokenSpan(tokens).subspan(at, len), LogitsAt::all,
                     cpu::rows_of(b.data() + at * Tiny::vocab, static_cast<index_t>(len), Tiny::vocab));
        at += len;
    }
    CHECK(testing::relative_error(b, a) < 1e-5);
    const std::int64_t next = 77;
    std::vector<float> x(Tiny::vocab), y(Tiny::vocab);
    model.extend(one, TokenSpan(&next, 1), LogitsAt::all, cpu::rows_of(x.data(), 1, Tiny::vocab));
    model.extend(chunked, TokenSpan(&next, 1), LogitsAt::all, cpu::rows_of(y.data(), 1, Tiny::vocab));
    CHECK(testing::relative_error(x, y) < 1e-5);
}

TEST_CASE("batched decode of sequences at different offsets equals decoding each alone") {
    PrismModel<Tiny> model(prism_test_weights<Tiny>(39));
    const auto p0 = random_tokens(5, Tiny::vocab, 40), p1 = random_tokens(23, Tiny::vocab, 41);
    KVCache<Tiny> a(32), b(32), a_alone(32), b_alone(32);
    std::vector<float> none;
    for (auto [cache, prompt] : {std::pair{&a, &p0}, std::pair{&b, &p1}, std::pair{&a_alone, &p0},
                                 std::pair{&b_alone, &p1}})
        model.extend(*cache, *prompt, LogitsAt::none, cpu::rows_of(none.data(), 0, Tiny::vocab));
    KVCache<Tiny>* caches[] = {&a, &b};
    const std::int64_t next[] = {3, 99};
    std::vector<float> both(2 * Tiny::vocab), x(Tiny::vocab), y(Tiny::vocab);
    model.decode(caches, next, cpu::rows_of(both.data(), 2, Tiny::vocab));
    model.extend(a_alone, TokenSpan(&next[0], 1), LogitsAt::all, cpu::rows_of(x.data(), 1, Tiny::vocab));
    model.extend(b_alone, TokenSpan(&next[1], 1), LogitsAt::all, cpu::rows_of(y.data(), 1, Tiny::vocab));
    CHECK(testing::relative_error(rows_of(both, 0, 1, Tiny::vocab), x) < 1e-5);
    CHECK(testing::relative_error(rows_of(both, 1, 1, Tiny::vocab), y) < 1e-5);
}

TEST_CASE("a bf16 KV cache stays close to the fp32 model") {
    const auto w = prism_test_weights<Tiny>(43);
    PrismModel<Tiny> exact(w);
    PrismModel<Tiny, float, bf16> compact(w);
    const auto tokens = random_tokens(20, Tiny::vocab, 44);
    KVCache<Tiny, float> c32(32);
    KVCache<Tiny, bf16> c16(32);
    std::vector<float> a(20 * Tiny::vocab), b(20 * Tiny::vocab);
    exact.extend(c32, tokens, LogitsAt::all, cpu::rows_of(a.data(), 20, Tiny::vocab));
    compact.extend(c16, tokens, LogitsAt::all, cpu::rows_of(b.data(), 20, Tiny::vocab));
    // Keys and values rounded to 8 mantissa bits (2^-9 relative): logits move by ~1e-3 of their range.
    CHECK(testing::relative_error(b, a) < 2e-2);
    CHECK(testing::relative_error(b, a) > 0.0);
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
    for (const auto& s : w.slots()) total += s.elements();
    CHECK(total - Mid::layers == parameter_count<Mid>());
}

TEST_CASE("bad input gets the same clear errors as the COMPLEXITY-DEEP model") {
    PrismModel<Tiny> model(PrismWeights<Tiny>::random(41));
    std::vector<float> logits(49 * Tiny::vocab);
    std::vector<std::int64_t> tokens{1, 2, 101, 3};
    CHECK_THROWS_WITH_AS(model.forward(tokens),
                         doctest::Contains("token id 101 at position 2 of sequence 0 is outside the vocabulary [0, 101)"),
                         InputError);
    tokens[2] = -1;
    CHECK_THROWS_AS(model.forward(tokens), InputError);
    const std::vector<std::int64_t> too_long(49, 7);
    CHECK_THROWS_WITH_AS(model.forward(too_long),
                         doctest::Contains("would reach position 49, past the context of 48 (block_size)"), InputError);
    const std::vector<std::int64_t> ok(4, 7);
    const TokenSpan batch[] = {ok};
    CHECK_THROWS_AS(model.forward(batch, LogitsAt::all, cpu::rows_of(logits.data(), 4, Tiny::vocab - 1)), ShapeError);
    const std::vector<std::int64_t> empty;
    CHECK_THROWS_WITH_AS(model.forward(empty, LogitsAt::last), doctest::Contains("is empty"), InputError);

    KVCache<Tiny> cache(8);
    model.extend(cache, std::vector<std::int64_t>(6, 1), LogitsAt::none, cpu::rows_of(logits.data(), 0, Tiny::vocab));
    CHECK_THROWS_WITH_AS(model.extend(cache, ok, LogitsAt::all, cpu::rows_of(logits.data(), 4, Tiny::vocab)),
                         doctest::Contains("the KV cache of sequence 0 holds 8 positions; 6 cached + 4 new need 10"),
                         InputError);
    CHECK(cache.length() == 6);  // a rejected call leaves the cache as it was
    KVCache<Tiny>* same[] = {&cache, &cache};
    const std::int64_t two[] = {1, 2};
    CHECK_THROWS_WITH_AS(model.decode(same, two, cpu::rows_of(logits.data(), 2, Tiny::vocab)),
                         doctest::Contains("share one KV cache"), InputError);
    CHECK_THROWS_WITH_AS(KVCache<Tiny>(49), doctest::Contains("outside [1, 48] (block_size)"), InputError);
}

TEST_CASE("the attention-distance table gets every layer's queries for each head") {
    PrismModel<Tiny> model(prism_test_weights<Tiny>(51));
    cpu::AttentionDistance distance(Tiny::layers, 2 * Tiny::heads);
    model.attach(distance);
    const auto a = random_tokens(20, Tiny::vocab, 52), b = random_tokens(20, Tiny::vocab, 53);
    const TokenSpan batch[] = {a, b};
    std::vector<float> logits(2 * Tiny::vocab);
    model.forward(batch, LogitsAt::last, cpu::rows_of(logits.data(), 2, Tiny::vocab));
    for (int l = 0; l < Tiny::layers; ++l)
        for (int h = 0; h < 2 * Tiny::heads; ++h) {
            CHECK(distance.queries(l, h) == 40);
            // A query at position i has distance in [0, i]; the mean over 0..19 is at most 9.5.
            CHECK(distance.mean(l, h) >= 0.0);
            CHECK(distance.mean(l, h) <= 9.5);
        }
    model.detach_observers();
    model.forward(batch, LogitsAt::last, cpu::rows_of(logits.data(), 2, Tiny::vocab));
    CHECK(distance.queries(0, 0) == 40);
    cpu::AttentionDistance wrong(Tiny::layers, Tiny::heads);
    CHECK_THROWS_AS(model.attach(wrong), ShapeError);
}

TEST_CASE("generation (shared with COMPLEXITY-DEEP) runs on the PRISM model: greedy = argmax of full passes") {
    PrismModel<Tiny> model(prism_test_weights<Tiny>(61));
    const auto prompt = random_tokens(6, Tiny::vocab, 62);
    KVCache<Tiny> cache(32);
    const auto out = generate(model, cache, prompt, 10);
    REQUIRE(out.size() == 10);
    auto seq = prompt;
    for (std::int64_t token : out) {
        const auto last = model.forward(seq, LogitsAt::last);
        CHECK(token == greedy_token(last));
        seq.push_back(token);
    }
    // Seeded sampling is reproducible.
    const SamplingParams p{.temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .seed = 5};
    KVCache<Tiny> c1(32), c2(32);
    CHECK(generate(model, c1, prompt, 8, p) == generate(model, c2, prompt, 8, p));
}

// bf16 arithmetic: the bound and its derivation are those of test_complexity_bf16.cpp.
TEST_CASE("bf16 arithmetic: logits within the bf16 bound of the double reference; packs follow weight edits") {
    if (cpu::best_bf16_level() == cpu::Bf16Level::none) {
        MESSAGE("skipped: this machine has no bf16 level (neither bf16 instructions nor AVX2 and FMA: ", cpu::cpu_features().summary(), ")");
        return;
    }
    PrismModel<Tiny> model(prism_test_weights<Tiny>(21), cpu::Compute::bf16);
    CHECK(model.packed_bytes() > 0);
    const auto tokens = random_tokens(40, Tiny::vocab, 22);
    const double err = testing::relative_error(model.forward(tokens), reference_logits(model.weights(), tokens));
    MESSAGE("bf16 arithmetic, relative error ", err);
    CHECK(err < 3e-2);
    CHECK(err > 1e-4);  // the products did run in bf16
    // Edits through the mutable accessor reach the next call.
    for (auto& v : model.weights().layers[1].c_fc_weight) v *= -1.0f;
    const auto edited = model.forward(tokens);
    PrismModel<Tiny> fresh(model.weights(), cpu::Compute::bf16);
    CHECK(edited == fresh.forward(tokens));
}

// fp32 on packed weights: the fp32 tolerance, as test_complexity_bf16.cpp states it.
TEST_CASE("fp32_packed arithmetic: logits within the fp32 tolerance of the double reference") {
    if (!cpu::gemm_f32_packed_available()) {
        MESSAGE("skipped: this machine has neither AVX-512 nor AVX2 and FMA (", cpu::cpu_features().summary(), ")");
        return;
    }
    PrismModel<Tiny> model(prism_test_weights<Tiny>(23), cpu::Compute::fp32_packed);
    CHECK(model.compute_runs() == cpu::Compute::fp32_packed);
    CHECK(model.packed_bytes() > 0);
    const auto tokens = random_tokens(40, Tiny::vocab, 24);
    const auto got = model.forward(tokens);
    const double err = testing::relative_error(got, reference_logits(model.weights(), tokens));
    MESSAGE("fp32_packed arithmetic, relative error ", err);
    CHECK(err < 1e-4);
    PrismModel<Tiny> plain(model.weights());
    CHECK(got != plain.forward(tokens));  // the packed kernel ran
}

// bf16 weights under fp32_packed keep bf16 panels (U read both ways, the MLP, the head), widened
// exactly by the kernel: the fp32 reference of the stored values, and half the pack bytes.
TEST_CASE("fp32_packed arithmetic on bf16 weights: the fp32 product of the stored values from bf16 panels") {
    if (!cpu::gemm_f32_packed_available()) {
        MESSAGE("skipped: this machine has neither AVX-512 nor AVX2 and FMA (", cpu::cpu_features().summary(), ")");
        return;
    }
    PrismModel<Tiny, bf16> model(convert_weights<bf16>(prism_test_weights<Tiny>(27)), cpu::Compute::fp32_packed);
    CHECK(model.compute_runs() == cpu::Compute::fp32_packed);
    CHECK(2 * model.packed_bytes() == PrismModel<Tiny>(prism_test_weights<Tiny>(27), cpu::Compute::fp32_packed).packed_bytes());
    const auto rounded = convert_weights<float>(model.weights());  // exact: bf16 -> fp32
    const auto tokens = random_tokens(40, Tiny::vocab, 28);
    const auto got = model.forward(tokens);
    const double err = testing::relative_error(got, reference_logits(rounded, tokens));
    MESSAGE("fp32_packed arithmetic on bf16 weights, relative error ", err);
    CHECK(err < 1e-4);
    PrismModel<Tiny, bf16> plain(model.weights());
    CHECK(got != plain.forward(tokens));  // the packed kernel ran
}

// As ComplexityModel's (test_complexity_bf16.cpp): the packs alone give the same logits.
TEST_CASE("released stored matrices: the packs alone give the same logits; edits and fp32 are refused") {
    for (const cpu::Compute compute : {cpu::Compute::bf16, cpu::Compute::fp32_packed}) {
        CAPTURE(cpu::compute_name(compute));
        if (cpu::runnable_compute(compute) != compute) {
            MESSAGE("skipped: this machine has no kernels for ", cpu::compute_name(compute), " (",
                    cpu::cpu_features().summary(), ")");
            continue;
        }
        PrismModel<Tiny> model(prism_test_weights<Tiny>(29), compute);
        const auto tokens = random_tokens(30, Tiny::vocab, 30);
        const auto want = model.forward(tokens);
        KVCache<Tiny> before(40);
        const auto generated = generate(model, before, std::span(tokens).first(20), 10);
        const std::size_t freed = model.release_stored_matrices();
        // U [2HD, d], c_fc [4d, d] and c_proj [d, 4d] of every layer; U stays where batch-1 decode
        // rows read it as stored (AVX-512, head by head)
        const bool keeps_u = cpu::PrismAttention<PrismAttentionOf<Tiny>>::decode_reads_stored_u(compute);
        const std::size_t u_rows = keeps_u ? 0 : Tiny::u_rows;
        CHECK(freed == sizeof(float) * Tiny::layers * (u_rows + 2 * Tiny::mlp_width) * Tiny::hidden);
        CHECK(std::as_const(model).weights().layers[0].u.empty() == !keeps_u);
        CHECK(model.release_keeps().prism_u == keeps_u);
        CHECK(model.forward(tokens) == want);
        PrismModel<Tiny> direct(prism_test_weights<Tiny>(29));
        direct.set_compute(compute, StoredMatrices::release);  // layer by layer while packing
        CHECK(direct.stored_matrices_released());
        CHECK(direct.forward(tokens) == want);
        KVCache<Tiny> after(40);
        CHECK(generate(model, after, std::span(tokens).first(20), 10) == generated);
        CHECK_THROWS_WITH_AS(model.weights(), doctest::Contains("can no longer change"), InputError);
        CHECK_THROWS_AS(model.set_compute(cpu::Compute::fp32), InputError);
        CHECK_THROWS_AS(std::as_const(model).weights().slots(), InputError);
        const auto& kept = std::as_const(model).weights();  // the embeddings stay
        CHECK(kept.wpe.size() == static_cast<std::size_t>(Tiny::max_positions * Tiny::hidden));
    }
    PrismModel<Tiny> plain(prism_test_weights<Tiny>(29));
    CHECK_THROWS_AS(plain.release_stored_matrices(), InputError);
}

// U released while the vector level was held below AVX-512 (so nothing read it as stored), then
// AVX-512 allowed again: batch-1 decode rows, which read U as stored there, take the packs instead.
TEST_CASE("a U released below AVX-512 leaves batch-1 decode on the packs once AVX-512 is back") {
    if (cpu::machine_vector_isa() != cpu::VectorIsa::avx512 ||
        cpu::runnable_compute(cpu::Compute::fp32_packed) != cpu::Compute::fp32_packed) {
        MESSAGE("skipped: needs AVX-512 (", cpu::cpu_features().summary(), ")");
        return;
    }
    PrismModel<Tiny> model(prism_test_weights<Tiny>(29), cpu::Compute::fp32_packed);
    const auto prompt = random_tokens(20, Tiny::vocab, 31);
    const std::int64_t next = 7;
    const auto decode_logits = [&] {
        KVCache<Tiny> cache(32);
        std::vector<float> none, logits(Tiny::vocab);
        model.extend(cache, prompt, LogitsAt::none, cpu::rows_of(none.data(), 0, Tiny::vocab));
        KVCache<Tiny>* caches[] = {&cache};
        model.decode(caches, TokenSpan(&next, 1), cpu::rows_of(logits.data(), 1, Tiny::vocab));
        return logits;
    };
    const auto before = decode_logits();  // head by head on the stored U
    const cpu::VectorIsa level = cpu::limit_vector_isa(cpu::VectorIsa::avx2);
    (void)model.release_stored_matrices();
    cpu::limit_vector_isa(level);
    CHECK(std::as_const(model).weights().layers[0].u.empty());
    const auto after = decode_logits();  // the packs' path: the same sums in another order
    CHECK(testing::relative_error(after, before) < 1e-5);
}

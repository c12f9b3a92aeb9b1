// Each COMPLEXITY-DEEP layer on its own against the plain double-precision
// formulas of tests/support/complexity_reference.hpp.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/cpu_views.hpp>
#include <cpx/models/complexity/weights.hpp>
#include <cpx/models/kv_cache.hpp>

#include <algorithm>

#include "complexity_reference.hpp"
#include "complexity_test_weights.hpp"
#include "test_support.hpp"

using namespace cpx;
using cpx::testing::random_normal;
using cpx::testing::random_tokens;
using cpx::testing::reference_weights;
using cpx::testing::relative_error;
using cpx::testing::test_weights;

namespace {
using Routed = presets::TinyComplexity;
using Dense = presets::TinyDense;
using Learned = presets::TinyLearnedRouter;

std::vector<std::vector<double>> split_rows(const std::vector<float>& x, std::size_t rows, std::size_t cols,
                                            std::size_t first = 0, std::size_t stride = 0) {
    if (!stride) stride = cols;
    std::vector<std::vector<double>> out(rows);
    for (std::size_t r = 0; r < rows; ++r) out[r].assign(x.begin() + r * stride + first, x.begin() + r * stride + first + cols);
    return out;
}
std::vector<double> join(const std::vector<std::vector<double>>& rows) {
    std::vector<double> out;
    for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
    return out;
}
}  // namespace

TEST_CASE("mu-guided attention matches the reference: stacked [a | mu] projection, QK-norm, RoPE, GQA, o_proj") {
    using C = Routed;
    const auto w = test_weights<C>(21);
    const auto ref = reference_weights(w);
    const int T = 19, in = 2 * C::hidden;
    const auto input = random_normal(T * in, 1);  // rows [a | mu]
    auto residual = random_normal(T * C::hidden, 2);
    const auto before = residual;
    cpu::MuGqaAttention<C, float> attention;
    const cpu::SequenceRows<float> seq{0, T, 0, {}, {}};
    attention.forward(w.attention(1), cpu::rows_of<const float>(input.data(), T, in), std::span(&seq, 1),
                      cpu::rows_of(residual.data(), T, C::hidden));
    auto want = cpx::testing::reference_attention<C>(ref, "layers.1.", split_rows(input, T, C::hidden, 0, in),
                                                     split_rows(input, T, C::hidden, C::hidden, in));
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < C::hidden; ++i) want[t][i] += before[t * C::hidden + i];
    CHECK(relative_error(residual, join(want)) < 1e-5);
}

TEST_CASE("attention without mu guidance reads the normalised input alone") {
    using C = Dense;
    const auto w = test_weights<C>(22);
    const auto ref = reference_weights(w);
    const int T = 11;
    const auto a = random_normal(T * C::hidden, 3);
    std::vector<float> residual(T * C::hidden, 0.0f);
    cpu::MuGqaAttention<C, float> attention;
    const cpu::SequenceRows<float> seq{0, T, 0, {}, {}};
    attention.forward(w.attention(0), cpu::rows_of<const float>(a.data(), T, C::hidden), std::span(&seq, 1),
                      cpu::rows_of(residual.data(), T, C::hidden));
    const auto want = cpx::testing::reference_attention<C>(ref, "layers.0.", split_rows(a, T, C::hidden), {});
    CHECK(relative_error(residual, join(want)) < 1e-5);
}

TEST_CASE("attention through a cache at an offset equals the rows of a full-sequence call") {
    using C = Routed;
    const auto w = test_weights<C>(23);
    const int T = 14, split = 9, in = 2 * C::hidden;
    const auto input = random_normal(T * in, 4);
    std::vector<float> full(T * C::hidden, 0.0f), chunked(T * C::hidden, 0.0f);
    cpu::MuGqaAttention<C, float> attention;
    const cpu::SequenceRows<float> whole{0, T, 0, {}, {}};
    attention.forward(w.attention(0), cpu::rows_of<const float>(input.data(), T, in), std::span(&whole, 1),
                      cpu::rows_of(full.data(), T, C::hidden));
    KVCache<C> cache(32);
    const cpu::SequenceRows<float> head{0, split, 0, cache.keys(0), cache.values(0)};
    attention.forward(w.attention(0), cpu::rows_of<const float>(input.data(), split, in), std::span(&head, 1),
                      cpu::rows_of(chunked.data(), split, C::hidden));
    const cpu::SequenceRows<float> tail{0, T - split, split, cache.keys(0), cache.values(0)};
    attention.forward(w.attention(0), cpu::rows_of<const float>(input.data() + split * in, T - split, in),
                      std::span(&tail, 1), cpu::rows_of(chunked.data() + split * C::hidden, T - split, C::hidden));
    CHECK(relative_error(chunked, full) < 1e-5);
}

TEST_CASE("QueryRows::last adds attention to each sequence's last row only, and every row's keys reach the cache") {
    using C = Routed;
    const auto w = test_weights<C>(24);
    const int lens[] = {6, 1, 10}, total = 17, in = 2 * C::hidden;
    const auto input = random_normal(total * in, 5);
    const auto residual = random_normal(total * C::hidden, 6);
    cpu::MuGqaAttention<C, float> attention;
    // Every row through caches, then only the last rows through other caches, from the same residual rows.
    KVCache<C> all_caches[3] = {KVCache<C>(16), KVCache<C>(16), KVCache<C>(16)};
    KVCache<C> last_caches[3] = {KVCache<C>(16), KVCache<C>(16), KVCache<C>(16)};
    std::vector<cpu::SequenceRows<float>> all_rows, last_rows;
    std::vector<float> last_residual;
    for (int s = 0, row = 0; s < 3; row += lens[s++]) {
        all_rows.push_back({row, lens[s], 0, all_caches[s].keys(0), all_caches[s].values(0)});
        last_rows.push_back({row, lens[s], 0, last_caches[s].keys(0), last_caches[s].values(0)});
        const auto* r = residual.data() + (row + lens[s] - 1) * C::hidden;
        last_residual.insert(last_residual.end(), r, r + C::hidden);
    }
    auto every = residual;
    attention.forward(w.attention(0), cpu::rows_of<const float>(input.data(), total, in), all_rows,
                      cpu::rows_of(every.data(), total, C::hidden));
    attention.forward(w.attention(0), cpu::rows_of<const float>(input.data(), total, in), last_rows,
                      cpu::rows_of(last_residual.data(), 3, C::hidden), nullptr, cpu::QueryRows::last);
    for (int s = 0, end = 0; s < 3; ++s) {
        CAPTURE(s);
        end += lens[s];
        const std::vector<float> want(every.begin() + (end - 1) * C::hidden, every.begin() + end * C::hidden);
        const std::vector<float> got(last_residual.begin() + s * C::hidden, last_residual.begin() + (s + 1) * C::hidden);
        CHECK(relative_error(got, want) < 1e-6);
        for (index_t r = 0; r < lens[s]; ++r)
            for (int h = 0; h < C::kv_heads; ++h) {
                const auto same = [&](auto a, auto b) { return std::equal(a, a + C::head_dim, b); };
                CHECK(same(all_caches[s].keys(0).head(r, h), last_caches[s].keys(0).head(r, h)));
                CHECK(same(all_caches[s].values(0).head(r, h), last_caches[s].values(0).head(r, h)));
            }
    }
    // None: the keys and values alone, no residual rows; a residual of other rows, or an empty
    // sequence asked for its last row, is an error.
    attention.forward(w.attention(0), cpu::rows_of<const float>(input.data(), total, in), last_rows,
                      cpu::rows_of(last_residual.data(), 0, C::hidden), nullptr, cpu::QueryRows::none);
    CHECK_THROWS_WITH_AS(attention.forward(w.attention(0), cpu::rows_of<const float>(input.data(), total, in),
                                           last_rows, cpu::rows_of(every.data(), total, C::hidden), nullptr,
                                           cpu::QueryRows::last),
                         doctest::Contains("the call finishes 3 of 17 input rows"), ShapeError);
    const cpu::SequenceRows<float> empty{0, 0, 0, {}, {}};
    CHECK_THROWS_WITH_AS(attention.forward(w.attention(0), cpu::rows_of<const float>(input.data(), 0, in),
                                           std::span(&empty, 1), cpu::rows_of(last_residual.data(), 1, C::hidden),
                                           nullptr, cpu::QueryRows::last),
                         doctest::Contains("no last row"), ShapeError);
}

TEST_CASE("the token-routed MLP adds each token's expert and the shared expert to the residual") {
    using C = Routed;
    const auto w = test_weights<C>(24);
    const auto ref = reference_weights(w);
    const int N = 40;
    const auto x = random_normal(N * C::hidden, 5);
    const auto tokens = random_tokens(N, C::vocab, 6);
    std::vector<float> residual(N * C::hidden, 0.0f);
    cpu::TokenRoutedMlp<C, float> mlp;
    std::vector<index_t> counts(C::experts, 0);
    mlp.forward(w.token_routed_mlp(2), cpu::rows_of<const float>(x.data(), N, C::hidden), tokens, w.routing(2),
                cpu::rows_of(residual.data(), N, C::hidden), counts);
    std::vector<std::vector<double>> want(N);
    std::vector<index_t> want_counts(C::experts, 0);
    for (int r = 0; r < N; ++r) {
        want[r] = cpx::testing::reference_mlp<C>(ref, "layers.2.", split_rows(x, N, C::hidden)[r], tokens[r]);
        ++want_counts[w.primary_routes(2)[tokens[r]]];
    }
    CHECK(relative_error(residual, join(want)) < 1e-5);
    CHECK(counts == want_counts);
}

TEST_CASE("sparse expert dispatch equals running every expert on every row and masking") {
    using C = Routed;
    const auto w = test_weights<C>(25);
    const int N = 33;
    const auto x = random_normal(N * C::hidden, 7);
    const auto experts = cpx::testing::random_ints(N, 0, C::experts - 1, 8);
    const std::vector<std::int32_t> expert(experts.begin(), experts.end());
    std::vector<float> sparse(N * C::hidden, 0.0f);
    cpu::ExpertDispatch<float> dispatch;
    dispatch.forward(w.experts(0), cpu::rows_of<const float>(x.data(), N, C::hidden), expert, {},
                     cpu::rows_of(sparse.data(), N, C::hidden));
    // Masked dense: all rows through all experts, then keep each row's own expert.
    std::vector<float> dense(N * C::hidden, 0.0f);
    cpu::LinearScratch scratch;
    std::vector<float> h(N * 2 * C::expert_width), y(N * C::hidden);
    for (int e = 0; e < C::experts; ++e) {
        cpu::matmul<float>(cpu::rows_of<const float>(x.data(), N, C::hidden), w.experts(0).gate_up_of(e),
                           cpu::rows_of(h.data(), N, 2 * C::expert_width), cpu::Write::overwrite, scratch);
        cpu::swiglu_inplace(cpu::rows_of(h.data(), N, 2 * C::expert_width), C::expert_width);
        cpu::matmul<float>(StridedMatrix<const float>{h.data(), N, C::expert_width, 2 * C::expert_width},
                           w.experts(0).down_of(e), cpu::rows_of(y.data(), N, C::hidden), cpu::Write::overwrite,
                           scratch);
        for (int r = 0; r < N; ++r)
            if (expert[r] == e) std::copy_n(y.data() + r * C::hidden, C::hidden, dense.data() + r * C::hidden);
    }
    // Same products on different row counts: rounding-level differences.
    CHECK(relative_error(sparse, dense) < 1e-6);
}

TEST_CASE_TEMPLATE("decode-sized dispatch runs the experts side by side, with the one-thread result", W, float, bf16) {
    // Up to 16 (row, route) pairs over at least as many experts as threads: one expert per thread
    // at a time, each product on one thread with its own scratch (fewer than two experts per
    // thread: one round so, the rest with every thread on each product). Every output is still summed by
    // one thread in the same order, so the result equals the one-thread call bit for bit; with
    // bf16 packs the inputs are rounded in the scratch, which a shared one would garble.
    using C = Routed;
    const auto stored = convert_weights<W>(test_weights<C>(26));
    const cpu::ExpertWeights<W> plain = stored.experts(0);
    std::vector<cpu::PackedWeight> gate_up, down;
    for (int e = 0; e < C::experts; ++e) {
        gate_up.push_back(cpu::PackedWeight::pack(plain.gate_up_of(e), cpu::WeightOrientation::in_out, cpu::Compute::bf16));
        down.push_back(cpu::PackedWeight::pack(plain.down_of(e), cpu::WeightOrientation::in_out, cpu::Compute::bf16));
    }
    const cpu::ExpertWeights<W> packed = [&] {
        cpu::ExpertWeights<W> p = plain;
        p.gate_up_packed = gate_up.data();
        p.down_packed = down.data();
        return p;
    }();
    const bool have_bf16 = cpu::best_bf16_level() != cpu::Bf16Level::none;
    // Three busy experts on two threads: one round of two, then the third with both threads.
    struct Case {
        int rows, routes, busy;
    };
    for (const Case c : {Case{2, 2, C::experts}, Case{4, 1, C::experts}, Case{7, 2, C::experts},
                         Case{16, 1, C::experts}, Case{3, 1, 3}, Case{5, 2, 3}}) {
        const int rows = c.rows, routes = c.routes, busy = c.busy;  // no bindings: lambdas below use them
        CAPTURE(rows);
        CAPTURE(routes);
        CAPTURE(busy);
        const auto x = random_normal(rows * C::hidden, 30 + rows);
        std::vector<std::int32_t> expert;
        for (int p = 0; p < rows * routes; ++p) expert.push_back((p + p / routes) % busy);
        std::vector<float> scale(expert.size());
        for (std::size_t p = 0; p < scale.size(); ++p) scale[p] = 0.25f + 0.5f * static_cast<float>(p % 3);
        for (const cpu::ExpertWeights<W>* w : {&plain, &packed}) {
            if (w == &packed && !have_bf16) continue;
            CAPTURE(w == &packed);
            auto run = [&] {
                std::vector<float> out = random_normal(rows * C::hidden, 40);
                cpu::ExpertDispatch<W> dispatch;
                dispatch.forward(*w, cpu::rows_of<const float>(x.data(), rows, C::hidden), routes, expert, scale,
                                 cpu::rows_of(out.data(), rows, C::hidden));
                return out;
            };
            const auto threaded = run();
            CHECK(threaded == testing::on_one_thread(run));
        }
    }
}

TEST_CASE_TEMPLATE("a one-row token-routed step runs the shared expert beside the routed one, with the one-thread result",
                   W, float, bf16) {
    // One row on two threads: the routed expert and the shared expert take a thread each (the
    // shared one writing a buffer of its own, added after the routed one), on fp32 or bf16
    // stored weights, plain or with bf16 packs. Each output is summed the same way as on one
    // thread, so the results agree bit for bit.
    using C = Routed;
    static_assert(C::has_shared_expert);
    const auto stored = convert_weights<W>(test_weights<C>(27));
    const auto ref = reference_weights(test_weights<C>(27));
    auto weights = stored.token_routed_mlp(1);
    std::vector<cpu::PackedWeight> packs;
    packs.reserve(2 * C::experts + 2);
    for (int e = 0; e < C::experts; ++e) {
        packs.push_back(cpu::PackedWeight::pack(weights.experts.gate_up_of(e), cpu::WeightOrientation::in_out,
                                                cpu::Compute::bf16));
        packs.push_back(cpu::PackedWeight::pack(weights.experts.down_of(e), cpu::WeightOrientation::in_out,
                                                cpu::Compute::bf16));
    }
    packs.push_back(cpu::PackedWeight::pack(weights.shared.gate_up, cpu::WeightOrientation::out_in, cpu::Compute::bf16));
    packs.push_back(cpu::PackedWeight::pack(weights.shared.down, cpu::WeightOrientation::out_in, cpu::Compute::bf16));
    const bool have_bf16 = cpu::best_bf16_level() != cpu::Bf16Level::none;
    const auto tokens = random_tokens(3, C::vocab, 9);
    for (bool packed : {false, true}) {
        if (packed && !have_bf16) continue;
        CAPTURE(packed);
        auto w = weights;
        std::vector<cpu::PackedWeight> gate_up, down;
        if (packed) {
            for (int e = 0; e < C::experts; ++e) {
                gate_up.push_back(packs[2 * e]);
                down.push_back(packs[2 * e + 1]);
            }
            w.experts.gate_up_packed = gate_up.data();
            w.experts.down_packed = down.data();
            w.shared.gate_up_packed = &packs[2 * C::experts];
            w.shared.down_packed = &packs[2 * C::experts + 1];
        }
        for (const std::int64_t token : tokens) {
            CAPTURE(token);
            const auto x = random_normal(C::hidden, 50 + token);
            const std::vector<float> start = random_normal(C::hidden, 60);
            const auto run = [&] {
                std::vector<float> residual = start;
                cpu::TokenRoutedMlp<C, W> mlp;
                mlp.forward(w, cpu::rows_of<const float>(x.data(), 1, C::hidden), std::span(&token, 1),
                            stored.routing(1), cpu::rows_of(residual.data(), 1, C::hidden));
                return residual;
            };
            const auto beside = testing::on_threads(2, run);
            CHECK(beside == testing::on_one_thread(run));
            if (!packed && std::is_same_v<W, float>) {
                auto want = cpx::testing::reference_mlp<C>(ref, "layers.1.", split_rows(x, 1, C::hidden)[0], token);
                for (int c = 0; c < C::hidden; ++c) want[c] += start[c];
                CHECK(relative_error(beside, want) < 1e-5);
            }
        }
    }
}

TEST_CASE("the learned router scales its top-1 expert by the softmax probability, plus the shared expert") {
    using C = Learned;
    const auto w = test_weights<C>(26);
    const auto ref = reference_weights(w);
    const int N = 25;
    const auto x = random_normal(N * C::hidden, 9);
    std::vector<float> residual(N * C::hidden, 0.0f);
    cpu::LearnedRouterMlp<C, float> mlp;
    std::vector<index_t> counts(C::experts, 0);
    mlp.forward(w.learned_router_mlp(1), cpu::rows_of<const float>(x.data(), N, C::hidden),
                cpu::rows_of(residual.data(), N, C::hidden), counts);
    std::vector<std::vector<double>> want(N);
    for (int r = 0; r < N; ++r)
        want[r] = cpx::testing::reference_mlp<C>(ref, "layers.1.", split_rows(x, N, C::hidden)[r], 0);
    CHECK(relative_error(residual, join(want)) < 1e-5);
    index_t total = 0;
    for (index_t c : counts) total += c;
    CHECK(total == N);
}

TEST_CASE("the dense SwiGLU MLP matches the reference") {
    using C = Dense;
    const auto w = test_weights<C>(27);
    const auto ref = reference_weights(w);
    const int N = 12;
    const auto x = random_normal(N * C::hidden, 10);
    std::vector<float> residual(N * C::hidden, 0.0f);
    cpu::SwiGluMlp<float> mlp;
    mlp.forward(w.dense_mlp(0), cpu::rows_of<const float>(x.data(), N, C::hidden),
                cpu::rows_of(residual.data(), N, C::hidden));
    std::vector<std::vector<double>> want(N);
    for (int r = 0; r < N; ++r) want[r] = cpx::testing::reference_mlp<C>(ref, "layers.0.", split_rows(x, N, C::hidden)[r], 0);
    CHECK(relative_error(residual, join(want)) < 1e-5);
}

TEST_CASE("mu guidance clamps mu_param to [0, 2], adds W_mu h2, and clamps the sum to [-2, 2]") {
    using C = Routed;
    const auto w = test_weights<C>(28);
    const auto ref = reference_weights(w);
    const int N = 10;
    const auto h2 = random_normal(N * C::hidden, 11, 2.0f);
    auto next = cpx::testing::poisoned<float>(N * C::hidden);
    cpu::LinearScratch scratch;
    cpu::next_mu<C, float>(w.mu_guidance(0), cpu::rows_of<const float>(h2.data(), N, C::hidden),
                           cpu::rows_of(next.data(), N, C::hidden), scratch);
    std::vector<double> want(N * C::hidden);
    int clamped = 0;
    for (int r = 0; r < N; ++r) {
        const auto proj = cpx::testing::ref::linear(ref["layers.0.mu_guidance.mu_proj.weight"],
                                                    split_rows(h2, N, C::hidden)[r], C::hidden);
        for (int i = 0; i < C::hidden; ++i) {
            const double raw = std::clamp(ref["layers.0.mu_guidance.mu"][i], 0.0, 2.0) + proj[i];
            want[r * C::hidden + i] = std::clamp(raw, -2.0, 2.0);
            clamped += std::abs(raw) > 2.0;
        }
    }
    CHECK(clamped > 0);  // the test weights reach the clamp
    CHECK(relative_error(next, want) < 1e-5);
}

TEST_CASE("the token-routed MLP rejects token ids outside the routing table") {
    using C = Routed;
    const auto w = test_weights<C>(29);
    std::vector<float> x(2 * C::hidden), residual(2 * C::hidden);
    const std::vector<std::int64_t> tokens = {1, C::vocab};
    cpu::TokenRoutedMlp<C, float> mlp;
    CHECK_THROWS_AS(mlp.forward(w.token_routed_mlp(0), cpu::rows_of<const float>(x.data(), 2, C::hidden), tokens,
                                w.routing(0), cpu::rows_of(residual.data(), 2, C::hidden)),
                    InputError);
}

TEST_CASE("layers take rows of the widths their configuration fixes and refuse others where they are handed over") {
    using C = Routed;
    const auto w = test_weights<C>(31);
    const int in = 2 * C::hidden;  // [a | mu]
    std::vector<float> x(3 * in), residual(3 * in);
    cpu::MuGqaAttention<C, float> attention;
    const cpu::SequenceRows<float> seq{0, 3, 0, {}, {}};
    // Rows of the hidden width where [a | mu] rows are expected, and the reverse for the residual.
    CHECK_THROWS_WITH_AS(attention.forward(w.attention(1), cpu::rows_of<const float>(x.data(), 3, C::hidden),
                                           std::span(&seq, 1), cpu::rows_of(residual.data(), 3, C::hidden)),
                         doctest::Contains("columns where the configuration fixes"), ShapeError);
    CHECK_THROWS_AS(attention.forward(w.attention(1), cpu::rows_of<const float>(x.data(), 3, in), std::span(&seq, 1),
                                      cpu::rows_of(residual.data(), 3, in)),
                    ShapeError);
    CHECK_THROWS_AS(attention.forward(w.attention(1), cpu::rows_of<const float>(x.data(), 3, in), std::span(&seq, 1),
                                      cpu::rows_of(residual.data(), 2, C::hidden)),
                    ShapeError);  // row counts differ
    const std::vector<std::int64_t> tokens = {1, 2, 3};
    cpu::TokenRoutedMlp<C, float> mlp;
    CHECK_THROWS_AS(mlp.forward(w.token_routed_mlp(0), cpu::rows_of<const float>(x.data(), 3, C::hidden - 1), tokens,
                                w.routing(0), cpu::rows_of(residual.data(), 3, C::hidden)),
                    ShapeError);
    // The same rows with the width in their type are accepted without a check at run time.
    CHECK_NOTHROW(attention.forward(w.attention(1), cpu::rows_of<in, const float>(x.data(), 3), std::span(&seq, 1),
                                    cpu::rows_of<C::hidden>(residual.data(), 3)));
}

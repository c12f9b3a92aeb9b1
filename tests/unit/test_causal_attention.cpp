// The causal attention core against a plain double-precision softmax attention.
#include <doctest/doctest.h>

#include <cpx/cpu/layers/causal_attention.hpp>
#include <cpx/cpu/kernels/gemm_bf16.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string_view>
#include <vector>

#include "test_support.hpp"
#include "vector_isas.hpp"

using namespace cpx;

namespace {
struct Case {
    int heads, kv_heads, dim, rows;
    index_t offset;
};

// Packed layouts: q [rows, heads*dim], k/v [keys, kv_heads*dim]; query row t is at position offset + t.
std::vector<double> reference_attention(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                                        const std::vector<float>& v, double scale,
                                        std::vector<std::vector<double>>* probs = nullptr) {
    const int groups = c.heads / c.kv_heads;
    std::vector<double> out(static_cast<std::size_t>(c.rows) * c.heads * c.dim);
    for (int t = 0; t < c.rows; ++t)
        for (int h = 0; h < c.heads; ++h) {
            const int kh = h / groups;
            const index_t keys = c.offset + t + 1;
            std::vector<double> s(keys);
            double mx = -1e300;
            for (index_t j = 0; j < keys; ++j) {
                double dot = 0;
                for (int i = 0; i < c.dim; ++i)
                    dot += double(q[(t * c.heads + h) * c.dim + i]) * k[(j * c.kv_heads + kh) * c.dim + i];
                s[j] = scale * dot;
                mx = std::max(mx, s[j]);
            }
            double sum = 0;
            for (auto& x : s) sum += (x = std::exp(x - mx));
            for (auto& x : s) x /= sum;
            for (int i = 0; i < c.dim; ++i) {
                double acc = 0;
                for (index_t j = 0; j < keys; ++j) acc += s[j] * v[(j * c.kv_heads + kh) * c.dim + i];
                out[(t * c.heads + h) * c.dim + i] = acc;
            }
            if (probs) (*probs)[t * c.heads + h] = s;
        }
    return out;
}

template <class KV = float>
std::vector<float> run(const Case& c, const std::vector<float>& q, const std::vector<KV>& k, const std::vector<KV>& v,
                       float scale, cpu::AttentionWorkspace& ws, cpu::Compute compute = cpu::Compute::fp32) {
    auto out = testing::poisoned<float>(static_cast<std::size_t>(c.rows) * c.heads * c.dim);
    const index_t keys = c.offset + c.rows;
    cpu::causal_attention<KV>(cpu::packed_heads(q.data(), c.rows, c.heads, c.dim),
                              cpu::packed_heads(k.data(), keys, c.kv_heads, c.dim),
                              cpu::packed_heads(v.data(), keys, c.kv_heads, c.dim),
                              cpu::packed_heads(out.data(), c.rows, c.heads, c.dim), c.offset, scale, ws, {}, compute);
    return out;
}
/// Random q, k, v for a case (seeds base, base + 1, base + 2).
struct Inputs {
    std::vector<float> q, k, v;
};
Inputs random_inputs(const Case& c, unsigned base) {
    const index_t keys = c.offset + c.rows;
    return {testing::random_normal(c.rows * c.heads * c.dim, base, 1.0f),
            testing::random_normal(keys * c.kv_heads * c.dim, base + 1, 1.0f),
            testing::random_normal(keys * c.kv_heads * c.dim, base + 2, 1.0f)};
}
/// x rounded to bf16, as a cache stores it; x itself becomes the rounded values, so that a
/// reference reading x sees exactly what is stored.
std::vector<bf16> round_to_bf16(std::vector<float>& x) {
    std::vector<bf16> stored(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        stored[i] = bf16::from_float(x[i]);
        x[i] = stored[i].to_float();
    }
    return stored;
}
/// The [rows, cols] block of `strided` (rows `stride` apart), packed.
std::vector<float> gather_rows(const std::vector<float>& strided, index_t rows, index_t cols, index_t stride) {
    std::vector<float> packed(static_cast<std::size_t>(rows * cols));
    for (index_t i = 0; i < rows; ++i)
        std::copy_n(strided.begin() + i * stride, cols, packed.begin() + i * cols);
    return packed;
}
}  // namespace

TEST_CASE("causal attention matches the reference for MHA, GQA and MQA shapes, with and without offset") {
    cpu::AttentionWorkspace ws;
    // rows 70 with one group spans two 64-row blocks; offsets model a chunk appended to a cache.
    // 260 query heads on one KV head stack more than max_deferred_rows rows in a block, whose
    // probabilities are then normalised in place (masked_softmax_row) instead of the outputs.
    // Every softmax kernel the machine runs (portable Eigen, AVX2, AVX-512).
    for (cpu::VectorIsa isa : testing::vector_isas()) {
        const cpu::VectorIsaLimit limit(isa);
        CAPTURE(cpu::vector_isa_name(isa));
        for (Case c : {Case{4, 4, 16, 70, 0}, Case{6, 2, 8, 33, 0}, Case{6, 2, 8, 5, 17}, Case{4, 1, 32, 1, 40},
                       Case{3, 1, 64, 30, 100}, Case{260, 1, 8, 3, 5}, Case{260, 1, 8, 20, 0}}) {
            CAPTURE(c.heads);
            CAPTURE(c.kv_heads);
            CAPTURE(c.rows);
            CAPTURE(c.offset);
            auto [q, k, v] = random_inputs(c, 1);
            const float scale = 1.0f / std::sqrt(float(c.dim));
            // fp32 dot products of <= 64 terms and fp32 softmax sums over <= 130 keys: ~1e-6 relative.
            CHECK(testing::relative_error(run(c, q, k, v, scale, ws), reference_attention(c, q, k, v, scale)) <
                  1e-5);
        }
    }
}

// Packed products: the block's keys and values packed per call. fp32_packed sums the same
// products in another order (~1e-6). bf16 rounds q, k, the probabilities and v to 8 bits:
// scores err by ~2^-8 of |q||k| scale (about 1e-2 absolute here), so probabilities by ~1%
// relative, and the outputs, averages of values, by about that share of their scale;
// measured ~4e-3 relative to the largest output, allowed 3e-2 as the model tests allow.
TEST_CASE("packed attention products (fp32_packed, bf16) match the reference, fp32 and bf16 caches") {
    cpu::AttentionWorkspace ws;
    const bool have_f32 = cpu::gemm_f32_packed_available(), have_bf16 = cpu::best_bf16_level() != cpu::Bf16Level::none;
    if (!have_f32) MESSAGE("fp32_packed: skipped, neither AVX-512 nor AVX2 and FMA (", cpu::cpu_features().summary(), ")");
    if (!have_bf16) MESSAGE("bf16: skipped, no bf16 level (neither bf16 instructions nor AVX2 and FMA: ", cpu::cpu_features().summary(), ")");
    // Blocks of 64 stacked rows and tails of them, head dims 8-128 (not multiples of the 64-column
    // panels), chunks appended to a cache, GQA and MHA.
    for (Case c : {Case{12, 4, 64, 150, 0}, Case{8, 8, 32, 70, 0}, Case{6, 2, 8, 33, 0}, Case{3, 1, 64, 30, 100},
                   Case{4, 2, 128, 40, 9}, Case{5, 5, 24, 17, 0}}) {
        CAPTURE(c.heads);
        CAPTURE(c.kv_heads);
        CAPTURE(c.dim);
        CAPTURE(c.rows);
        CAPTURE(c.offset);
        auto [q, k, v] = random_inputs(c, 31);
        const float scale = 1.0f / std::sqrt(float(c.dim));
        const auto want = reference_attention(c, q, k, v, scale);
        const auto fp32 = run(c, q, k, v, scale, ws);
        if (have_f32) {
            const auto got = run(c, q, k, v, scale, ws, cpu::Compute::fp32_packed);
            CHECK(testing::relative_error(got, want) < 1e-5);
            // The default arithmetic packs per call too where the vector level runs the packed kernel
            // (the same bits); at the portable level it keeps Eigen's products.
            if (cpu::vector_isa() != cpu::VectorIsa::portable) CHECK(fp32 == got);
        }
        {
            const cpu::VectorIsaLimit eigen(cpu::VectorIsa::portable);
            CHECK(testing::relative_error(run(c, q, k, v, scale, ws), want) < 1e-5);
        }
        if (have_bf16) {
            const auto got = run(c, q, k, v, scale, ws, cpu::Compute::bf16);
            const double err = testing::relative_error(got, want);
            MESSAGE("bf16 attention, relative error ", err);
            CHECK(err < 3e-2);
            CHECK(err > 1e-5);  // the bf16 products did run
        }
        // A bf16 cache: its values are the rounded ones, the reference reads them exactly.
        const std::vector<bf16> k16 = round_to_bf16(k), v16 = round_to_bf16(v);
        const auto want16 = reference_attention(c, q, k, v, scale);
        if (have_f32) CHECK(testing::relative_error(run(c, q, k16, v16, scale, ws, cpu::Compute::fp32_packed), want16) < 1e-5);
        if (have_bf16) CHECK(testing::relative_error(run(c, q, k16, v16, scale, ws, cpu::Compute::bf16), want16) < 3e-2);
    }
}

TEST_CASE("decode-shaped calls (a few query rows per KV head) match the reference, fp32 and bf16 caches") {
    // One or two new rows against a long cache, head dims 32-192 and 1 to 4
    // query rows per KV head: the shapes of the dedicated decode kernel
    // (AVX-512) and of its fallback, for both storage types; every kernel family
    // the machine runs is checked.
    // At the AVX-512 level both stream-fetch choices (testing::kernel_variants).
    cpu::AttentionWorkspace ws;
    for (const testing::KernelVariant& variant : testing::kernel_variants()) {
        for (Case c : {Case{12, 4, 64, 1, 511}, Case{16, 4, 64, 1, 300}, Case{8, 4, 128, 2, 77}, Case{6, 2, 192, 1, 40},
                       Case{4, 1, 32, 1, 1000}, Case{4, 4, 96, 1, 3}, Case{4, 2, 96, 1, 200},
                       Case{12, 4, 64, 2, 50}}) {
            const testing::KernelVariantLimit limit(variant);
            CAPTURE(variant.name());
            CAPTURE(c.heads);
            CAPTURE(c.dim);
            CAPTURE(c.rows);
            CAPTURE(c.offset);
            const index_t keys = c.offset + c.rows;
            auto [q, k, v] = random_inputs(c, 21);
            const float scale = 1.0f / std::sqrt(float(c.dim));
            CHECK(testing::relative_error(run(c, q, k, v, scale, ws), reference_attention(c, q, k, v, scale)) < 1e-5);

            const std::vector<bf16> k16 = round_to_bf16(k), v16 = round_to_bf16(v);
            auto out = testing::poisoned<float>(c.rows * c.heads * c.dim);
            cpu::causal_attention<bf16>(cpu::packed_heads(q.data(), c.rows, c.heads, c.dim),
                                        cpu::packed_heads(k16.data(), keys, c.kv_heads, c.dim),
                                        cpu::packed_heads(v16.data(), keys, c.kv_heads, c.dim),
                                        cpu::packed_heads(out.data(), c.rows, c.heads, c.dim), c.offset, scale, ws);
            CHECK(testing::relative_error(out, reference_attention(c, q, k, v, scale)) < 1e-5);
        }
    }
}

TEST_CASE("keys past the last query's position are never read") {
    const Case c{4, 2, 8, 6, 3};
    const index_t keys = c.offset + c.rows, capacity = keys + 10;
    auto q = testing::random_normal(c.rows * c.heads * c.dim, 4);
    auto k = testing::random_normal(capacity * c.kv_heads * c.dim, 5);
    auto v = testing::random_normal(capacity * c.kv_heads * c.dim, 6);
    auto k_poisoned = k, v_poisoned = v;
    for (std::size_t i = keys * c.kv_heads * c.dim; i < k.size(); ++i)
        k_poisoned[i] = v_poisoned[i] = std::numeric_limits<float>::quiet_NaN();
    cpu::AttentionWorkspace ws;
    auto out = testing::poisoned<float>(c.rows * c.heads * c.dim);
    cpu::causal_attention<float>(cpu::packed_heads(q.data(), c.rows, c.heads, c.dim),
                                 cpu::packed_heads(k_poisoned.data(), capacity, c.kv_heads, c.dim),
                                 cpu::packed_heads(v_poisoned.data(), capacity, c.kv_heads, c.dim),
                                 cpu::packed_heads(out.data(), c.rows, c.heads, c.dim), c.offset, 0.3f, ws);
    CHECK(testing::relative_error(out, reference_attention(c, q, k, v, 0.3)) < 1e-5);
}

TEST_CASE("q, k and v may be column ranges of one fused projection row") {
    // Row layout [q (3 heads) | k (1 head) | v (1 head)] of dim 8, as a fused QKV GEMM produces.
    const Case c{3, 1, 8, 12, 0};
    const int width = (3 + 1 + 1) * 8;
    auto fused = testing::random_normal(c.rows * width, 7);
    std::vector<float> q, k, v;
    for (int t = 0; t < c.rows; ++t) {
        q.insert(q.end(), fused.begin() + t * width, fused.begin() + t * width + 24);
        k.insert(k.end(), fused.begin() + t * width + 24, fused.begin() + t * width + 32);
        v.insert(v.end(), fused.begin() + t * width + 32, fused.begin() + t * width + 40);
    }
    cpu::AttentionWorkspace ws;
    auto out = testing::poisoned<float>(c.rows * 24);
    cpu::causal_attention<float>(cpu::packed_heads(fused.data(), c.rows, 3, 8, width),
                                 cpu::packed_heads(fused.data() + 24, c.rows, 1, 8, width),
                                 cpu::packed_heads(fused.data() + 32, c.rows, 1, 8, width),
                                 cpu::packed_heads(out.data(), c.rows, 3, 8), 0, 0.5f, ws);
    CHECK(testing::relative_error(out, reference_attention(c, q, k, v, 0.5)) < 1e-5);
}

TEST_CASE("a bf16 KV store gives the attention of its rounded keys and values") {
    const Case c{4, 2, 16, 9, 20};
    const index_t keys = c.offset + c.rows;
    auto q = testing::random_normal(c.rows * c.heads * c.dim, 8);
    auto k = testing::random_normal(keys * c.kv_heads * c.dim, 9);
    auto v = testing::random_normal(keys * c.kv_heads * c.dim, 10);
    const std::vector<bf16> k16 = round_to_bf16(k), v16 = round_to_bf16(v);  // the reference sees the stored values
    cpu::AttentionWorkspace ws;
    auto out = testing::poisoned<float>(c.rows * c.heads * c.dim);
    cpu::causal_attention<bf16>(cpu::packed_heads(q.data(), c.rows, c.heads, c.dim),
                                cpu::packed_heads(k16.data(), keys, c.kv_heads, c.dim),
                                cpu::packed_heads(v16.data(), keys, c.kv_heads, c.dim),
                                cpu::packed_heads(out.data(), c.rows, c.heads, c.dim), c.offset, 0.25f, ws);
    CHECK(testing::relative_error(out, reference_attention(c, q, k, v, 0.25)) < 1e-5);
}

TEST_CASE("the observer sees every (head, position) once with the reference probabilities") {
    const Case c{4, 2, 8, 7, 5};
    const index_t keys = c.offset + c.rows;
    auto q = testing::random_normal(c.rows * c.heads * c.dim, 11);
    auto k = testing::random_normal(keys * c.kv_heads * c.dim, 12);
    auto v = testing::random_normal(keys * c.kv_heads * c.dim, 13);
    std::vector<std::vector<double>> want(c.rows * c.heads);
    reference_attention(c, q, k, v, 0.4, &want);
    std::vector<std::vector<float>> seen(c.rows * c.heads);
    std::vector<std::atomic<int>> calls(c.rows * c.heads);
    auto observer = [&](int head, index_t position, const float* p, index_t count) {
        const std::size_t slot = (position - c.offset) * c.heads + head;
        seen[slot].assign(p, p + count);
        calls[slot].fetch_add(1);
    };
    cpu::AttentionWorkspace ws;
    std::vector<float> out(c.rows * c.heads * c.dim);
    cpu::causal_attention<float>(cpu::packed_heads(q.data(), c.rows, c.heads, c.dim),
                                 cpu::packed_heads(k.data(), keys, c.kv_heads, c.dim),
                                 cpu::packed_heads(v.data(), keys, c.kv_heads, c.dim),
                                 cpu::packed_heads(out.data(), c.rows, c.heads, c.dim), c.offset, 0.4f, ws, observer);
    for (std::size_t s = 0; s < seen.size(); ++s) {
        CHECK(calls[s].load() == 1);
        CHECK(testing::relative_error(seen[s], want[s]) < 1e-5);
    }
}

TEST_CASE("attention is bit-identical run to run") {
    const Case c{6, 2, 16, 80, 10};
    const index_t keys = c.offset + c.rows;
    auto q = testing::random_normal(c.rows * c.heads * c.dim, 14);
    auto k = testing::random_normal(keys * c.kv_heads * c.dim, 15);
    auto v = testing::random_normal(keys * c.kv_heads * c.dim, 16);
    cpu::AttentionWorkspace ws1, ws2;
    const auto a = run(c, q, k, v, 0.25f, ws1);
    const auto b = run(c, q, k, v, 0.25f, ws2);
    const auto again = run(c, q, k, v, 0.25f, ws1);
    for (std::size_t i = 0; i < a.size(); ++i) {
        CHECK(a[i] == b[i]);
        CHECK(a[i] == again[i]);
    }
}

TEST_CASE("a reserved workspace is not grown by calls within its reservation") {
    cpu::AttentionWorkspace ws;
    ws.reserve(2, 8, 8, 64, false);
    const auto bytes = ws.bytes();
    const Case c{4, 2, 8, 1, 63};
    auto q = testing::random_normal(c.heads * c.dim, 17);
    auto k = testing::random_normal(64 * c.kv_heads * c.dim, 18);
    auto v = testing::random_normal(64 * c.kv_heads * c.dim, 19);
    run(c, q, k, v, 0.3f, ws);
    CHECK(ws.bytes() == bytes);
}

TEST_CASE("attention rejects inconsistent heads and too few keys") {
    std::vector<float> buf(4096);
    cpu::AttentionWorkspace ws;
    auto q = cpu::packed_heads<const float>(buf.data(), 4, 3, 8);
    auto out = cpu::packed_heads(buf.data() + 2048, 4, 3, 8);
    auto kv2 = cpu::packed_heads<const float>(buf.data(), 8, 2, 8);
    CHECK_THROWS_AS(cpu::causal_attention<float>(q, kv2, kv2, out, 0, 1.0f, ws), ShapeError);
    auto kv1 = cpu::packed_heads<const float>(buf.data(), 8, 1, 8);
    CHECK_THROWS_AS(cpu::causal_attention<float>(q, kv1, kv1, out, 5, 1.0f, ws), InputError);
    CHECK_THROWS_AS(cpu::causal_attention<float>(q, kv1, kv1, out, -1, 1.0f, ws), InputError);
    auto kv_wide = cpu::packed_heads<const float>(buf.data(), 8, 1, 16);
    CHECK_THROWS_AS(cpu::causal_attention<float>(q, kv_wide, kv_wide, out, 0, 1.0f, ws), ShapeError);
}

// Every arithmetic: in the packed ones the two prefill problems (9 and 40 rows) run packed and the
// decode problem (1 row) reads its keys in place, exactly as in fp32.
TEST_CASE("a batch of sequences with different lengths and offsets equals separate calls, in every arithmetic") {
    std::vector<cpu::Compute> computes{cpu::Compute::fp32};
    if (cpu::gemm_f32_packed_available()) computes.push_back(cpu::Compute::fp32_packed);
    if (cpu::best_bf16_level() != cpu::Bf16Level::none) computes.push_back(cpu::Compute::bf16);
    for (const cpu::Compute compute : computes) {
        const std::string_view arithmetic = cpu::compute_name(compute);
        CAPTURE(arithmetic);
        const std::vector<Case> cases = {Case{4, 2, 8, 9, 0}, Case{4, 2, 8, 1, 30}, Case{4, 2, 8, 40, 3}};
        std::vector<std::vector<float>> q, k, v, out;
        std::vector<cpu::AttentionProblem<float>> problems;
        std::vector<std::size_t> observed_problem;
        for (std::size_t i = 0; i < cases.size(); ++i) {
            const Case& c = cases[i];
            const index_t keys = c.offset + c.rows;
            q.push_back(testing::random_normal(c.rows * c.heads * c.dim, 20 + i));
            k.push_back(testing::random_normal(keys * c.kv_heads * c.dim, 30 + i));
            v.push_back(testing::random_normal(keys * c.kv_heads * c.dim, 40 + i));
            out.push_back(testing::poisoned<float>(c.rows * c.heads * c.dim));
        }
        for (std::size_t i = 0; i < cases.size(); ++i) {
            const Case& c = cases[i];
            const index_t keys = c.offset + c.rows;
            problems.push_back({cpu::packed_heads<const float>(q[i].data(), c.rows, c.heads, c.dim),
                                cpu::packed_heads<const float>(k[i].data(), keys, c.kv_heads, c.dim),
                                cpu::packed_heads<const float>(v[i].data(), keys, c.kv_heads, c.dim),
                                cpu::packed_heads(out[i].data(), c.rows, c.heads, c.dim), c.offset});
        }
        std::vector<std::atomic<int>> rows_seen(cases.size());
        std::atomic<int> wrong_counts{0};
        cpu::AttentionWorkspace ws;
        const auto observe = [&](std::size_t problem, int, index_t position, const float*, index_t count) {
            if (count != position + 1) wrong_counts.fetch_add(1);
            rows_seen[problem].fetch_add(1);
        };
        cpu::causal_attention_batch<float>(problems, 0.35f, ws, compute, observe);
        CHECK(wrong_counts.load() == 0);
        for (std::size_t i = 0; i < cases.size(); ++i) {
            cpu::AttentionWorkspace single;
            const auto alone = run(cases[i], q[i], k[i], v[i], 0.35f, single, compute);
            for (std::size_t j = 0; j < alone.size(); ++j) CHECK(out[i][j] == alone[j]);
            CHECK(rows_seen[i].load() == cases[i].rows * cases[i].heads);
        }
        const auto decode_fp32 = run(cases[1], q[1], k[1], v[1], 0.35f, ws);
        for (std::size_t j = 0; j < decode_fp32.size(); ++j) CHECK(out[1][j] == decode_fp32[j]);
    }
}

TEST_CASE("a decode-only batch (one new row per sequence) equals separate calls, head-major and row-major caches") {
    // The shape of a batched decode step: every problem one query row read by the decode
    // kernels, caches laid out head-major (as KVCache stores them) or row-major. Eleven
    // sequences x 2 KV heads: more items than threads, so the items are shared (with two or
    // more sequences per thread, a thread takes all heads of a sequence).
    const int heads = 6, kv_heads = 2, dim = 64;
    const index_t capacity = 700;
    const std::vector<index_t> offsets = {0, 5, 63, 64, 100, 257, 511, 600, 1, 333, 699};
    const auto check = [&]<class KV>(bool head_major) {
        CAPTURE(head_major);
        CAPTURE(sizeof(KV));
        std::vector<std::vector<float>> q, out;
        std::vector<std::vector<KV>> k, v;
        std::vector<cpu::AttentionProblem<KV>> problems;
        const auto cache_view = [&](std::vector<KV>& c) {
            return head_major ? cpu::HeadRows<const KV>{c.data(), capacity, kv_heads, dim, dim, capacity * dim}
                              : cpu::HeadRows<const KV>(cpu::packed_heads(c.data(), capacity, kv_heads, dim));
        };
        for (std::size_t i = 0; i < offsets.size(); ++i) {
            q.push_back(testing::random_normal(heads * dim, 60 + i));
            const auto kf = testing::random_normal(capacity * kv_heads * dim, 70 + i);
            const auto vf = testing::random_normal(capacity * kv_heads * dim, 80 + i);
            k.emplace_back(kf.size()), v.emplace_back(vf.size());
            for (std::size_t j = 0; j < kf.size(); ++j) {
                if constexpr (std::is_same_v<KV, bf16>)
                    k.back()[j] = bf16::from_float(kf[j]), v.back()[j] = bf16::from_float(vf[j]);
                else
                    k.back()[j] = kf[j], v.back()[j] = vf[j];
            }
            out.push_back(testing::poisoned<float>(heads * dim));
        }
        for (std::size_t i = 0; i < offsets.size(); ++i) {
            const auto keys = cache_view(k[i]), values = cache_view(v[i]);
            problems.push_back({cpu::packed_heads<const float>(q[i].data(), 1, heads, dim),
                                keys.rows_range(0, offsets[i] + 1), values.rows_range(0, offsets[i] + 1),
                                cpu::packed_heads(out[i].data(), 1, heads, dim), offsets[i]});
        }
        cpu::AttentionWorkspace ws;
        for (cpu::Compute compute : {cpu::Compute::fp32, cpu::Compute::bf16}) {
            for (auto& o : out) {  // in place: the problems point into these buffers
                const auto poison = testing::poisoned<float>(heads * dim);
                std::copy(poison.begin(), poison.end(), o.begin());
            }
            cpu::causal_attention_batch<KV>(problems, 0.125f, ws, compute);
            for (std::size_t i = 0; i < offsets.size(); ++i) {
                CAPTURE(i);
                auto alone = testing::poisoned<float>(heads * dim);
                cpu::AttentionProblem<KV> single = problems[i];
                single.out = cpu::packed_heads(alone.data(), 1, heads, dim);
                cpu::AttentionWorkspace own;
                cpu::causal_attention_batch<KV>(std::span<const cpu::AttentionProblem<KV>>(&single, 1), 0.125f, own,
                                                compute);
                CHECK(out[i] == alone);
            }
        }
    };
    for (cpu::VectorIsa isa : testing::vector_isas()) {
        const cpu::VectorIsaLimit limit(isa);
        CAPTURE(cpu::vector_isa_name(isa));
        for (bool head_major : {true, false}) {
            check.template operator()<float>(head_major);
            check.template operator()<bf16>(head_major);
        }
    }
}

#if defined(CPX_HAVE_ATTENTION_DECODE_AVX512) && defined(CPX_HAVE_ATTENTION_DECODE_AVX2)
// The decode kernels of each vector set the machine has, called directly. Head widths: multiples
// of 32 (AVX-512) or 16 (AVX2) up to 256; the AVX2 value passes are 64, 32 and 16 wide.
namespace {
struct DecodeKernels {
    cpu::VectorIsa isa;
    int dim_step;
    /// Head widths for the score pass: every multiple of 32 for AVX-512; for AVX2 (chunks of 16)
    /// odd and even chunk counts, the constant-width 64, and the widest.
    std::vector<int> score_dims() const {
        if (isa == cpu::VectorIsa::avx2) return {16, 32, 48, 64, 80, 128, 208, 256};
        std::vector<int> dims;
        for (int dim = 32; dim <= 256; dim += 32) dims.push_back(dim);
        return dims;
    }
    template <class KV>
    void scores(const float* q, index_t qs, index_t rows, int dim, const KV* k, index_t ks, index_t n, float* s,
                index_t ss) const {
        if (isa == cpu::VectorIsa::avx512) cpu::avx512::decode_scores<KV>(q, qs, rows, dim, k, ks, n, s, ss);
        else cpu::avx2::decode_scores<KV>(q, qs, rows, dim, k, ks, n, s, ss);
    }
    template <class KV>
    void values(const float* p, index_t ps, index_t rows, const KV* v, index_t vs, index_t n, int dim, float* o,
                index_t os) const {
        if (isa == cpu::VectorIsa::avx512) cpu::avx512::decode_values<KV>(p, ps, rows, v, vs, n, dim, o, os);
        else cpu::avx2::decode_values<KV>(p, ps, rows, v, vs, n, dim, o, os);
    }
};

/// want[i * cols + j] = sum over t < inner of a(i, t) b(j, t), in double: the reference of both passes.
template <class A, class B>
std::vector<double> double_products(index_t rows, index_t cols, index_t inner, A a, B b) {
    std::vector<double> want(static_cast<std::size_t>(rows * cols));
    for (index_t i = 0; i < rows; ++i)
        for (index_t j = 0; j < cols; ++j) {
            double sum = 0.0;
            for (index_t t = 0; t < inner; ++t) sum += double(a(i, t)) * double(b(j, t));
            want[static_cast<std::size_t>(i * cols + j)] = sum;
        }
    return want;
}

/// The kernel sets this machine runs; a message for each one it lacks.
std::vector<DecodeKernels> decode_kernel_sets(const char* what) {
    std::vector<DecodeKernels> sets;
    const cpu::VectorIsa machine = cpu::machine_vector_isa();
    if (machine >= cpu::VectorIsa::avx2) sets.push_back({cpu::VectorIsa::avx2, 16});
    else MESSAGE(what, ": AVX2 kernels skipped, this machine lacks AVX2 (", cpu::cpu_features().summary(), ")");
    if (machine >= cpu::VectorIsa::avx512) sets.push_back({cpu::VectorIsa::avx512, 32});
    else MESSAGE(what, ": AVX-512 kernels skipped, this machine lacks AVX-512 (", cpu::cpu_features().summary(), ")");
    return sets;
}
}  // namespace

TEST_CASE("the decode score pass: every row count 1-9 and head width, fp32 and bf16 keys, against double sums") {
    // Key counts below, at and past the blocks of four and eight (tails of 1-7 keys), strided
    // rows; row counts that leave groups of one, two and three rows (AVX2).
    const index_t q_stride = 260, k_stride = 270, s_stride = 45;
    for (const DecodeKernels& kernels : decode_kernel_sets("decode score pass")) {
        CAPTURE(cpu::vector_isa_name(kernels.isa));
        for (index_t n : {index_t{1}, index_t{6}, index_t{7}, index_t{8}, index_t{37}}) {
            for (int dim : kernels.score_dims()) {
                for (index_t rows = 1; rows <= 9; ++rows) {  // past max_decode_rows too: four rows at a time
                    CAPTURE(n);
                    CAPTURE(dim);
                    CAPTURE(rows);
                    const auto q = testing::random_normal(rows * q_stride, 9);
                    auto k = testing::random_normal(n * k_stride, 10);
                    const std::vector<bf16> k16 = round_to_bf16(k);
                    const auto want = double_products(
                        rows, n, dim, [&](index_t i, index_t c) { return q[i * q_stride + c]; },
                        [&](index_t j, index_t c) { return k[j * k_stride + c]; });
                    auto s = testing::poisoned<float>(rows * s_stride);
                    kernels.scores<float>(q.data(), q_stride, rows, dim, k.data(), k_stride, n, s.data(), s_stride);
                    CHECK(testing::relative_error(gather_rows(s, rows, n, s_stride), want) < 1e-5);
                    s = testing::poisoned<float>(rows * s_stride);
                    kernels.scores<bf16>(q.data(), q_stride, rows, dim, k16.data(), k_stride, n, s.data(), s_stride);
                    CHECK(testing::relative_error(gather_rows(s, rows, n, s_stride), want) < 1e-5);
                    // Nothing past each row's n scores is written.
                    for (index_t i = 0; i < rows; ++i)
                        for (index_t j = n; j < s_stride; ++j) CHECK(std::isnan(s[i * s_stride + j]));
                }
            }
        }
    }
}

TEST_CASE("the decode value pass: every row count 1-9 and pass width, fp32 and bf16 values, against double sums") {
    const index_t p_stride = 75, v_stride = 230;
    for (const DecodeKernels& kernels : decode_kernel_sets("decode value pass")) {
        CAPTURE(cpu::vector_isa_name(kernels.isa));
        // AVX-512: passes of 128 (up to two rows), 64 and 32; AVX2: 64, 32 and 16, up to four rows
        // through each block of 32 keys: key counts within one block, one whole block, and several
        // with a tail.
        for (index_t n : {index_t{5}, index_t{32}, index_t{37}, index_t{70}}) {
            for (int dim : {16, 32, 48, 64, 80, 96, 128, 208, 224}) {
                if (dim % kernels.dim_step != 0) continue;
                for (index_t rows = 1; rows <= 9; ++rows) {  // past max_decode_rows too: four rows at a time
                    CAPTURE(n);
                    CAPTURE(dim);
                    CAPTURE(rows);
                    const auto p = testing::random_normal(rows * p_stride, 7);
                    auto v = testing::random_normal(n * v_stride, 8);
                    const std::vector<bf16> v16 = round_to_bf16(v);
                    const index_t o_stride = dim + 3;
                    const auto want = double_products(
                        rows, dim, n, [&](index_t i, index_t j) { return p[i * p_stride + j]; },
                        [&](index_t c, index_t j) { return v[j * v_stride + c]; });
                    auto o = testing::poisoned<float>(rows * o_stride);
                    kernels.values<float>(p.data(), p_stride, rows, v.data(), v_stride, n, dim, o.data(), o_stride);
                    CHECK(testing::relative_error(gather_rows(o, rows, dim, o_stride), want) < 1e-5);
                    // Nothing past each row's dim outputs is written.
                    for (index_t i = 0; i < rows; ++i)
                        for (index_t c = dim; c < o_stride; ++c)
                            CHECK(std::isnan(o[i * o_stride + c]));
                    o = testing::poisoned<float>(rows * o_stride);
                    kernels.values<bf16>(p.data(), p_stride, rows, v16.data(), v_stride, n, dim, o.data(), o_stride);
                    CHECK(testing::relative_error(gather_rows(o, rows, dim, o_stride), want) < 1e-5);
                }
            }
        }
    }
}
#endif

namespace {
/// A vector softmax kernel the machine runs: its masked_softmax_row.
struct SoftmaxKernel {
    const char* name;
    void (*softmax_row)(float*, index_t, index_t);
};
std::vector<SoftmaxKernel> softmax_kernels() {
    std::vector<SoftmaxKernel> kernels;
#ifdef CPX_HAVE_SOFTMAX_AVX2
    if (cpu::machine_vector_isa() >= cpu::VectorIsa::avx2) kernels.push_back({"avx2", cpu::avx2::masked_softmax_row});
#endif
#ifdef CPX_HAVE_SOFTMAX_AVX512
    if (cpu::machine_vector_isa() >= cpu::VectorIsa::avx512)
        kernels.push_back({"avx512", cpu::avx512::masked_softmax_row});
#endif
    for (cpu::VectorIsa isa : {cpu::VectorIsa::avx2, cpu::VectorIsa::avx512})
        if (cpu::machine_vector_isa() < isa)
            MESSAGE(cpu::vector_isa_name(isa), " softmax row skipped: this machine lacks it (", cpu::cpu_features().summary(), ")");
    return kernels;
}
}  // namespace

// The AVX2 and AVX-512 softmax rows against a double-precision one: every tail length of
// the 8- and 16-lane loops, long rows, spreads that underflow most terms to 0, -inf scores,
// and the masked part [valid, n) zeroed without touching what lies past n.
TEST_CASE("the vector softmax rows match a double softmax, tails and underflow included") {
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<index_t> lengths;
    for (index_t v = 1; v <= 40; ++v) lengths.push_back(v);
    for (index_t v : {63, 64, 65, 513, 2048}) lengths.push_back(v);
    for (const SoftmaxKernel& kernel : softmax_kernels()) {
        CAPTURE(kernel.name);
        unsigned seed = 300;
        for (float spread : {0.5f, 3.0f, 40.0f, 1000.0f})
            for (index_t valid : lengths) {
                CAPTURE(spread);
                CAPTURE(valid);
                const index_t n = valid + (valid % 7) * 3, guard = 5;
                auto s = testing::random_normal(static_cast<std::size_t>(n + guard), ++seed, spread);
                if (valid > 3) s[1] = -inf;  // a score that must give exactly 0
                const std::vector<float> in(s.begin(), s.begin() + valid);
                for (index_t j = n; j < n + guard; ++j) s[j] = 12345.0f;
                kernel.softmax_row(s.data(), valid, n);

                double mx = -1e300, sum = 0.0;
                for (float x : in) mx = std::max(mx, double(x));
                for (float x : in) sum += std::exp(double(x) - mx);
                double worst = 0.0, total = 0.0;
                for (index_t j = 0; j < valid; ++j) {
                    const double want = std::exp(double(in[j]) - mx) / sum;
                    total += s[j];
                    if (want > 1e-30) worst = std::max(worst, std::abs(s[j] - want) / want);
                    else CHECK(std::abs(s[j]) <= 1e-30);  // underflowed in fp32 or near it
                }
                CHECK(worst < 4e-6);
                CHECK(std::abs(total - 1.0) < 1e-5);
                if (valid > 3) CHECK(s[1] == 0.0f);
                for (index_t j = valid; j < n; ++j) CHECK(s[j] == 0.0f);
                for (index_t j = n; j < n + guard; ++j) CHECK(s[j] == 12345.0f);
            }
        // A NaN score poisons the row instead of vanishing as a zero probability.
        for (index_t at : {0, 5, 16, 20}) {
            CAPTURE(at);
            auto row = testing::random_normal(21, 400);
            row[static_cast<std::size_t>(at)] = std::numeric_limits<float>::quiet_NaN();
            kernel.softmax_row(row.data(), 21, 21);
            for (float p : row) CHECK(std::isnan(p));
        }
        // Equal scores: exactly uniform up to rounding.
        std::vector<float> flat(37, 2.5f);
        kernel.softmax_row(flat.data(), 37, 37);
        for (float p : flat) CHECK(std::abs(p - 1.0f / 37.0f) < 1e-7f);
    }
}

#ifdef CPX_HAVE_SOFTMAX_AVX512
// The bf16-writing row (what attention's P V product reads under Compute::bf16) against the
// fp32 row: the same 1 / sum, each value the fp32 exponential rounded to nearest even (those
// below 2^-126 to 0, as the rounding instruction and gemm_bf16's rounding treat them), zeros up
// to dst_n, the scores untouched.
TEST_CASE("the bf16 softmax row is the fp32 row rounded, with the same normaliser") {
    if (!cpu::bf16_level_available(cpu::Bf16Level::avx512_bf16)) {
        MESSAGE("bf16 softmax row skipped: this machine lacks AVX512_BF16 (", cpu::cpu_features().summary(), ")");
        return;
    }
    unsigned seed = 700;
    for (float spread : {0.5f, 3.0f, 40.0f, 1000.0f})
        for (index_t valid : {1, 2, 15, 16, 17, 31, 33, 64, 100, 513}) {
            CAPTURE(spread);
            CAPTURE(valid);
            const index_t dst_n = (valid + 31) / 32 * 32, guard = 3;
            const auto s = testing::random_normal(static_cast<std::size_t>(valid), ++seed, spread);
            std::vector<float> fp32 = s;
            const float want_inverse = cpu::avx512::masked_exp_row(fp32.data(), valid, valid);
            std::vector<std::uint16_t> dst(static_cast<std::size_t>(dst_n + guard), 0xBEEF);
            const std::vector<float> scores = s;
            const float inverse = cpu::avx512::masked_exp_row_bf16(scores.data(), valid, dst.data(), dst_n);
            CHECK(inverse == want_inverse);
            CHECK(scores == s);
            int wrong = 0;
            for (index_t j = 0; j < valid; ++j) {
                const float e = fp32[static_cast<std::size_t>(j)];
                const std::uint16_t want = e < 0x1p-126f ? 0 : bf16::from_float(e).bits;
                if (dst[static_cast<std::size_t>(j)] != want) ++wrong;
            }
            CHECK(wrong == 0);
            for (index_t j = valid; j < dst_n; ++j) CHECK(dst[static_cast<std::size_t>(j)] == 0);
            for (index_t j = dst_n; j < dst_n + guard; ++j) CHECK(dst[static_cast<std::size_t>(j)] == 0xBEEF);
        }
}
#endif

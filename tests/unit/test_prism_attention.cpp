// PRISM's pi-RoPE differential attention layer against a naive double-precision
// reference written from docs/MODELS.md §17.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/config/prism_attention_shape.hpp>
#include <cpx/cpu/layers/orthogonal_init.hpp>
#include <cpx/cpu/kernels/attention_distance.hpp>
#include <cpx/cpu/layers/prism_attention.hpp>
#include <cpx/models/kv_cache.hpp>
#include <cpx/models/seeded_normal.hpp>

#include <atomic>
#include <cmath>
#include <cstring>
#include <numbers>

#include "prism_reference.hpp"
#include "test_support.hpp"

using namespace cpx;

namespace {

using TinyShape = PrismAttentionOf<presets::TinyPrism>;  // d 32, H 2, R 2: D 32, U [128, 32]
using NoExpansion = PrismAttentionShape<PrismAttentionDims{.hidden = 24, .heads = 3, .expansion_ratio = 1,
                                                           .freq_multiplier = 2.5}>;
using RotateHalf = PrismAttentionShape<PrismAttentionDims{
    .hidden = 16, .heads = 2, .expansion_ratio = 3, .rope_convention = RopeConvention::rotate_half}>;
using UnitMultiplier = PrismAttentionShape<PrismAttentionDims{.hidden = 32, .heads = 2, .freq_multiplier = 1.0}>;

using reference::prism_shape;

std::vector<double> reference_layer(const reference::PrismShape& s, const std::vector<float>& x, int T,
                                    const std::vector<float>& u, double lambda,
                                    std::vector<double>* mean_distance = nullptr) {
    return reference::prism_attention(s, reference::widen(x), T, u, lambda, mean_distance);
}

/// Plain multi-head causal attention with W_q = W_k = W_v = U_s and W_o = U_s^T,
/// RoPE at one base: the textbook layer PRISM reduces to when lambda = 0.
std::vector<double> plain_attention(const std::vector<float>& x, int T, int d, int heads, int D,
                                    const std::vector<float>& w, double base, bool interleaved, double out_scale) {
    std::vector<double> out(std::size_t(T) * d, 0.0);
    for (int hd = 0; hd < heads; ++hd) {
        std::vector<std::vector<double>> v(T), k(T);
        for (int t = 0; t < T; ++t) {
            v[t].assign(D, 0.0);
            for (int i = 0; i < D; ++i)
                for (int c = 0; c < d; ++c) v[t][i] += double(w[(hd * D + i) * d + c]) * x[t * d + c];
            k[t] = reference::rope(v[t], base, t, interleaved);
        }
        for (int t = 0; t < T; ++t) {
            std::vector<double> p(t + 1), head_out(D, 0.0);
            double z = 0;
            for (int j = 0; j <= t; ++j) {
                double dot = 0;
                for (int i = 0; i < D; ++i) dot += k[t][i] * k[j][i];
                z += (p[j] = std::exp(dot / std::sqrt(double(D))));
            }
            for (int j = 0; j <= t; ++j)
                for (int i = 0; i < D; ++i) head_out[i] += p[j] / z * v[j][i];
            for (int c = 0; c < d; ++c)
                for (int i = 0; i < D; ++i) out[t * d + c] += out_scale * head_out[i] * w[(hd * D + i) * d + c];
        }
    }
    return out;
}

std::vector<float> orthogonal_u(int rows, int cols, std::uint64_t seed) {
    SeededRandom rng(seed);
    std::vector<float> u(std::size_t(rows) * cols);
    cpu::orthogonal_init(Matrix<float>(u.data(), rows, cols), [&] { return rng.normal(); });
    return u;
}

template <class S>
std::vector<float> run_layer(cpu::PrismAttention<S>& layer, const std::vector<float>& x, int T,
                             const std::vector<float>& u, float lambda) {
    auto out = testing::poisoned<float>(std::size_t(T) * S::hidden);
    layer.forward({Matrix<const float>(u.data(), S::u_rows, S::hidden), lambda},
                  Matrix<const float>(x.data(), T, S::hidden), Matrix<float>(out.data(), T, S::hidden));
    return out;
}

/// Relative error of the layer against the reference for one shape.
template <class S>
double layer_error(int T, float lambda, std::uint64_t seed, float u_scale = 1.0f) {
    auto u = orthogonal_u(S::u_rows, S::hidden, seed);
    for (auto& v : u) v *= u_scale;
    const auto x = testing::random_normal(std::size_t(T) * S::hidden, seed + 1);
    cpu::PrismAttention<S> layer(64);
    return testing::relative_error(run_layer(layer, x, T, u, lambda), reference_layer(prism_shape<S>(), x, T, u, lambda));
}

}  // namespace

TEST_CASE("the shape follows the spec: D = (d/H) R, U is [2HD, d], bases theta*m and theta/m") {
    static_assert(TinyShape::head_dim == 32);
    static_assert(TinyShape::u_rows == 128);
    static_assert(TinyShape::physical_heads == 4);
    using Mini = PrismAttentionOf<presets::PrismMini>;
    static_assert(Mini::head_dim == 128);
    static_assert(Mini::u_rows == 2048);
    CHECK(Mini::signal_rope.theta == doctest::Approx(31415.926535));
    CHECK(Mini::noise_rope.theta == doctest::Approx(3183.0988625));
    CHECK(Mini::signal_rope.convention == RopeConvention::interleaved_pairs);
}

TEST_CASE("the layer matches the double reference within 1e-4 (TinyPrism shape)") {
    // fp32 GEMMs with inner sizes 32 and 128, softmax over <= 40 keys: the
    // observed error is ~1e-6; 1e-4 is the project's bar for fp32 layers.
    CHECK(layer_error<TinyShape>(40, 0.37f, 101) < 1e-4);
    CHECK(layer_error<TinyShape>(1, 0.1f, 102) < 1e-4);
}

TEST_CASE("the layer matches the reference for R = 1, another multiplier and the rotate-half convention") {
    CHECK(layer_error<NoExpansion>(33, 0.25f, 111) < 1e-4);
    CHECK(layer_error<RotateHalf>(21, 0.6f, 121) < 1e-4);
}

TEST_CASE("the layer matches the reference when attention is sharp (large U)") {
    // Scaling U by 4 scales scores by 16: near one-hot softmax rows.
    CHECK(layer_error<TinyShape>(24, 0.1f, 131, 4.0f) < 1e-4);
}

TEST_CASE("with lambda = 0 the layer is plain causal attention over the signal heads") {
    const int T = 30, d = TinyShape::hidden, H = TinyShape::heads, D = TinyShape::head_dim;
    auto u = orthogonal_u(TinyShape::u_rows, d, 141);
    const auto x = testing::random_normal(std::size_t(T) * d, 142);
    cpu::PrismAttention<TinyShape> layer(64);
    const auto got = run_layer(layer, x, T, u, 0.0f);
    const auto want = plain_attention(x, T, d, H, D, u, 10000.0 * std::numbers::pi, true, 1.0 / std::sqrt(2.0 * H * 2));
    CHECK(testing::relative_error(got, want) < 1e-4);

    // The noise half of U then has no influence at all.
    const auto fresh = orthogonal_u(TinyShape::u_rows, d, 143);
    std::copy(fresh.begin() + H * D * d, fresh.end(), u.begin() + H * D * d);
    CHECK(testing::relative_error(run_layer(layer, x, T, u, 0.0f), got) < 1e-6);
}

TEST_CASE("multiplier 1 gives signal and noise heads the same RoPE basis") {
    static_assert(UnitMultiplier::signal_rope.theta == UnitMultiplier::noise_rope.theta);
    cpu::PrismAttention<UnitMultiplier> unit(64);
    for (index_t pos : {0, 1, 17, 63})
        for (int i = 0; i < UnitMultiplier::head_dim / 2; ++i) {
            CHECK(unit.signal_rope().cos_at(pos)[i] == unit.noise_rope().cos_at(pos)[i]);
            CHECK(unit.signal_rope().sin_at(pos)[i] == unit.noise_rope().sin_at(pos)[i]);
        }
    // Behaviourally: with both halves of U equal, noise heads reproduce the
    // signal heads, so out(lambda) = (1 - lambda) out(0) ...
    const int T = 20, d = UnitMultiplier::hidden, half = UnitMultiplier::u_rows / 2;
    auto u = orthogonal_u(UnitMultiplier::u_rows, d, 151);
    std::copy(u.begin(), u.begin() + half * d, u.begin() + half * d);
    const auto x = testing::random_normal(std::size_t(T) * d, 152);
    const auto base = run_layer(unit, x, T, u, 0.0f);
    auto scaled = base;
    for (auto& v : scaled) v *= 0.7f;
    CHECK(testing::relative_error(run_layer(unit, x, T, u, 0.3f), scaled) < 1e-5);
    // ... which the pi multiplier breaks: its noise heads see other frequencies.
    cpu::PrismAttention<TinyShape> pi_layer(64);
    const auto pi0 = run_layer(pi_layer, x, T, u, 0.0f);
    auto pi_scaled = pi0;
    for (auto& v : pi_scaled) v *= 0.7f;
    CHECK(testing::relative_error(run_layer(pi_layer, x, T, u, 0.3f), pi_scaled) > 1e-3);
}

TEST_CASE("chunks through a KV cache reproduce the one-shot layer: chunked prefill and decode") {
    const int T = 37, d = TinyShape::hidden, W = TinyShape::u_rows;
    const auto u = orthogonal_u(W, d, 161);
    const auto x = testing::random_normal(std::size_t(T) * d, 162);
    cpu::PrismAttention<TinyShape> layer(48);
    const auto whole = run_layer(layer, x, T, u, 0.2f);

    for (int chunk : {1, 5, 16, 37}) {
        KVCache<presets::TinyPrism> cache(48);  // the models' cache; this test uses its layer 0
        auto out = testing::poisoned<float>(std::size_t(T) * d);
        for (int t0 = 0; t0 < T; t0 += chunk) {
            const int n = std::min(chunk, T - t0);
            const cpu::SequenceRows<float> s{0, n, t0, cache.keys(0), cache.values(0)};
            layer.forward({Matrix<const float>(u.data(), W, d), 0.2f}, cpu::rows_of(x.data() + t0 * d, n, d),
                          std::span(&s, 1), cpu::rows_of(out.data() + t0 * d, n, d), cpu::Write::overwrite);
        }
        // Same arithmetic per row up to GEMM blocking: a few fp32 ulps.
        CHECK_MESSAGE(testing::relative_error(out, whole) < 1e-5, "chunk size ", chunk);
    }
}

namespace {
/// d 128, H 4, R 2: D 64, U [512, 128]; the input-major product splits U's rows into four
/// chunks of two heads each, so a decode row runs head by head.
using FourChunks = PrismAttentionShape<PrismAttentionDims{.hidden = 128, .heads = 4}>;
/// d 160, H 5, R 2: D 64, U [640, 160] in chunks of 160 rows, which split heads.
using SplitHeads = PrismAttentionShape<PrismAttentionDims{.hidden = 160, .heads = 5}>;
static_assert(cpu::PrismAttention<SplitHeads>::decodes_by_head == false);

/// FourChunks' U (orthogonal, seed `seed`) stored as W.
template <class W>
std::vector<W> four_chunks_u(std::uint64_t seed) {
    const auto uf = orthogonal_u(FourChunks::u_rows, FourChunks::hidden, seed);
    std::vector<W> u(uf.size());
    for (std::size_t i = 0; i < u.size(); ++i) u[i] = from_float<W>(uf[i]);
    return u;
}

/// The output row a decode row writes and the cache it leaves.
template <class KV>
struct DecodedRow {
    std::vector<float> out;
    std::vector<KV> k, v;
};

/// Row T - 1 of x through a fresh FourChunks layer after a prefill of its first T - 1 rows
/// (with `prefill`'s weights), the row with `row_weights` on `threads` threads: `by_head`
/// without an observer (head by head where that applies), else with one that does nothing
/// (the whole-layer path). The output starts as `residual` under accumulate, else poisoned.
template <class W, class KV>
DecodedRow<KV> decode_after_prefill(const cpu::PrismAttentionWeights<W>& prefill,
                                    const cpu::PrismAttentionWeights<W>& row_weights, const std::vector<float>& x,
                                    int T, const std::vector<float>& residual, int threads, bool by_head,
                                    cpu::Write mode) {
    using S = FourChunks;
    const int d = S::hidden, heads = S::physical_heads, D = S::head_dim, capacity = std::max(T, 32);
    cpu::PrismAttention<S, W, KV> layer(capacity);
    DecodedRow<KV> r;
    r.k.assign(std::size_t(capacity) * heads * D, from_float<KV>(0.0f));
    r.v = r.k;
    const auto keys = cpu::packed_heads(r.k.data(), capacity, heads, D);
    const auto values = cpu::packed_heads(r.v.data(), capacity, heads, D);
    auto prefill_out = testing::poisoned<float>(std::size_t(T - 1) * d);
    const cpu::SequenceRows<KV> first{0, T - 1, 0, keys, values}, last{0, 1, T - 1, keys, values};
    layer.forward(prefill, cpu::rows_of(x.data(), T - 1, d), std::span(&first, 1),
                  cpu::rows_of(prefill_out.data(), T - 1, d), cpu::Write::overwrite);
    r.out = mode == cpu::Write::accumulate ? residual : testing::poisoned<float>(std::size_t(d));
    const auto row = cpu::rows_of(x.data() + (T - 1) * d, 1, d);
    const auto dst = cpu::rows_of(r.out.data(), 1, d);
    testing::on_threads(threads, [&] {
        if (by_head) layer.forward(row_weights, row, std::span(&last, 1), dst, mode);
        else layer.forward(row_weights, row, std::span(&last, 1), dst, mode, [](int, index_t, const float*, index_t) {});
    });
    return r;
}

/// One decode row after a prefill of T - 1 rows, head by head (no observer) on `threads`
/// threads and through the whole-layer path (an observer that does nothing) on two: the outputs
/// and the cached rows must be the same bits. `fp32_packs`: the head-by-head row is given U's
/// fp32 packs too, which it leaves for the stored U (the same arithmetic, U read once).
template <class W, class KV>
void check_decode_by_head(int threads, cpu::Write mode, bool fp32_packs = false, int T = 23) {
    using S = FourChunks;
    const int d = S::hidden;
    const auto u = four_chunks_u<W>(181);
    const cpu::PrismAttentionWeights<W> w{Matrix<const W>(u.data(), S::u_rows, d), 0.35f};
    const StridedMatrix<const W> stored = cpu::rows_of(w.u);
    const auto out_in = cpu::PackedWeight::pack(stored, cpu::WeightOrientation::out_in, cpu::Compute::fp32_packed);
    const auto in_out = cpu::PackedWeight::pack(stored, cpu::WeightOrientation::in_out, cpu::Compute::fp32_packed);
    cpu::PrismAttentionWeights<W> packed = w;
    packed.u_packed = &out_in;
    packed.u_t_packed = &in_out;
    const auto x = testing::random_normal(std::size_t(T) * d, 182);
    const auto residual = testing::random_normal(std::size_t(d), 183);
    const auto by_head = decode_after_prefill<W, KV>(w, fp32_packs ? packed : w, x, T, residual, threads, true, mode);
    const auto whole = decode_after_prefill<W, KV>(w, w, x, T, residual, 2, false, mode);
    for (int i = 0; i < d; ++i) REQUIRE_MESSAGE(by_head.out[i] == whole.out[i], "output ", i);
    const auto same_bits = [](const std::vector<KV>& a, const std::vector<KV>& b) {
        return std::memcmp(a.data(), b.data(), a.size() * sizeof(KV)) == 0;
    };
    CHECK(same_bits(by_head.k, whole.k));
    CHECK(same_bits(by_head.v, whole.v));
}
}  // namespace

TEST_CASE("a decode row run head by head gives the whole layer's bits (fp32/bf16 U and cache, fp32 packs, 1-3 threads)") {
    static_assert(cpu::PrismAttention<FourChunks>::decodes_by_head);
    if (cpu::vector_isa() != cpu::VectorIsa::avx512) {
        MESSAGE("skipped: this CPU has no AVX-512, where decode rows run head by head");
        return;
    }
    for (int threads : {1, 2, 3}) {
        check_decode_by_head<float, float>(threads, cpu::Write::overwrite);
        check_decode_by_head<bf16, bf16>(threads, cpu::Write::overwrite);
        check_decode_by_head<bf16, float>(threads, cpu::Write::accumulate);
        check_decode_by_head<float, bf16>(threads, cpu::Write::accumulate);
        check_decode_by_head<float, float>(threads, cpu::Write::accumulate, true);
        check_decode_by_head<bf16, bf16>(threads, cpu::Write::overwrite, true);
    }
    // Past 704 cached keys a FourChunks head's rows of fp32 U, keys and values exceed half the
    // phase budget: one head per phase instead of two.
    static_assert(cpu::PrismAttention<FourChunks>::heads_per_phase(23) == 2);
    static_assert(cpu::PrismAttention<FourChunks>::heads_per_phase(720) == 1);
    check_decode_by_head<float, float>(2, cpu::Write::overwrite, false, 720);
}

namespace {
/// One decode row of bf16 U after a prefill of T - 1 rows, with U's bf16 packs (bf16
/// arithmetic): `by_head` through decode_row, else through the whole-layer packed products (an
/// observer that does nothing); `packs` false: the same row without packs (fp32 arithmetic).
template <class KV>
std::vector<float> bf16_decode_row(int threads, bool packs, bool by_head) {
    using S = FourChunks;
    const int T = 23;
    const auto u = four_chunks_u<bf16>(191);
    cpu::PrismAttentionWeights<bf16> w{Matrix<const bf16>(u.data(), S::u_rows, S::hidden), 0.35f};
    const StridedMatrix<const bf16> stored = cpu::rows_of(w.u);
    const auto out_in = cpu::PackedWeight::pack(stored, cpu::WeightOrientation::out_in, cpu::Compute::bf16);
    const auto in_out = cpu::PackedWeight::pack(stored, cpu::WeightOrientation::in_out, cpu::Compute::bf16);
    if (packs) w.u_packed = &out_in, w.u_t_packed = &in_out;
    const auto x = testing::random_normal(std::size_t(T) * S::hidden, 192);
    return decode_after_prefill<bf16, KV>(w, w, x, T, {}, threads, by_head, cpu::Write::overwrite).out;
}
}  // namespace

TEST_CASE("under bf16 arithmetic a decode row run head by head rounds its inputs as the packed layer does") {
    if (cpu::vector_isa() != cpu::VectorIsa::avx512) {
        MESSAGE("skipped: this CPU has no AVX-512, where decode rows run head by head");
        return;
    }
    // The head-by-head row multiplies the stored bf16 U with inputs rounded to bf16, the packed
    // products the same rounded inputs with U's packs: only the order of the fp32 sums differs, and
    // with it, rarely, the rounding of an attention output lying near the midpoint of two bf16
    // values. The fp32 row (no packs: inputs unrounded) is ~2^-9 away, bf16's rounding of x.
    for (int threads : {1, 2, 3}) {
        const auto packed_layer = bf16_decode_row<bf16>(threads, true, false);
        const auto by_head = bf16_decode_row<bf16>(threads, true, true);
        const auto fp32_row = bf16_decode_row<bf16>(threads, false, true);
        const double err = testing::relative_error(by_head, packed_layer);
        const double fp32_err = testing::relative_error(fp32_row, packed_layer);
        CHECK_MESSAGE(err < 1e-4, threads, " threads: ", err);
        CHECK_MESSAGE(err * 8 < fp32_err, threads, " threads: ", err, " against the fp32 row's ", fp32_err);
        const auto by_head_f32_cache = bf16_decode_row<float>(threads, true, true);
        const auto packed_f32_cache = bf16_decode_row<float>(threads, true, false);
        CHECK(testing::relative_error(by_head_f32_cache, packed_f32_cache) < 1e-4);
    }
}

TEST_CASE("a bf16 cache stores the keys and values rounded, close to the fp32 layer") {
    const int T = 20, d = TinyShape::hidden, W = TinyShape::u_rows;
    const auto u = orthogonal_u(W, d, 165);
    const auto x = testing::random_normal(std::size_t(T) * d, 166);
    cpu::PrismAttention<TinyShape, float, bf16> layer(48);
    KVCache<presets::TinyPrism, bf16> cache(48);
    auto out = testing::poisoned<float>(std::size_t(T) * d);
    const cpu::SequenceRows<bf16> s{0, T, 0, cache.keys(1), cache.values(1)};
    layer.forward({Matrix<const float>(u.data(), W, d), 0.3f}, cpu::rows_of(x.data(), T, d), std::span(&s, 1),
                  cpu::rows_of(out.data(), T, d), cpu::Write::overwrite);
    // bf16 keeps 8 bits of mantissa (relative rounding 2^-9 = 2e-3) on keys and values.
    CHECK(testing::relative_error(out, reference_layer(prism_shape<TinyShape>(), x, T, u, 0.3)) < 1e-2);
}

TEST_CASE("accumulate mode adds the layer to a residual stream") {
    const int T = 9, d = TinyShape::hidden, W = TinyShape::u_rows;
    const auto u = orthogonal_u(W, d, 167);
    const auto x = testing::random_normal(std::size_t(T) * d, 168);
    auto residual = testing::random_normal(std::size_t(T) * d, 169);
    auto want = reference_layer(prism_shape<TinyShape>(), x, T, u, 0.4);
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += residual[i];
    cpu::PrismAttention<TinyShape> layer(48);
    const cpu::SequenceRows<float> s{0, T, 0, {}, {}};
    layer.forward({Matrix<const float>(u.data(), W, d), 0.4f}, cpu::rows_of(x.data(), T, d), std::span(&s, 1),
                  cpu::rows_of(residual.data(), T, d), cpu::Write::accumulate);
    CHECK(testing::relative_error(residual, want) < 1e-4);
}

TEST_CASE("a batch of sequences of different lengths equals each sequence alone") {
    const int d = TinyShape::hidden, W = TinyShape::u_rows;
    const auto u = orthogonal_u(W, d, 171);
    const int lens[] = {7, 19, 1};
    const int total = 27;
    const auto x = testing::random_normal(std::size_t(total) * d, 172);
    cpu::PrismAttention<TinyShape> layer(48);
    std::vector<cpu::SequenceRows<float>> seqs;
    for (int s = 0, row = 0; s < 3; row += lens[s++]) seqs.push_back({row, lens[s], 0, {}, {}});
    auto out = testing::poisoned<float>(std::size_t(total) * d);
    layer.forward({Matrix<const float>(u.data(), W, d), 0.15f}, cpu::rows_of(x.data(), total, d),
                  std::span<const cpu::SequenceRows<float>>(seqs), cpu::rows_of(out.data(), total, d),
                  cpu::Write::overwrite);
    for (int s = 0, row = 0; s < 3; row += lens[s++]) {
        const std::vector<float> xs(x.begin() + row * d, x.begin() + (row + lens[s]) * d);
        const std::vector<float> got(out.begin() + row * d, out.begin() + (row + lens[s]) * d);
        CHECK(testing::relative_error(got, reference_layer(prism_shape<TinyShape>(), xs, lens[s], u, 0.15)) < 1e-4);
    }
}

TEST_CASE("QueryRows::last finishes each sequence's last row only; an empty sequence or a wrong output is an error") {
    const int d = TinyShape::hidden, W = TinyShape::u_rows;
    const auto u = orthogonal_u(W, d, 173);
    const int lens[] = {7, 19, 1};
    const int total = 27;
    const auto x = testing::random_normal(std::size_t(total) * d, 174);
    const cpu::PrismAttentionWeights<float> w{Matrix<const float>(u.data(), W, d), 0.15f};
    cpu::PrismAttention<TinyShape> layer(48);
    std::vector<cpu::SequenceRows<float>> seqs;
    for (int s = 0, row = 0; s < 3; row += lens[s++]) seqs.push_back({row, lens[s], 0, {}, {}});
    const std::span<const cpu::SequenceRows<float>> batch(seqs);
    auto all = testing::poisoned<float>(std::size_t(total) * d), last = testing::poisoned<float>(std::size_t(3) * d);
    layer.forward(w, cpu::rows_of(x.data(), total, d), batch, cpu::rows_of(all.data(), total, d), cpu::Write::overwrite);
    layer.forward(w, cpu::rows_of(x.data(), total, d), batch, cpu::rows_of(last.data(), 3, d), cpu::Write::overwrite,
                  cpu::NoAttentionObserver{}, cpu::QueryRows::last);
    for (int s = 0, end = 0; s < 3; ++s) {
        end += lens[s];
        const std::vector<float> want(all.begin() + (end - 1) * d, all.begin() + end * d);
        CHECK(testing::relative_error(std::vector<float>(last.begin() + s * d, last.begin() + (s + 1) * d), want) <
              1e-6);
    }
    // None: no output rows at all.
    layer.forward(w, cpu::rows_of(x.data(), total, d), batch, cpu::rows_of(last.data(), 0, d), cpu::Write::overwrite,
                  cpu::NoAttentionObserver{}, cpu::QueryRows::none);
    CHECK_THROWS_WITH_AS(layer.forward(w, cpu::rows_of(x.data(), total, d), batch, cpu::rows_of(all.data(), total, d),
                                       cpu::Write::overwrite, cpu::NoAttentionObserver{}, cpu::QueryRows::last),
                         doctest::Contains("the call finishes 3 of 27 input rows"), ShapeError);
    const cpu::SequenceRows<float> with_empty[] = {{0, 7, 0, {}, {}}, {7, 0, 0, {}, {}}};
    CHECK_THROWS_WITH_AS(layer.forward(w, cpu::rows_of(x.data(), 7, d), std::span(with_empty),
                                       cpu::rows_of(last.data(), 2, d), cpu::Write::overwrite,
                                       cpu::NoAttentionObserver{}, cpu::QueryRows::last),
                         doctest::Contains("no last row"), ShapeError);
}

TEST_CASE("the observer sees every (head, position) once, with probabilities that sum to 1") {
    const int T = 13, d = TinyShape::hidden, W = TinyShape::u_rows, heads = TinyShape::physical_heads;
    const auto u = orthogonal_u(W, d, 181);
    const auto x = testing::random_normal(std::size_t(T) * d, 182);
    cpu::PrismAttention<TinyShape> layer(48);
    std::vector<std::atomic<int>> seen(std::size_t(heads) * T);
    std::vector<double> distance(std::size_t(heads) * T, -1.0);
    std::atomic<int> bad_sums{0};
    auto observe = [&](int head, index_t pos, const float* p, index_t count) {
        seen[std::size_t(head) * T + pos]++;
        double sum = 0, dist = 0;
        for (index_t j = 0; j < count; ++j) {
            sum += p[j];
            dist += p[j] * double(pos - j);
        }
        if (count != pos + 1 || std::abs(sum - 1.0) > 1e-5) bad_sums++;
        distance[std::size_t(head) * T + pos] = dist;
    };
    auto out = testing::poisoned<float>(std::size_t(T) * d);
    layer.forward({Matrix<const float>(u.data(), W, d), 0.1f}, Matrix<const float>(x.data(), T, d),
                  Matrix<float>(out.data(), T, d), observe);
    for (auto& s : seen) CHECK(s.load() == 1);
    CHECK(bad_sums.load() == 0);
    std::vector<double> want;
    reference_layer(prism_shape<TinyShape>(), x, T, u, 0.1, &want);
    for (int h = 0; h < heads; ++h) {
        double mean = 0;
        for (int t = 0; t < T; ++t) mean += distance[std::size_t(h) * T + t] / T;
        CHECK(mean == doctest::Approx(want[h]).epsilon(1e-4));
    }
    // The attention-distance table gives the same per-head means.
    cpu::AttentionDistance table(1, heads);
    layer.forward({Matrix<const float>(u.data(), W, d), 0.1f}, Matrix<const float>(x.data(), T, d),
                  Matrix<float>(out.data(), T, d), table.layer(0));
    for (int h = 0; h < heads; ++h) CHECK(table.mean(0, h) == doctest::Approx(want[h]).epsilon(1e-4));
    CHECK(table.group_mean(0, 0, TinyShape::heads) ==
          doctest::Approx((want[0] + want[1]) / 2).epsilon(1e-4));
}

TEST_CASE("long inputs (the threaded copy, scale and cache-store loops) match the reference") {
    // 600 rows x 2HD = 128 values: above the layer's threshold for splitting rows over threads.
    const int T = 600, d = TinyShape::hidden, W = TinyShape::u_rows;
    const auto u = orthogonal_u(W, d, 201);
    const auto x = testing::random_normal(std::size_t(T) * d, 202);
    const auto want = reference_layer(prism_shape<TinyShape>(), x, T, u, 0.3);
    cpu::PrismAttention<TinyShape> layer(T);
    // Softmax over up to 600 keys and GEMMs with inner size 128: ~1e-6 observed; the fp32 bar is 1e-4.
    CHECK(testing::relative_error(run_layer(layer, x, T, u, 0.3f), want) < 1e-4);

    // Through a cache, in two chunks of 300 rows (each stored with the threaded loop).
    // (Position-major storage of T rows: longer than TinyPrism's context, which a KVCache enforces.)
    std::vector<float> k(std::size_t(T) * W), v(std::size_t(T) * W);
    const auto heads = [&](std::vector<float>& m) { return cpu::packed_heads(m.data(), T, TinyShape::physical_heads, TinyShape::head_dim); };
    auto out = testing::poisoned<float>(std::size_t(T) * d);
    for (int t0 = 0; t0 < T; t0 += 300) {
        const cpu::SequenceRows<float> s{0, 300, t0, heads(k), heads(v)};
        layer.forward({Matrix<const float>(u.data(), W, d), 0.3f}, cpu::rows_of(x.data() + t0 * d, 300, d),
                      std::span(&s, 1), cpu::rows_of(out.data() + t0 * d, 300, d), cpu::Write::overwrite);
    }
    CHECK(testing::relative_error(out, want) < 1e-4);
}

TEST_CASE("bad input gets clear errors: shapes, positions past the context, sequences without their cache") {
    const int d = TinyShape::hidden, W = TinyShape::u_rows;
    const auto u = orthogonal_u(W, d, 191);
    cpu::PrismAttention<TinyShape> layer(8);
    std::vector<float> x(std::size_t(10) * d), out(std::size_t(10) * d);
    const cpu::PrismAttentionWeights<float> w{Matrix<const float>(u.data(), W, d), 0.1f};

    CHECK_THROWS_WITH_AS(layer.forward(w, Matrix<const float>(x.data(), 9, d), Matrix<float>(out.data(), 9, d)),
                         doctest::Contains("exceed the context length 8"), InputError);
    CHECK_THROWS_WITH_AS(layer.forward({Matrix<const float>(u.data(), W / 2, d), 0.1f},
                                       Matrix<const float>(x.data(), 4, d), Matrix<float>(out.data(), 4, d)),
                         doctest::Contains("U is [64, 32]"), ShapeError);
    CHECK_THROWS_AS(layer.forward(w, Matrix<const float>(x.data(), 4, d - 1), Matrix<float>(out.data(), 4, d)),
                    ShapeError);
    CHECK_THROWS_AS(layer.forward({w.u, NAN}, Matrix<const float>(x.data(), 4, d), Matrix<float>(out.data(), 4, d)),
                    InputError);

    const cpu::SequenceRows<float> late{0, 2, 3, {}, {}};
    CHECK_THROWS_WITH_AS(layer.forward(w, cpu::rows_of(x.data(), 2, d), std::span(&late, 1),
                                       cpu::rows_of(out.data(), 2, d), cpu::Write::overwrite),
                         doctest::Contains("needs a cache"), InputError);

    const cpu::SequenceRows<float> gap[] = {{0, 2, 0, {}, {}}, {3, 2, 0, {}, {}}};
    CHECK_THROWS_WITH_AS(layer.forward(w, cpu::rows_of(x.data(), 5, d), std::span(gap), cpu::rows_of(out.data(), 5, d),
                                       cpu::Write::overwrite),
                         doctest::Contains("do not follow the previous sequences' 2 rows"), ShapeError);
    const cpu::SequenceRows<float> short_cover{0, 3, 0, {}, {}};
    CHECK_THROWS_WITH_AS(layer.forward(w, cpu::rows_of(x.data(), 5, d), std::span(&short_cover, 1),
                                       cpu::rows_of(out.data(), 5, d), cpu::Write::overwrite),
                         doctest::Contains("cover 3 of the 5 input rows"), ShapeError);

    KVCache<presets::TinyPrism> small(4);
    const cpu::SequenceRows<float> overflow{0, 2, 3, small.keys(0), small.values(0)};
    CHECK_THROWS_WITH_AS(layer.forward(w, cpu::rows_of(x.data(), 2, d), std::span(&overflow, 1),
                                       cpu::rows_of(out.data(), 2, d), cpu::Write::overwrite),
                         doctest::Contains("do not fit a cache of 4"), InputError);
}

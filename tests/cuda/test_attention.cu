// The fused causal attention kernel against a double-precision softmax over
// the same cache contents: prefill, a chunk appended at an offset, decode of
// sequences at different positions, GQA groups, head dims 16 to 128, and
// PRISM's signal/noise heads (q = k, noise heads scaled by -lambda) in one launch;
// each also with the keys split into chunks merged by a second kernel.
#include <doctest/doctest.h>

#include <cpx/cuda/kernels/attention.cuh>

#include <algorithm>
#include <cmath>
#include <limits>

#include "cuda_test_support.cuh"
#include "test_support.hpp"

using namespace cpx;

namespace {

// Where one call's rows are (the host twin of cuda::SequenceRows, with its device buffers):
// equal lengths, or lengths that differ packed one after the other, optionally in named slots.
struct Call {
    std::vector<std::int32_t> lengths, starts, slots, first;
    cuda::DeviceBuffer<std::int32_t> dstart, doffsets, dslots;
    cuda::SequenceRows seqs;
    int rows = 0;

    Call(int S, const std::vector<std::int32_t>& st) : Call(std::vector<std::int32_t>(st.size(), S), st, {}, false) {}
    Call(std::vector<std::int32_t> len, std::vector<std::int32_t> st, std::vector<std::int32_t> sl, bool packed = true)
        : lengths(std::move(len)), starts(std::move(st)), slots(std::move(sl)), dstart(starts) {
        first.push_back(0);
        int longest = 0;
        for (std::int32_t n : lengths) {
            first.push_back(first.back() + n);
            longest = std::max(longest, static_cast<int>(n));
        }
        rows = first.back();
        seqs = cuda::SequenceRows::equal(dstart.data(), static_cast<int>(lengths.size()), longest);
        if (packed) {
            doffsets = cuda::DeviceBuffer<std::int32_t>(first);
            seqs.offsets = doffsets.data();
        }
        if (!slots.empty()) {
            dslots = cuda::DeviceBuffer<std::int32_t>(slots);
            seqs.slots = dslots.data();
        }
    }
    int sequence_of(int r) const {
        int b = 0;
        while (first[b + 1] <= r) ++b;
        return b;
    }
    int position(int r) const {
        const int b = sequence_of(r);
        return starts[b] + r - first[b];
    }
    int slot(int b) const { return slots.empty() ? b : slots[b]; }
};

// A one-layer cache on the device (poisoned: a read of an unwritten position
// shows as NaN) and its mirror on the host.
template <class T>
struct Fixture {
    int batch, heads, kv_heads, D, capacity;
    cuda::KvCache<T> cache;
    std::vector<float> hk, hv;  // [slots][kv_heads][capacity][D]

    Fixture(int b, int h, int kv, int d, int cap)
        : batch(b), heads(h), kv_heads(kv), D(d), capacity(cap), cache(1, b, kv, d, cap),
          hk(static_cast<std::size_t>(b) * kv * cap * d, std::numeric_limits<float>::quiet_NaN()), hv(hk) {
        cache.poison();
    }
    std::size_t at(int slot, int g, int pos) const {
        return ((static_cast<std::size_t>(slot) * kv_heads + g) * capacity + pos) * D;
    }

    // Appends S new tokens per sequence at the given starts: random K, V (K = `keys` if given).
    std::vector<float> append(int S, const std::vector<std::int32_t>& starts, std::uint64_t seed,
                              const std::vector<float>* keys = nullptr) {
        return append(Call(S, starts), seed, keys);
    }
    std::vector<float> append(const Call& c, std::uint64_t seed, const std::vector<float>* keys = nullptr) {
        const int rows = c.rows, width = kv_heads * D;
        const auto k = keys ? *keys : testing::rounded<T>(testing::random_normal(rows * width, seed));
        const auto v = testing::rounded<T>(testing::random_normal(rows * width, seed + 1));
        auto dk = testing::upload_as<T>(k), dv = testing::upload_as<T>(v);
        cuda::kv_append<T, T>(StridedMatrix<const T>(dk.data(), rows, width, width),
                              StridedMatrix<const T>(dv.data(), rows, width, width), cache.layer(0), c.seqs, {}, nullptr);
        CPX_CUDA_CHECK(cudaDeviceSynchronize());
        for (int r = 0; r < rows; ++r)
            for (int g = 0; g < kv_heads; ++g)
                for (int d = 0; d < D; ++d) {
                    const std::size_t dst = at(c.slot(c.sequence_of(r)), g, c.position(r)) + d;
                    hk[dst] = k[r * width + g * D + d];
                    hv[dst] = v[r * width + g * D + d];
                }
        return k;
    }

    // Runs attention for S queries per sequence at the starts; returns the relative error.
    double attend(int S, const std::vector<std::int32_t>& starts, const std::vector<float>& q,
                  cuda::AttentionOptions opt = {}, cuda::AttentionSplits* splits = nullptr) {
        return attend(Call(S, starts), q, opt, splits);
    }
    double attend(const Call& c, const std::vector<float>& q, cuda::AttentionOptions opt = {},
                  cuda::AttentionSplits* splits = nullptr) {
        const int rows = c.rows, width = heads * D, groups = heads / kv_heads;
        auto dq = testing::upload_as<T>(q);
        auto dout = testing::poisoned_device<T>(rows * width);
        cuda::causal_attention<T>(StridedMatrix<const T>(dq.data(), rows, width, width), cache.layer(0),
                                  StridedMatrix<T>(dout.data(), rows, width, width), heads, c.seqs, opt, {}, nullptr,
                                  splits);
        CPX_CUDA_CHECK(cudaDeviceSynchronize());
        const double scale = opt.scale > 0 ? opt.scale : 1.0 / std::sqrt(double(D));
        std::vector<double> want(rows * width);
        for (int r = 0; r < rows; ++r) {
            const int slot = c.slot(c.sequence_of(r)), qpos = c.position(r);
            for (int h = 0; h < heads; ++h) {
                const int g = h / groups;
                std::vector<double> s(qpos + 1);
                double mx = -1e300;
                for (int j = 0; j <= qpos; ++j) {
                    double dot = 0;
                    for (int d = 0; d < D; ++d) dot += double(q[r * width + h * D + d]) * hk[at(slot, g, j) + d];
                    s[j] = dot * scale;
                    mx = std::max(mx, s[j]);
                }
                double sum = 0;
                for (double& e : s) sum += (e = std::exp(e - mx));
                const double f = (opt.scaled_head_begin >= 0 && h >= opt.scaled_head_begin) ? opt.scaled_head_factor : 1.0;
                for (int d = 0; d < D; ++d) {
                    double acc = 0;
                    for (int j = 0; j <= qpos; ++j) acc += s[j] * hv[at(slot, g, j) + d];
                    want[r * width + h * D + d] = f * acc / sum;
                }
            }
        }
        return testing::relative_error(testing::download_floats(dout), want);
    }

    std::vector<float> queries(int S, std::uint64_t seed, float stddev = 1.0f) const {
        return queries_for(batch * S, seed, stddev);
    }
    std::vector<float> queries_for(int rows, std::uint64_t seed, float stddev = 1.0f) const {
        return testing::rounded<T>(testing::random_normal(rows * heads * D, seed, stddev));
    }
};

}  // namespace

TEST_CASE("prefill: causal GQA attention over a fresh cache (fp32 within 1e-5)") {
    Fixture<float> f(2, 4, 2, 64, 64);
    f.append(37, {0, 0}, 1);
    CHECK(f.attend(37, {0, 0}, f.queries(37, 2)) < 1e-5);
}

TEST_CASE("chunked prefill then decode: each chunk sees the cache up to its own offset") {
    Fixture<float> f(2, 6, 2, 64, 80);  // groups of 3, as the 187M model
    f.append(20, {0, 0}, 3);
    CHECK(f.attend(20, {0, 0}, f.queries(20, 4)) < 1e-5);
    f.append(13, {20, 20}, 5);
    CHECK(f.attend(13, {20, 20}, f.queries(13, 6)) < 1e-5);
    f.append(1, {33, 33}, 7);
    CHECK(f.attend(1, {33, 33}, f.queries(1, 8)) < 1e-5);
}

TEST_CASE("decode of sequences at different positions in one launch") {
    Fixture<float> f(3, 4, 1, 128, 48);  // multi-query: one KV head
    f.append(40, {0, 0, 0}, 9);
    const std::vector<std::int32_t> starts = {40, 7, 0};  // later positions of sequences 1 and 2 are simply not seen
    f.append(1, starts, 10);
    CHECK(f.attend(1, starts, f.queries(1, 11)) < 1e-5);
}

// Scores of magnitude ~100 (e^100 overflows fp32) must be rescaled by the running maximum.
// fp32 dot products of that size carry ~1e-5 absolute error, which moves softmax weights
// by as much relatively: hence 1e-4 here instead of 1e-5.
TEST_CASE("large scores stay finite: the online softmax rescales instead of overflowing") {
    Fixture<float> f(1, 2, 2, 32, 70);
    f.append(70, {0}, 12);
    CHECK(f.attend(70, {0}, f.queries(70, 13, 30.0f)) < 1e-4);
}

TEST_CASE("bf16 and fp16 attention stay within 2e-2") {
    {
        Fixture<bf16> f(2, 8, 2, 128, 64);  // groups of 4, as the 384M model
        f.append(33, {0, 0}, 14);
        CHECK(f.attend(33, {0, 0}, f.queries(33, 15)) < 2e-2);
        f.append(1, {33, 33}, 16);
        CHECK(f.attend(1, {33, 33}, f.queries(1, 17)) < 2e-2);
    }
    {
        Fixture<fp16> f(1, 4, 2, 64, 40);
        f.append(40, {0}, 18);
        CHECK(f.attend(40, {0}, f.queries(40, 19)) < 2e-2);
    }
}

TEST_CASE("PRISM: signal and noise heads in one launch, q = k, noise heads scaled by -lambda") {
    const int H = 2, D = 32, S = 25;
    Fixture<float> f(2, 2 * H, 2 * H, D, 32);
    const auto qk = f.append(S, {0, 0}, 20);  // the rotated tensor serves as both queries and keys
    cuda::AttentionOptions opt;
    opt.scaled_head_begin = H;
    opt.scaled_head_factor = -0.05f;
    CHECK(f.attend(S, {0, 0}, qk, opt) < 1e-5);
}

TEST_CASE("head dim 16 (the tiny test models) is served by the same kernel") {
    Fixture<float> f(2, 4, 2, 16, 24);
    f.append(24, {0, 0}, 21);
    CHECK(f.attend(24, {0, 0}, f.queries(24, 22)) < 1e-5);
}

TEST_CASE("queries past the cache capacity give NaN rows and an InputError at the check") {
    Fixture<float> f(1, 2, 2, 64, 8);
    f.append(8, {0}, 23);
    auto dq = testing::upload_as<float>(f.queries(2, 24));
    auto dout = testing::poisoned_device<float>(2 * 2 * 64);
    cuda::DeviceBuffer<std::int32_t> dstart(std::vector<std::int32_t>{7});  // positions 7, 8: 8 is past the end
    cuda::DeviceStatus status;
    cuda::causal_attention<float>(StridedMatrix<const float>(dq.data(), 2, 128, 128), f.cache.layer(0),
                                  StridedMatrix<float>(dout.data(), 2, 128, 128), 2,
                                  cuda::SequenceRows::equal(dstart.data(), 1, 2), {}, status.view());
    CHECK_THROWS_AS(status.check(nullptr, "attention"), InputError);
    for (float v : dout.download()) CHECK(std::isnan(v));
}

TEST_CASE("attention rejects head counts that are not whole GQA groups") {
    cuda::KvCache<float> cache(1, 1, 3, 64, 8);
    cuda::DeviceBuffer<float> q(4 * 64), out(4 * 64);
    cuda::DeviceBuffer<std::int32_t> start(1);
    CHECK_THROWS_AS(cuda::causal_attention<float>(StridedMatrix<const float>(q.data(), 1, 256, 256), cache.layer(0),
                                                  StridedMatrix<float>(out.data(), 1, 256, 256), 4,
                                                  cuda::SequenceRows::equal(start.data(), 1, 1)),
                    ShapeError);
}

// ---- key splits (flash-decoding): the same results with the keys in chunks.

cuda::AttentionOptions with_splits(int n) {
    cuda::AttentionOptions opt;
    opt.key_splits = n;
    return opt;
}

TEST_CASE("key splits: forced chunk counts give the unsplit results (chunks empty or partly visible)") {
    Fixture<float> f(2, 6, 2, 64, 200);
    cuda::AttentionSplits ws(64, 100000);
    f.append(20, {0, 0}, 30);
    for (int n : {2, 3, 7})  // capacity 200 in n chunks: early queries see only the first chunk
        CHECK_MESSAGE(f.attend(20, {0, 0}, f.queries(20, 31), with_splits(n), &ws) < 1e-5, n, " splits");
    f.append(13, {20, 20}, 32);
    CHECK(f.attend(13, {20, 20}, f.queries(13, 33), with_splits(4), &ws) < 1e-5);
    f.append(1, {33, 5}, 34);  // decode at different positions: sequence 1 leaves most chunks empty
    CHECK(f.attend(1, {33, 5}, f.queries(1, 35), with_splits(7), &ws) < 1e-5);
}

TEST_CASE("key splits: the automatic choice for decode, bf16, head dims 16 to 128, MQA") {
    for (int D : {16, 32, 64, 128}) {
        Fixture<float> f(1, 4, 1, D, 700);
        cuda::AttentionSplits ws(128);
        f.append(600, {0}, 40);
        f.append(1, {600}, 41);
        CHECK_MESSAGE(f.attend(1, {600}, f.queries(1, 42), {}, &ws) < 1e-5, "head dim ", D);
    }
    Fixture<bf16> f(1, 16, 4, 64, 4096);  // the 384M model's attention at a long context
    cuda::AttentionSplits ws(64);
    f.append(2047, {0}, 43);
    f.append(1, {2047}, 44);
    CHECK(f.attend(1, {2047}, f.queries(1, 45), {}, &ws) < 2e-2);
}

TEST_CASE("key splits: PRISM's scaled noise heads and large scores") {
    const int H = 2, D = 32, S = 25;
    Fixture<float> f(2, 2 * H, 2 * H, D, 96);
    cuda::AttentionSplits ws(32);
    const auto qk = f.append(S, {0, 0}, 46);
    auto opt = with_splits(3);
    opt.scaled_head_begin = H;
    opt.scaled_head_factor = -0.05f;
    CHECK(f.attend(S, {0, 0}, qk, opt, &ws) < 1e-5);
    Fixture<float> g(1, 2, 2, 32, 70);
    g.append(70, {0}, 47);
    CHECK(g.attend(70, {0}, g.queries(70, 48, 30.0f), with_splits(3), &ws) < 1e-4);  // 1e-4: see the unsplit case
}

TEST_CASE("key splits: positions past the cache still give NaN rows, and bad split requests are refused") {
    Fixture<float> f(1, 2, 2, 64, 64);
    f.append(64, {0}, 49);
    cuda::AttentionSplits ws(64, 64);
    auto dq = testing::upload_as<float>(f.queries(2, 50));
    auto dout = testing::poisoned_device<float>(2 * 2 * 64);
    cuda::DeviceBuffer<std::int32_t> dstart(std::vector<std::int32_t>{63});  // positions 63, 64: 64 is past the end
    cuda::DeviceStatus status;
    const StridedMatrix<const float> q(dq.data(), 2, 128, 128);
    const StridedMatrix<float> out(dout.data(), 2, 128, 128);
    const auto seqs = cuda::SequenceRows::equal(dstart.data(), 1, 2);
    cuda::causal_attention<float>(q, f.cache.layer(0), out, 2, seqs, with_splits(2), status.view(), nullptr, &ws);
    CHECK_THROWS_AS(status.check(nullptr, "attention"), InputError);
    for (float v : dout.download()) CHECK(std::isnan(v));
    // 2 rows x 2 heads x 17 chunks > 64 states; splits without a workspace.
    CHECK_THROWS_AS(cuda::causal_attention<float>(q, f.cache.layer(0), out, 2, seqs, with_splits(17), {},
                                                  nullptr, &ws),
                    ShapeError);
    CHECK_THROWS_AS(cuda::causal_attention<float>(q, f.cache.layer(0), out, 2, seqs, with_splits(2)),
                    ShapeError);
}

TEST_CASE("key splits: a call with more (row, head) states than the workspace holds runs unsplit") {
    // A prefill's rows x heads exceed a workspace sized for decoding; one chunk needs none of it.
    Fixture<float> f(1, 4, 2, 64, 200);
    f.append(200, {0}, 51);
    cuda::AttentionSplits ws(64, 8);
    CHECK(f.attend(200, {0}, f.queries(200, 52), {}, &ws) < 1e-5);
    CHECK_THROWS_AS(f.attend(200, {0}, f.queries(200, 52), with_splits(2), &ws), ShapeError);
}

// ---- sequences of different lengths in one launch (packed rows), each in the cache slot it names.

TEST_CASE("packed sequences of different lengths, empty ones included, in named cache slots") {
    Fixture<float> f(4, 6, 2, 64, 96);
    cuda::AttentionSplits ws(64, 100000);
    const std::vector<std::int32_t> slots = {2, 0, 3, 1};
    const Call prefill({30, 0, 17, 5}, {0, 0, 0, 0}, slots);
    f.append(prefill, 90);
    CHECK(f.attend(prefill, f.queries_for(prefill.rows, 91)) < 1e-5);
    const Call chunk({1, 9, 3, 20}, {30, 0, 17, 5}, slots);  // every sequence at its own offset
    f.append(chunk, 92);
    CHECK(f.attend(chunk, f.queries_for(chunk.rows, 93)) < 1e-5);
    CHECK(f.attend(chunk, f.queries_for(chunk.rows, 94), with_splits(3), &ws) < 1e-5);
    // Equal lengths, the slots in another order: each sequence's start is its slot's length.
    const Call decode({1, 1, 1, 1}, {25, 20, 31, 9}, {1, 3, 2, 0}, false);
    f.append(decode, 95);
    CHECK(f.attend(decode, f.queries_for(decode.rows, 96), {}, &ws) < 1e-5);
}

TEST_CASE("packed sequences on the tensor-core kernel (bf16), lengths that are not multiples of its tiles") {
    Fixture<bf16> f(3, 4, 2, 64, 256);
    cuda::AttentionOptions opt;
    opt.kernel = cuda::AttentionKernel::tensor_cores;
    const Call prefill({100, 17, 64}, {0, 0, 0}, {1, 2, 0});
    f.append(prefill, 97);
    CHECK(f.attend(prefill, f.queries_for(prefill.rows, 98), opt) < 2e-2);
    const Call chunk({0, 40, 23}, {100, 17, 64}, {1, 2, 0});
    f.append(chunk, 99);
    CHECK(f.attend(chunk, f.queries_for(chunk.rows, 100), opt) < 2e-2);
}

TEST_CASE("a slot outside the cache gives NaN rows and an InputError, never a write") {
    Fixture<float> f(2, 2, 2, 32, 16);
    const Call bad({3, 2}, {0, 0}, {1, 2});  // slot 2 of 2
    auto dk = testing::upload_as<float>(testing::random_normal(5 * 64, 101));
    cuda::DeviceStatus status;
    cuda::kv_append<float, float>(StridedMatrix<const float>(dk.data(), 5, 64, 64),
                                  StridedMatrix<const float>(dk.data(), 5, 64, 64), f.cache.layer(0), bad.seqs,
                                  status.view(), nullptr);
    CHECK_THROWS_AS(status.check(nullptr, "kv_append"), InputError);
    status.reset(nullptr);
    auto dout = testing::poisoned_device<float>(5 * 64);
    cuda::causal_attention<float>(StridedMatrix<const float>(dk.data(), 5, 64, 64), f.cache.layer(0),
                                  StridedMatrix<float>(dout.data(), 5, 64, 64), 2, bad.seqs, {}, status.view());
    CHECK_THROWS_AS(status.check(nullptr, "attention"), InputError);
    const auto out = dout.download();
    for (std::size_t i = 3 * 64; i < out.size(); ++i) CHECK(std::isnan(out[i]));  // sequence 1's rows
}

// ---- the tensor-core kernel (opt-in): prefill-sized launches of bf16/fp16, head dims 64 and 128.
// Its softmax weights are rounded to the storage type before P.V, within the 16-bit bound 2e-2.

cuda::AttentionOptions tensor_cores() {
    cuda::AttentionOptions opt;
    opt.kernel = cuda::AttentionKernel::tensor_cores;
    return opt;
}

template <class T>
void check_tensor_core_prefill(int D, int groups, std::uint64_t seed) {
    Fixture<T> f(2, 2 * groups, 2, D, 256);
    f.append(100, {0, 0}, seed);  // 100 queries: one full and one partial block of 64
    CHECK_MESSAGE(f.attend(100, {0, 0}, f.queries(100, seed + 1), tensor_cores()) < 2e-2, "head dim ", D);
    f.append(37, {100, 100}, seed + 2);  // a chunk at an offset: tiles partly visible
    CHECK_MESSAGE(f.attend(37, {100, 100}, f.queries(37, seed + 3), tensor_cores()) < 2e-2, "head dim ", D);
}

TEST_CASE("tensor-core attention: prefill and chunked prefill, bf16 and fp16, head dims 64 and 128, GQA") {
    check_tensor_core_prefill<bf16>(64, 3, 60);
    check_tensor_core_prefill<bf16>(128, 4, 64);
    check_tensor_core_prefill<fp16>(64, 1, 68);
    check_tensor_core_prefill<fp16>(128, 2, 72);
}

TEST_CASE("tensor-core attention: sequences at different offsets, PRISM's scaled heads, decode falls back") {
    Fixture<bf16> f(2, 4, 4, 64, 200);
    f.append(150, {0, 0}, 76);
    const std::vector<std::int32_t> starts = {150, 40};  // sequence 1 overwrites positions 40.. with its chunk
    f.append(20, starts, 77);
    auto opt = tensor_cores();
    opt.scaled_head_begin = 2;
    opt.scaled_head_factor = -0.3f;
    CHECK(f.attend(20, starts, f.queries(20, 78), opt) < 2e-2);
    f.append(1, {170, 60}, 79);  // one query per sequence: the SIMT kernel serves it
    CHECK(f.attend(1, {170, 60}, f.queries(1, 80), tensor_cores()) < 2e-2);
}

TEST_CASE("tensor-core attention: NaN rows past the cache, and the shapes it does not take are refused") {
    {
        Fixture<bf16> f(1, 2, 2, 64, 40);
        f.append(40, {0}, 81);
        auto dq = testing::upload_as<bf16>(f.queries(20, 82));
        auto dout = testing::poisoned_device<bf16>(20 * 2 * 64);
        cuda::DeviceBuffer<std::int32_t> dstart(std::vector<std::int32_t>{30});  // positions 30..49: past 40
        cuda::DeviceStatus status;
        cuda::causal_attention<bf16>(StridedMatrix<const bf16>(dq.data(), 20, 128, 128), f.cache.layer(0),
                                     StridedMatrix<bf16>(dout.data(), 20, 128, 128), 2,
                                     cuda::SequenceRows::equal(dstart.data(), 1, 20), tensor_cores(), status.view());
        CHECK_THROWS_AS(status.check(nullptr, "attention"), InputError);
        for (float v : testing::download_floats(dout)) CHECK(std::isnan(v));
    }
    cuda::DeviceBuffer<std::int32_t> start(std::vector<std::int32_t>{0});
    {
        cuda::KvCache<float> cache(1, 1, 1, 64, 32);
        cuda::DeviceBuffer<float> q(16 * 64), out(16 * 64);
        CHECK_THROWS_AS(cuda::causal_attention<float>(StridedMatrix<const float>(q.data(), 16, 64, 64), cache.layer(0),
                                                      StridedMatrix<float>(out.data(), 16, 64, 64), 1,
                                                      cuda::SequenceRows::equal(start.data(), 1, 16), tensor_cores()),
                        ShapeError);
    }
    {
        cuda::KvCache<bf16> cache(1, 1, 1, 32, 32);
        cuda::DeviceBuffer<bf16> q(16 * 32), out(16 * 32);
        CHECK_THROWS_AS(cuda::causal_attention<bf16>(StridedMatrix<const bf16>(q.data(), 16, 32, 32), cache.layer(0),
                                                     StridedMatrix<bf16>(out.data(), 16, 32, 32), 1,
                                                     cuda::SequenceRows::equal(start.data(), 1, 16), tensor_cores()),
                        ShapeError);
    }
}

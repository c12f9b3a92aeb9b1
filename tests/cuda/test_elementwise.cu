// The row and elementwise kernels against double-precision references:
// LayerNorm, SwiGLU, bias + GELU(erf), bias add, strided RMSNorm, embedding
// gather (with PRISM's positions) and its device-side token validation,
// and the device-side greedy step (argmax, positions, token history).
#include <doctest/doctest.h>

#include <cpx/cuda/kernels/activations.cuh>
#include <cpx/cuda/kernels/embedding.cuh>
#include <cpx/cuda/kernels/greedy_decode.cuh>
#include <cpx/cuda/kernels/layernorm.cuh>
#include <cpx/cuda/kernels/rmsnorm.cuh>

#include <algorithm>
#include <cmath>
#include <limits>

#include "cuda_test_support.cuh"
#include "test_support.hpp"

using namespace cpx;

namespace {
double silu_d(double z) { return z / (1.0 + std::exp(-z)); }
double gelu_d(double z) { return 0.5 * z * std::erfc(-z / std::sqrt(2.0)); }  // 1 + erf(z/sqrt 2), without its cancellation

template <class T>
void check_layernorm(int rows, int n, bool with_bias, std::uint64_t seed) {
    const auto x = testing::rounded<T>(testing::random_normal(rows * n, seed, 2.0f, 0.7f));
    const auto w = testing::random_normal(n, seed + 1, 0.3f, 1.0f);
    const auto b = testing::random_normal(n, seed + 2, 0.3f);
    auto dx = testing::upload_as<T>(x);
    cuda::DeviceBuffer<float> dw(w), db(b);
    auto dy = testing::poisoned_device<T>(rows * n);
    cuda::layernorm<T, float, T>(StridedMatrix<const T>(dx.data(), rows, n, n), dw.data(), with_bias ? db.data() : nullptr,
                                 StridedMatrix<T>(dy.data(), rows, n, n), 1e-5f);
    CPX_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> want(rows * n);
    for (int r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int i = 0; i < n; ++i) mean += x[r * n + i];
        mean /= n;
        for (int i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
        var /= n;
        for (int i = 0; i < n; ++i)
            want[r * n + i] = (x[r * n + i] - mean) / std::sqrt(var + 1e-5) * w[i] + (with_bias ? b[i] : 0.0);
    }
    CHECK(testing::relative_error(testing::download_floats(dy), want) < testing::tolerance<T>());
}
}  // namespace

TEST_CASE("layernorm matches the reference (fp32 within 1e-5, bf16 within 2e-2), with and without bias") {
    check_layernorm<float>(13, 32, true, 1);
    check_layernorm<float>(7, 512, false, 2);
    check_layernorm<float>(3, 1000, true, 3);
    check_layernorm<bf16>(13, 512, true, 4);
}

TEST_CASE("swiglu takes the gate and up halves of one fused product") {
    const int rows = 21, I = 96;
    const auto gu = testing::random_normal(rows * 2 * I, 5, 3.0f);
    auto dgu = testing::upload_as<float>(gu);
    auto dact = testing::poisoned_device<float>(rows * I);
    StridedMatrix<const float> all(dgu.data(), rows, 2 * I, 2 * I);
    cuda::swiglu(all.columns(0, I), all.columns(I, I), StridedMatrix<float>(dact.data(), rows, I, I));
    CPX_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> want(rows * I);
    for (int r = 0; r < rows; ++r)
        for (int j = 0; j < I; ++j) want[r * I + j] = silu_d(gu[r * 2 * I + j]) * gu[r * 2 * I + I + j];
    CHECK(testing::relative_error(testing::download_floats(dact), want) < 1e-5);
}

TEST_CASE("swiglu stores bf16 within 2e-2") {
    const int rows = 9, I = 64;
    const auto g = testing::rounded<bf16>(testing::random_normal(rows * I, 6, 3.0f));
    const auto u = testing::rounded<bf16>(testing::random_normal(rows * I, 7));
    auto dg = testing::upload_as<bf16>(g), du = testing::upload_as<bf16>(u);
    auto dact = testing::poisoned_device<bf16>(rows * I);
    cuda::swiglu(StridedMatrix<const bf16>(dg.data(), rows, I, I), StridedMatrix<const bf16>(du.data(), rows, I, I),
                 StridedMatrix<bf16>(dact.data(), rows, I, I));
    CPX_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> want(rows * I);
    for (int i = 0; i < rows * I; ++i) want[i] = silu_d(g[i]) * u[i];
    CHECK(testing::relative_error(testing::download_floats(dact), want) < 2e-2);
}

TEST_CASE("bias_gelu applies the exact erf GELU after the bias, and add_bias adds a row bias") {
    const int rows = 11, n = 130;
    const auto x = testing::random_normal(rows * n, 8, 2.0f);
    const auto b = testing::random_normal(n, 9);
    cuda::DeviceBuffer<float> db(b);
    auto dx = testing::upload_as<float>(x);
    cuda::bias_gelu(StridedMatrix<float>(dx.data(), rows, n, n), db.data());
    auto dz = testing::upload_as<float>(x);
    cuda::add_bias(StridedMatrix<float>(dz.data(), rows, n, n), db.data());
    CPX_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> want_gelu(rows * n), want_add(rows * n);
    for (int r = 0; r < rows; ++r)
        for (int i = 0; i < n; ++i) {
            want_gelu[r * n + i] = gelu_d(double(x[r * n + i]) + b[i]);
            want_add[r * n + i] = double(x[r * n + i]) + b[i];
        }
    CHECK(testing::relative_error(dx.download(), want_gelu) < 1e-5);
    CHECK(testing::relative_error(dz.download(), want_add) < 1e-6);
}

TEST_CASE("rmsnorm writes into a column block of a wider buffer (the a half of [a, mu])") {
    const int rows = 6, n = 64, wide = 2 * n;
    const auto x = testing::random_normal(rows * n, 10, 2.0f);
    const auto w = testing::random_normal(n, 11, 0.2f, 1.0f);
    auto dx = testing::upload_as<float>(x);
    cuda::DeviceBuffer<float> dw(w);
    auto dy = testing::poisoned_device<float>(rows * wide);
    cuda::rmsnorm(StridedMatrix<const float>(dx.data(), rows, n, n), Vector<const float>(dw.data(), n),
                  StridedMatrix<float>(dy.data(), rows, n, wide), 1e-6f);
    CPX_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = dy.download();
    std::vector<float> block;
    std::vector<double> want;
    for (int r = 0; r < rows; ++r) {
        double ss = 0;
        for (int i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
        for (int i = 0; i < n; ++i) {
            want.push_back(w[i] * x[r * n + i] / std::sqrt(ss / n + 1e-6));
            block.push_back(got[r * wide + i]);
            CHECK(std::isnan(got[r * wide + n + i]));  // the mu half is not touched
        }
    }
    CHECK(testing::relative_error(block, want) < 1e-5);
}

TEST_CASE("embedding gathers rows by token id and adds learned positions per sequence") {
    const int V = 37, d = 48, P = 20, batch = 2, S = 6;
    const auto table = testing::random_normal(V * d, 12);
    const auto wpe = testing::random_normal(P * d, 13);
    const auto ids = testing::random_ints(batch * S, 0, V - 1, 14);
    const std::vector<std::int64_t> tokens(ids.begin(), ids.end());
    const std::vector<std::int32_t> starts = {0, 11};
    cuda::DeviceBuffer<float> dt(table), dp(wpe);
    cuda::DeviceBuffer<std::int64_t> dtok(tokens);
    cuda::DeviceBuffer<std::int32_t> dstart(starts);
    auto plain = testing::poisoned_device<float>(batch * S * d);
    auto with_pos = testing::poisoned_device<float>(batch * S * d);
    cuda::DeviceStatus status;
    cuda::embedding(dtok.data(), Matrix<const float>(dt.data(), V, d), StridedMatrix<float>(plain.data(), batch * S, d, d),
                    status.view());
    cuda::embedding(dtok.data(), Matrix<const float>(dt.data(), V, d),
                    StridedMatrix<float>(with_pos.data(), batch * S, d, d), status.view(), nullptr, dp.data(), P,
                    cuda::SequenceRows::equal(dstart.data(), batch, S));
    status.check(nullptr, "embedding");
    std::vector<double> want_plain, want_pos;
    for (int r = 0; r < batch * S; ++r)
        for (int i = 0; i < d; ++i) {
            want_plain.push_back(table[tokens[r] * d + i]);
            want_pos.push_back(double(table[tokens[r] * d + i]) + wpe[(starts[r / S] + r % S) * d + i]);
        }
    CHECK(testing::relative_error(plain.download(), want_plain) == 0.0);
    CHECK(testing::relative_error(with_pos.download(), want_pos) < 1e-6);

    // The same rows as sequences of lengths 4 and 8, packed: positions restart at each sequence's start.
    cuda::DeviceBuffer<std::int32_t> offsets(std::vector<std::int32_t>{0, 4, 12});
    cuda::SequenceRows packed = cuda::SequenceRows::equal(dstart.data(), batch, 8);
    packed.offsets = offsets.data();
    cuda::embedding(dtok.data(), Matrix<const float>(dt.data(), V, d),
                    StridedMatrix<float>(with_pos.data(), batch * S, d, d), status.view(), nullptr, dp.data(), P, packed);
    status.check(nullptr, "embedding");
    want_pos.clear();
    for (int r = 0; r < batch * S; ++r)
        for (int i = 0; i < d; ++i)
            want_pos.push_back(double(table[tokens[r] * d + i]) + wpe[(r < 4 ? starts[0] + r : starts[1] + r - 4) * d + i]);
    CHECK(testing::relative_error(with_pos.download(), want_pos) < 1e-6);
}

TEST_CASE("an out-of-vocabulary token id is recorded on the device and thrown at the caller's check") {
    const int V = 10, d = 8;
    cuda::DeviceBuffer<float> dt(testing::random_normal(V * d, 15));
    cuda::DeviceBuffer<std::int32_t> dtok(std::vector<std::int32_t>{3, 10, -1, 9});
    auto out = testing::poisoned_device<float>(4 * d);
    cuda::DeviceStatus status;
    cuda::embedding(dtok.data(), Matrix<const float>(dt.data(), V, d), StridedMatrix<float>(out.data(), 4, d, d),
                    status.view());
    CHECK_THROWS_AS(status.check(nullptr, "embedding"), InputError);
    const auto got = out.download();
    for (int i = 0; i < d; ++i) {
        CHECK(std::isfinite(got[i]));
        CHECK(std::isnan(got[d + i]));
        CHECK(std::isnan(got[2 * d + i]));
        CHECK(std::isfinite(got[3 * d + i]));
    }
    // After a reset, a valid batch passes the check.
    status.reset(nullptr);
    cuda::DeviceBuffer<std::int32_t> good(std::vector<std::int32_t>{0, 9});
    cuda::embedding(good.data(), Matrix<const float>(dt.data(), V, d), StridedMatrix<float>(out.data(), 2, d, d),
                    status.view());
    CHECK_NOTHROW(status.check(nullptr, "embedding"));
}

TEST_CASE("validate_tokens rejects ids outside the vocabulary on the host") {
    const std::vector<std::int64_t> ok = {0, 5, 9}, bad = {0, 10};
    CHECK_NOTHROW(cuda::validate_tokens<std::int64_t>(ok, 10));
    CHECK_THROWS_AS(cuda::validate_tokens<std::int64_t>(bad, 10), InputError);
}

TEST_CASE("argmax_rows picks each row's largest logit (lowest index on ties, -1 for a row with a NaN)") {
    const int rows = 6, vocab = 32000, ld = 32003;
    auto l = testing::random_normal(rows * ld, 91, 3.0f);
    l[1 * ld + 17] = 50.0f;  // a tie: the lower index wins
    l[1 * ld + 31000] = 50.0f;
    l[2 * ld + 12345] = std::numeric_limits<float>::quiet_NaN();
    for (int j = 0; j < vocab; ++j) l[3 * ld + j] = -std::numeric_limits<float>::infinity();
    l[4 * ld + vocab - 1] = std::numeric_limits<float>::infinity();
    l[5 * ld + vocab] = 1e9f;  // past the row's vocabulary (padding): never picked
    cuda::DeviceBuffer<float> dl(l);
    cuda::DeviceBuffer<std::int32_t> out(rows);
    out.fill_bytes(0x7f);
    cuda::argmax_rows(dl.data(), rows, vocab, ld, out.data(), nullptr);
    const auto got = out.download();
    std::vector<std::int32_t> want(rows);
    for (int r = 0; r < rows; ++r) {
        const auto first = l.begin() + static_cast<std::ptrdiff_t>(r) * ld;
        want[r] = static_cast<std::int32_t>(std::max_element(first, first + vocab) - first);
    }
    want[2] = -1;
    CHECK(want[1] == 17);
    CHECK(want[3] == 0);
    CHECK(want[4] == vocab - 1);
    CHECK(got == want);
    CHECK_THROWS_AS(cuda::argmax_rows(dl.data(), rows, vocab, vocab - 1, out.data(), nullptr), ShapeError);
}

TEST_CASE("greedy_feedback moves positions on and records each token at its position") {
    const int batch = 3, vocab = 10, ld = 8;
    std::vector<float> l(batch * vocab, 0.0f);
    l[0 * vocab + 4] = 1.0f;
    l[1 * vocab + 9] = 1.0f;
    l[2 * vocab + 2] = 1.0f;
    cuda::DeviceBuffer<float> dl(l);
    cuda::DeviceBuffer<std::int32_t> tokens(batch), starts(std::vector<std::int32_t>{0, 3, 7}), history(batch * ld);
    tokens.fill_bytes(0x7f);
    history.upload(std::vector<std::int32_t>(batch * ld, -5));
    cuda::greedy_feedback(dl.data(), batch, vocab, 1, tokens.data(), starts.data(), nullptr, history.data(), ld);
    CHECK(tokens.download() == std::vector<std::int32_t>{4, 9, 2});
    CHECK(starts.download() == std::vector<std::int32_t>{1, 4, 8});
    auto want = std::vector<std::int32_t>(batch * ld, -5);
    want[0 * ld + 1] = 4;
    want[1 * ld + 4] = 9;  // sequence 2 is at position 8, past the history row: not written
    CHECK(history.download() == want);
}

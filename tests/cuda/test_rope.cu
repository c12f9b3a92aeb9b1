// cuda::rope_heads against a double-precision reference: QK-norm + rotate-half
// RoPE over the Q and K heads of a fused QKV row (COMPLEXITY-DEEP), and PRISM's
// interleaved RoPE with the signal and noise bases in one launch, out of place.
#include <doctest/doctest.h>

#include <cpx/cuda/kernels/rope.cuh>

#include <cmath>

#include "cuda_test_support.cuh"
#include "test_support.hpp"

using namespace cpx;

namespace {

// One head rotated in double: optional RMSNorm with weight w, then RoPE at `pos` with base theta.
std::vector<double> reference_head(const float* x, int D, int pos, double theta, RopeConvention conv,
                                   const std::vector<float>* w, double eps) {
    std::vector<double> v(x, x + D);
    if (w) {
        double ss = 0;
        for (double e : v) ss += e * e;
        const double inv = 1.0 / std::sqrt(ss / D + eps);
        for (int j = 0; j < D; ++j) v[j] = (*w)[j] * v[j] * inv;
    }
    std::vector<double> y = v;
    for (int i = 0; i < D / 2; ++i) {
        const int a = conv == RopeConvention::rotate_half ? i : 2 * i;
        const int b = conv == RopeConvention::rotate_half ? i + D / 2 : 2 * i + 1;
        const double angle = pos * std::pow(theta, -2.0 * i / D);
        y[a] = v[a] * std::cos(angle) - v[b] * std::sin(angle);
        y[b] = v[b] * std::cos(angle) + v[a] * std::sin(angle);
    }
    return y;
}

// COMPLEXITY-DEEP: rows of [q (Hq heads) | k (Hkv heads) | v (Hkv heads)], norm + rotate in place on q and k.
template <class T>
void check_qk_norm_rope(int D, int Hq, int Hkv, std::uint64_t seed) {
    const int batch = 2, S = 24, width = (Hq + 2 * Hkv) * D, rows = batch * S;
    const std::vector<std::int32_t> starts = {0, 17};
    const auto x = testing::rounded<T>(testing::random_normal(rows * width, seed, 1.5f));
    const auto wq = testing::random_normal(D, seed + 1, 0.3f, 1.0f);
    const auto wk = testing::random_normal(D, seed + 2, 0.3f, 1.0f);
    const RopeParams params{10000.0, 1.0, RopeConvention::rotate_half};
    cuda::RopeTable table(params, D, 64);
    auto dx = testing::upload_as<T>(x);
    cuda::DeviceBuffer<float> dwq(wq), dwk(wk);
    cuda::DeviceBuffer<std::int32_t> dstart(starts);
    StridedMatrix<T> qk(dx.data(), rows, static_cast<index_t>(Hq + Hkv) * D, width);
    cuda::rope_heads<T, float>(qk, qk, Hq + Hkv, D, Hq, {&table, dwq.data()}, {&table, dwk.data()},
                               cuda::SequenceRows::equal(dstart.data(), batch, S), 1e-6f);
    CPX_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = testing::download_floats(dx);

    std::vector<double> want;
    std::vector<float> got_qk, got_v, x_v;
    for (int r = 0; r < rows; ++r) {
        const int pos = starts[r / S] + r % S;
        for (int h = 0; h < Hq + Hkv; ++h) {
            const auto y = reference_head(&x[r * width + h * D], D, pos, 10000.0, RopeConvention::rotate_half,
                                          h < Hq ? &wq : &wk, 1e-6);
            want.insert(want.end(), y.begin(), y.end());
            got_qk.insert(got_qk.end(), got.begin() + r * width + h * D, got.begin() + r * width + (h + 1) * D);
        }
        got_v.insert(got_v.end(), got.begin() + r * width + (Hq + Hkv) * D, got.begin() + (r + 1) * width);
        x_v.insert(x_v.end(), x.begin() + r * width + (Hq + Hkv) * D, x.begin() + (r + 1) * width);
    }
    CHECK(testing::relative_error(got_qk, want) < testing::tolerance<T>());
    CHECK(got_v == x_v);  // the V heads beside them are untouched
}

// PRISM: u = [signal heads | noise heads], rotated out of place with bases theta*m and theta/m.
template <class T>
void check_prism_rope(int D, int H, std::uint64_t seed) {
    const int batch = 3, S = 5, width = 2 * H * D, rows = batch * S;
    const std::vector<std::int32_t> starts = {0, 9, 40};
    const double m = 3.1415926535, theta = 10000.0;
    const auto x = testing::rounded<T>(testing::random_normal(rows * width, seed));
    cuda::RopeTable signal({theta * m, 1.0, RopeConvention::interleaved_pairs}, D, 48);
    cuda::RopeTable noise({theta / m, 1.0, RopeConvention::interleaved_pairs}, D, 48);
    auto dx = testing::upload_as<T>(x);
    auto dy = testing::poisoned_device<T>(rows * width);
    cuda::DeviceBuffer<std::int32_t> dstart(starts);
    cuda::rope_heads<T, float>(StridedMatrix<const T>(dx.data(), rows, width, width),
                               StridedMatrix<T>(dy.data(), rows, width, width), 2 * H, D, H, {&signal, nullptr},
                               {&noise, nullptr}, cuda::SequenceRows::equal(dstart.data(), batch, S), 0.0f);
    CPX_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> want;
    for (int r = 0; r < rows; ++r)
        for (int h = 0; h < 2 * H; ++h) {
            const auto y = reference_head(&x[r * width + h * D], D, starts[r / S] + r % S, h < H ? theta * m : theta / m,
                                          RopeConvention::interleaved_pairs, nullptr, 0.0);
            want.insert(want.end(), y.begin(), y.end());
        }
    CHECK(testing::relative_error(testing::download_floats(dy), want) < testing::tolerance<T>());
    CHECK(testing::download_floats(dx) == x);  // the unrotated values (PRISM's V) are kept
}

}  // namespace

// fp32: the angles are fp32 products pos * inv_freq (as the reference code forms them), off
// the double angle by ~1 ulp of 40 rad = 4e-6 rad at these positions: below 1e-5 relative.
TEST_CASE("QK-norm + rotate-half RoPE over the Q and K heads of fused QKV rows matches the reference") {
    check_qk_norm_rope<float>(64, 4, 2, 1);
    check_qk_norm_rope<float>(128, 2, 1, 2);
    check_qk_norm_rope<float>(16, 4, 2, 3);  // head dim below a warp's width of pairs
    check_qk_norm_rope<bf16>(64, 6, 2, 4);
    check_qk_norm_rope<fp16>(64, 4, 4, 5);
}

TEST_CASE("PRISM signal and noise heads are rotated with their own bases in one launch") {
    check_prism_rope<float>(128, 2, 6);
    check_prism_rope<float>(32, 2, 7);
    check_prism_rope<bf16>(128, 4, 8);
}

TEST_CASE("a position past the table gives NaN heads and an InputError at the check, never a read out of bounds") {
    const int D = 16, rows = 4;
    cuda::RopeTable table({10000.0, 1.0, RopeConvention::rotate_half}, D, 8);
    auto dx = testing::upload_as<float>(testing::random_normal(rows * D, 9));
    auto dy = testing::poisoned_device<float>(rows * D);
    cuda::DeviceBuffer<std::int32_t> dstart(std::vector<std::int32_t>{6});  // positions 6..9, table has 8
    cuda::DeviceStatus status;
    cuda::rope_heads<float, float>(StridedMatrix<const float>(dx.data(), rows, D, D),
                                   StridedMatrix<float>(dy.data(), rows, D, D), 1, D, 1, {&table, nullptr},
                                   {&table, nullptr}, cuda::SequenceRows::equal(dstart.data(), 1, rows), 0.0f,
                                   status.view());
    CHECK_THROWS_AS(status.check(nullptr, "rope"), InputError);
    const auto got = dy.download();
    for (int j = 0; j < 2 * D; ++j) CHECK(std::isfinite(got[j]));   // positions 6 and 7
    for (int j = 2 * D; j < 4 * D; ++j) CHECK(std::isnan(got[j]));  // positions 8 and 9
}

TEST_CASE("rope_heads rejects a table built for another head dim") {
    cuda::RopeTable table({10000.0, 1.0, RopeConvention::rotate_half}, 32, 8);
    cuda::DeviceBuffer<float> x(64);
    cuda::DeviceBuffer<std::int32_t> start(1);
    CHECK_THROWS_AS((cuda::rope_heads<float, float>(StridedMatrix<const float>(x.data(), 4, 16, 16),
                                                    StridedMatrix<float>(x.data(), 4, 16, 16), 1, 16, 1,
                                                    {&table, nullptr}, {&table, nullptr},
                                                    cuda::SequenceRows::equal(start.data(), 1, 4), 0.0f)),
                    ShapeError);
}

TEST_CASE("rope_heads: packed sequences of different lengths (one empty) each rotate from their own start") {
    const int D = 32, H = 2, width = H * D;
    const std::vector<std::int32_t> lengths = {5, 0, 9}, starts = {3, 40, 20}, offsets = {0, 5, 5, 14};
    const int rows = 14;
    const double theta = 10000.0;
    cuda::RopeTable table({theta, 1.0, RopeConvention::rotate_half}, D, 48);
    const auto x = testing::random_normal(rows * width, 10);
    auto dx = testing::upload_as<float>(x);
    auto dy = testing::poisoned_device<float>(rows * width);
    cuda::DeviceBuffer<std::int32_t> dstart(starts), doff(offsets);
    cuda::SequenceRows seqs = cuda::SequenceRows::equal(dstart.data(), 3, 9);
    seqs.offsets = doff.data();
    cuda::DeviceStatus status;
    cuda::rope_heads<float, float>(StridedMatrix<const float>(dx.data(), rows, width, width),
                                   StridedMatrix<float>(dy.data(), rows, width, width), H, D, H, {&table, nullptr},
                                   {&table, nullptr}, seqs, 0.0f, status.view());
    CHECK_NOTHROW(status.check(nullptr, "rope"));
    std::vector<double> want;
    for (int r = 0; r < rows; ++r) {
        const int pos = r < 5 ? starts[0] + r : starts[2] + (r - 5);
        for (int h = 0; h < H; ++h) {
            const auto y = reference_head(&x[r * width + h * D], D, pos, theta, RopeConvention::rotate_half, nullptr, 0.0);
            want.insert(want.end(), y.begin(), y.end());
        }
    }
    CHECK(testing::relative_error(dy.download(), want) < 1e-5);
}

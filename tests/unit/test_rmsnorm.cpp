// RMSNorm against a plain double-precision reference.
#include <doctest/doctest.h>

#include <cpx/cpu/layers/rmsnorm.hpp>

#include <cmath>

#include "test_support.hpp"

using namespace cpx;

namespace {
std::vector<double> reference_rmsnorm(const std::vector<float>& x, const std::vector<float>& w, int rows, int n,
                                      double eps) {
    std::vector<double> y(x.size());
    for (int r = 0; r < rows; ++r) {
        double ss = 0;
        for (int i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
        const double inv = 1.0 / std::sqrt(ss / n + eps);
        for (int i = 0; i < n; ++i) y[r * n + i] = w[i] * x[r * n + i] * inv;
    }
    return y;
}
}  // namespace

TEST_CASE("rmsnorm matches the double reference on random rows") {
    for (int n : {1, 7, 64, 768}) {
        const int rows = 5;
        auto x = testing::random_normal(rows * n, 11 + n, 3.0f);
        auto w = testing::random_normal(n, 12 + n, 1.0f, 1.0f);
        auto y = testing::poisoned<float>(rows * n);
        cpu::rmsnorm(Matrix<const float>(x.data(), rows, n), Vector<const float>(w.data(), n),
                     Matrix<float>(y.data(), rows, n), 1e-6f);
        // fp32 sums of up to 768 squares: a few ulp of relative error.
        CHECK(testing::relative_error(y, reference_rmsnorm(x, w, rows, n, 1e-6)) < 1e-6);
    }
}

TEST_CASE("rmsnorm stores bf16 outputs rounded from the fp32 result") {
    const int rows = 3, n = 32;
    auto x = testing::random_normal(rows * n, 5);
    std::vector<float> w(n, 1.0f), y32(rows * n);
    std::vector<bf16> y16(rows * n);
    cpu::rmsnorm(Matrix<const float>(x.data(), rows, n), Vector<const float>(w.data(), n),
                 Matrix<float>(y32.data(), rows, n), 1e-6f);
    cpu::rmsnorm(Matrix<const float>(x.data(), rows, n), Vector<const float>(w.data(), n),
                 Matrix<bf16>(y16.data(), rows, n), 1e-6f);
    for (int i = 0; i < rows * n; ++i) CHECK(y16[i].bits == bf16::from_float(y32[i]).bits);
}

TEST_CASE("rmsnorm rejects a weight of the wrong length") {
    std::vector<float> x(8), w(3), y(8);
    CHECK_THROWS_AS(cpu::rmsnorm(Matrix<const float>(x.data(), 2, 4), Vector<const float>(w.data(), 3),
                                 Matrix<float>(y.data(), 2, 4), 1e-6f),
                    ShapeError);
}

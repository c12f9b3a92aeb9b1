// PRISM's initial state: the orthogonal dictionary U and the lambda schedule.
#include <doctest/doctest.h>

#include <cpx/cpu/layers/orthogonal_init.hpp>
#include <cpx/math/prism_lambda.hpp>
#include <cpx/models/seeded_normal.hpp>

#include <cmath>

#include "test_support.hpp"

using namespace cpx;

namespace {
/// max |(W^T W - I)_ij| in double, for a rows x cols row-major matrix.
double gram_defect(const std::vector<float>& w, int rows, int cols, bool columns) {
    const int n = columns ? cols : rows, len = columns ? rows : cols;
    double worst = 0;
    for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) {
            double s = 0;
            for (int k = 0; k < len; ++k) {
                const double x = columns ? w[k * cols + a] : w[a * cols + k];
                const double y = columns ? w[k * cols + b] : w[b * cols + k];
                s += x * y;
            }
            worst = std::max(worst, std::abs(s - (a == b ? 1.0 : 0.0)));
        }
    return worst;
}
}  // namespace

TEST_CASE("orthogonal_init gives U^T U = I within 1e-5 for PRISM's tall U") {
    // TinyPrism's [2HD, d] = [128, 32] and PRISM-mini's shape ratio [2048, 512] scaled down.
    for (auto [rows, cols] : {std::pair{128, 32}, std::pair{256, 64}, std::pair{40, 40}}) {
        SeededRandom rng(7);
        auto w = testing::poisoned<float>(std::size_t(rows) * cols);
        cpu::orthogonal_init(Matrix<float>(w.data(), rows, cols), [&] { return rng.normal(); });
        CHECK(gram_defect(w, rows, cols, true) < 1e-5);
    }
}

TEST_CASE("orthogonal_init of a wide matrix has orthonormal rows") {
    SeededRandom rng(8);
    auto w = testing::poisoned<float>(12 * 30);
    cpu::orthogonal_init(Matrix<float>(w.data(), 12, 30), [&] { return rng.normal(); });
    CHECK(gram_defect(w, 12, 30, false) < 1e-5);
}

TEST_CASE("orthogonal_init is reproducible from its seed and differs between seeds") {
    std::vector<float> a(64 * 16), b(64 * 16), c(64 * 16);
    SeededRandom g1(3), g2(3), g3(4);
    cpu::orthogonal_init(Matrix<float>(a.data(), 64, 16), [&] { return g1.normal(); });
    cpu::orthogonal_init(Matrix<float>(b.data(), 64, 16), [&] { return g2.normal(); });
    cpu::orthogonal_init(Matrix<float>(c.data(), 64, 16), [&] { return g3.normal(); });
    CHECK(a == b);
    CHECK(a != c);
}

TEST_CASE("the lambda schedule runs from lambda0 to lambda1 along a half cosine") {
    CHECK(prism_lambda_schedule(0, 1000) == doctest::Approx(0.01).epsilon(1e-12));
    CHECK(prism_lambda_schedule(1000, 1000) == doctest::Approx(0.1).epsilon(1e-12));
    CHECK(prism_lambda_schedule(500, 1000) == doctest::Approx(0.055).epsilon(1e-12));
    // a quarter of the way: (1 - cos(pi/4)) / 2 of the range.
    CHECK(prism_lambda_schedule(250, 1000, 0.0, 1.0) == doctest::Approx((1 - std::sqrt(0.5)) / 2).epsilon(1e-12));
    double last = -1;
    for (int t = 0; t <= 100; ++t) {
        const double l = prism_lambda_schedule(t, 100);
        CHECK(l >= last);
        last = l;
    }
}

TEST_CASE("the lambda schedule clamps progress outside [0, T]") {
    CHECK(prism_lambda_schedule(-5, 100) == doctest::Approx(0.01));
    CHECK(prism_lambda_schedule(1e6, 100) == doctest::Approx(0.1));
    CHECK(prism_lambda_schedule(3, 0) == doctest::Approx(0.1));
}

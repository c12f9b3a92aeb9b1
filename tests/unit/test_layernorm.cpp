// LayerNorm against a plain double-precision reference.
#include <doctest/doctest.h>

#include <cpx/cpu/layers/layernorm.hpp>

#include <cmath>

#include "prism_reference.hpp"
#include "test_support.hpp"
#include "vector_isas.hpp"

using namespace cpx;

namespace {
// The double-precision LayerNorm of PRISM's reference (tests/support/prism_reference.hpp).
std::vector<double> reference_layernorm(const std::vector<float>& x, const std::vector<float>& w,
                                        const std::vector<float>* b, int n, double eps) {
    return reference::layernorm(reference::widen(x), n, w, b ? *b : std::vector<float>{}, eps);
}
}  // namespace

// Every kernel family the machine runs (portable loops; AVX2 and AVX-512 with four
// accumulators and masked tails): widths below, at and past a vector and a four-vector step,
// and 59 (one AVX2 step of four vectors, three single vectors, a tail of three).
TEST_CASE("layernorm with bias matches the double reference, also for rows with a large mean") {
    for (cpu::VectorIsa isa : testing::vector_isas()) {
        const cpu::VectorIsaLimit limit(isa);
        CAPTURE(cpu::vector_isa_name(isa));
        for (int n : {1, 7, 16, 32, 59, 70, 100, 512, 768}) {
            CAPTURE(n);
            const int rows = 4;
            auto x = testing::random_normal(rows * n, 21 + n, 2.0f, 5.0f);
            auto w = testing::random_normal(n, 22 + n, 0.5f, 1.0f);
            auto b = testing::random_normal(n, 23 + n, 0.5f);
            auto y = testing::poisoned<float>(rows * n);
            cpu::layernorm(Matrix<const float>(x.data(), rows, n), Vector<const float>(w.data(), n),
                           Vector<const float>(b.data(), n), Matrix<float>(y.data(), rows, n), 1e-5f);
            // fp32 two-pass sums over at most 768 values: well under 1e-5 relative.
            CHECK(testing::relative_error(y, reference_layernorm(x, w, &b, n, 1e-5)) < 1e-5);
        }
    }
}

TEST_CASE("layernorm without bias leaves the bias term out") {
    for (cpu::VectorIsa isa : testing::vector_isas()) {
        const cpu::VectorIsaLimit limit(isa);
        CAPTURE(cpu::vector_isa_name(isa));
        for (int n : {16, 37}) {
            const int rows = 3;
            auto x = testing::random_normal(rows * n, 31);
            auto w = testing::random_normal(n, 32, 0.5f, 1.0f);
            auto y = testing::poisoned<float>(rows * n);
            cpu::layernorm(Matrix<const float>(x.data(), rows, n), Vector<const float>(w.data(), n),
                           Vector<const float>(), Matrix<float>(y.data(), rows, n), 1e-5f);
            CHECK(testing::relative_error(y, reference_layernorm(x, w, nullptr, n, 1e-5)) < 1e-5);
        }
    }
}

TEST_CASE("layernorm of a constant row is the bias (eps keeps it finite)") {
    for (cpu::VectorIsa isa : testing::vector_isas()) {
        const cpu::VectorIsaLimit limit(isa);
        CAPTURE(cpu::vector_isa_name(isa));
        for (int n : {8, 40}) {
            std::vector<float> x(n, 3.25f), w(n, 2.0f), b(n), y(n);
            for (int i = 0; i < n; ++i) b[i] = 0.1f * i;
            cpu::layernorm(Matrix<const float>(x.data(), 1, n), Vector<const float>(w.data(), n),
                           Vector<const float>(b.data(), n), Matrix<float>(y.data(), 1, n), 1e-5f);
            for (int i = 0; i < n; ++i) CHECK(y[i] == b[i]);
        }
    }
}

TEST_CASE("layernorm rejects weight, bias or output of the wrong shape") {
    std::vector<float> x(8), w(4), w3(3), y(8);
    const Matrix<const float> xv(x.data(), 2, 4);
    const Matrix<float> yv(y.data(), 2, 4);
    CHECK_THROWS_AS(cpu::layernorm(xv, Vector<const float>(w3.data(), 3), Vector<const float>(), yv, 1e-5f),
                    ShapeError);
    CHECK_THROWS_AS(cpu::layernorm(xv, Vector<const float>(w.data(), 4), Vector<const float>(w3.data(), 3), yv, 1e-5f),
                    ShapeError);
    CHECK_THROWS_AS(cpu::layernorm(xv, Vector<const float>(w.data(), 4), Vector<const float>(),
                                   Matrix<float>(y.data(), 1, 4), 1e-5f),
                    ShapeError);
}

TEST_CASE("layernorm over many rows (the threaded row loop) matches the double reference, in place too") {
    const int rows = 200, n = 512;  // 102400 values: above the threshold for splitting rows over threads
    for (cpu::VectorIsa isa : testing::vector_isas()) {
        const cpu::VectorIsaLimit limit(isa);
        CAPTURE(cpu::vector_isa_name(isa));
        auto x = testing::random_normal(rows * n, 91, 2.0f, 3.0f);
        auto w = testing::random_normal(n, 92, 0.5f, 1.0f);
        auto b = testing::random_normal(n, 93, 0.5f);
        const auto want = reference_layernorm(x, w, &b, n, 1e-5);
        cpu::layernorm(Matrix<const float>(x.data(), rows, n), Vector<const float>(w.data(), n),
                       Vector<const float>(b.data(), n), Matrix<float>(x.data(), rows, n), 1e-5f);
        CHECK(testing::relative_error(x, want) < 1e-5);
    }
}

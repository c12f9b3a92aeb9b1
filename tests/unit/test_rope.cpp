// RoPE on the CPU against a plain double-precision rotation written from the spec.
#include <doctest/doctest.h>

#include <cpx/cpu/layers/rope.hpp>

#include <cmath>
#include <vector>

#include "test_support.hpp"

using namespace cpx;

namespace {
// The spec's recipe: fp32 inv_freq and fp32 angle p * inv_freq; the rotation itself in double.
std::vector<double> reference_rope(const std::vector<float>& x, int rows, int row_stride, int first_col, int heads,
                                   int dim, double theta, RopeConvention conv, const std::vector<long>& positions) {
    std::vector<double> y(x.begin(), x.end());
    for (int r = 0; r < rows; ++r)
        for (int h = 0; h < heads; ++h)
            for (int i = 0; i < dim / 2; ++i) {
                const float inv = static_cast<float>(1.0 / std::pow(theta, 2.0 * i / dim));
                const float angle = static_cast<float>(positions[r]) * inv;
                const int a = conv == RopeConvention::rotate_half ? i : 2 * i;
                const int b = conv == RopeConvention::rotate_half ? i + dim / 2 : 2 * i + 1;
                const std::size_t ia = r * row_stride + first_col + h * dim + a;
                const std::size_t ib = r * row_stride + first_col + h * dim + b;
                const double xa = x[ia], xb = x[ib];
                y[ia] = xa * std::cos(double(angle)) - xb * std::sin(double(angle));
                y[ib] = xb * std::cos(double(angle)) + xa * std::sin(double(angle));
            }
    return y;
}
}  // namespace

TEST_CASE("rotate-half RoPE matches the reference at absolute positions on a column range") {
    // Three heads of dim 16 inside rows of 80 values, starting at column 8: the others must not change.
    const int rows = 9, stride = 80, first = 8, heads = 3, dim = 16;
    cpu::RopeTable table(RopeParams{10000.0, 1.0, RopeConvention::rotate_half}, dim, 64);
    auto x = testing::random_normal(rows * stride, 3);
    std::vector<long> pos(rows);
    for (int r = 0; r < rows; ++r) pos[r] = 40 + r;
    auto want = reference_rope(x, rows, stride, first, heads, dim, 10000.0, RopeConvention::rotate_half, pos);
    cpu::apply_rope(table, cpu::packed_heads(x.data() + first, rows, heads, dim, stride), 40);
    // fp32 rotation of unit-scale values: a few ulp.
    CHECK(testing::relative_error(x, want) < 2e-6);
}

TEST_CASE("interleaved-pair RoPE matches the reference with a PRISM-like base") {
    const int rows = 5, heads = 2, dim = 8;
    const double theta = 10000.0 / 3.1415926535;
    cpu::RopeTable table(RopeParams{theta, 1.0, RopeConvention::interleaved_pairs}, dim, 32);
    auto x = testing::random_normal(rows * heads * dim, 4);
    std::vector<long> pos = {0, 7, 3, 31, 12};
    auto want = reference_rope(x, rows, heads * dim, 0, heads, dim, theta, RopeConvention::interleaved_pairs, pos);
    std::vector<index_t> positions(pos.begin(), pos.end());
    cpu::apply_rope(table, cpu::packed_heads(x.data(), rows, heads, dim), positions);
    CHECK(testing::relative_error(x, want) < 2e-6);
}

TEST_CASE("position 0 is the identity and rotations preserve each head's norm") {
    const int dim = 32;
    cpu::RopeTable table(RopeParams{}, dim, 16);
    auto x = testing::random_normal(2 * dim, 5);
    const auto before = x;
    cpu::apply_rope(table, cpu::packed_heads(x.data(), 1, 1, dim), 0);
    for (int i = 0; i < dim; ++i) CHECK(x[i] == before[i]);
    cpu::apply_rope(table, cpu::packed_heads(x.data() + dim, 1, 1, dim), 15);
    double n0 = 0, n1 = 0;
    for (int i = 0; i < dim; ++i) {
        n0 += double(before[dim + i]) * before[dim + i];
        n1 += double(x[dim + i]) * x[dim + i];
    }
    CHECK(std::abs(n1 - n0) / n0 < 1e-6);
}

TEST_CASE("the table follows the configured scaling: position p / s uses the angle of p") {
    const int dim = 8;
    cpu::RopeTable scaled(RopeParams{10000.0, 2.0, RopeConvention::rotate_half}, dim, 32);
    cpu::RopeTable plain(RopeParams{10000.0, 1.0, RopeConvention::rotate_half}, dim, 32);
    for (int i = 0; i < dim / 2; ++i) {
        CHECK(scaled.cos_at(10)[i] == plain.cos_at(5)[i]);
        CHECK(scaled.sin_at(10)[i] == plain.sin_at(5)[i]);
    }
}

TEST_CASE("RoPE rejects positions beyond the table and heads of another dimension") {
    cpu::RopeTable table(RopeParams{}, 8, 4);
    std::vector<float> x(2 * 8);
    CHECK_THROWS_AS(cpu::apply_rope(table, cpu::packed_heads(x.data(), 2, 1, 8), 3), InputError);
    std::vector<index_t> bad = {0, 4};
    CHECK_THROWS_AS(cpu::apply_rope(table, cpu::packed_heads(x.data(), 2, 1, 8), bad), InputError);
    CHECK_THROWS_AS(cpu::apply_rope(table, cpu::packed_heads(x.data(), 1, 1, 16), 0), ShapeError);
    CHECK_THROWS_AS(cpu::RopeTable(RopeParams{}, 7, 4), ShapeError);
}

// Tensor views and 16-bit storage types.
#include <doctest/doctest.h>

#include <cpx/core/dtype.hpp>
#include <cpx/core/strided_matrix.hpp>
#include <cpx/core/tensor_view.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace cpx;

TEST_CASE("views index row-major and mix static and dynamic extents") {
    std::vector<float> buf(2 * 3 * 4);
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i);
    View<float, dynamic, 3, 4> v(buf.data(), 2);
    CHECK(v.extent(0) == 2);
    CHECK(v.extent<1>() == 3);
    CHECK(v.size() == 24);
    CHECK(v(1, 2, 3) == 23.0f);
    CHECK(v(0, 1, 0) == 4.0f);
    auto plane = v[1];
    static_assert(std::is_same_v<decltype(plane), View<float, 3, 4>>);
    CHECK(plane(0, 0) == 12.0f);
    auto rows = Matrix<float>(buf.data(), 6, 4).rows(2, 3);
    CHECK(rows.extent(0) == 3);
    CHECK(rows(0, 0) == 8.0f);
    View<const float, dynamic, 3, 4> cv = v;
    CHECK(cv(1, 2, 3) == 23.0f);
}

TEST_CASE("checked views reject extents that contradict the static ones") {
    std::vector<float> buf(12);
    using V = View<float, dynamic, 4>;
    const std::array<index_t, 2> good{3, 4}, bad{4, 3}, negative{-1, 3};
    CHECK_NOTHROW(V::checked(buf.data(), good));
    CHECK_THROWS_WITH_AS(V::checked(buf.data(), bad), "view extent 1 is 3 but the configuration fixes it at 4",
                         ShapeError);
    CHECK_THROWS_AS(Matrix<float>::checked(buf.data(), negative), ShapeError);
}

TEST_CASE("strided matrices: a constant width is part of the type and checked where it is handed over") {
    std::vector<float> buf(6 * 10);
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i);
    const StridedMatrix<float> any(buf.data(), 6, 8, 10);  // 8 columns of 10-wide rows
    // The constant width is not stored: data, rows and stride only.
    static_assert(sizeof(StridedMatrix<float, 8>) == sizeof(float*) + 2 * sizeof(index_t));
    static_assert(StridedMatrix<float, 8>::cols == 8 && StridedMatrix<float>::static_cols == dynamic);

    const StridedMatrix<const float, 8> fixed = any;  // run-time width to a constant one: checked
    CHECK(fixed.rows == 6);
    CHECK(fixed.ld == 10);
    CHECK(fixed(2, 7) == 27.0f);
    CHECK(fixed.row(5) == buf.data() + 50);

    const StridedMatrix<const float> back = fixed;  // and back: always valid
    CHECK(back.cols == 8);
    CHECK(back.ld == 10);
    CHECK(back(3, 1) == 31.0f);

    // Sub-blocks: rows keep the constant width; columns<N> makes a new constant one.
    const auto tail = fixed.rows_range(4, 2);
    static_assert(std::is_same_v<decltype(tail), const StridedMatrix<const float, 8>>);
    CHECK(tail(0, 0) == 40.0f);
    const auto middle = fixed.columns<3>(2);
    static_assert(decltype(middle)::cols == 3);
    CHECK(middle(1, 0) == 12.0f);
    CHECK(middle.ld == 10);
    CHECK(fixed.columns(6, 2).cols == 2);

    // A width that contradicts the type is refused with the two widths in the message.
    const auto narrow = [&] { return StridedMatrix<const float, 9>(any); };
    CHECK_THROWS_WITH_AS(narrow(), "a matrix with 8 columns where the configuration fixes 9", ShapeError);
    CHECK_THROWS_AS((StridedMatrix<float, 9>(buf.data(), 6, 8, 10)), ShapeError);
    CHECK_THROWS_AS((StridedMatrix<float, 9>(Matrix<float>(buf.data(), 6, 10))), ShapeError);
    CHECK_NOTHROW((StridedMatrix<float, 10>(Matrix<float>(buf.data(), 6, 10))));
    CHECK_THROWS_AS(fixed.columns<4>(6), ShapeError);  // columns [6, 10) of 8
}

namespace {
float ref_bf16_round(float f) {  // reference: round half to even on the 16 dropped bits, in integers
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    const std::uint32_t low = u & 0xffffu, high = u >> 16;
    std::uint32_t r = high;
    if (low > 0x8000u || (low == 0x8000u && (high & 1u))) r += 1;
    const std::uint32_t out = r << 16;
    float g;
    std::memcpy(&g, &out, 4);
    return g;
}
}  // namespace

TEST_CASE("bf16 rounds to nearest even and keeps NaN and infinities") {
    for (float f : {1.0f, -2.5f, 3.14159265f, 1e-30f, 6.5e4f, 1.00390625f, 1.01171875f, 3.0e38f}) {
        CHECK(bf16::from_float(f).to_float() == ref_bf16_round(f));
    }
    CHECK(bf16::from_float(1.00390625f).to_float() == 1.0f);        // exact tie, even stays
    CHECK(bf16::from_float(1.01171875f).to_float() == 1.015625f);   // exact tie, odd rounds up
    CHECK(rounded_to<bf16>(1.01171875f) == 1.015625f);
    CHECK(rounded_to<bf16>(1.00390625f) == 1.0f);
    CHECK(rounded_to<float>(1.00390625f) == 1.00390625f);
    CHECK(std::isnan(bf16::from_float(std::numeric_limits<float>::quiet_NaN()).to_float()));
    CHECK(std::isinf(bf16::from_float(std::numeric_limits<float>::infinity()).to_float()));
}

TEST_CASE("fp16 converts exactly, subnormals and overflow included") {
    // Every fp16 bit pattern that is a number round-trips through float exactly.
    for (std::uint32_t b = 0; b < 0x10000u; ++b) {
        const fp16 h = fp16::from_bits(static_cast<std::uint16_t>(b));
        const float f = h.to_float();
        if (std::isnan(f)) continue;
        REQUIRE(fp16::from_float(f).bits == h.bits);
    }
    CHECK(fp16::from_bits(0x3c00).to_float() == 1.0f);
    CHECK(fp16::from_bits(0x0001).to_float() == std::ldexp(1.0f, -24));
    CHECK(fp16::from_bits(0x7bff).to_float() == 65504.0f);
    CHECK(fp16::from_float(65520.0f).bits == 0x7c00);  // rounds to infinity
    CHECK(fp16::from_float(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00);  // tie to even
    CHECK(fp16::from_float(std::ldexp(1.0f, -25)).bits == 0x0000);          // tie to even (zero)
    CHECK(fp16::from_float(std::ldexp(3.0f, -25)).bits == 0x0002);          // 1.5 ulp -> 2
}

// Tensor views and 16-bit storage types.
#include <doctest/doctest.h>

#include <cpx/core/dtype.hpp>
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

#pragma once
// Storage types for weights and activations. Arithmetic is always fp32; these
// types only define how 16-bit values are stored and converted, with the same
// bit-level definitions on host and device so both paths round identically.

#include <cstdint>
#include <cstring>
#include <string_view>

#include "cpx/core/host_device.hpp"

namespace cpx {

namespace detail {
CPX_HD_INLINE std::uint32_t float_bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
CPX_HD_INLINE float bits_float(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
}  // namespace detail

/// bfloat16 storage: the top 16 bits of an IEEE float, rounded to nearest even.
struct bf16 {
    std::uint16_t bits = 0;

    static CPX_HD_INLINE bf16 from_bits(std::uint16_t b) { bf16 r; r.bits = b; return r; }

    CPX_HD_INLINE static bf16 from_float(float f) {
        std::uint32_t u = detail::float_bits(f);
        if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: keep it quiet, never round to inf
            return from_bits(static_cast<std::uint16_t>((u >> 16) | 0x0040u));
        u += 0x7fffu + ((u >> 16) & 1u);
        return from_bits(static_cast<std::uint16_t>(u >> 16));
    }
    CPX_HD_INLINE float to_float() const { return detail::bits_float(std::uint32_t{bits} << 16); }
};

/// IEEE binary16 storage, converted exactly (subnormals included), round to nearest even.
struct fp16 {
    std::uint16_t bits = 0;

    static CPX_HD_INLINE fp16 from_bits(std::uint16_t b) { fp16 r; r.bits = b; return r; }

    CPX_HD_INLINE float to_float() const {
        const std::uint32_t sign = std::uint32_t{bits & 0x8000u} << 16;
        std::uint32_t exp = (bits >> 10) & 0x1fu;
        std::uint32_t man = bits & 0x3ffu;
        if (exp == 0x1fu) return detail::bits_float(sign | 0x7f800000u | (man << 13));
        if (exp == 0) {
            if (man == 0) return detail::bits_float(sign);
            // Subnormal: value = man * 2^-24, exact in float.
            const float mag = static_cast<float>(man) * 5.9604644775390625e-08f;
            return sign ? -mag : mag;
        }
        return detail::bits_float(sign | ((exp + 112u) << 23) | (man << 13));
    }

    CPX_HD_INLINE static fp16 from_float(float f) {
        const std::uint32_t u = detail::float_bits(f);
        const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
        const std::uint32_t abs = u & 0x7fffffffu;
        if (abs > 0x7f800000u) return from_bits(sign | 0x7e00u);          // NaN
        if (abs >= 0x477ff000u) return from_bits(sign | 0x7c00u);         // overflow to inf
        if (abs < 0x38800000u) {                                          // subnormal or zero
            // Scale so that one fp16 subnormal step is 1.0, then round to nearest even.
            const float mag = detail::bits_float(abs) * 16777216.0f;      // * 2^24
            std::uint32_t m = static_cast<std::uint32_t>(mag);
            const float rest = mag - static_cast<float>(m);
            if (rest > 0.5f || (rest == 0.5f && (m & 1u))) ++m;
            return from_bits(static_cast<std::uint16_t>(sign | m));
        }
        std::uint32_t r = abs - 0x38000000u;                              // rebias 127 -> 15
        r += 0x0fffu + ((r >> 13) & 1u);
        return from_bits(static_cast<std::uint16_t>(sign | (r >> 13)));
    }
};

/// Element types the checkpoint readers and kernels know about.
enum class DType : std::uint8_t { f32, bf16, f16, i64, i32 };

constexpr std::size_t dtype_size(DType t) {
    switch (t) {
        case DType::f32: return 4;
        case DType::bf16: return 2;
        case DType::f16: return 2;
        case DType::i64: return 8;
        case DType::i32: return 4;
    }
    return 0;
}

constexpr std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::f32: return "F32";
        case DType::bf16: return "BF16";
        case DType::f16: return "F16";
        case DType::i64: return "I64";
        case DType::i32: return "I32";
    }
    return "?";
}

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<fp16> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::i32; };

/// Widening load used by every kernel: storage type -> fp32.
CPX_HD_INLINE float to_float(float x) { return x; }
CPX_HD_INLINE float to_float(bf16 x) { return x.to_float(); }
CPX_HD_INLINE float to_float(fp16 x) { return x.to_float(); }

/// Narrowing store used by every kernel: fp32 -> storage type.
template <class T> CPX_HD_INLINE T from_float(float x);
template <> CPX_HD_INLINE float from_float<float>(float x) { return x; }
template <> CPX_HD_INLINE bf16 from_float<bf16>(float x) { return bf16::from_float(x); }
template <> CPX_HD_INLINE fp16 from_float<fp16>(float x) { return fp16::from_float(x); }

/// x rounded to the nearest value T holds, kept in fp32: what a product in T arithmetic takes
/// for its fp32 inputs (bf16: to nearest even).
template <class T> CPX_HD_INLINE float rounded_to(float x) { return to_float(from_float<T>(x)); }

}  // namespace cpx

#pragma once
// Typed reads of a validated tensor into caller memory: same dtype is one
// memcpy, conversions are tight loops over the bytes (no alignment assumed:
// loads go through memcpy, which compilers turn into plain vector loads).
//
//   destination   accepted file dtypes
//   float         F32 (copy), BF16, F16 (exact widening)
//   bf16          BF16 (copy), F32 and F16 (rounded to nearest even)
//   fp16          F16 (copy), F32 and BF16 (rounded to nearest even)
//   int64         I64 (copy), I32 (widening)
//   int32         I32 (copy), I64 (every value checked to fit)
//
// The element count must equal the tensor's (ShapeError otherwise); other
// dtypes raise ShapeError naming the tensor and its dtype.

#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/safetensors_file.hpp"

namespace cpx::io {

namespace detail {

template <class T>
constexpr std::string_view destination_name() {
    if constexpr (std::is_same_v<T, float>) return "float";
    else if constexpr (std::is_same_v<T, bf16>) return "bf16";
    else if constexpr (std::is_same_v<T, fp16>) return "fp16";
    else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
    else return "int32";
}

template <class T>
constexpr std::string_view readable_dtypes() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, fp16>)
        return "F32, BF16, F16";
    else return "I64, I32";
}

template <class T>
[[noreturn]] void unreadable(const TensorInfo& t, std::string_view context) {
    raise<ShapeError>(context, "tensor '", t.name, "' has dtype ", t.dtype_name, ", which cannot be read as ",
                      destination_name<T>(), " (readable: ", readable_dtypes<T>(), ")");
}

inline std::uint16_t load_u16(const std::byte* p) { std::uint16_t v; std::memcpy(&v, p, 2); return v; }
inline float load_f32(const std::byte* p) { float v; std::memcpy(&v, p, 4); return v; }
inline std::int32_t load_i32(const std::byte* p) { std::int32_t v; std::memcpy(&v, p, 4); return v; }
inline std::int64_t load_i64(const std::byte* p) { std::int64_t v; std::memcpy(&v, p, 8); return v; }

inline float bf16_bits_to_float(std::uint16_t b) { return cpx::detail::bits_float(std::uint32_t{b} << 16); }

}  // namespace detail

/// Whether read_tensor<T> can read a tensor of dtype `d` (checked before any
/// destination is allocated).
template <class T>
constexpr bool readable_as(DType d) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, fp16>)
        return d == DType::f32 || d == DType::bf16 || d == DType::f16;
    else return d == DType::i64 || d == DType::i32;
}

/// Throws the read_tensor error for a tensor whose dtype T cannot hold.
template <class T>
void require_readable(const TensorInfo& t, std::string_view context = {}) {
    if (!readable_as<T>(t.dtype)) detail::unreadable<T>(t, context);
}

/// Reads `t` into `out` (see the table at the top). `context` prefixes messages
/// (e.g. "checkpoint 'dir': ").
template <class T>
void read_tensor(const TensorInfo& t, std::span<T> out, std::string_view context = {}) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, fp16> ||
                      std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::int32_t>,
                  "read_tensor reads into float, bf16, fp16, int64_t or int32_t");
    const std::int64_t n = t.numel();
    if (static_cast<std::int64_t>(out.size()) != n)
        raise<ShapeError>(context, "tensor '", t.name, "' ", t.shape_str(), " has ", n,
                          " elements, the destination holds ", out.size());
    const std::byte* src = t.bytes.data();
    T* dst = out.data();
    const std::size_t count = out.size();
    if (t.dtype == dtype_of<T>::value) {
        if (count) std::memcpy(dst, src, count * sizeof(T));
        return;
    }
    if constexpr (std::is_same_v<T, float>) {
        if (t.dtype == DType::bf16) {
            for (std::size_t i = 0; i < count; ++i) dst[i] = detail::bf16_bits_to_float(detail::load_u16(src + 2 * i));
            return;
        }
        if (t.dtype == DType::f16) {
            for (std::size_t i = 0; i < count; ++i) dst[i] = fp16::from_bits(detail::load_u16(src + 2 * i)).to_float();
            return;
        }
    } else if constexpr (std::is_same_v<T, bf16>) {
        if (t.dtype == DType::f32) {
            for (std::size_t i = 0; i < count; ++i) dst[i] = bf16::from_float(detail::load_f32(src + 4 * i));
            return;
        }
        if (t.dtype == DType::f16) {  // F16 -> float is exact, so this rounds once
            for (std::size_t i = 0; i < count; ++i)
                dst[i] = bf16::from_float(fp16::from_bits(detail::load_u16(src + 2 * i)).to_float());
            return;
        }
    } else if constexpr (std::is_same_v<T, fp16>) {
        if (t.dtype == DType::f32) {
            for (std::size_t i = 0; i < count; ++i) dst[i] = fp16::from_float(detail::load_f32(src + 4 * i));
            return;
        }
        if (t.dtype == DType::bf16) {  // BF16 -> float is exact, so this rounds once
            for (std::size_t i = 0; i < count; ++i)
                dst[i] = fp16::from_float(detail::bf16_bits_to_float(detail::load_u16(src + 2 * i)));
            return;
        }
    } else if constexpr (std::is_same_v<T, std::int64_t>) {
        if (t.dtype == DType::i32) {
            for (std::size_t i = 0; i < count; ++i) dst[i] = detail::load_i32(src + 4 * i);
            return;
        }
    } else {
        if (t.dtype == DType::i64) {
            for (std::size_t i = 0; i < count; ++i) {
                const std::int64_t v = detail::load_i64(src + 8 * i);
                if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
                    raise<ShapeError>(context, "tensor '", t.name, "' element ", i, " is ", v,
                                      ", outside the int32 range");
                dst[i] = static_cast<std::int32_t>(v);
            }
            return;
        }
    }
    detail::unreadable<T>(t, context);
}

}  // namespace cpx::io

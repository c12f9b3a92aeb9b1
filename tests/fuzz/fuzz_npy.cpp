// A .npy file: parsing fails with a FormatError or gives an array whose bytes
// match its shape and dtype; it encodes and parses back to the same array.
#include <cpx/io/npy.hpp>

#include <cstdint>
#include <span>

#include "fuzz_support.hpp"

namespace {
template <class T>
void round_trip(const cpx::io::NpyArray& a) {
    const auto values = a.values<T>();
    const auto again = cpx::io::parse_npy(cpx::io::encode_npy<T>(std::span<const T>(values), a.shape), "re-encoded");
    CPX_FUZZ_CHECK(again.type == a.type && again.shape == a.shape && again.bytes == a.bytes);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    cpx::io::NpyArray a;
    try {
        a = cpx::io::parse_npy(std::span<const unsigned char>(data, size), "fuzz.npy");
    } catch (const cpx::Error&) {
        return 0;
    }
    std::int64_t n = 1;
    for (auto d : a.shape) n *= d;
    CPX_FUZZ_CHECK(static_cast<std::int64_t>(a.elements()) == n);
    CPX_FUZZ_CHECK(a.bytes.size() == a.elements() * cpx::io::npy_itemsize(a.type));
    switch (a.type) {
        case cpx::io::NpyType::f32: round_trip<float>(a); break;
        case cpx::io::NpyType::f64: round_trip<double>(a); break;
        case cpx::io::NpyType::i32: round_trip<std::int32_t>(a); break;
        case cpx::io::NpyType::i64: round_trip<std::int64_t>(a); break;
        default: break;
    }
    return 0;
}

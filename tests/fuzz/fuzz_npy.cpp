// A .npy file: parsing fails with a FormatError or gives a view of the file's
// tail whose bytes match its shape and dtype; its copy encodes and parses back
// to the same array.
#include <cpx/io/npy.hpp>

#include <algorithm>
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
    const std::span<const unsigned char> file(data, size);
    cpx::io::NpyView view;
    try {
        view = cpx::io::parse_npy_view(file, "fuzz.npy");
    } catch (const cpx::Error&) {
        return 0;
    }
    // The view's data is the file's tail, in place; the array is its copy.
    CPX_FUZZ_CHECK(view.bytes.data() + view.bytes.size() == file.data() + file.size());
    const cpx::io::NpyArray a(view);
    CPX_FUZZ_CHECK(a.type == view.type && a.shape == view.shape &&
                   std::equal(a.bytes.begin(), a.bytes.end(), view.bytes.begin(), view.bytes.end()));
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

// Frequency tables as text or .npy, with and without a vocabulary (the first
// byte chooses: 0 none, else a vocabulary of 1..255). Reading fails with a
// FormatError or gives exactly `vocab` counts (when given) whose sum fits in
// 64 bits; memory stays bounded by what the file justifies.
#include <cpx/io/frequency_table.hpp>
#include <cpx/io/npy.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::optional<std::size_t> vocab = data[0] ? std::optional<std::size_t>(data[0]) : std::nullopt;
    ++data, --size;
    const auto path = cpx_fuzz::write_file("table", data, size);
    try {
        const auto counts = cpx::io::read_frequency_table(path, vocab);
        CPX_FUZZ_CHECK(!vocab || counts.size() == *vocab);
        CPX_FUZZ_CHECK(!counts.empty());
        std::uint64_t sum = 0;
        for (std::uint64_t c : counts) {
            CPX_FUZZ_CHECK(sum + c >= sum);
            sum += c;
        }
    } catch (const cpx::Error&) {
    }
    return 0;
}

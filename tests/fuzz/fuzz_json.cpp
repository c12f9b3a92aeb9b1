// Any text as JSON: parsing fails with a FormatError or gives a value whose
// dump parses back to a value with the same dump.
#include <cpx/io/json.hpp>

#include <cstdint>
#include <string_view>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    cpx::io::Json value;
    try {
        value = cpx::io::parse_json(text, "fuzz");
    } catch (const cpx::Error&) {
        return 0;
    }
    const std::string once = value.dump();
    const cpx::io::Json again = cpx::io::parse_json(once, "fuzz (re-parsed)");
    CPX_FUZZ_CHECK(again.dump() == once);
    CPX_FUZZ_CHECK(cpx::io::parse_json(value.dump(2), "fuzz (indented)").dump() == once);
    return 0;
}

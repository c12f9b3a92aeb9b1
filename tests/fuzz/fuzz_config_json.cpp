// config.json of both model families: reading fails with a cpx::Error or gives
// a configuration that writes out and reads back to the same JSON.
#include <cpx/io/complexity_config_json.hpp>
#include <cpx/io/prism_config_json.hpp>

#include <cstdint>
#include <string_view>

#include "fuzz_support.hpp"

namespace {
template <class Parse>
void round_trip(std::string_view text, Parse parse) {
    decltype(parse(text)) config;
    try {
        config = parse(text);
    } catch (const cpx::Error&) {
        return;
    }
    const std::string once = cpx::io::to_json(config).dump(2);
    const std::string twice = cpx::io::to_json(parse(once)).dump(2);
    CPX_FUZZ_CHECK(once == twice);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    round_trip(text, [](std::string_view t) { return cpx::io::parse_complexity_config(t, "config.json"); });
    round_trip(text, [](std::string_view t) { return cpx::io::parse_prism_config(t, "config.json"); });
    return 0;
}

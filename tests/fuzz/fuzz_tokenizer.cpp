// tokenizer.json and the text it tokenizes. An input starting with '{' is a
// tokenizer.json: it loads or fails with a cpx::Error, and a loaded tokenizer
// encodes and decodes a fixed sentence with ids inside its vocabulary. Any other
// input is text for the test suite's GPT-2-style tokenizer: every id is in the
// vocabulary, decoding gives the input back (invalid UTF-8 repaired, as the
// reference does), the streaming decoder adds up to the same text, and encoding
// is deterministic.
#include <cpx/text/tokenizer.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"

namespace {

const cpx::text::Tokenizer& fixture() {
    static const cpx::text::Tokenizer t = cpx::text::Tokenizer::from_file(CPX_FUZZ_TOKENIZER);
    return t;
}

void check_text(const cpx::text::Tokenizer& t, std::string_view text, bool round_trip) {
    const auto ids = t.encode(text);
    for (const auto id : ids) CPX_FUZZ_CHECK(id >= 0 && static_cast<std::size_t>(id) < t.vocab_size());
    const std::string decoded = t.decode(ids);
    CPX_FUZZ_CHECK(cpx::is_valid_utf8(decoded));
    if (round_trip) CPX_FUZZ_CHECK(decoded == cpx::repair_utf8(text));
    cpx::text::Tokenizer::StreamDecoder stream(t);
    std::string streamed;
    for (const auto id : ids) streamed += stream.push(id);
    streamed += stream.finish();
    CPX_FUZZ_CHECK(streamed == decoded);
    CPX_FUZZ_CHECK(t.encode(text) == ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    if (!input.empty() && input.front() == '{') {
        try {
            const auto t = cpx::text::Tokenizer::from_json(input, "fuzz.json");
            check_text(t, "In the beginning, 42 words\n\xF0\x9F\x98\x80", false);
        } catch (const cpx::Error&) {
        }
        return 0;
    }
    // Added tokens in the text decode as nothing (they are special): no round trip then.
    check_text(fixture(), input, input.find("<|") == std::string_view::npos);
    return 0;
}

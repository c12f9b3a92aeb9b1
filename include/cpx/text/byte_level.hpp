#pragma once
// The byte-level alphabet of GPT-2-style BPE: each of the 256 byte values is
// written as one printable Unicode character, so a vocabulary of strings can
// hold any byte sequence. Printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC,
// U+00AE..U+00FF) stand for themselves; the other 68 bytes (controls, space,
// U+00A0, U+00AD) take U+0100 onwards in byte order, so space is U+0120 'Ġ'.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace cpx::text {

/// The code point that byte `b` is written as.
constexpr std::uint32_t byte_level_code_point(std::uint8_t b) {
    const auto printable = [](unsigned c) { return (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE; };
    if (printable(b)) return b;
    std::uint32_t n = 0;
    for (unsigned c = 0; c < b; ++c) n += printable(c) ? 0 : 1;
    return 0x100 + n;
}

/// UTF-8 encoding of a code point (no validation: callers pass scalar values).
inline void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

/// Byte-level spelling of raw bytes (what a vocabulary entry looks like).
inline std::string to_byte_level(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) append_utf8(out, byte_level_code_point(static_cast<std::uint8_t>(c)));
    return out;
}

/// Raw bytes of a byte-level string. Characters outside the alphabet (possible in added tokens)
/// stand for their own UTF-8 bytes, as the reference decoder treats them. `s` must be valid UTF-8.
inline std::string from_byte_level(std::string_view s) {
    static const std::array<std::int16_t, 0x144> byte_of = [] {
        std::array<std::int16_t, 0x144> t{};
        t.fill(-1);
        for (unsigned b = 0; b < 256; ++b) t[byte_level_code_point(static_cast<std::uint8_t>(b))] = static_cast<std::int16_t>(b);
        return t;
    }();
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const std::size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        std::uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1Fu) : n == 3 ? (c & 0x0Fu) : (c & 0x07u);
        for (std::size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
        if (cp < byte_of.size() && byte_of[cp] >= 0) out += static_cast<char>(byte_of[cp]);
        else out.append(s.substr(i, n));
        i += n;
    }
    return out;
}

}  // namespace cpx::text

#pragma once
// UTF-8 well-formedness, written once: error messages quote file text safely
// with it (printable), and the tokenizer repairs invalid input the way Python's
// bytes.decode("utf-8", "replace") and Rust's String::from_utf8_lossy do (one
// U+FFFD per maximal ill-formed subpart, Unicode 15 §3.9 "best practice"), so
// that text given as bytes tokenizes exactly as the reference tokenizes the
// repaired string; and finding where a byte stream's last complete character
// ends, so generated text can be printed as it is produced.

#include <cstddef>
#include <string>
#include <string_view>

namespace cpx {

/// U+FFFD REPLACEMENT CHARACTER in UTF-8.
inline constexpr std::string_view utf8_replacement_character = "\xEF\xBF\xBD";

namespace detail {

/// Length of the well-formed sequence starting at s[i] (1..4), or 0 with `bad`
/// set to the length of the maximal ill-formed subpart (>= 1) to replace.
inline std::size_t utf8_sequence(std::string_view s, std::size_t i, std::size_t& bad) {
    const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = at(i);
    bad = 1;
    if (c < 0x80) return 1;
    std::size_t n;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Table 3-7)
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
        return 0;  // C0, C1, F5..FF and stray continuation bytes: one byte each
    }
    for (std::size_t k = 1; k < n; ++k) {
        if (i + k >= s.size()) { bad = k; return 0; }
        const unsigned char b = at(i + k);
        const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
        if (!ok) { bad = k; return 0; }
    }
    return n;
}

}  // namespace detail

/// Whether `s` is well-formed UTF-8.
inline bool is_valid_utf8(std::string_view s) {
    for (std::size_t i = 0, bad = 0; i < s.size();) {
        const std::size_t n = detail::utf8_sequence(s, i, bad);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

/// `s` with every maximal ill-formed subpart replaced by U+FFFD; valid input is returned unchanged.
inline std::string repair_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0, bad = 0; i < s.size();) {
        const std::size_t n = detail::utf8_sequence(s, i, bad);
        if (n == 0) {
            out += utf8_replacement_character;
            i += bad;
        } else {
            out.append(s.substr(i, n));
            i += n;
        }
    }
    return out;
}

/// The length of the longest prefix of `s` that does not end inside a character that more bytes
/// could still complete: the part of a growing byte stream that can be printed now. An ill-formed
/// sequence counts as complete (it will print as U+FFFD whatever follows).
inline std::size_t complete_utf8_prefix(std::string_view s) {
    for (std::size_t back = 1; back <= 3 && back <= s.size(); ++back) {
        const auto c = static_cast<unsigned char>(s[s.size() - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
        std::size_t bad = 0;
        const std::size_t start = s.size() - back;
        const std::size_t n = detail::utf8_sequence(s, start, bad);
        // Ill-formed only because the input stops early: hold those bytes back.
        return n == 0 && start + bad == s.size() && c >= 0xC2 && c <= 0xF4 ? start : s.size();
    }
    return s.size();
}

}  // namespace cpx

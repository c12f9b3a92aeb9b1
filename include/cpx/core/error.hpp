#pragma once
// Errors the library reports. Input validation never uses assert: every bad
// input becomes an exception whose message names the offending thing.

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "cpx/core/utf8.hpp"

namespace cpx {

/// Base of every error the library throws.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Shapes, dtypes or sizes that do not match the compiled configuration.
class ShapeError : public Error { public: using Error::Error; };

/// Token ids outside the vocabulary, sequences past the context, caches too small.
class InputError : public Error { public: using Error::Error; };

/// Malformed, truncated or inconsistent files (checkpoints, frequency tables, JSON).
class FormatError : public Error { public: using Error::Error; };

/// Failures reported by the CUDA runtime or its libraries.
class CudaError : public Error { public: using Error::Error; };

/// `text` made safe to quote in a message: control bytes, DEL and bytes that
/// are not UTF-8 become \n, \t, \r or \xNN; valid UTF-8 is kept. Text from a
/// file then cannot move a terminal's cursor, clear its screen, forge a line
/// of output or (with a NUL) cut the message short where it is printed.
inline std::string printable(std::string_view text) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    const auto escape = [&](unsigned char c) {
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
    };
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f) escape(c);
            else out += static_cast<char>(c);
            ++i;
            continue;
        }
        // A well-formed UTF-8 sequence (no overlongs, no surrogates, at most U+10FFFF) is kept.
        std::size_t bad = 0;
        if (const std::size_t n = detail::utf8_sequence(text, i, bad); n != 0) {
            out.append(text.substr(i, n));
            i += n;
        } else {
            escape(c);
            ++i;
        }
    }
    return out;
}

namespace detail {
/// Message text of our own (e.g. a multi-line list we composed), passed to raise unescaped.
struct Verbatim {
    std::string text;
};
inline Verbatim verbatim(std::string text) { return {std::move(text)}; }

/// String literals are the library's own words and pass as they are; strings
/// known only at run time (names and text from files) are escaped.
template <class T>
void append_part(std::ostringstream& out, T&& part) {
    using D = std::remove_cvref_t<T>;
    if constexpr (std::is_array_v<std::remove_reference_t<T>>) out << part;
    else if constexpr (std::is_same_v<D, Verbatim>) out << part.text;
    else if constexpr (std::is_convertible_v<const D&, std::string_view>) out << printable(std::string_view(part));
    else if constexpr (std::is_same_v<D, char>) out << printable(std::string_view(&part, 1));
    else out << std::forward<T>(part);
}

template <class... Parts>
std::string concat(Parts&&... parts) {
    std::ostringstream out;
    (append_part(out, std::forward<Parts>(parts)), ...);
    return out.str();
}
}  // namespace detail

/// Throws `E` with the parts streamed into one message (run-time strings escaped, see printable).
template <class E = Error, class... Parts>
[[noreturn]] void raise(Parts&&... parts) {
    throw E(detail::concat(std::forward<Parts>(parts)...));
}

/// Throws `E` with the message parts when `condition` is false.
template <class E = Error, class... Parts>
void require(bool condition, Parts&&... parts) {
    if (!condition) raise<E>(std::forward<Parts>(parts)...);
}

}  // namespace cpx

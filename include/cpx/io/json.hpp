#pragma once
// A small, strict JSON value, parser and writer (RFC 8259) for checkpoint
// headers, shard indices and config.json files. Objects keep their key order
// and reject duplicate keys (a duplicated tensor name would be ambiguous);
// numbers remember whether they were written as integers, so int64 values
// such as byte offsets stay exact. Parse errors are FormatError with
// "<source>:<line>:<column>: <what>".

#include <algorithm>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "cpx/core/error.hpp"

namespace cpx::io {

class Json {
public:
    enum class Kind : std::uint8_t { null, boolean, number, string, array, object };
    using Array = std::vector<Json>;
    using Member = std::pair<std::string, Json>;
    using Object = std::vector<Member>;  ///< in insertion (file) order, keys unique

    /// A JSON number: the double value, and the exact int64 when the number was
    /// written as an integer (no fraction, no exponent) that fits in int64.
    struct Number {
        double value = 0.0;
        std::int64_t integer = 0;
        bool is_integer = false;
        bool operator==(const Number&) const = default;
    };

    Json() noexcept = default;  ///< null
    Json(std::nullptr_t) noexcept {}
    Json(bool b) : value_(b) {}
    template <std::integral I>
        requires(!std::same_as<I, bool>)
    Json(I v) : value_(make_integer(v)) {}
    Json(double v) : value_(Number{v, 0, false}) {}
    Json(std::string s) : value_(std::move(s)) {}
    Json(std::string_view s) : value_(std::string(s)) {}
    Json(const char* s) : value_(std::string(s)) {}
    Json(Array a) : value_(std::move(a)) {}
    Json(Object o) : value_(std::move(o)) {}

    static Json array() { return Json(Array{}); }
    static Json object() { return Json(Object{}); }

    Kind kind() const noexcept { return static_cast<Kind>(value_.index()); }
    static constexpr std::string_view kind_name(Kind k) {
        constexpr std::string_view names[] = {"null", "boolean", "number", "string", "array", "object"};
        return names[static_cast<int>(k)];
    }
    std::string_view kind_name() const noexcept { return kind_name(kind()); }

    bool is_null() const noexcept { return kind() == Kind::null; }
    bool is_bool() const noexcept { return kind() == Kind::boolean; }
    bool is_number() const noexcept { return kind() == Kind::number; }
    bool is_string() const noexcept { return kind() == Kind::string; }
    bool is_array() const noexcept { return kind() == Kind::array; }
    bool is_object() const noexcept { return kind() == Kind::object; }
    /// A number written as an integer that fits in int64 (1 and -7, not 1.0 or 1e3).
    bool is_integer() const noexcept { return is_number() && std::get<Number>(value_).is_integer; }

    bool as_bool() const { return get<bool>(Kind::boolean); }
    const Number& as_number() const { return get<Number>(Kind::number); }
    /// Any number, as a double (integers above 2^53 round).
    double as_double() const { return as_number().value; }
    /// An integer number, exactly; throws FormatError for 1.5, 1.0 or 1e3.
    std::int64_t as_int64() const {
        const Number& n = as_number();
        if (!n.is_integer) raise<FormatError>("expected an integer, found the number ", dump());
        return n.integer;
    }
    const std::string& as_string() const { return get<std::string>(Kind::string); }
    const Array& as_array() const { return get<Array>(Kind::array); }
    Array& as_array() { return const_cast<Array&>(std::as_const(*this).as_array()); }
    const Object& as_object() const { return get<Object>(Kind::object); }
    Object& as_object() { return const_cast<Object&>(std::as_const(*this).as_object()); }

    /// The member named `key` of an object, or nullptr.
    const Json* find(std::string_view key) const {
        for (const Member& m : as_object())
            if (m.first == key) return &m.second;
        return nullptr;
    }
    /// Sets `key` (replacing its value in place, or appending it) and returns the value.
    Json& set(std::string key, Json value) {
        Object& obj = as_object();
        for (Member& m : obj)
            if (m.first == key) return m.second = std::move(value);
        obj.emplace_back(std::move(key), std::move(value));
        return obj.back().second;
    }
    void push_back(Json value) { as_array().push_back(std::move(value)); }
    /// Element count of an array or member count of an object.
    std::size_t size() const {
        if (is_array()) return as_array().size();
        return as_object().size();
    }

    friend bool operator==(const Json& a, const Json& b) { return a.value_ == b.value_; }

    /// Serialises the value. indent < 0: compact ("a":1,"b":[1,2]); indent >= 0:
    /// one member or element per line, `indent` spaces per level, ": " after keys.
    /// Output is deterministic: object order is kept, doubles use the shortest
    /// text that reads back to the same value, formatted as Python's repr does
    /// (10000.0, 1e-06, 0.02), so integers and doubles stay distinguishable.
    std::string dump(int indent = -1) const {
        std::string out;
        write(out, indent, 0);
        return out;
    }

private:
    std::variant<std::nullptr_t, bool, Number, std::string, Array, Object> value_{nullptr};

    template <std::integral I>
    static Number make_integer(I v) {
        if constexpr (std::is_unsigned_v<I>) {
            if (v > static_cast<std::make_unsigned_t<std::int64_t>>(std::numeric_limits<std::int64_t>::max()))
                raise<FormatError>("integer ", v, " does not fit in a JSON int64");
        }
        const auto i = static_cast<std::int64_t>(v);
        return Number{static_cast<double>(i), i, true};
    }

    template <class T>
    const T& get(Kind want) const {
        if (const T* p = std::get_if<T>(&value_)) return *p;
        raise<FormatError>("expected ", kind_name(want), ", found ", kind_name());
    }

    static void write_string(std::string& out, std::string_view s) {
        out += '"';
        for (char c : s) {
            switch (c) {
                case '"': out += "\\\""; break;
                case '\\': out += "\\\\"; break;
                case '\b': out += "\\b"; break;
                case '\f': out += "\\f"; break;
                case '\n': out += "\\n"; break;
                case '\r': out += "\\r"; break;
                case '\t': out += "\\t"; break;
                default:
                    if (static_cast<unsigned char>(c) < 0x20) {
                        constexpr char hex[] = "0123456789abcdef";
                        out += "\\u00";
                        out += hex[(c >> 4) & 0xf];
                        out += hex[c & 0xf];
                    } else {
                        out += c;  // UTF-8 passes through unchanged
                    }
            }
        }
        out += '"';
    }

    static void write_double(std::string& out, double v);

    static void newline(std::string& out, int indent, int depth) {
        if (indent < 0) return;
        out += '\n';
        out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(depth), ' ');
    }

    void write(std::string& out, int indent, int depth) const {
        switch (kind()) {
            case Kind::null: out += "null"; break;
            case Kind::boolean: out += std::get<bool>(value_) ? "true" : "false"; break;
            case Kind::number: {
                const Number& n = std::get<Number>(value_);
                if (n.is_integer) {
                    char buf[24];
                    const auto r = std::to_chars(buf, buf + sizeof buf, n.integer);
                    out.append(buf, r.ptr);
                } else {
                    write_double(out, n.value);
                }
                break;
            }
            case Kind::string: write_string(out, std::get<std::string>(value_)); break;
            case Kind::array: {
                const Array& a = std::get<Array>(value_);
                out += '[';
                for (std::size_t i = 0; i < a.size(); ++i) {
                    if (i) out += ',';
                    newline(out, indent, depth + 1);
                    a[i].write(out, indent, depth + 1);
                }
                if (!a.empty()) newline(out, indent, depth);
                out += ']';
                break;
            }
            case Kind::object: {
                const Object& o = std::get<Object>(value_);
                out += '{';
                for (std::size_t i = 0; i < o.size(); ++i) {
                    if (i) out += ',';
                    newline(out, indent, depth + 1);
                    write_string(out, o[i].first);
                    out += indent < 0 ? ":" : ": ";
                    o[i].second.write(out, indent, depth + 1);
                }
                if (!o.empty()) newline(out, indent, depth);
                out += '}';
                break;
            }
        }
    }
};

inline void Json::write_double(std::string& out, double v) {
    if (!std::isfinite(v)) raise<FormatError>("JSON cannot hold the non-finite number ", v);
    // Shortest round-trip digits d1.d2d3... x 10^exp, then Python's repr layout:
    // positional for 1e-4 <= |v| < 1e16, scientific otherwise.
    char buf[40];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    const std::string_view sci(buf, static_cast<std::size_t>(r.ptr - buf));
    const std::size_t e_pos = sci.find('e');
    std::string_view mantissa = sci.substr(0, e_pos);
    int exp = 0;
    std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+'), sci.data() + sci.size(), exp);
    const bool negative = mantissa.front() == '-';
    if (negative) {
        out += '-';
        mantissa.remove_prefix(1);
    }
    std::string digits;
    for (char c : mantissa)
        if (c != '.') digits += c;
    const int decpt = exp + 1;  // value = 0.digits x 10^decpt
    const int nd = static_cast<int>(digits.size());
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out += "0.";
            out.append(static_cast<std::size_t>(-decpt), '0');
            out += digits;
        } else if (decpt >= nd) {
            out += digits;
            out.append(static_cast<std::size_t>(decpt - nd), '0');
            out += ".0";
        } else {
            out.append(digits, 0, static_cast<std::size_t>(decpt));
            out += '.';
            out.append(digits, static_cast<std::size_t>(decpt));
        }
    } else {
        out += digits[0];
        if (nd > 1) {
            out += '.';
            out.append(digits, 1);
        }
        out += exp < 0 ? "e-" : "e+";
        const int mag = exp < 0 ? -exp : exp;
        if (mag < 10) out += '0';
        out += std::to_string(mag);
    }
}

/// Parser limits.
struct JsonLimits {
    int max_depth = 128;  ///< nesting of arrays and objects; deeper input is rejected, not recursed into
};

namespace detail {

class JsonParser {
public:
    JsonParser(std::string_view text, std::string_view source, JsonLimits limits)
        : text_(text), source_(source), limits_(limits) {}

    Json parse_document() {
        skip_space();
        Json v = parse_value(0);
        skip_space();
        if (pos_ != text_.size()) fail("unexpected content after the JSON value");
        return v;
    }

private:
    std::string_view text_;
    std::string_view source_;
    JsonLimits limits_;
    std::size_t pos_ = 0;

    [[noreturn]] void fail_at(std::size_t at, std::string_view what) const {
        std::size_t line = 1, column = 1;
        for (std::size_t i = 0; i < at && i < text_.size(); ++i) {
            if (text_[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        raise<FormatError>(source_, ":", line, ":", column, ": ", what);
    }
    [[noreturn]] void fail(std::string_view what) const { fail_at(pos_, what); }

    bool at_end() const { return pos_ >= text_.size(); }
    char peek() const { return at_end() ? '\0' : text_[pos_]; }

    void skip_space() {
        while (!at_end()) {
            const char c = text_[pos_];
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
            ++pos_;
        }
    }

    void expect_literal(std::string_view word) {
        if (text_.substr(pos_, word.size()) != word) fail("invalid literal (expected true, false or null)");
        pos_ += word.size();
    }

    Json parse_value(int depth) {
        if (at_end()) fail("unexpected end of input, expected a value");
        switch (peek()) {
            case '{': return parse_object(depth + 1);
            case '[': return parse_array(depth + 1);
            case '"': return Json(parse_string());
            case 't': expect_literal("true"); return Json(true);
            case 'f': expect_literal("false"); return Json(false);
            case 'n': expect_literal("null"); return Json(nullptr);
            default:
                if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
                fail(std::string("unexpected character '") + peek() + "', expected a value");
        }
    }

    void enter(int depth) {
        if (depth > limits_.max_depth)
            fail(cpx::detail::concat("nesting deeper than ", limits_.max_depth, " levels"));
    }

    Json parse_object(int depth) {
        enter(depth);
        ++pos_;  // '{'
        Json::Object members;
        std::vector<std::size_t> key_at;  // where each key starts, for the duplicate check
        skip_space();
        if (peek() == '}') {
            ++pos_;
            return Json(std::move(members));
        }
        while (true) {
            skip_space();
            if (peek() != '"') fail("expected a string key");
            key_at.push_back(pos_);
            std::string key = parse_string();
            skip_space();
            if (peek() != ':') fail("expected ':' after an object key");
            ++pos_;
            skip_space();
            Json value = parse_value(depth);
            members.emplace_back(std::move(key), std::move(value));
            skip_space();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() == '}') {
                ++pos_;
                reject_duplicates(members, key_at);
                return Json(std::move(members));
            }
            fail(at_end() ? "unexpected end of input inside an object" : "expected ',' or '}' in an object");
        }
    }

    // Sorting keeps this O(n log n): headers are untrusted input and may hold millions of keys.
    // Reports the earliest second occurrence of any key.
    void reject_duplicates(const Json::Object& members, const std::vector<std::size_t>& key_at) const {
        if (members.size() < 2) return;
        std::vector<std::size_t> order(members.size());
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return members[a].first != members[b].first ? members[a].first < members[b].first : a < b;
        });
        std::size_t first_repeat = members.size();
        for (std::size_t i = 1; i < order.size(); ++i)
            if (members[order[i]].first == members[order[i - 1]].first) first_repeat = std::min(first_repeat, order[i]);
        if (first_repeat < members.size())
            fail_at(key_at[first_repeat], "duplicate key \"" + members[first_repeat].first + "\"");
    }

    Json parse_array(int depth) {
        enter(depth);
        ++pos_;  // '['
        Json::Array items;
        skip_space();
        if (peek() == ']') {
            ++pos_;
            return Json(std::move(items));
        }
        while (true) {
            skip_space();
            items.push_back(parse_value(depth));
            skip_space();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() == ']') {
                ++pos_;
                return Json(std::move(items));
            }
            fail(at_end() ? "unexpected end of input inside an array" : "expected ',' or ']' in an array");
        }
    }

    Json parse_number() {
        const std::size_t start = pos_;
        auto digits = [&] {
            const std::size_t from = pos_;
            while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
            return pos_ - from;
        };
        if (peek() == '-') ++pos_;
        if (peek() == '0') {
            ++pos_;
            if (peek() >= '0' && peek() <= '9') fail("leading zeros are not allowed in numbers");
        } else if (digits() == 0) {
            fail("expected a digit");
        }
        bool integral = true;
        if (peek() == '.') {
            integral = false;
            ++pos_;
            if (digits() == 0) fail("expected a digit after the decimal point");
        }
        if (peek() == 'e' || peek() == 'E') {
            integral = false;
            ++pos_;
            if (peek() == '+' || peek() == '-') ++pos_;
            if (digits() == 0) fail("expected a digit in the exponent");
        }
        const char* first = text_.data() + start;
        const char* last = text_.data() + pos_;
        if (integral) {
            std::int64_t i = 0;
            const auto r = std::from_chars(first, last, i);
            if (r.ec == std::errc{} && r.ptr == last) {
                Json v(i);
                return v;
            }
            // Integers beyond int64 stay numbers, as doubles, without the integer flag.
        }
        double d = 0.0;
        const auto r = std::from_chars(first, last, d);
        if (r.ec == std::errc::result_out_of_range)
            fail_at(start, "number " + std::string(first, last) + " is out of the range of a double");
        if (r.ec != std::errc{} || r.ptr != last) fail_at(start, "malformed number");
        return Json(d);
    }

    unsigned hex4() {
        if (text_.size() - pos_ < 4) fail("truncated \\u escape");
        unsigned v = 0;
        for (int i = 0; i < 4; ++i) {
            const char c = text_[pos_++];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
            else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
            else fail_at(pos_ - 1, "invalid hex digit in a \\u escape");
        }
        return v;
    }

    static void append_utf8(std::string& out, std::uint32_t cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xc0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xe0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (cp & 0x3f));
        } else {
            out += static_cast<char>(0xf0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (cp & 0x3f));
        }
    }

    // Copies one well-formed UTF-8 sequence (no overlongs, no surrogates, <= U+10FFFF).
    void copy_utf8(std::string& out) {
        const std::size_t start = pos_;
        const auto lead = static_cast<unsigned char>(text_[pos_]);
        int extra = 0;
        std::uint32_t cp = 0, min = 0;
        if (lead >= 0xc2 && lead <= 0xdf) { extra = 1; cp = lead & 0x1fu; min = 0x80; }
        else if (lead >= 0xe0 && lead <= 0xef) { extra = 2; cp = lead & 0x0fu; min = 0x800; }
        else if (lead >= 0xf0 && lead <= 0xf4) { extra = 3; cp = lead & 0x07u; min = 0x10000; }
        else fail("invalid UTF-8 byte in a string");
        if (text_.size() - pos_ <= static_cast<std::size_t>(extra)) fail("truncated UTF-8 sequence in a string");
        for (int i = 1; i <= extra; ++i) {
            const auto c = static_cast<unsigned char>(text_[pos_ + static_cast<std::size_t>(i)]);
            if ((c & 0xc0u) != 0x80u) fail("invalid UTF-8 sequence in a string");
            cp = (cp << 6) | (c & 0x3fu);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            fail("invalid UTF-8 sequence in a string (overlong, surrogate or beyond U+10FFFF)");
        pos_ += static_cast<std::size_t>(extra) + 1;
        out.append(text_.substr(start, pos_ - start));
    }

    std::string parse_string() {
        ++pos_;  // opening quote
        std::string out;
        while (true) {
            if (at_end()) fail("unterminated string");
            const char c = text_[pos_];
            if (c == '"') {
                ++pos_;
                return out;
            }
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string (must be escaped)");
            if (static_cast<unsigned char>(c) >= 0x80) {
                copy_utf8(out);
                continue;
            }
            if (c != '\\') {
                out += c;
                ++pos_;
                continue;
            }
            ++pos_;
            if (at_end()) fail("unterminated escape in a string");
            const char e = text_[pos_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    const std::size_t esc_at = pos_ - 2;
                    std::uint32_t cp = hex4();
                    if (cp >= 0xdc00 && cp <= 0xdfff) fail_at(esc_at, "unpaired low surrogate in a \\u escape");
                    if (cp >= 0xd800 && cp <= 0xdbff) {
                        if (text_.substr(pos_, 2) != "\\u")
                            fail_at(esc_at, "high surrogate not followed by a low surrogate escape");
                        pos_ += 2;
                        const std::uint32_t low = hex4();
                        if (low < 0xdc00 || low > 0xdfff)
                            fail_at(esc_at, "high surrogate not followed by a low surrogate escape");
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                    }
                    append_utf8(out, cp);
                    break;
                }
                default: fail_at(pos_ - 2, std::string("invalid escape '\\") + e + "'");
            }
        }
    }
};

}  // namespace detail

/// Parses one JSON document. `source` names the text in error messages
/// (a path, "config.json", ...).
inline Json parse_json(std::string_view text, std::string_view source = "JSON", JsonLimits limits = {}) {
    return detail::JsonParser(text, source, limits).parse_document();
}

}  // namespace cpx::io

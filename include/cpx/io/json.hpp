#pragma once
// A small, strict JSON value and writer for checkpoint headers, shard indices
// and config.json files, read through nlohmann-json (RFC 8259). Objects keep
// their key order and reject duplicate keys (a duplicated tensor name would be
// ambiguous); numbers remember whether they were written as integers, so int64
// values such as byte offsets stay exact; the writer's doubles read as Python
// writes them. Parse errors are FormatError "<source>:<line>:<column>: <what>".

#include <algorithm>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

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

// nlohmann-json does the lexing and grammar; this SAX handler builds a Json and
// adds the rules nlohmann does not have: duplicate keys and over-deep nesting
// are errors, integers keep their exact int64, and every error carries
// "<source>:<line>:<column>". nlohmann reports no positions to a SAX handler
// except on errors, so the input iterator records how far the lexer has read.
class JsonBuilder final : public nlohmann::json_sax<nlohmann::json> {
public:
    /// Iterator over the text that remembers the furthest byte the lexer has pulled.
    struct Cursor {
        using iterator_category = std::forward_iterator_tag;
        using value_type = char;
        using difference_type = std::ptrdiff_t;
        using pointer = const char*;
        using reference = const char&;
        const char* at = nullptr;
        const char** furthest = nullptr;
        reference operator*() const { return *at; }
        Cursor& operator++() {
            *furthest = ++at;
            return *this;
        }
        Cursor operator++(int) {
            Cursor before = *this;
            ++*this;
            return before;
        }
        bool operator==(const Cursor& o) const { return at == o.at; }
    };

    JsonBuilder(std::string_view text, std::string_view source, JsonLimits limits)
        : text_(text), source_(source), limits_(limits), furthest_(text.data()) {}

    Json parse() {
        // Python's json and the safetensors reference reject a byte order mark; nlohmann skips it.
        if (text_.starts_with("\xef\xbb\xbf")) fail_at(0, "a UTF-8 byte order mark is not allowed before the value");
        const char* begin = text_.data();
        const char* end = begin + text_.size();
        nlohmann::json::sax_parse(Cursor{begin, &furthest_}, Cursor{end, &furthest_}, this);
        return std::move(root_);
    }

    bool null() override { return add(Json(nullptr)); }
    bool boolean(bool b) override { return add(Json(b)); }
    bool number_integer(number_integer_t i) override { return add(Json(static_cast<std::int64_t>(i))); }
    bool number_unsigned(number_unsigned_t u) override {
        // Beyond int64 a number stays a number, as a double without the integer flag.
        if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            return add(Json(static_cast<double>(u)));
        return add(Json(static_cast<std::int64_t>(u)));
    }
    bool number_float(number_float_t d, const string_t&) override { return add(Json(d)); }
    bool string(string_t& s) override { return add(Json(std::move(s))); }
    bool binary(binary_t&) override { return false; }  // never produced by the JSON text format
    bool start_object(std::size_t) override { return open(Json::object()); }
    bool start_array(std::size_t) override { return open(Json::array()); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }

    bool key(string_t& k) override {
        Frame& f = open_.back();
        f.key_at.push_back(key_start());
        f.pending_key = std::move(k);
        return true;
    }

    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
        fail_at(position == 0 ? 0 : position - 1, reason(e.what()));
    }

private:
    struct Frame {
        Json value;
        std::string key_in_parent;  ///< where the finished container goes when its parent is an object
        std::string pending_key;    ///< an object's key awaiting its value
        std::vector<std::size_t> key_at;  ///< where each key starts, for the duplicate check
    };

    std::string_view text_;
    std::string_view source_;
    JsonLimits limits_;
    const char* furthest_;
    std::vector<Frame> open_;
    Json root_;

    bool add(Json v) {
        if (open_.empty()) {
            root_ = std::move(v);
        } else if (Frame& f = open_.back(); f.value.is_array()) {
            f.value.as_array().push_back(std::move(v));
        } else {
            f.value.as_object().emplace_back(std::move(f.pending_key), std::move(v));
        }
        return true;
    }

    bool open(Json container) {
        if (static_cast<int>(open_.size()) >= limits_.max_depth)
            fail_at(read_so_far() - 1, cpx::detail::concat("nesting deeper than ", limits_.max_depth, " levels"));
        std::string key = open_.empty() || open_.back().value.is_array() ? std::string() : std::move(open_.back().pending_key);
        open_.push_back(Frame{std::move(container), std::move(key), {}, {}});
        return true;
    }

    bool close() {
        Frame done = std::move(open_.back());
        open_.pop_back();
        if (done.value.is_object()) reject_duplicates(done.value.as_object(), done.key_at);
        if (!open_.empty() && open_.back().value.is_object()) open_.back().pending_key = std::move(done.key_in_parent);
        return add(std::move(done.value));
    }

    // Sorting keeps this O(n log n): headers are untrusted and may hold millions
    // of keys. Reports the earliest second occurrence of any key.
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

    std::size_t read_so_far() const { return static_cast<std::size_t>(furthest_ - text_.data()); }

    // The lexer has just read a key's closing quote: its opening quote is the
    // nearest earlier quote not escaped by an odd run of backslashes.
    std::size_t key_start() const {
        std::size_t i = read_so_far() - 1;
        while (i-- > 0) {
            if (text_[i] != '"') continue;
            std::size_t slashes = 0;
            while (slashes < i && text_[i - 1 - slashes] == '\\') ++slashes;
            if (slashes % 2 == 0) return i;
        }
        return 0;
    }

    // nlohmann's explanation without its "[json.exception.parse_error.101] parse
    // error at line L, column C: " prefix (its column does not count from line starts).
    static std::string reason(std::string_view what) {
        if (const auto bracket = what.find("] "); bracket != std::string_view::npos) what.remove_prefix(bracket + 2);
        if (what.starts_with("parse error"))
            if (const auto colon = what.find(": "); colon != std::string_view::npos) what.remove_prefix(colon + 2);
        return std::string(what);
    }

    [[noreturn]] void fail_at(std::size_t offset, std::string_view what) const {
        const std::string_view before = text_.substr(0, std::min(offset, text_.size()));
        const auto line = 1 + std::count(before.begin(), before.end(), '\n');
        const std::size_t last_newline = before.rfind('\n');
        const std::size_t column = last_newline == std::string_view::npos ? before.size() + 1 : before.size() - last_newline;
        raise<FormatError>(source_, ":", line, ":", column, ": ", what);
    }
};

}  // namespace detail

/// Parses one JSON document. `source` names the text in error messages
/// (a path, "config.json", ...).
inline Json parse_json(std::string_view text, std::string_view source = "JSON", JsonLimits limits = {}) {
    return detail::JsonBuilder(text, source, limits).parse();
}

}  // namespace cpx::io

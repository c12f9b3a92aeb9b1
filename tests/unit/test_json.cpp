// The strict JSON value, parser and writer used for checkpoint headers and config files.
#include <doctest/doctest.h>

#include <cpx/io/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

using cpx::FormatError;
using cpx::io::Json;
using cpx::io::parse_json;

namespace {
// The message of the FormatError that parsing `text` raises ("" if none).
std::string parse_error(std::string_view text, cpx::io::JsonLimits limits = {}) {
    try {
        parse_json(text, "doc", limits);
    } catch (const FormatError& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST_CASE("parses every kind of value and keeps object keys in file order") {
    const Json v = parse_json(R"( {"z": null, "a": [true, false, 1, -2.5, "s"], "m": {"k": {}}, "e": []} )");
    REQUIRE(v.is_object());
    const auto& members = v.as_object();
    REQUIRE(members.size() == 4);
    CHECK(members[0].first == "z");
    CHECK(members[1].first == "a");
    CHECK(members[2].first == "m");
    CHECK(members[3].first == "e");
    CHECK(v.find("z")->is_null());
    const auto& a = v.find("a")->as_array();
    REQUIRE(a.size() == 5);
    CHECK(a[0].as_bool() == true);
    CHECK(a[1].as_bool() == false);
    CHECK(a[2].as_int64() == 1);
    CHECK(a[3].as_double() == -2.5);
    CHECK(a[4].as_string() == "s");
    CHECK(v.find("m")->find("k")->size() == 0);
    CHECK(v.find("e")->as_array().empty());
    CHECK(v.find("missing") == nullptr);
}

TEST_CASE("integers are exact over the whole int64 range") {
    const Json v = parse_json("[9223372036854775807, -9223372036854775808, 9007199254740993, 0, -0]");
    const auto& a = v.as_array();
    CHECK(a[0].as_int64() == std::numeric_limits<std::int64_t>::max());
    CHECK(a[1].as_int64() == std::numeric_limits<std::int64_t>::min());
    CHECK(a[2].as_int64() == 9007199254740993);  // 2^53 + 1: not representable as a double
    CHECK(a[3].is_integer());
    CHECK(a[4].as_int64() == 0);
}

TEST_CASE("only numbers written as integers that fit int64 are integers") {
    const Json v = parse_json("[1.0, 1e3, 2.5, 9223372036854775808, -9223372036854775809]");
    for (const Json& x : v.as_array()) CHECK_FALSE(x.is_integer());
    CHECK(v.as_array()[0].as_double() == 1.0);
    CHECK(v.as_array()[1].as_double() == 1000.0);
    CHECK(v.as_array()[3].as_double() == 9223372036854775808.0);
    CHECK_THROWS_WITH_AS(v.as_array()[0].as_int64(), "expected an integer, found the number 1.0", FormatError);
    CHECK_THROWS_AS(v.as_array()[3].as_int64(), FormatError);
}

TEST_CASE("string escapes decode, including \\u escapes and surrogate pairs") {
    const Json v = parse_json(R"(["a\"b\\c\/d\b\f\n\r\t", "\u0041\u00e9\u20ac", "\ud83d\ude00", "\u0000x"])");
    const auto& a = v.as_array();
    CHECK(a[0].as_string() == "a\"b\\c/d\b\f\n\r\t");
    CHECK(a[1].as_string() == "A\xc3\xa9\xe2\x82\xac");  // A, e-acute, euro sign in UTF-8
    CHECK(a[2].as_string() == "\xf0\x9f\x98\x80");       // U+1F600 from its surrogate pair
    CHECK(a[3].as_string() == std::string("\0x", 2));
}

TEST_CASE("raw UTF-8 in strings is kept byte for byte") {
    const std::string text = "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"";
    CHECK(parse_json(text).as_string() == text.substr(1, text.size() - 2));
}

TEST_CASE("malformed documents are rejected with the line and column of the fault") {
    // The reasons are nlohmann-json's; the position is where it detected the fault,
    // counted in lines and bytes from 1 by our code (README, "Reading checkpoints and config.json").
    struct Case { std::string_view text; std::string message; };
    const std::string value = "syntax error while parsing value - ";
    const std::string literal = "'[', '{', or a literal";
    const Case cases[] = {
        {"", "doc:1:1: " + value + "unexpected end of input; expected " + literal},
        {"   ", "doc:1:4: " + value + "unexpected end of input; expected " + literal},
        {"[1, 2,]", "doc:1:7: " + value + "unexpected ']'; expected " + literal},
        {"{\"a\" 1}", "doc:1:6: syntax error while parsing object separator - unexpected number literal; expected ':'"},
        {"{'a': 1}", "doc:1:2: syntax error while parsing object key - invalid literal; last read: '{''; expected string literal"},
        {"{\"a\": 1,}", "doc:1:9: syntax error while parsing object key - unexpected '}'; expected string literal"},
        {"[1 2]", "doc:1:4: syntax error while parsing array - unexpected number literal; expected ']'"},
        {"{\"a\": 1", "doc:1:8: syntax error while parsing object - unexpected end of input; expected '}'"},
        {"[1", "doc:1:3: syntax error while parsing array - unexpected end of input; expected ']'"},
        {"01", "doc:1:2: " + value + "unexpected number literal; expected end of input"},
        {"1.", "doc:1:3: " + value + "invalid number; expected digit after '.'; last read: '1.'"},
        {".5", "doc:1:1: " + value + "invalid literal; last read: '.'"},
        {"+1", "doc:1:1: " + value + "invalid literal; last read: '+'"},
        {"-", "doc:1:2: " + value + "invalid number; expected digit after '-'; last read: '-'"},
        {"1e", "doc:1:3: " + value + "invalid number; expected '+', '-', or digit after exponent; last read: '1e'"},
        {"1e999", "doc:1:5: number overflow parsing '1e999'"},
        {"NaN", "doc:1:1: " + value + "invalid literal; last read: 'N'"},
        {"tru", "doc:1:4: " + value + "invalid literal; last read: 'tru'"},
        {"nulls", "doc:1:5: " + value + "invalid literal; last read: 'nulls'; expected end of input"},
        {"{} {}", "doc:1:4: " + value + "unexpected '{'; expected end of input"},
        {"// c\n1", "doc:1:1: " + value + "invalid literal; last read: '/'"},
        {"\"abc", "doc:1:5: " + value + "invalid string: missing closing quote; last read: '\"abc'"},
        {"\"a\tb\"", "doc:1:3: " + value + "invalid string: control character U+0009 (HT) must be escaped to "
                     "\\u0009 or \\t; last read: '\"a<U+0009>'"},
        {"\"\\x\"", "doc:1:3: " + value + "invalid string: forbidden character after backslash; last read: '\"\\x'"},
        {"\"\\u12g4\"", "doc:1:6: " + value + "invalid string: '\\u' must be followed by 4 hex digits; last read: '\"\\u12g'"},
        {"\"\\ude00\"", "doc:1:7: " + value + "invalid string: surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF; "
                        "last read: '\"\\ude00'"},
        {"\"\\ud83d\"", "doc:1:8: " + value + "invalid string: surrogate U+D800..U+DBFF must be followed by "
                        "U+DC00..U+DFFF; last read: '\"\\ud83d\"'"},
        {"\"\\ud83d\\u0041\"", "doc:1:13: " + value + "invalid string: surrogate U+D800..U+DBFF must be followed by "
                               "U+DC00..U+DFFF; last read: '\"\\ud83d\\u0041'"},
        // Bytes that are not UTF-8 are quoted escaped, never raw (docs/FUZZING.md, finding 3).
        {"\"\xff\"", "doc:1:2: " + value + "invalid string: ill-formed UTF-8 byte; last read: '\"\\xff'"},
        {"\"\xc0\xaf\"", "doc:1:2: " + value + "invalid string: ill-formed UTF-8 byte; last read: '\"\\xc0'"},
        {"\"\xe0\x80\xaf\"", "doc:1:3: " + value + "invalid string: ill-formed UTF-8 byte; last read: '\"\\xe0\\x80'"},
        {"\"\xed\xa0\x80\"", "doc:1:3: " + value + "invalid string: ill-formed UTF-8 byte; last read: '\"\\xed\\xa0'"},
        {"\"\xc3(\"", "doc:1:3: " + value + "invalid string: ill-formed UTF-8 byte; last read: '\"\\xc3('"},
        {"{\"k\": 1, \"k\": 2}", "doc:1:10: duplicate key \"k\""},
        {"{\"a\\\"\": 1, \"a\\\"\": 2}", "doc:1:12: duplicate key \"a\"\""},
        // Python's json and the safetensors reference reject a byte order mark too.
        {"\xef\xbb\xbf{}", "doc:1:1: a UTF-8 byte order mark is not allowed before the value"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.text);
        CHECK(parse_error(c.text) == c.message);
    }
}

TEST_CASE("duplicate keys are found among many, at their second occurrence") {
    std::string text = "{";
    for (int i = 0; i < 5000; ++i) text += "\"k" + std::to_string(i) + "\": 0, ";
    text += "\"k4321\": 1, \"k17\": 2}";
    CHECK(parse_error(text) == "doc:1:" + std::to_string(text.find("\"k4321\": 1") + 1) + ": duplicate key \"k4321\"");
}

TEST_CASE("line and column count lines and bytes from 1") {
    CHECK(parse_error("{\n  \"a\": 1,\n  \"b\" 2\n}") ==
          "doc:3:7: syntax error while parsing object separator - unexpected number literal; expected ':'");
}

TEST_CASE("nesting deeper than the limit is an error, not a stack overflow") {
    const std::string deep(100000, '[');
    CHECK(parse_error(deep) == "doc:1:129: nesting deeper than 128 levels");
    const cpx::io::JsonLimits four{4};
    CHECK(parse_error("[[[[1]]]]", four).empty());
    CHECK(parse_error("[[[[[1]]]]]", four) == "doc:1:5: nesting deeper than 4 levels");
    CHECK(parse_error("{\"a\":{\"b\":{\"c\":{\"d\":{}}}}}", four) == "doc:1:21: nesting deeper than 4 levels");
}

TEST_CASE("accessors name the kind they wanted and the kind they found") {
    const Json v = parse_json("[1, \"s\"]");
    CHECK_THROWS_WITH_AS(v.as_string(), "expected string, found array", FormatError);
    CHECK_THROWS_WITH_AS(v.as_array()[1].as_double(), "expected number, found string", FormatError);
    CHECK_THROWS_WITH_AS(v.find("k"), "expected object, found array", FormatError);
}

TEST_CASE("compact output has no spaces; pretty output matches Python's json.dumps(indent=2)") {
    const Json v = parse_json(R"({"a": [1, 2], "b": {}, "c": [], "d": {"x": null, "y": true}, "e": "q\"\\\n\u0001é"})");
    CHECK(v.dump() == "{\"a\":[1,2],\"b\":{},\"c\":[],\"d\":{\"x\":null,\"y\":true},\"e\":\"q\\\"\\\\\\n\\u0001é\"}");
    // Reference text produced by Python 3.11 json.dumps(..., indent=2, ensure_ascii=False).
    CHECK(v.dump(2) ==
          "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {},\n  \"c\": [],\n  \"d\": {\n    \"x\": null,\n"
          "    \"y\": true\n  },\n  \"e\": \"q\\\"\\\\\\n\\u0001é\"\n}");
}

TEST_CASE("doubles are written in Python's repr form: shortest round trip, integers with .0") {
    // Left: the value; right: Python 3.11 repr() of the same double.
    struct Case { double value; std::string_view text; };
    const Case cases[] = {
        {10000.0, "10000.0"}, {1e-06, "1e-06"}, {0.02, "0.02"}, {3.1415926535, "3.1415926535"},
        {0.1, "0.1"}, {1.0 / 3.0, "0.3333333333333333"}, {1e16, "1e+16"}, {1e15, "1000000000000000.0"},
        {123456789012345680.0, "1.2345678901234568e+17"}, {1e-5, "1e-05"}, {0.0001, "0.0001"},
        {-0.0, "-0.0"}, {0.0, "0.0"}, {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
        {2.5, "2.5"}, {100.0, "100.0"}, {1e22, "1e+22"}, {0.30000000000000004, "0.30000000000000004"},
        {-1.5e-7, "-1.5e-07"}, {9007199254740992.0, "9007199254740992.0"}, {1234.5678, "1234.5678"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.text);
        CHECK(Json(c.value).dump() == c.text);
        const Json back = parse_json(c.text);
        CHECK_FALSE(back.is_integer());
        CHECK(back.as_double() == c.value);
        CHECK(std::signbit(back.as_double()) == std::signbit(c.value));
    }
}

TEST_CASE("integers are written as integers") {
    CHECK(Json(0).dump() == "0");
    CHECK(Json(std::numeric_limits<std::int64_t>::min()).dump() == "-9223372036854775808");
    CHECK(Json(std::uint64_t{42}).dump() == "42");
    CHECK_THROWS_AS(static_cast<void>(Json(std::numeric_limits<std::uint64_t>::max())), FormatError);
}

TEST_CASE("non-finite doubles cannot be written") {
    CHECK_THROWS_AS(Json(std::numeric_limits<double>::infinity()).dump(), FormatError);
    CHECK_THROWS_AS(Json(std::numeric_limits<double>::quiet_NaN()).dump(), FormatError);
}

TEST_CASE("writing then parsing gives back an equal value") {
    Json doc = Json::object();
    doc.set("ints", Json(Json::Array{Json(1), Json(-7), Json(std::numeric_limits<std::int64_t>::max())}));
    doc.set("doubles", Json(Json::Array{Json(1.0), Json(-2.5e-300), Json(6.02214076e23)}));
    doc.set("text", "tab\t quote\" slash\\ nul" + std::string(1, '\0') + " \xe2\x82\xac");
    doc.set("nested", Json(Json::Object{{"deep", Json(Json::Array{Json(), Json(true), Json::object()})}}));
    for (int indent : {-1, 0, 2, 4}) {
        CAPTURE(indent);
        const Json back = parse_json(doc.dump(indent));
        CHECK(back == doc);
        CHECK(back.dump(indent) == doc.dump(indent));
    }
    // An integer and a double of the same value are different JSON values.
    CHECK_FALSE(Json(1) == Json(1.0));
}

TEST_CASE("set replaces an existing key in place and appends a new one") {
    Json o = Json::object();
    o.set("a", 1);
    o.set("b", 2);
    o.set("a", 3);
    CHECK(o.dump() == "{\"a\":3,\"b\":2}");
}

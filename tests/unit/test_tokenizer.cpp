// cpx::text::Tokenizer against the reference implementation (the `tokenizers`
// package): ids and decodings recorded by tests/data/tokenizer/make_tokenizer_fixtures.py
// for two byte-level BPE shapes (GPT-2's ByteLevel regex; LLaMA-3's Split + ByteLevel with
// ignore_merges and a BOS), on adversarial inputs; the demo model's tokenizer on its whole
// validation text; the UTF-8 and BPE building blocks; and clear errors for bad files.

#include <doctest/doctest.h>

#include <cpx/io/json.hpp>
#include <cpx/io/npy.hpp>
#include <cpx/text/tokenizer.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <iterator>
#include <string>

#include "error_message.hpp"

namespace {

using cpx::text::Tokenizer;
using cpx::testing::message_of;
const std::filesystem::path data_dir = std::filesystem::path(CPX_TEST_DATA_DIR) / "tokenizer";
const std::filesystem::path kjv_dir = std::filesystem::path(CPX_SOURCE_DIR) / "data" / "kjv";

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    REQUIRE_MESSAGE(in, "cannot open " << p);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string from_hex(const std::string& hex) {
    std::string out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    return out;
}

std::vector<std::int32_t> ids_of(const cpx::io::Json& array) {
    std::vector<std::int32_t> ids;
    for (const auto& v : array.as_array()) ids.push_back(static_cast<std::int32_t>(v.as_int64()));
    return ids;
}

/// tokenizer.json text with one edit applied to its parsed tree, for the error cases.
std::string edited(const std::string& name, const std::function<void(cpx::io::Json&)>& edit) {
    cpx::io::Json root = cpx::io::parse_json(read_file(data_dir / (name + ".json")));
    edit(root);
    return root.dump();
}

cpx::io::Json& at(cpx::io::Json& obj, const char* key) {
    for (auto& m : obj.as_object())
        if (m.first == key) return m.second;
    FAIL("no key " << key);
    throw;
}

}  // namespace

TEST_CASE("UTF-8 repair follows the maximal-subpart rule of the reference decoders") {
    using cpx::repair_utf8;
    const std::string fffd(cpx::utf8_replacement_character);
    CHECK(repair_utf8("plain") == "plain");
    CHECK(repair_utf8("\xff") == fffd);
    CHECK(repair_utf8("a\xe2\x82") == "a" + fffd);                  // truncated 3-byte sequence: one U+FFFD
    CHECK(repair_utf8("\xed\xa0\x80") == fffd + fffd + fffd);       // a surrogate: each byte
    CHECK(repair_utf8("\xf4\x90\x80\x80") == fffd + fffd + fffd + fffd);  // above U+10FFFF
    CHECK(repair_utf8("\xc0\xaf") == fffd + fffd);                  // overlong
    CHECK(repair_utf8("\xe2\x82x") == fffd + "x");
    CHECK(cpx::complete_utf8_prefix("ab\xe2\x82") == 2);      // waits for the third byte
    CHECK(cpx::complete_utf8_prefix("ab\xe2\x82\xac") == 5);
    CHECK(cpx::complete_utf8_prefix("ab\xff") == 3);          // ill-formed: printable now
    CHECK(cpx::complete_utf8_prefix("\xf0\x9f\x98") == 0);
}

TEST_CASE("byte-level alphabet: 256 distinct characters, space is U+0120, round trip") {
    std::set<std::uint32_t> seen;
    for (int b = 0; b < 256; ++b) seen.insert(cpx::text::byte_level_code_point(static_cast<std::uint8_t>(b)));
    CHECK(seen.size() == 256);
    CHECK(cpx::text::byte_level_code_point(' ') == 0x120);
    CHECK(cpx::text::byte_level_code_point('A') == 'A');
    std::string all;
    for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
    CHECK(cpx::text::from_byte_level(cpx::text::to_byte_level(all)) == all);
}

TEST_CASE("UTF-8 encoding of one code point: one to four bytes, valid") {
    const auto utf8 = [](std::uint32_t cp) {
        std::string out;
        cpx::text::append_utf8(out, cp);
        return out;
    };
    CHECK(utf8(0x41) == "A");
    CHECK(utf8(0x7F) == "\x7f");
    CHECK(utf8(0xE9) == "\xc3\xa9");                // e acute
    CHECK(utf8(0x7FF) == "\xdf\xbf");
    CHECK(utf8(0x20AC) == "\xe2\x82\xac");         // the euro sign
    CHECK(utf8(0xFFFD) == std::string(cpx::utf8_replacement_character));
    CHECK(utf8(0x1F600) == "\xf0\x9f\x98\x80");    // an emoji: four bytes
    CHECK(utf8(0x10FFFF) == "\xf4\x8f\xbf\xbf");
    for (const std::uint32_t cp : {0x80u, 0x800u, 0xFFFFu, 0x10000u}) CHECK(cpx::is_valid_utf8(utf8(cp)));
    // Outside the byte-level alphabet (an added token's text): a character stands for its own bytes.
    CHECK(cpx::text::from_byte_level("a\xe2\x82\xac\xc4\xa0" "b") == "a\xe2\x82\xac b");
}

TEST_CASE("BPE merges lowest rank first, leftmost among equals, and long pieces stay fast") {
    cpx::text::MergeTable merges;
    // ids: a=0, b=1, ab=2, aa=3, aaaa=4
    merges.add(0, 1, 0, 2);
    merges.add(0, 0, 1, 3);
    merges.add(3, 3, 2, 4);
    std::vector<std::int32_t> ids{0, 0, 0, 1};  // "aaab": ab first (rank 0), then aa
    cpx::text::bpe_merge(ids, merges);
    CHECK(ids == std::vector<std::int32_t>{3, 2});
    ids = {0, 0, 0, 0, 0};  // "aaaaa": aa aa a, then aaaa a
    cpx::text::bpe_merge(ids, merges);
    CHECK(ids == std::vector<std::int32_t>{4, 0});
    ids.assign(200000, 0);  // O(n log n): a quadratic merge would take minutes here
    cpx::text::bpe_merge(ids, merges);
    CHECK(ids == std::vector<std::int32_t>(50000, 4));
}

TEST_CASE("ids and decodings equal the reference on adversarial text, both tokenizer shapes") {
    const cpx::io::Json cases = cpx::io::parse_json(read_file(data_dir / "cases.json"));
    for (const char* name : {"gpt2_style", "llama3_style"}) {
        const Tokenizer tok = Tokenizer::from_file(data_dir / (std::string(name) + ".json"));
        CHECK(tok.vocab_size() == 600);
        int index = 0;
        for (const auto& c : cases.find("cases")->as_array()) {
            const std::string text = from_hex(c.find("hex")->as_string());
            const cpx::io::Json& want = *c.find(name);
            CAPTURE(name);
            CAPTURE(index);
            const std::vector<std::int32_t> ids = tok.encode(text);
            CHECK(ids == ids_of(*want.find("ids")));
            CHECK(tok.decode(ids) == from_hex(want.find("decoded_hex")->as_string()));
            // Round trip: what goes in (repaired, special tokens aside) comes back out.
            if (text.find("<|") == std::string::npos) CHECK(tok.decode(ids) == cpx::repair_utf8(text));
            ++index;
        }
    }
}

TEST_CASE("streaming decode prints whole characters only and adds up to decode()") {
    const Tokenizer tok = Tokenizer::from_file(data_dir / "gpt2_style.json");
    const std::string text = "emoji \xF0\x9F\x98\x80 and \xE4\xB8\xAD\xE6\x96\x87 text";
    const auto ids = tok.encode(text);
    Tokenizer::StreamDecoder stream(tok);
    std::string out;
    for (const auto id : ids) {
        const std::string piece = stream.push(id);
        CHECK(cpx::is_valid_utf8(piece));
        out += piece;
    }
    out += stream.finish();
    CHECK(out == text);
    CHECK(out == tok.decode(ids));
}

TEST_CASE("special tokens: kept whole inside text, skipped or kept when decoding, BOS by template") {
    const Tokenizer tok = Tokenizer::from_file(data_dir / "llama3_style.json");
    const auto ids = tok.encode("x<|end_of_text|>y");
    CHECK(ids.front() == 1);  // <|begin_of_text|> from the template
    CHECK(std::count(ids.begin(), ids.end(), *tok.token_to_id("<|end_of_text|>")) == 1);
    CHECK(tok.decode(ids) == "xy");
    CHECK(tok.decode(ids, false) == "<|begin_of_text|>x<|end_of_text|>y");
    CHECK(tok.encode("x", false) == std::vector<std::int32_t>(ids.begin() + 1, ids.begin() + 2));
    CHECK(message_of([&] { (void)tok.decode(std::vector<std::int32_t>{600}); }).find("token id 600 is not in the vocabulary") != std::string::npos);
    CHECK(message_of([&] { (void)tok.decode(std::vector<std::int32_t>{-1}); }).find("token id -1") != std::string::npos);
}

TEST_CASE("bytes missing from the vocabulary become unk_token (fused with fuse_unk) or vanish without one") {
    // gpt2_style without the byte-level character of byte 0x01 (U+0101), which no merge uses.
    const auto without_byte_1 = [](const char* unk, bool fuse) {
        return Tokenizer::from_json(edited("gpt2_style", [&](auto& r) {
                                        auto& model = at(r, "model");
                                        auto& vocab = at(model, "vocab").as_object();
                                        vocab.erase(std::find_if(vocab.begin(), vocab.end(),
                                                                 [](const auto& m) { return m.first == "\xc4\x81"; }));
                                        if (unk) model.set("unk_token", cpx::io::Json(unk));
                                        model.set("fuse_unk", cpx::io::Json(fuse));
                                    }),
                                    "t.json");
    };
    const Tokenizer full = Tokenizer::from_file(data_dir / "gpt2_style.json");
    const std::int32_t a = full.encode("a", false).at(0), b = full.encode("b", false).at(0);
    REQUIRE(full.encode("a", false).size() == 1);
    REQUIRE(full.encode("b", false).size() == 1);
    const std::int32_t unk = *full.token_to_id("<|endoftext|>");
    using Ids = std::vector<std::int32_t>;
    // "\x01\x01" is one pre-tokenized piece between "a" and "b".
    CHECK(without_byte_1("<|endoftext|>", false).encode("a\x01\x01" "b", false) == Ids{a, unk, unk, b});
    CHECK(without_byte_1("<|endoftext|>", true).encode("a\x01\x01" "b", false) == Ids{a, unk, b});
    CHECK(without_byte_1(nullptr, false).encode("a\x01\x01" "b", false) == Ids{a, b});
    CHECK_FALSE(full.token_to_id("no such token").has_value());
}

TEST_CASE("split pre-tokenizers: Removed drops the matches, a pattern matching empty moves on by a character") {
    const auto with_split = [](const char* pattern, const char* behavior) {
        return Tokenizer::from_json(edited("llama3_style", [&](auto& r) {
                                        auto& split = at(at(r, "pre_tokenizer"), "pretokenizers").as_array()[0];
                                        at(split, "pattern") = cpx::io::parse_json(pattern);
                                        at(split, "behavior") = cpx::io::Json(behavior);
                                    }),
                                    "t.json");
    };
    const Tokenizer isolated = with_split("{\"String\":\".\"}", "Isolated");
    const Tokenizer removed = with_split("{\"String\":\".\"}", "Removed");
    std::vector<std::int32_t> want = isolated.encode("ab", false);
    const auto cd = isolated.encode("cd", false);
    want.insert(want.end(), cd.begin(), cd.end());
    CHECK(removed.encode("ab.cd", false) == want);
    CHECK(removed.decode(removed.encode("ab.cd", false)) == "abcd");
    // "x*" matches the empty string at every position: the text is still split and encoded whole,
    // stepping over whole characters (the two bytes of e acute stay together).
    const Tokenizer empty_matches = with_split("{\"Regex\":\"x*\"}", "Isolated");
    for (const std::string text : {"abc", "a\xc3\xa9" "b", "axxb"}) CHECK(empty_matches.decode(empty_matches.encode(text, false)) == text);
}

TEST_CASE("the demo model's tokenizer reproduces the reference ids of its whole validation text") {
    if (!std::filesystem::exists(kjv_dir / "deep" / "tokenizer.json")) {
        MESSAGE("data/kjv/deep/tokenizer.json is absent: skipped");
        return;
    }
    const Tokenizer tok = Tokenizer::from_file(kjv_dir / "deep");
    const std::string text = read_file(kjv_dir / "validation.txt");
    const auto ids = tok.encode(text, false);
    const cpx::io::NpyArray want = cpx::io::read_npy(data_dir / "kjv_validation_ids.npy");
    REQUIRE(want.shape.size() == 1);
    const std::vector<std::int32_t> w = want.values<std::int32_t>("kjv_validation_ids.npy");
    REQUIRE(ids.size() == w.size());
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) mismatches += ids[i] != w[i];
    CHECK(mismatches == 0);
    CHECK(tok.decode(ids) == text);
}

TEST_CASE("bad tokenizer.json files are clear errors naming the field") {
    const auto error = [](const std::string& json) { return message_of([&] { (void)Tokenizer::from_json(json, "t.json"); }); };
    CHECK(error("{\"model\": ").find("t.json:1:") != std::string::npos);  // truncated JSON: position
    CHECK(error("[]").find("t.json: the top level is not a JSON object") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) {
              auto& o = r.as_object();
              o.erase(std::find_if(o.begin(), o.end(), [](const auto& m) { return m.first == "model"; }));
          })).find("t.json: model: is missing") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(at(r, "model"), "type") = cpx::io::Json("WordPiece"); }))
              .find("model.type: \"WordPiece\" is not supported") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(at(r, "model"), "byte_fallback") = cpx::io::Json(true); }))
              .find("model.byte_fallback: is true") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(r, "normalizer") = cpx::io::parse_json("{\"type\":\"NFC\"}"); }))
              .find("normalizer: type NFC is not supported") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(at(r, "model"), "merges").push_back(cpx::io::Json("Ġt zzz")); }))
              .find("names \"zzz\", which is not in the vocabulary") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(at(r, "model"), "merges").push_back(cpx::io::Json("a b c")); }))
              .find("is not two tokens separated by one space") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(r, "pre_tokenizer") = cpx::io::parse_json("{\"type\":\"Whitespace\"}"); }))
              .find("pre_tokenizer.type: \"Whitespace\" is not supported") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(r, "decoder") = cpx::io::Json(nullptr); }))
              .find("decoder: is null") != std::string::npos);
    CHECK(error(edited("llama3_style", [](auto& r) {
              at(at(at(at(r, "pre_tokenizer"), "pretokenizers").as_array()[0], "pattern"), "Regex") = cpx::io::Json("(unclosed");
          })).find("pre_tokenizer.pretokenizers[0].pattern") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(r, "truncation") = cpx::io::parse_json("{\"max_length\":5}"); }))
              .find("truncation: is set") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(r, "added_tokens").as_array()[0].set("lstrip", cpx::io::Json(true)); }))
              .find("added_tokens[0].lstrip: is true") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(r, "model").set("dropout", cpx::io::Json(0.1)); }))
              .find("model.dropout: is set; BPE dropout is not supported") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(r, "model").set("continuing_subword_prefix", cpx::io::Json("##")); }))
              .find("model.continuing_subword_prefix: is set") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(r, "model").set("unk_token", cpx::io::Json("<nope>")); }))
              .find("model.unk_token: \"<nope>\" is not in the vocabulary") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(at(r, "model"), "merges").push_back(cpx::io::Json(7)); }))
              .find("is neither \"a b\" nor [\"a\", \"b\"]") != std::string::npos);
    CHECK(error(edited("gpt2_style", [](auto& r) { at(r, "added_tokens").as_array()[0].set("content", cpx::io::Json("\xc4\xa0t")); }))
              .find("but the vocabulary gives it") != std::string::npos);
    CHECK(error(edited("llama3_style", [](auto& r) {
              at(at(at(r, "pre_tokenizer"), "pretokenizers").as_array()[0], "pattern") = cpx::io::parse_json("{\"Glob\":\"*\"}");
          })).find("pattern: is neither {\"Regex\": ...} nor {\"String\": ...}") != std::string::npos);
    CHECK(error(edited("llama3_style", [](auto& r) { at(at(r, "post_processor"), "type") = cpx::io::Json("RobertaProcessing"); }))
              .find("post_processor.type: \"RobertaProcessing\" is not supported (ByteLevel, TemplateProcessing)") !=
          std::string::npos);
    CHECK(error(edited("llama3_style", [](auto& r) {
              at(at(at(at(r, "post_processor"), "single").as_array()[1], "Sequence"), "id") = cpx::io::Json("B");
          })).find("post_processor.single: must hold the sequence $A once") != std::string::npos);
    CHECK(error(edited("llama3_style", [](auto& r) {
              auto& single = at(at(r, "post_processor"), "single").as_array();
              single.push_back(single[1]);  // $A twice
          })).find("post_processor.single: must hold the sequence $A once") != std::string::npos);
    CHECK(error(edited("llama3_style", [](auto& r) {
              at(at(at(at(r, "post_processor"), "special_tokens"), "<|begin_of_text|>"), "ids") = cpx::io::parse_json("[9999]");
          })).find("post_processor.special_tokens: id 9999 is not in the vocabulary") != std::string::npos);
    CHECK(error(edited("llama3_style", [](auto& r) {
              at(at(r, "post_processor"), "single").push_back(cpx::io::parse_json("{\"Pad\":{}}"));
          })).find("post_processor.single: holds an item that is neither Sequence nor SpecialToken") != std::string::npos);
    // A ByteLevel post-processor (offsets only) leaves the ids as they are.
    const auto byte_level_post = edited("llama3_style", [](auto& r) {
        at(r, "post_processor") = cpx::io::parse_json("{\"type\":\"ByteLevel\",\"trim_offsets\":false}");
    });
    CHECK(Tokenizer::from_json(byte_level_post, "t.json").encode("x") ==
          Tokenizer::from_file(data_dir / "llama3_style.json").encode("x", false));
    // A literal split pattern ({"String": ...}) is accepted and splits on the literal.
    const auto literal = edited("llama3_style", [](auto& r) {
        at(at(at(r, "pre_tokenizer"), "pretokenizers").as_array()[0], "pattern") = cpx::io::parse_json("{\"String\":\".\"}");
    });
    CHECK_NOTHROW((void)Tokenizer::from_json(literal, "t.json").encode("a.b"));
    CHECK(message_of([] { (void)Tokenizer::from_file("/nonexistent/tokenizer.json"); }).find("cannot open '/nonexistent/tokenizer.json'") !=
          std::string::npos);
}

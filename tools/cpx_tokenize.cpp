// cpx-tokenize: text to token ids and back with a tokenizer.json, from the command line.
//
//   cpx-tokenize TOKENIZER FILE                 ids of FILE's text, comma-separated, on one line
//   cpx-tokenize TOKENIZER FILE --special 1     ... with the post-processor's special tokens (a BOS)
//   cpx-tokenize TOKENIZER IDS_FILE --decode 1  the text of comma-separated ids
// TOKENIZER is a tokenizer.json or a directory holding one; FILE "-" reads standard input.
#include <cpx/text/tokenizer.hpp>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "cli_args.hpp"

namespace {

constexpr const char* usage =
    "usage: cpx-tokenize TOKENIZER FILE [--special 0|1] [--decode 0|1]\n"
    "  prints FILE's token ids comma-separated (--special 1 adds the post-processor's tokens);\n"
    "  with --decode 1, FILE holds comma-separated ids and the text is printed. FILE '-' is stdin.\n";

std::string read_all(const std::string& path) {
    if (path == "-") return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
    std::ifstream in(path, std::ios::binary);
    if (!in) throw cpx::InputError(path + ": cannot open");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool flag(const cpx::tools::Args& args, const char* name) {
    if (!args.has(name)) return false;
    const std::string v = args.text(name);
    if (v != "0" && v != "1") throw cpx::tools::UsageError(std::string("--") + name + " takes 0 or 1, got '" + v + "'");
    return v == "1";
}

int run(int argc, char** argv) {
    const cpx::tools::Args args(argc, argv, {"special", "decode"});
    if (args.positional.size() != 2) throw cpx::tools::UsageError("expected TOKENIZER and FILE");
    const auto tok = cpx::text::Tokenizer::from_file(args.positional[0]);
    const std::string input = read_all(args.positional[1]);
    if (flag(args, "decode")) {
        std::vector<std::int32_t> ids;
        const char* p = input.data();
        const char* end = p + input.size();
        while (p < end) {
            while (p < end && (*p == ',' || *p == ' ' || *p == '\n' || *p == '\r')) ++p;
            if (p == end) break;
            std::int32_t id = 0;
            const auto [next, ec] = std::from_chars(p, end, id);
            if (ec != std::errc()) throw cpx::InputError("not a token id at byte " + std::to_string(p - input.data()));
            ids.push_back(id);
            p = next;
        }
        const std::string text = tok.decode(ids);
        std::fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    }
    const auto ids = tok.encode(input, flag(args, "special"));
    std::string line;
    for (std::size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
    std::puts(line.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) { return cpx::tools::tool_main("cpx-tokenize", usage, argc, argv, run); }

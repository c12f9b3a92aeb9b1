#pragma once
// A compiled PCRE2 pattern with Unicode properties (\p{L}, \p{N}, Unicode \s),
// JIT-compiled where PCRE2 supports it, and the "split, keeping matches and the
// text between them" operation that tokenizer pre-tokenizers are made of.
// Needs libpcre2-8 (Debian libpcre2-dev); link the cpx::text target.

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cpx/core/error.hpp"

namespace cpx::text {

class Regex {
public:
    /// Compiles `pattern` (UTF-8, Perl syntax); a bad pattern is a FormatError naming the position.
    explicit Regex(std::string_view pattern) : pattern_(pattern) {
        int code = 0;
        PCRE2_SIZE offset = 0;
        pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                       PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr);
        if (re == nullptr) raise<FormatError>("regular expression \"", pattern, "\": ", message(code), " at offset ", offset);
        code_.reset(re);
        jit_ = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    }

    const std::string& pattern() const noexcept { return pattern_; }
    bool jit() const noexcept { return jit_; }

    /// Calls `piece(begin, end, matched)` for every match of the pattern in `text` (valid UTF-8) and
    /// for the non-empty stretches between matches, in order. Empty matches are skipped.
    template <class F>
    void split(std::string_view text, F&& piece) const {
        const std::unique_ptr<pcre2_match_data, MatchDataFree> md(pcre2_match_data_create_from_pattern(code_.get(), nullptr));
        if (!md) throw std::bad_alloc();
        const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
        std::size_t pos = 0, last = 0;
        while (pos <= text.size()) {
            const int rc = pcre2_match(code_.get(), subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) raise<Error>("regular expression \"", pattern_, "\": ", message(rc));
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
            const std::size_t b = ov[0], e = ov[1];
            if (e == b) {  // empty match: move on by one character
                pos = b + 1;
                while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
                continue;
            }
            if (b > last) piece(last, b, false);
            piece(b, e, true);
            last = pos = e;
        }
        if (last < text.size()) piece(last, text.size(), false);
    }

private:
    struct CodeFree { void operator()(pcre2_code* c) const { pcre2_code_free(c); } };
    struct MatchDataFree { void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); } };

    static std::string message(int code) {
        PCRE2_UCHAR buf[256];
        const int n = pcre2_get_error_message(code, buf, sizeof buf);
        return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<char*>(buf), static_cast<std::size_t>(n));
    }

    std::string pattern_;
    std::unique_ptr<pcre2_code, CodeFree> code_;
    bool jit_ = false;
};

}  // namespace cpx::text

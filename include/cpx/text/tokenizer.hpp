#pragma once
// A reader of Hugging Face tokenizer.json files for byte-level BPE, the
// tokenizer of the GPT-2 and LLaMA-3 families and of the models this library
// runs (docs/TOKENIZER.md). Encoding: split out added/special tokens, run the
// pre-tokenizer's regular expressions (PCRE2), map each piece's bytes to the
// byte-level alphabet, merge by rank, add the post-processor's special tokens.
// Decoding: token strings back to bytes; text that is not valid UTF-8 becomes
// U+FFFD. What the file asks for and this reader does not do (other model
// types, normalizers, byte fallback, added-token stripping...) is an error that
// names the field, never a silent difference.

#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/io/json.hpp"
#include "cpx/io/mapped_file.hpp"
#include "cpx/text/bpe_merge.hpp"
#include "cpx/text/byte_level.hpp"
#include "cpx/text/regex.hpp"
#include "cpx/core/utf8.hpp"

namespace cpx::text {

/// The split pattern of the ByteLevel pre-tokenizer with use_regex (GPT-2's).
inline constexpr std::string_view gpt2_split_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class Tokenizer {
public:
    struct AddedToken {
        std::int32_t id;
        std::string content;
        bool special;
    };

    /// Reads `path` (a tokenizer.json, or a directory holding one).
    static Tokenizer from_file(const std::filesystem::path& path) {
        std::filesystem::path file = path;
        if (std::filesystem::is_directory(file)) file /= "tokenizer.json";
        return from_json(io::read_text_file(file), file.string());
    }

    /// Parses tokenizer.json text; `source` names it in errors.
    static Tokenizer from_json(std::string_view text, std::string_view source = "tokenizer.json") {
        Tokenizer t;
        t.source_ = source;
        const io::Json root = io::parse_json(text, source);
        if (!root.is_object()) t.fail("", "the top level is not a JSON object");
        for (const char* key : {"truncation", "padding"})
            if (const io::Json* v = root.find(key); v != nullptr && !v->is_null())
                t.fail(key, "is set; truncation and padding are not supported (set them to null)");
        if (const io::Json* v = root.find("normalizer"); v != nullptr && !v->is_null())
            t.fail("normalizer", "type ", t.type_of(*v, "normalizer"), " is not supported (only null)");
        t.read_model(t.member(root, "model", "model"));
        t.read_added_tokens(root);
        t.read_pre_tokenizer(t.member(root, "pre_tokenizer", "pre_tokenizer"));
        t.read_decoder(t.member(root, "decoder", "decoder"));
        if (const io::Json* v = root.find("post_processor"); v != nullptr && !v->is_null()) t.read_post_processor(*v);
        return t;
    }

    /// Token ids of `text` (bytes; invalid UTF-8 is repaired to U+FFFD first). With
    /// `add_special_tokens` the post-processor's tokens (e.g. a BOS) are added.
    std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = true) const {
        std::vector<std::int32_t> out;
        if (add_special_tokens) out.insert(out.end(), prefix_.begin(), prefix_.end());
        std::string repaired;
        if (!is_valid_utf8(text)) {
            repaired = repair_utf8(text);
            text = repaired;
        }
        std::size_t pos = 0;
        while (pos < text.size()) {  // added tokens first, leftmost-longest
            std::size_t at = pos;
            const AddedToken* hit = nullptr;
            for (; at < text.size() && hit == nullptr; ++at) hit = added_at(text, at);
            const std::size_t begin = hit ? at - 1 : text.size();
            if (begin > pos) encode_segment(text.substr(pos, begin - pos), out);
            if (hit == nullptr) break;
            out.push_back(hit->id);
            pos = begin + hit->content.size();
        }
        if (add_special_tokens) out.insert(out.end(), suffix_.begin(), suffix_.end());
        return out;
    }

    /// The bytes of `ids` joined, as UTF-8 (ill-formed sequences become U+FFFD); special added
    /// tokens are left out when `skip_special_tokens`. An id with no token is an InputError.
    std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = true) const {
        std::string bytes;
        for (const std::int32_t id : ids) bytes += token_bytes(id, skip_special_tokens);
        return repair_utf8(bytes);
    }

    /// Raw bytes of token `id` (empty for a special token when `skip_special`).
    const std::string& token_bytes(std::int32_t id, bool skip_special = false) const {
        static const std::string empty;
        require<InputError>(id >= 0 && static_cast<std::size_t>(id) < bytes_of_.size() && has_id_[id], source_,
                            ": token id ", id, " is not in the vocabulary");
        return skip_special && is_special_[id] ? empty : bytes_of_[id];
    }

    /// Id of a token written as in the file (byte-level spelling, or an added token's content).
    std::optional<std::int32_t> token_to_id(std::string_view token) const {
        if (const auto it = id_of_token_.find(std::string(token)); it != id_of_token_.end()) return it->second;
        return std::nullopt;
    }

    /// Forgets the encodings of pieces seen so far (they are remembered to skip repeated merging).
    void clear_cache() const {
        const std::lock_guard lock(cache_->mutex);
        cache_->ids.clear();
    }

    /// One past the largest id (the size a model's vocabulary must at least have).
    std::size_t vocab_size() const noexcept { return bytes_of_.size(); }
    const std::vector<AddedToken>& added_tokens() const noexcept { return added_; }
    const std::string& source() const noexcept { return source_; }
    std::size_t merge_count() const noexcept { return merges_.size(); }

    /// Turns ids produced one at a time into text as soon as whole characters are known.
    class StreamDecoder {
    public:
        explicit StreamDecoder(const Tokenizer& t, bool skip_special_tokens = true) : t_(&t), skip_(skip_special_tokens) {}
        /// Text completed by `id` (possibly empty: a character split across tokens waits).
        std::string push(std::int32_t id) {
            pending_ += t_->token_bytes(id, skip_);
            const std::size_t n = complete_utf8_prefix(pending_);
            std::string out = repair_utf8(std::string_view(pending_).substr(0, n));
            pending_.erase(0, n);
            return out;
        }
        /// What is left at the end (an incomplete character prints as U+FFFD).
        std::string finish() {
            std::string out = repair_utf8(pending_);
            pending_.clear();
            return out;
        }

    private:
        const Tokenizer* t_;
        bool skip_;
        std::string pending_;
    };

private:
    struct Stage {
        std::shared_ptr<const Regex> regex;  // null: no split
        bool keep_gaps = true;               // Split "Isolated" keeps the text between matches; "Removed" drops matches
        bool keep_matches = true;
        bool add_prefix_space = false;       // ByteLevel
    };

    Tokenizer() = default;

    template <class... Parts>
    [[noreturn]] void fail(std::string_view field, Parts&&... parts) const {
        if (field.empty()) raise<FormatError>(source_, ": ", std::forward<Parts>(parts)...);
        raise<FormatError>(source_, ": ", field, ": ", std::forward<Parts>(parts)...);
    }
    const io::Json& member(const io::Json& obj, const char* key, std::string_view field) const {
        if (!obj.is_object()) fail(field, "is not a JSON object");
        const io::Json* v = obj.find(key);
        if (v == nullptr) fail(field, "is missing");
        return *v;
    }
    std::string type_of(const io::Json& v, std::string_view field) const {
        const io::Json& t = member(v, "type", field);
        if (!t.is_string()) fail(std::string(field) + ".type", "is not a string");
        return t.as_string();
    }
    bool flag(const io::Json& obj, const char* key, std::string_view field, bool fallback) const {
        const io::Json* v = obj.find(key);
        if (v == nullptr || v->is_null()) return fallback;
        if (!v->is_bool()) fail(std::string(field) + "." + key, "is not true or false");
        return v->as_bool();
    }
    std::int32_t id_value(const io::Json& v, std::string_view field) const {
        if (!v.is_integer() || v.as_int64() < 0 || v.as_int64() > (1 << 30)) fail(field, "is not a token id in [0, 2^30]");
        return static_cast<std::int32_t>(v.as_int64());
    }

    void set_token(std::int32_t id, const std::string& token, bool special, std::string_view field) {
        if (static_cast<std::size_t>(id) >= bytes_of_.size()) {
            bytes_of_.resize(id + 1);
            has_id_.resize(id + 1, 0);
            is_special_.resize(id + 1, 0);
        }
        if (has_id_[id] && token_of_[id] != token) fail(field, "token id ", id, " is given to two different tokens");
        if (token_of_.size() < bytes_of_.size()) token_of_.resize(bytes_of_.size());
        token_of_[id] = token;
        has_id_[id] = 1;
        is_special_[id] = special ? 1 : 0;
        bytes_of_[id] = from_byte_level(token);
    }

    void read_model(const io::Json& m) {
        const std::string type = type_of(m, "model");
        if (type != "BPE") fail("model.type", "\"", type, "\" is not supported (only byte-level \"BPE\")");
        if (const io::Json* d = m.find("dropout"); d && !d->is_null() && !(d->is_number() && d->as_double() == 0.0))
            fail("model.dropout", "is set; BPE dropout is not supported");
        for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
            if (const io::Json* v = m.find(key); v && !v->is_null() && !(v->is_string() && v->as_string().empty()))
                fail(std::string("model.") + key, "is set; byte-level BPE does not use it");
        if (flag(m, "byte_fallback", "model", false)) fail("model.byte_fallback", "is true; byte fallback (SentencePiece-style BPE) is not supported");
        ignore_merges_ = flag(m, "ignore_merges", "model", false);
        fuse_unk_ = flag(m, "fuse_unk", "model", false);

        const io::Json& vocab = member(m, "vocab", "model");
        if (!vocab.is_object()) fail("model.vocab", "is not a JSON object");
        id_of_token_.reserve(vocab.size() * 2);
        for (const auto& [token, value] : vocab.as_object()) {
            const std::int32_t id = id_value(value, "model.vocab[\"" + token + "\"]");
            if (!is_valid_utf8(token)) fail("model.vocab", "a token is not valid UTF-8");
            set_token(id, token, false, "model.vocab");
            id_of_token_.emplace(token, id);
        }
        for (std::size_t id = 0; id < bytes_of_.size(); ++id)
            if (has_id_[id]) id_of_bytes_.emplace(bytes_of_[id], static_cast<std::int32_t>(id));

        if (const io::Json* u = m.find("unk_token"); u && !u->is_null()) {
            if (!u->is_string()) fail("model.unk_token", "is not a string");
            const auto it = id_of_token_.find(u->as_string());
            if (it == id_of_token_.end()) fail("model.unk_token", "\"", u->as_string(), "\" is not in the vocabulary");
            unk_ = it->second;
        }
        for (int b = 0; b < 256; ++b) {
            const auto it = id_of_token_.find(to_byte_level(std::string(1, static_cast<char>(b))));
            byte_id_[b] = it == id_of_token_.end() ? -1 : it->second;
        }

        const io::Json& merges = member(m, "merges", "model");
        if (!merges.is_array()) fail("model.merges", "is not a JSON array");
        std::int32_t rank = 0;
        for (const io::Json& item : merges.as_array()) {
            std::string left, right;
            if (item.is_string()) {  // older files: "left right"
                const std::string& s = item.as_string();
                const std::size_t space = s.find(' ');
                if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
                    fail("model.merges[" + std::to_string(rank) + "]", "\"", s, "\" is not two tokens separated by one space");
                left = s.substr(0, space);
                right = s.substr(space + 1);
            } else if (item.is_array() && item.size() == 2 && item.as_array()[0].is_string() && item.as_array()[1].is_string()) {
                left = item.as_array()[0].as_string();
                right = item.as_array()[1].as_string();
            } else {
                fail("model.merges[" + std::to_string(rank) + "]", "is neither \"a b\" nor [\"a\", \"b\"]");
            }
            const auto l = id_of_token_.find(left), r = id_of_token_.find(right), lr = id_of_token_.find(left + right);
            const std::string where = "model.merges[" + std::to_string(rank) + "]";
            if (l == id_of_token_.end()) fail(where, "names \"", left, "\", which is not in the vocabulary");
            if (r == id_of_token_.end()) fail(where, "names \"", right, "\", which is not in the vocabulary");
            if (lr == id_of_token_.end()) fail(where, "makes \"", left + right, "\", which is not in the vocabulary");
            merges_.add(l->second, r->second, rank, lr->second);
            ++rank;
        }
    }

    void read_added_tokens(const io::Json& root) {
        const io::Json* list = root.find("added_tokens");
        if (list == nullptr || list->is_null()) return;
        if (!list->is_array()) fail("added_tokens", "is not a JSON array");
        for (std::size_t i = 0; i < list->size(); ++i) {
            const io::Json& a = list->as_array()[i];
            const std::string field = "added_tokens[" + std::to_string(i) + "]";
            const std::int32_t id = id_value(member(a, "id", field), field + ".id");
            const io::Json& content = member(a, "content", field);
            if (!content.is_string() || content.as_string().empty()) fail(field + ".content", "is not a non-empty string");
            if (!is_valid_utf8(content.as_string())) fail(field + ".content", "is not valid UTF-8");
            for (const char* key : {"lstrip", "rstrip", "single_word"})
                if (flag(a, key, field, false)) fail(field + "." + key, "is true; this option is not supported");
            const bool special = flag(a, "special", field, false);
            if (const auto it = id_of_token_.find(content.as_string()); it != id_of_token_.end() && it->second != id)
                fail(field, "\"", content.as_string(), "\" has id ", id, " but the vocabulary gives it ", it->second);
            id_of_token_[content.as_string()] = id;
            set_token(id, content.as_string(), special, field);
            added_.push_back({id, content.as_string(), special});
        }
        for (const AddedToken& a : added_) added_first_[static_cast<unsigned char>(a.content[0])] = 1;
    }

    void read_stage(const io::Json& p, std::string_view field) {
        const std::string type = type_of(p, field);
        if (type == "ByteLevel") {
            Stage s;
            s.add_prefix_space = flag(p, "add_prefix_space", field, true);
            if (flag(p, "use_regex", field, true)) s.regex = std::make_shared<Regex>(gpt2_split_pattern);
            stages_.push_back(std::move(s));
            byte_level_ = true;
        } else if (type == "Split") {
            if (flag(p, "invert", field, false)) fail(std::string(field) + ".invert", "is true; not supported");
            const io::Json& pattern = member(p, "pattern", field);
            std::string regex;
            if (const io::Json* r = pattern.is_object() ? pattern.find("Regex") : nullptr; r && r->is_string()) {
                regex = r->as_string();
            } else if (const io::Json* s = pattern.is_object() ? pattern.find("String") : nullptr; s && s->is_string()) {
                regex = "\\Q" + s->as_string() + "\\E";
            } else {
                fail(std::string(field) + ".pattern", "is neither {\"Regex\": ...} nor {\"String\": ...}");
            }
            const io::Json& behavior = member(p, "behavior", field);
            Stage s;
            try {
                s.regex = std::make_shared<Regex>(regex);
            } catch (const FormatError& e) {
                fail(std::string(field) + ".pattern", e.what());
            }
            if (behavior.is_string() && behavior.as_string() == "Isolated") {
            } else if (behavior.is_string() && behavior.as_string() == "Removed") {
                s.keep_matches = false;
            } else {
                fail(std::string(field) + ".behavior", behavior.is_string() ? behavior.as_string() : "(not a string)",
                     " is not supported (Isolated or Removed)");
            }
            stages_.push_back(std::move(s));
        } else if (type == "Sequence") {
            const io::Json& list = member(p, "pretokenizers", field);
            if (!list.is_array()) fail(std::string(field) + ".pretokenizers", "is not a JSON array");
            for (std::size_t i = 0; i < list.size(); ++i)
                read_stage(list.as_array()[i], std::string(field) + ".pretokenizers[" + std::to_string(i) + "]");
        } else {
            fail(std::string(field) + ".type", "\"", type, "\" is not supported (ByteLevel, Split, Sequence)");
        }
    }

    void read_pre_tokenizer(const io::Json& p) {
        if (p.is_null()) fail("pre_tokenizer", "is null; only byte-level BPE (a ByteLevel pre-tokenizer) is supported");
        read_stage(p, "pre_tokenizer");
        if (!byte_level_) fail("pre_tokenizer", "has no ByteLevel step; only byte-level BPE is supported");
    }

    void read_decoder(const io::Json& d) {
        if (d.is_null()) fail("decoder", "is null; byte-level BPE needs the ByteLevel decoder");
        const std::string type = type_of(d, "decoder");
        if (type != "ByteLevel") fail("decoder.type", "\"", type, "\" is not supported (only ByteLevel)");
    }

    void read_post_processor(const io::Json& p) {
        const std::string type = type_of(p, "post_processor");
        if (type == "ByteLevel") return;  // offsets only: ids unchanged
        if (type != "TemplateProcessing")
            fail("post_processor.type", "\"", type, "\" is not supported (ByteLevel, TemplateProcessing)");
        const io::Json& single = member(p, "single", "post_processor");
        const io::Json& specials = member(p, "special_tokens", "post_processor");
        if (!single.is_array()) fail("post_processor.single", "is not a JSON array");
        bool seen_sequence = false;
        for (const io::Json& item : single.as_array()) {
            if (const io::Json* s = item.is_object() ? item.find("Sequence") : nullptr) {
                const io::Json* id = s->is_object() ? s->find("id") : nullptr;
                if (id == nullptr || !id->is_string() || id->as_string() != "A" || seen_sequence)
                    fail("post_processor.single", "must hold the sequence $A once");
                seen_sequence = true;
            } else if (const io::Json* t = item.is_object() ? item.find("SpecialToken") : nullptr) {
                const io::Json& name = member(*t, "id", "post_processor.single");
                if (!name.is_string()) fail("post_processor.single", "a SpecialToken id is not a string");
                const io::Json* entry = specials.is_object() ? specials.find(name.as_string()) : nullptr;
                if (entry == nullptr) fail("post_processor.special_tokens", "has no entry \"", name.as_string(), "\"");
                const io::Json& ids = member(*entry, "ids", "post_processor.special_tokens");
                if (!ids.is_array()) fail("post_processor.special_tokens", "ids is not an array");
                for (const io::Json& v : ids.as_array()) {
                    const std::int32_t id = id_value(v, "post_processor.special_tokens.ids");
                    if (static_cast<std::size_t>(id) >= has_id_.size() || !has_id_[id])
                        fail("post_processor.special_tokens", "id ", id, " is not in the vocabulary");
                    (seen_sequence ? suffix_ : prefix_).push_back(id);
                }
            } else {
                fail("post_processor.single", "holds an item that is neither Sequence nor SpecialToken");
            }
        }
        if (!seen_sequence) fail("post_processor.single", "must hold the sequence $A once");
    }

    const AddedToken* added_at(std::string_view text, std::size_t at) const {
        if (!added_first_[static_cast<unsigned char>(text[at])]) return nullptr;
        const AddedToken* best = nullptr;
        for (const AddedToken& a : added_)
            if ((best == nullptr || a.content.size() > best->content.size()) && text.substr(at, a.content.size()) == a.content) best = &a;
        return best;
    }

    void encode_segment(std::string_view segment, std::vector<std::int32_t>& out) const {
        std::deque<std::string> owned;  // pieces that a prefix space made new
        std::vector<std::string_view> pieces{segment}, next;
        for (const Stage& s : stages_) {
            next.clear();
            for (std::string_view piece : pieces) {
                if (s.add_prefix_space && !piece.empty() && piece.front() != ' ') piece = owned.emplace_back(" " + std::string(piece));
                if (!s.regex) {
                    next.push_back(piece);
                    continue;
                }
                s.regex->split(piece, [&](std::size_t b, std::size_t e, bool matched) {
                    if (matched ? s.keep_matches : s.keep_gaps) next.push_back(piece.substr(b, e - b));
                });
            }
            pieces.swap(next);
        }
        const std::lock_guard lock(cache_->mutex);
        auto& cache = cache_->ids;
        if (cache.size() > 200000) cache.clear();  // bounded memory on endless distinct input
        for (const std::string_view piece : pieces) {
            if (piece.empty()) continue;
            auto it = cache.find(piece);  // heterogeneous: no string made for a hit
            if (it == cache.end()) it = cache.emplace(std::string(piece), encode_piece(piece)).first;
            out.insert(out.end(), it->second.begin(), it->second.end());
        }
    }

    std::vector<std::int32_t> encode_piece(std::string_view piece) const {
        if (ignore_merges_)
            if (const auto it = id_of_bytes_.find(std::string(piece)); it != id_of_bytes_.end()) return {it->second};
        std::vector<std::int32_t> ids;
        ids.reserve(piece.size());
        bool last_unk = false;
        for (const char c : piece) {
            const std::int32_t id = byte_id_[static_cast<unsigned char>(c)];
            if (id >= 0) {
                ids.push_back(id);
                last_unk = false;
            } else if (unk_ >= 0 && !last_unk) {  // the reference: an unknown symbol becomes unk, or vanishes
                ids.push_back(unk_);
                last_unk = fuse_unk_;
            }
        }
        bpe_merge(ids, merges_);
        return ids;
    }

    std::string source_;
    std::vector<std::string> bytes_of_;     // id -> raw bytes
    std::vector<std::string> token_of_;     // id -> the token as spelled in the file
    std::vector<char> has_id_, is_special_;
    std::unordered_map<std::string, std::int32_t> id_of_token_;  // as spelled in the file
    std::unordered_map<std::string, std::int32_t> id_of_bytes_;  // raw bytes -> id (ignore_merges)
    std::int32_t byte_id_[256]{};
    std::int32_t unk_ = -1;
    bool fuse_unk_ = false;
    bool ignore_merges_ = false;
    bool byte_level_ = false;
    MergeTable merges_;
    std::vector<AddedToken> added_;
    char added_first_[256]{};
    std::vector<Stage> stages_;
    std::vector<std::int32_t> prefix_, suffix_;
    // Encodings of pieces seen so far, behind a pointer so the tokenizer stays movable.
    struct StringHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };
    struct PieceCache {
        std::mutex mutex;
        std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> ids;
    };
    std::unique_ptr<PieceCache> cache_ = std::make_unique<PieceCache>();
};

}  // namespace cpx::text

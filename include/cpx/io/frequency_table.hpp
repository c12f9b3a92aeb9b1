#pragma once
// Token frequency tables: one occurrence count per token id, the input of the
// frequency-aware routers. Two file formats, told apart by the .npy magic:
//
// Text, UTF-8/ASCII, one record per line:
//   - blank lines and lines whose first non-blank character is '#' are skipped;
//   - dense form: one count per line, the k-th count belongs to token id k;
//   - sparse form: `id<TAB>count` (any run of spaces or tabs separates the two
//     fields); ids not listed have count 0; an id may appear only once;
//   - the first record fixes the form for the whole file;
//   - a count is a non-negative decimal integer (exact up to 2^64 - 1), or a
//     decimal/scientific number that is finite, non-negative and whole
//     ("12", "12.0", "1.2e1"); fractions, negatives, nan and inf are errors.
// .npy: a 1-D little-endian array of int32, int64, float32 or float64. Integer
//   entries must be >= 0; float entries must be finite, >= 0 and whole (float
//   tables from PyTorch hold integer counts), converted exactly to uint64.
//
// Vocabulary: when given, a dense table must have exactly that many counts
// and sparse ids must lie in [0, vocab); when not given, it is the number of
// dense counts, or the largest sparse id + 1, which must then be at most
// max_unsized_vocab (a few bytes of text cannot demand gigabytes). Every error is a FormatError
// naming the file and the line (text) or entry (.npy). The counts must sum to
// less than 2^64 (routers accumulate them exactly).

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/io/mapped_file.hpp"
#include "cpx/io/npy.hpp"
#include "cpx/router/frequency_order.hpp"

namespace cpx::io {

namespace detail {

/// 2^64 as a double: whole values below it convert to uint64 exactly.
inline constexpr double two_to_64 = 18446744073709551616.0;

/// A float count as uint64, or an error message part explaining why it is not a count.
inline std::optional<std::uint64_t> whole_count(double v, std::string& why) {
    if (!std::isfinite(v)) { why = "is not finite"; return std::nullopt; }
    if (v < 0) { why = "is negative"; return std::nullopt; }
    if (v != std::floor(v)) { why = "is not a whole number"; return std::nullopt; }
    if (v >= two_to_64) { why = "exceeds 2^64 - 1"; return std::nullopt; }
    return static_cast<std::uint64_t>(v);
}

inline std::uint64_t parse_count_field(std::string_view field, std::string_view where) {
    if (std::all_of(field.begin(), field.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
        if (ec == std::errc::result_out_of_range) raise<FormatError>(where, ": count ", field, " exceeds 2^64 - 1");
        if (ec != std::errc() || end != field.data() + field.size()) raise<FormatError>(where, ": bad count '", field, "'");
        return v;
    }
    double d = 0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), d);
    if (ec == std::errc::result_out_of_range) raise<FormatError>(where, ": count ", field, " is out of range");
    if (ec != std::errc() || end != field.data() + field.size())
        raise<FormatError>(where, ": '", field, "' is not a count (expected a non-negative whole number)");
    std::string why;
    const auto v = whole_count(d, why);
    if (!v) raise<FormatError>(where, ": count ", field, " ", why);
    return *v;
}

inline std::uint64_t parse_id_field(std::string_view field, std::string_view where) {
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
    if (field.empty() || ec != std::errc() || end != field.data() + field.size())
        raise<FormatError>(where, ": token id '", field, "' is not a non-negative integer");
    return v;
}

inline void check_sum(const std::vector<std::uint64_t>& counts, std::string_view name) {
    std::uint64_t total = 0;
    for (std::size_t t = 0; t < counts.size(); ++t) {
        if (counts[t] > std::numeric_limits<std::uint64_t>::max() - total) raise<FormatError>(name, ": the counts sum past 2^64 - 1 at token id ", t);
        total += counts[t];
    }
}

}  // namespace detail

/// The largest vocabulary a sparse table may imply when no vocabulary size is
/// given (2^22 ids, 32 MiB of counts; tokenizers' vocabularies stay below 2^18).
inline constexpr std::uint64_t max_unsized_vocab = std::uint64_t{1} << 22;

/// Parses a text frequency table (format above); `name` prefixes error messages.
inline std::vector<std::uint64_t> parse_frequency_text(std::string_view text, std::string_view name,
                                                       std::optional<std::size_t> vocab = std::nullopt) {
    if (vocab && *vocab == 0) raise<FormatError>(name, ": the vocabulary size must be at least 1");
    struct Sparse { std::uint64_t id; std::uint64_t count; std::size_t line; };
    std::vector<std::uint64_t> dense;
    std::vector<Sparse> sparse;
    std::size_t form = 0, form_line = 0, line_no = 0, last_data_line = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t eol = text.find('\n', pos);
        if (eol == std::string_view::npos) eol = text.size();
        std::string_view line = text.substr(pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        const std::string where = std::string(name) + ":" + std::to_string(line_no);
        const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
        while (!line.empty() && blank(line.front())) line.remove_prefix(1);
        while (!line.empty() && blank(line.back())) line.remove_suffix(1);
        if (line.empty() || line.front() == '#') continue;

        std::vector<std::string_view> fields;
        for (std::size_t i = 0; i < line.size();) {
            std::size_t j = i;
            while (j < line.size() && !blank(line[j])) ++j;
            fields.push_back(line.substr(i, j - i));
            while (j < line.size() && blank(line[j])) ++j;
            i = j;
        }
        if (fields.size() > 2)
            raise<FormatError>(where, ": expected `count` or `id<TAB>count`, found ", fields.size(), " fields");
        if (form == 0) { form = fields.size(); form_line = line_no; }
        if (fields.size() != form)
            raise<FormatError>(where, ": found ", fields.size() == 1 ? "a bare count" : "an `id count` record",
                               " but line ", form_line, " set the ", form == 1 ? "dense `count`" : "sparse `id count`",
                               " form for the file");
        last_data_line = line_no;
        if (form == 1) {
            if (vocab && dense.size() == *vocab)
                raise<FormatError>(where, ": more counts than the vocabulary size ", *vocab);
            dense.push_back(detail::parse_count_field(fields[0], where));
        } else {
            const std::uint64_t id = detail::parse_id_field(fields[0], where);
            if (vocab && id >= *vocab)
                raise<FormatError>(where, ": token id ", id, " is outside the vocabulary [0, ", *vocab, ")");
            if (id >= router::max_routing_vocab)
                raise<FormatError>(where, ": token id ", id, " exceeds the int32 routing-table limit");
            // Without a vocabulary the table spans ids 0..largest, so one short line could
            // otherwise demand gigabytes of zeros.
            if (!vocab && id >= max_unsized_vocab)
                raise<FormatError>(where, ": token id ", id, " in a table read without a vocabulary size; such tables "
                                   "may name ids below ", max_unsized_vocab, " (give the vocabulary size for larger ones)");
            sparse.push_back({id, detail::parse_count_field(fields[1], where), line_no});
        }
    }
    if (form == 0)
        raise<FormatError>(name, ": no counts (the file is empty or holds only blank and comment lines)");

    std::vector<std::uint64_t> counts;
    if (form == 1) {
        if (vocab && dense.size() != *vocab)
            raise<FormatError>(name, ":", last_data_line, ": the table ends after ", dense.size(),
                               " counts but the vocabulary has ", *vocab, " token ids");
        counts = std::move(dense);
    } else {
        std::stable_sort(sparse.begin(), sparse.end(), [](const Sparse& a, const Sparse& b) { return a.id < b.id; });
        for (std::size_t i = 1; i < sparse.size(); ++i)
            if (sparse[i].id == sparse[i - 1].id)
                raise<FormatError>(name, ":", std::max(sparse[i].line, sparse[i - 1].line), ": token id ", sparse[i].id,
                                   " appears again (first on line ", std::min(sparse[i].line, sparse[i - 1].line), ")");
        counts.assign(vocab ? *vocab : static_cast<std::size_t>(sparse.back().id) + 1, 0);
        for (const Sparse& s : sparse) counts[s.id] = s.count;
    }
    detail::check_sum(counts, name);
    return counts;
}

namespace detail {
/// Element t of a .npy array's little-endian bytes, at any alignment.
template <class T>
struct NpyEntries {
    const unsigned char* bytes;
    T operator[](std::size_t t) const {
        T v;
        std::memcpy(&v, bytes + t * sizeof(T), sizeof(T));
        return v;
    }
};
}  // namespace detail

/// Counts from a 1-D .npy array (int32/int64/float32/float64; rules above).
inline std::vector<std::uint64_t> frequency_counts_from_npy(const NpyView& array, std::string_view name,
                                                            std::optional<std::size_t> vocab = std::nullopt) {
    if (vocab && *vocab == 0) raise<FormatError>(name, ": the vocabulary size must be at least 1");
    if (array.shape.size() != 1)
        raise<FormatError>(name, ": a frequency table must be a 1-D array, this one has ", array.shape.size(),
                           " dimensions");
    const std::size_t n = array.elements();
    if (n == 0) raise<FormatError>(name, ": no counts (the array is empty)");
    if (vocab && n != *vocab)
        raise<FormatError>(name, ": the table has ", n, " entries but the vocabulary has ", *vocab, " token ids");
    if (n > router::max_routing_vocab)
        raise<FormatError>(name, ": ", n, " entries exceed the int32 routing-table limit");
    std::vector<std::uint64_t> counts(n);
    const auto integers = [&](const auto& values) {
        for (std::size_t t = 0; t < n; ++t) {
            if (values[t] < 0) raise<FormatError>(name, ": entry ", t, ": count ", values[t], " is negative");
            counts[t] = static_cast<std::uint64_t>(values[t]);
        }
    };
    const auto floats = [&](const auto& values) {
        std::string why;
        for (std::size_t t = 0; t < n; ++t) {
            const auto v = detail::whole_count(static_cast<double>(values[t]), why);
            if (!v) raise<FormatError>(name, ": entry ", t, ": count ", values[t], " ", why);
            counts[t] = *v;
        }
    };
    // The entries are read where they lie (a mapped file's pages), not copied out first.
    const unsigned char* const at = array.bytes.data();
    switch (array.type) {
        case NpyType::i32: integers(detail::NpyEntries<std::int32_t>{at}); break;
        case NpyType::i64: integers(detail::NpyEntries<std::int64_t>{at}); break;
        case NpyType::f32: floats(detail::NpyEntries<float>{at}); break;
        case NpyType::f64: floats(detail::NpyEntries<double>{at}); break;
    }
    detail::check_sum(counts, name);
    return counts;
}

inline std::vector<std::uint64_t> frequency_counts_from_npy(const NpyArray& array, std::string_view name,
                                                            std::optional<std::size_t> vocab = std::nullopt) {
    return frequency_counts_from_npy(array.view(), name, vocab);
}

namespace detail {
inline std::vector<std::uint64_t> frequency_table_of(std::span<const unsigned char> bytes, const std::string& name,
                                                     std::optional<std::size_t> vocab) {
    if (bytes.size() >= npy_magic.size() && std::memcmp(bytes.data(), npy_magic.data(), npy_magic.size()) == 0)
        return frequency_counts_from_npy(parse_npy_view(bytes, name), name, vocab);
    return parse_frequency_text({reinterpret_cast<const char*>(bytes.data()), bytes.size()}, name, vocab);
}
}  // namespace detail

/// Reads a frequency table file: .npy when it starts with the .npy magic, text otherwise. A
/// regular file is mapped, not copied, so a table's size is checked before its entries are read;
/// a pipe (a table given as `<(command)`) is read to its end first.
inline std::vector<std::uint64_t> read_frequency_table(const std::filesystem::path& path,
                                                       std::optional<std::size_t> vocab = std::nullopt) {
    const std::string name = path.string();
    if (const auto piped = detail::read_if_pipe(path)) return detail::frequency_table_of(*piped, name, vocab);
    const MappedFile file(path);
    return detail::frequency_table_of({reinterpret_cast<const unsigned char*>(file.bytes().data()), file.size()},
                                      name, vocab);
}

}  // namespace cpx::io

#pragma once
// NumPy .npy files: reader and writer for the dtypes the project exchanges
// (float32/float64/int32/int64, little-endian, C order, any rank), e.g.
// frequency tables [V] and logits [T, V] dumped for comparison with Python.
//
// Format (numpy.lib.format): magic "\x93NUMPY", major and minor version,
// header length (uint16 in 1.0, uint32 in 2.0 and 3.0), an ASCII/UTF-8
// Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}
// padded with spaces and a newline, then the raw data. Every malformed,
// truncated or unsupported file is a FormatError naming the file.
//
// parse_npy_view and MappedNpy read an array where it lies (a buffer, a mapped
// file); NpyArray owns a copy. Sizes are checked against the header before
// any data is touched, so a bad header fails fast even on a huge file.

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/io/mapped_file.hpp"

namespace cpx::io {

static_assert(std::endian::native == std::endian::little, "the .npy reader and writer assume a little-endian host");

enum class NpyType { f32, f64, i32, i64 };

constexpr std::string_view npy_descr(NpyType t) {
    switch (t) {
        case NpyType::f32: return "<f4";
        case NpyType::f64: return "<f8";
        case NpyType::i32: return "<i4";
        case NpyType::i64: return "<i8";
    }
    return "?";
}

constexpr std::size_t npy_itemsize(NpyType t) {
    return t == NpyType::f32 || t == NpyType::i32 ? 4 : 8;
}

template <class T>
constexpr NpyType npy_type_of() {
    if constexpr (std::is_same_v<T, float>) return NpyType::f32;
    else if constexpr (std::is_same_v<T, double>) return NpyType::f64;
    else if constexpr (std::is_same_v<T, std::int32_t>) return NpyType::i32;
    else if constexpr (std::is_same_v<T, std::int64_t>) return NpyType::i64;
    else static_assert(sizeof(T) == 0, "npy: supported element types are float, double, int32_t and int64_t");
}

/// An .npy array seen in place: element type, shape and the raw little-endian C-order bytes, which
/// belong to whoever holds the file (an NpyArray, a MappedNpy, the caller's buffer).
struct NpyView {
    NpyType type = NpyType::f32;
    std::vector<std::int64_t> shape;
    std::span<const unsigned char> bytes;

    std::size_t elements() const { return bytes.size() / npy_itemsize(type); }

    /// The elements as T; T must be the stored type (no silent conversion).
    template <class T>
    std::vector<T> values(std::string_view name = "npy array") const {
        if (npy_type_of<T>() != type)
            raise<FormatError>(name, ": holds dtype '", npy_descr(type), "', not the requested '",
                               npy_descr(npy_type_of<T>()), "'");
        std::vector<T> out(elements());
        if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
        return out;
    }
};

/// A whole .npy array in memory, owning its bytes.
struct NpyArray {
    NpyType type = NpyType::f32;
    std::vector<std::int64_t> shape;
    std::vector<unsigned char> bytes;

    NpyArray() = default;
    explicit NpyArray(const NpyView& v) : type(v.type), shape(v.shape), bytes(v.bytes.begin(), v.bytes.end()) {}

    NpyView view() const { return {type, shape, bytes}; }
    std::size_t elements() const { return bytes.size() / npy_itemsize(type); }

    /// The elements as T; T must be the stored type (no silent conversion).
    template <class T>
    std::vector<T> values(std::string_view name = "npy array") const {
        return view().values<T>(name);
    }
};

namespace detail {

/// Cursor over the header dict with just enough Python-literal parsing for numpy's headers.
class NpyHeaderParser {
public:
    NpyHeaderParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

    void skip_space() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n')) ++pos_;
    }
    bool accept(char c) {
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == c) { ++pos_; return true; }
        return false;
    }
    void expect(char c) {
        if (!accept(c)) fail("expected '", std::string(1, c), "'");
    }
    std::string string_literal() {
        skip_space();
        if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) fail("expected a quoted string");
        const char quote = text_[pos_++];
        const std::size_t end = text_.find(quote, pos_);
        if (end == std::string_view::npos) fail("unterminated string");
        std::string s(text_.substr(pos_, end - pos_));
        pos_ = end + 1;
        return s;
    }
    bool boolean() {
        skip_space();
        for (const auto& [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}})
            if (text_.substr(pos_, word.size()) == word) { pos_ += word.size(); return value; }
        fail("expected True or False");
    }
    std::vector<std::int64_t> shape_tuple() {
        expect('(');
        std::vector<std::int64_t> dims;
        while (!accept(')')) {
            skip_space();
            std::int64_t v = 0;
            std::size_t digits = 0;
            while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
                if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) fail("dimension too large");
                v = v * 10 + (text_[pos_++] - '0');
                ++digits;
            }
            if (digits == 0) fail("expected a non-negative dimension in the shape");
            dims.push_back(v);
            if (!accept(',')) { expect(')'); break; }
        }
        return dims;
    }
    template <class... Parts>
    [[noreturn]] void fail(Parts&&... parts) const {
        raise<FormatError>(name_, ": bad .npy header at character ", pos_, ": ", std::forward<Parts>(parts)...,
                           " (header: ", text_, ")");
    }

private:
    std::string_view text_, name_;
    std::size_t pos_ = 0;
};

inline constexpr std::string_view npy_magic{"\x93NUMPY", 6};

}  // namespace detail

/// Parses a complete .npy file held in memory, leaving the data where it is: the view's bytes
/// point into `file`. `name` is used in error messages.
inline NpyView parse_npy_view(std::span<const unsigned char> file, std::string_view name) {
    if (file.size() < 10 || std::memcmp(file.data(), detail::npy_magic.data(), 6) != 0)
        raise<FormatError>(name, ": not a .npy file (missing the \\x93NUMPY magic)");
    const unsigned major = file[6];
    std::size_t header_len = 0, header_start = 0;
    if (major == 1) {
        header_len = file[8] | (std::size_t{file[9]} << 8);
        header_start = 10;
    } else if (major == 2 || major == 3) {
        if (file.size() < 12) raise<FormatError>(name, ": truncated .npy preamble");
        for (int i = 0; i < 4; ++i) header_len |= std::size_t{file[8 + i]} << (8 * i);
        header_start = 12;
    } else {
        raise<FormatError>(name, ": unsupported .npy format version ", major, ".", unsigned{file[7]});
    }
    if (file.size() - header_start < header_len)
        raise<FormatError>(name, ": truncated .npy header (", header_len, " bytes announced, ",
                           file.size() - header_start, " present)");
    const std::string_view header(reinterpret_cast<const char*>(file.data() + header_start), header_len);

    detail::NpyHeaderParser p(header, name);
    std::string descr;
    bool fortran = false, have_descr = false, have_order = false, have_shape = false;
    NpyView array;
    p.expect('{');
    while (!p.accept('}')) {
        const std::string key = p.string_literal();
        p.expect(':');
        if (key == "descr") { descr = p.string_literal(); have_descr = true; }
        else if (key == "fortran_order") { fortran = p.boolean(); have_order = true; }
        else if (key == "shape") { array.shape = p.shape_tuple(); have_shape = true; }
        else p.fail("unknown key '", key, "'");
        if (!p.accept(',')) { p.expect('}'); break; }
    }
    if (!have_descr || !have_order || !have_shape)
        raise<FormatError>(name, ": .npy header lacks one of 'descr', 'fortran_order', 'shape': ", header);

    if (descr == "<f4") array.type = NpyType::f32;
    else if (descr == "<f8") array.type = NpyType::f64;
    else if (descr == "<i4") array.type = NpyType::i32;
    else if (descr == "<i8") array.type = NpyType::i64;
    else if (!descr.empty() && descr[0] == '>')
        raise<FormatError>(name, ": big-endian dtype '", descr, "' is not supported (save with '<' byte order)");
    else
        raise<FormatError>(name, ": unsupported dtype '", descr, "' (supported: <f4, <f8, <i4, <i8)");
    if (fortran && array.shape.size() > 1)
        raise<FormatError>(name, ": Fortran-order arrays are not supported (save a C-contiguous array)");

    std::size_t elements = 1;
    for (const std::int64_t d : array.shape) {
        const auto ud = static_cast<std::size_t>(d);
        if (ud != 0 && elements > std::numeric_limits<std::size_t>::max() / ud / npy_itemsize(array.type))
            raise<FormatError>(name, ": shape too large");
        elements *= ud;
    }
    const std::size_t data_start = header_start + header_len, want = elements * npy_itemsize(array.type);
    const std::size_t have = file.size() - data_start;
    if (have < want)
        raise<FormatError>(name, ": truncated data: the shape needs ", want, " bytes, the file has ", have);
    if (have > want)
        raise<FormatError>(name, ": ", have - want, " unexpected bytes after the ", want, " bytes of data");
    array.bytes = file.subspan(data_start);
    return array;
}

/// Parses a complete .npy file held in memory into an array that owns a copy of its data.
inline NpyArray parse_npy(std::span<const unsigned char> file, std::string_view name) {
    return NpyArray(parse_npy_view(file, name));
}

/// A .npy file mapped read-only (MappedFile): its header is checked on opening, its data is read in
/// place, a page when first touched, for as long as the object lives (moves keep the bytes where
/// they are). For arrays too large to copy, e.g. logits [T, V] of long runs.
class MappedNpy {
public:
    explicit MappedNpy(const std::filesystem::path& path)
        : file_(path), view_(parse_npy_view(bytes_of(file_), path.string())) {}

    const NpyView& view() const noexcept { return view_; }
    const std::filesystem::path& path() const noexcept { return file_.path(); }

private:
    MappedFile file_;
    NpyView view_;

    static std::span<const unsigned char> bytes_of(const MappedFile& f) {
        return {reinterpret_cast<const unsigned char*>(f.bytes().data()), f.size()};
    }
};

namespace detail {
/// The whole content of `path` when it is a pipe (a file given as `<(command)`), read to its
/// end; nothing when it is not (regular files are mapped instead).
inline std::optional<std::vector<unsigned char>> read_if_pipe(const std::filesystem::path& path) {
    std::error_code ec;
    if (!std::filesystem::is_fifo(std::filesystem::status(path, ec))) return std::nullopt;
    std::ifstream in(path, std::ios::binary);
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.is_open() || in.bad()) raise<Error>("cannot read the pipe '", path.string(), "'");
    return bytes;
}
}  // namespace detail

/// Reads a whole .npy file into memory (a regular file through MappedNpy, a pipe to its end).
/// Errors name the file (a missing or unreadable one as MappedFile says it).
inline NpyArray read_npy(const std::filesystem::path& path) {
    if (const auto piped = detail::read_if_pipe(path)) return parse_npy(*piped, path.string());
    return NpyArray(MappedNpy(path).view());
}

/// The header of a version 1.0 .npy file of T with `shape` (C order), byte for byte as numpy
/// writes it: padded so that the data following it starts at a multiple of 64 bytes.
template <class T>
std::vector<unsigned char> encode_npy_header(std::span<const std::int64_t> shape) {
    std::string dims;
    for (const std::int64_t d : shape) {
        if (d < 0) raise<ShapeError>("npy: negative dimension ", d);
        dims += std::to_string(d) + ", ";
    }
    if (shape.size() > 1) dims.erase(dims.size() - 2);  // (a, b); a 1-tuple keeps its comma: (a,)
    else if (shape.size() == 1) dims.pop_back();
    std::string header = "{'descr': '" + std::string(npy_descr(npy_type_of<T>())) +
                         "', 'fortran_order': False, 'shape': (" + dims + "), }";
    // numpy pads so the data starts at a multiple of 64 bytes; the header ends with '\n'.
    const std::size_t unpadded = 10 + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header.push_back('\n');
    if (header.size() > 0xffff) raise<ShapeError>("npy: header too long for format 1.0");
    std::vector<unsigned char> out(detail::npy_magic.begin(), detail::npy_magic.end());
    out.push_back(1);
    out.push_back(0);
    out.push_back(static_cast<unsigned char>(header.size() & 0xff));
    out.push_back(static_cast<unsigned char>(header.size() >> 8));
    out.insert(out.end(), header.begin(), header.end());
    return out;
}

/// The bytes of a version 1.0 .npy file holding `data` with `shape` (C order).
template <class T>
std::vector<unsigned char> encode_npy(std::span<const T> data, std::span<const std::int64_t> shape) {
    std::vector<unsigned char> out = encode_npy_header<T>(shape);  // rejects a negative dimension
    std::size_t elements = 1;
    for (const std::int64_t d : shape) elements *= static_cast<std::size_t>(d);
    if (elements != data.size())
        raise<ShapeError>("npy: the shape holds ", elements, " elements but ", data.size(), " were given");
    const auto* raw = reinterpret_cast<const unsigned char*>(data.data());
    out.insert(out.end(), raw, raw + data.size_bytes());
    return out;
}

/// Writes `data` with `shape` (row-major) to `path`, e.g. float logits with shape {T, V}.
template <class T>
void write_npy(const std::filesystem::path& path, std::span<const T> data, std::span<const std::int64_t> shape) {
    const std::vector<unsigned char> bytes = encode_npy(data, shape);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) raise<Error>(path.string(), ": cannot open for writing");
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) raise<Error>(path.string(), ": write failed");
}

/// Shape given inline: write_npy<float>("logits.npy", logits, {tokens, vocab}).
template <class T>
void write_npy(const std::filesystem::path& path, std::span<const T> data, std::initializer_list<std::int64_t> shape) {
    write_npy(path, data, std::span<const std::int64_t>(shape.begin(), shape.size()));
}

/// One-dimensional convenience overload.
template <class T>
void write_npy(const std::filesystem::path& path, std::span<const T> data) {
    const std::int64_t n = static_cast<std::int64_t>(data.size());
    write_npy(path, data, std::span<const std::int64_t>(&n, 1));
}

}  // namespace cpx::io

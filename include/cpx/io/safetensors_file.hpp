#pragma once
// One .safetensors file, memory-mapped and fully validated when opened.
//
// Layout: an 8-byte little-endian u64 N, N bytes of JSON header, then the data
// region. The header maps each tensor name to {"dtype", "shape",
// "data_offsets": [begin, end]} (offsets relative to the data region) and may
// hold "__metadata__": {string: string}. Opening checks everything a reader
// could trip over: header length, JSON syntax, dtype names, negative or
// overflowing shapes, byte sizes against shapes, offsets inside the data
// region, and that the tensors tile the data region exactly (no overlap, no
// gap, no trailing bytes), as the format requires. After that, every
// TensorInfo::bytes is an in-bounds span of exactly numel * element size bytes.

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/json.hpp"
#include "cpx/io/mapped_file.hpp"

namespace cpx::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; the readers copy it as host-order bytes");

/// The DType of a tensor whose safetensors dtype is valid but not one the
/// library computes with (F64, U8, BOOL, F8_E4M3, ...). It equals no DType
/// enumerator, so comparisons against DType::f32 and friends are false.
inline constexpr DType unknown_dtype = static_cast<DType>(0xff);

/// One dtype name of the safetensors format and its width in bits.
struct SafetensorsDType {
    std::string_view name;
    DType dtype;  ///< unknown_dtype when the library does not compute with it
    unsigned bits;
};

/// Every dtype the safetensors format defines. Sub-byte types (F4, F6_*) pack
/// elements, so their byte size is numel * bits / 8 and must be whole.
inline constexpr std::array<SafetensorsDType, 20> safetensors_dtypes{{
    {"F32", DType::f32, 32},         {"BF16", DType::bf16, 16},        {"F16", DType::f16, 16},
    {"I64", DType::i64, 64},         {"I32", DType::i32, 32},          {"F64", unknown_dtype, 64},
    {"C64", unknown_dtype, 64},      {"U64", unknown_dtype, 64},       {"U32", unknown_dtype, 32},
    {"I16", unknown_dtype, 16},      {"U16", unknown_dtype, 16},       {"I8", unknown_dtype, 8},
    {"U8", unknown_dtype, 8},        {"BOOL", unknown_dtype, 8},       {"F8_E4M3", unknown_dtype, 8},
    {"F8_E5M2", unknown_dtype, 8},   {"F8_E8M0", unknown_dtype, 8},    {"F6_E2M3", unknown_dtype, 6},
    {"F6_E3M2", unknown_dtype, 6},   {"F4", unknown_dtype, 4},
}};

/// The table entry for a safetensors dtype name, or nullptr for a name the format does not define.
inline const SafetensorsDType* find_safetensors_dtype(std::string_view name) {
    for (const auto& d : safetensors_dtypes)
        if (d.name == name) return &d;
    return nullptr;
}

/// "[a, b, c]" ("[]" for a scalar): the shape notation of every message.
inline std::string shape_string(std::span<const std::int64_t> shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

/// A tensor of an opened file: name, dtype, shape and its bytes in the mapping.
struct TensorInfo {
    std::string name;
    DType dtype = unknown_dtype;  ///< unknown_dtype for valid dtypes the library does not compute with
    std::string dtype_name;       ///< as written in the file: "F32", "BF16", "F64", ...
    std::vector<std::int64_t> shape;
    std::span<const std::byte> bytes;  ///< exactly numel * element size bytes, inside the mapping

    /// Product of the dims (1 for a scalar); validated not to overflow at open.
    std::int64_t numel() const {
        std::int64_t n = 1;
        for (std::int64_t d : shape) n *= d;
        return n;
    }
    bool known_dtype() const { return dtype != unknown_dtype; }
    std::string shape_str() const { return shape_string(shape); }
};

class SafetensorsFile {
public:
    /// Headers larger than this are rejected before parsing (the reference
    /// implementation's limit); real headers are kilobytes.
    static constexpr std::uint64_t max_header_bytes = 100'000'000;

    /// Maps and validates `path`. Throws cpx::Error if the file cannot be
    /// opened and FormatError, naming the file and the tensor, if it is malformed.
    static SafetensorsFile open(const std::filesystem::path& path) {
        SafetensorsFile f;
        f.file_ = MappedFile(path);
        f.parse();
        return f;
    }

    const std::filesystem::path& path() const noexcept { return file_.path(); }
    /// Tensor names in header order.
    const std::vector<std::string>& names() const noexcept { return names_; }
    std::span<const TensorInfo> tensors() const noexcept { return tensors_; }
    std::size_t size() const noexcept { return tensors_.size(); }
    /// The tensor called `name`, or nullptr if the file has none.
    const TensorInfo* find(std::string_view name) const {
        const auto it = index_.find(name);
        return it == index_.end() ? nullptr : &tensors_[it->second];
    }
    /// "__metadata__" entries in header order (empty if the file has none).
    const std::vector<std::pair<std::string, std::string>>& metadata() const noexcept { return metadata_; }
    const std::string* metadata_value(std::string_view key) const {
        for (const auto& kv : metadata_)
            if (kv.first == key) return &kv.second;
        return nullptr;
    }
    /// The whole file as mapped (every tensor's bytes lie inside, after the header).
    std::span<const std::byte> bytes() const noexcept { return file_.bytes(); }
    /// Byte offset of the data region in the file (8 + header length).
    std::uint64_t data_start() const noexcept { return data_start_; }

private:
    MappedFile file_;
    std::vector<TensorInfo> tensors_;
    std::vector<std::string> names_;
    std::map<std::string, std::size_t, std::less<>> index_;
    std::vector<std::pair<std::string, std::string>> metadata_;
    std::uint64_t data_start_ = 0;

    /// Where a tensor's bytes lie in the data region, for the tiling check.
    struct Extent {
        std::int64_t begin, end;
        std::size_t tensor;
    };

    template <class... Parts>
    [[noreturn]] void fail(Parts&&... parts) const {
        raise<FormatError>("safetensors file '", path().string(), "': ", std::forward<Parts>(parts)...);
    }

    std::int64_t offset_value(const std::string& name, const Json& v) const {
        if (!v.is_integer() || v.as_int64() < 0)
            fail("tensor '", name, "': data_offsets must hold non-negative integers, found ", v.dump());
        return v.as_int64();
    }

    void parse() {
        const std::span<const std::byte> all = file_.bytes();
        if (all.size() < 8)
            fail("truncated: the file has ", all.size(), " bytes, fewer than the 8-byte header length");
        std::uint64_t header_len = 0;
        std::memcpy(&header_len, all.data(), 8);
        const std::uint64_t available = all.size() - 8;
        if (header_len > available)
            fail("header length ", header_len, " exceeds the ", available,
                 " bytes that follow it (file truncated, or not a safetensors file)");
        if (header_len > max_header_bytes)
            fail("header length ", header_len, " exceeds the limit of ", max_header_bytes, " bytes");
        data_start_ = 8 + header_len;
        const std::string_view header_text(reinterpret_cast<const char*>(all.data() + 8),
                                           static_cast<std::size_t>(header_len));
        Json header;
        try {
            header = parse_json(header_text, path().string() + " (header)");
        } catch (const FormatError& e) {
            fail("header is not valid JSON: ", e.what());
        }
        if (!header.is_object()) fail("header must be a JSON object, found ", header.kind_name());

        const std::span<const std::byte> data = all.subspan(static_cast<std::size_t>(data_start_));
        std::vector<Extent> extents;
        for (const auto& [name, entry] : header.as_object()) {
            if (name == "__metadata__") {
                parse_metadata(entry);
                continue;
            }
            extents.push_back(parse_entry(name, entry, data.size()));
            index_.emplace(name, extents.back().tensor);
            names_.push_back(name);
        }
        check_tiling(extents, data.size());
    }

    void parse_metadata(const Json& entry) {
        if (!entry.is_object()) fail("__metadata__ must be an object of strings, found ", entry.kind_name());
        for (const auto& [key, value] : entry.as_object()) {
            if (!value.is_string())
                fail("__metadata__ value of '", key, "' must be a string, found ", value.kind_name());
            metadata_.emplace_back(key, value.as_string());
        }
    }

    // Validates one header entry, appends its TensorInfo and returns where its bytes lie.
    Extent parse_entry(const std::string& name, const Json& entry, std::size_t data_size) {
        if (!entry.is_object()) fail("tensor '", name, "': entry must be an object, found ", entry.kind_name());
        for (const auto& member : entry.as_object())
            if (member.first != "dtype" && member.first != "shape" && member.first != "data_offsets")
                fail("tensor '", name, "': unexpected key '", member.first, "'");
        const Json* dtype = entry.find("dtype");
        const Json* shape = entry.find("shape");
        const Json* offsets = entry.find("data_offsets");
        if (!dtype || !shape || !offsets) fail("tensor '", name, "': needs dtype, shape and data_offsets");

        TensorInfo info;
        info.name = name;
        if (!dtype->is_string()) fail("tensor '", name, "': dtype must be a string, found ", dtype->kind_name());
        info.dtype_name = dtype->as_string();
        const SafetensorsDType* dt = find_safetensors_dtype(info.dtype_name);
        if (!dt) fail("tensor '", name, "': unknown dtype '", info.dtype_name, "'");
        info.dtype = dt->dtype;

        if (!shape->is_array()) fail("tensor '", name, "': shape must be an array, found ", shape->kind_name());
        std::int64_t numel = 1;
        bool overflow = false;
        for (const Json& d : shape->as_array()) {
            if (!d.is_integer()) fail("tensor '", name, "': shape must hold integers, found ", d.dump());
            const std::int64_t v = d.as_int64();
            if (v < 0) fail("tensor '", name, "': negative dimension ", v, " in shape ", shape->dump());
            info.shape.push_back(v);
            if (!overflow && __builtin_mul_overflow(numel, v, &numel)) overflow = true;
        }
        // Bytes = numel * bits / 8, computed without overflow.
        std::int64_t bits = 0;
        if (overflow || __builtin_mul_overflow(numel, static_cast<std::int64_t>(dt->bits), &bits))
            fail("tensor '", name, "': element count of shape ", info.shape_str(), " overflows 64 bits");
        if (bits % 8 != 0)
            fail("tensor '", name, "': ", numel, " elements of ", dt->name, " do not fill whole bytes");
        const std::int64_t nbytes = bits / 8;

        if (!offsets->is_array() || offsets->size() != 2)
            fail("tensor '", name, "': data_offsets must be [begin, end], found ", offsets->dump());
        const std::int64_t begin = offset_value(name, offsets->as_array()[0]);
        const std::int64_t end = offset_value(name, offsets->as_array()[1]);
        if (end < begin) fail("tensor '", name, "': data_offsets [", begin, ", ", end, "] end before they begin");
        if (static_cast<std::uint64_t>(end) > data_size)
            fail("tensor '", name, "': data_offsets [", begin, ", ", end, "] reach past the end of the data region (",
                 data_size, " bytes): the file is truncated or its header is wrong");
        if (end - begin != nbytes)
            fail("tensor '", name, "': shape ", info.shape_str(), " of ", dt->name, " needs ", nbytes,
                 " bytes but data_offsets [", begin, ", ", end, "] span ", end - begin);
        info.bytes = file_.bytes().subspan(static_cast<std::size_t>(data_start_) + static_cast<std::size_t>(begin),
                                           static_cast<std::size_t>(nbytes));
        tensors_.push_back(std::move(info));
        return {begin, end, tensors_.size() - 1};
    }

    void check_tiling(std::vector<Extent>& extents, std::size_t data_size) const {
        std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
            return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
        });
        std::int64_t covered = 0;
        const TensorInfo* previous = nullptr;
        for (const Extent& e : extents) {
            const TensorInfo& t = tensors_[e.tensor];
            if (e.begin < covered)
                fail("tensors '", previous->name, "' and '", t.name, "' overlap: '", t.name, "' begins at byte ",
                     e.begin, " of the data region, before '", previous->name, "' ends at ", covered);
            if (e.begin > covered)
                fail("bytes [", covered, ", ", e.begin, ") of the data region belong to no tensor (before '", t.name,
                     "')");
            covered = e.end;
            previous = &t;
        }
        if (static_cast<std::uint64_t>(covered) != data_size)
            fail("the data region has ", data_size, " bytes but the tensors cover only ", covered);
    }
};

}  // namespace cpx::io

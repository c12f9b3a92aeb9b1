#pragma once
// Writes safetensors files and sharded checkpoints (for tests, exports and
// converted checkpoints).
//
// add() COPIES the tensor's bytes, so the caller's buffer may be released as
// soon as add() returns. Output is deterministic whatever the order of add():
// tensors are laid out by decreasing element width, then by name, so every
// tensor starts at an offset aligned to its element size (the header is padded
// with spaces to a multiple of 8 bytes, as the format recommends); header
// entries follow the data order and offsets are contiguous from 0.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/checkpoint.hpp"
#include "cpx/io/json.hpp"
#include "cpx/io/safetensors_file.hpp"

namespace cpx::io {

/// Creates `dir` and its parents for writing files into; every failure (a file
/// already there, no permission) is a cpx::Error naming the directory.
inline void create_output_directory(const std::filesystem::path& dir) {
    if (entry_exists(dir) && !std::filesystem::is_directory(dir))
        raise<Error>("cannot write into '", dir.string(), "': it exists and is not a directory");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) raise<Error>("cannot create the directory '", dir.string(), "': ", ec.message());
}

class SafetensorsWriter {
public:
    /// Adds a tensor of a library dtype; copies numel * dtype_size(dtype) bytes from `data`.
    void add(std::string name, DType dtype, std::vector<std::int64_t> shape, const void* data) {
        require<ShapeError>(dtype_size(dtype) != 0, "tensor '", name, "': not a library dtype");
        const std::size_t bytes = byte_size(name, shape, dtype_size(dtype) * 8);
        const auto* p = static_cast<const std::byte*>(data);
        insert(std::move(name), std::string(dtype_name(dtype)), std::move(shape),
               std::vector<std::byte>(p, p + bytes));
    }

    /// Adds a tensor whose dtype follows from T (float, bf16, fp16, int64_t, int32_t);
    /// `values` must hold exactly the shape's element count.
    template <class T>
    void add(std::string name, std::vector<std::int64_t> shape, std::span<const T> values) {
        const std::size_t bytes = byte_size(name, shape, sizeof(T) * 8);
        require<ShapeError>(values.size() * sizeof(T) == bytes, "tensor '", name, "': shape ", shape_string(shape),
                            " needs ", bytes / sizeof(T), " elements, got ", values.size());
        add(std::move(name), dtype_of<T>::value, std::move(shape), values.data());
    }
    template <class T>
    void add(std::string name, std::vector<std::int64_t> shape, const std::vector<T>& values) {
        add(std::move(name), std::move(shape), std::span<const T>(values));
    }

    /// Adds a tensor of any safetensors dtype by name (F64, U8, F8_E4M3, ...),
    /// with its raw little-endian bytes; their count must match the shape.
    void add_raw(std::string name, std::string dtype, std::vector<std::int64_t> shape,
                 std::span<const std::byte> bytes) {
        const SafetensorsDType* dt = find_safetensors_dtype(dtype);
        require<ShapeError>(dt != nullptr, "tensor '", name, "': unknown safetensors dtype '", dtype, "'");
        const std::size_t need = byte_size(name, shape, dt->bits);
        require<ShapeError>(bytes.size() == need, "tensor '", name, "': shape ", shape_string(shape), " of ", dtype,
                            " needs ", need, " bytes, got ", bytes.size());
        insert(std::move(name), std::move(dtype), std::move(shape), std::vector<std::byte>(bytes.begin(), bytes.end()));
    }

    /// Sets a "__metadata__" entry (written in key order).
    void add_metadata(std::string key, std::string value) { metadata_[std::move(key)] = std::move(value); }

    std::size_t size() const noexcept { return tensors_.size(); }
    bool contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }
    /// Bytes of tensor data (the sum over tensors).
    std::uint64_t data_bytes() const {
        std::uint64_t n = 0;
        for (const auto& [name, t] : tensors_) n += t.bytes.size();
        return n;
    }

    /// Writes every tensor to one file (through a temporary file renamed into place).
    void write(const std::filesystem::path& file) const {
        std::vector<const Entry*> all;
        for (const auto& kv : tensors_) all.push_back(&kv.second);
        write_file(file, all);
    }

    /// Writes `dir`/model-0000i-of-0000N.safetensors and model.safetensors.index.json.
    /// Tensors go to shards in name order; a shard is closed when the next tensor
    /// would take it past `max_shard_bytes` (a larger tensor gets a shard of its
    /// own). Returns the shard paths.
    std::vector<std::filesystem::path> write_sharded(const std::filesystem::path& dir,
                                                     std::uint64_t max_shard_bytes) const {
        require<Error>(max_shard_bytes > 0, "write_sharded: max_shard_bytes must be positive");
        require<Error>(!tensors_.empty(), "write_sharded: no tensors to write");
        std::vector<std::vector<const Entry*>> shards(1);
        std::uint64_t in_shard = 0;
        for (const auto& [name, t] : tensors_) {
            if (!shards.back().empty() && in_shard + t.bytes.size() > max_shard_bytes) {
                shards.emplace_back();
                in_shard = 0;
            }
            shards.back().push_back(&t);
            in_shard += t.bytes.size();
        }
        create_output_directory(dir);
        Json weight_map = Json::object();
        std::vector<std::filesystem::path> paths;
        for (std::size_t s = 0; s < shards.size(); ++s) {
            const std::string file = shard_file_name(s + 1, shards.size());
            paths.push_back(dir / file);
            write_file(paths.back(), shards[s]);
            for (const Entry* t : shards[s]) weight_map.set(t->name, file);
        }
        Json::Object sorted = weight_map.as_object();
        std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        Json index = Json::object();
        index.set("metadata", Json(Json::Object{{"total_size", Json(data_bytes())}}));
        index.set("weight_map", Json(std::move(sorted)));
        write_text(dir / checkpoint_index_file, index.dump(2) + "\n");
        return paths;
    }

    /// "model-00002-of-00005.safetensors": the Hugging Face shard naming.
    static std::string shard_file_name(std::size_t index, std::size_t count) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", index, count);
        return buf;
    }

private:
    struct Entry {
        std::string name;
        std::string dtype;
        unsigned bits = 0;
        std::vector<std::int64_t> shape;
        std::vector<std::byte> bytes;
    };
    std::map<std::string, Entry, std::less<>> tensors_;
    std::map<std::string, std::string> metadata_;

    static std::size_t byte_size(const std::string& name, const std::vector<std::int64_t>& shape, std::size_t bits) {
        std::int64_t n = 1;
        for (std::int64_t d : shape) {
            require<ShapeError>(d >= 0, "tensor '", name, "': negative dimension in shape ", shape_string(shape));
            require<ShapeError>(!__builtin_mul_overflow(n, d, &n), "tensor '", name, "': shape ",
                                shape_string(shape), " overflows");
        }
        std::int64_t total_bits = 0;
        require<ShapeError>(!__builtin_mul_overflow(n, static_cast<std::int64_t>(bits), &total_bits), "tensor '",
                            name, "': shape ", shape_string(shape), " overflows");
        require<ShapeError>(total_bits % 8 == 0, "tensor '", name, "': ", n, " elements of ", bits,
                            " bits do not fill whole bytes");
        return static_cast<std::size_t>(total_bits / 8);
    }

    void insert(std::string name, std::string dtype, std::vector<std::int64_t> shape, std::vector<std::byte> bytes) {
        require<Error>(!name.empty(), "a tensor name must not be empty");
        require<Error>(name != "__metadata__", "'__metadata__' is reserved and cannot name a tensor");
        require<Error>(!contains(name), "tensor '", name, "' was already added");
        const unsigned bits = find_safetensors_dtype(dtype)->bits;
        Entry e{name, std::move(dtype), bits, std::move(shape), std::move(bytes)};
        tensors_.emplace(std::move(name), std::move(e));
    }

    static void write_text(const std::filesystem::path& path, std::string_view text) {
        write_atomically(path, [&](std::ofstream& out) { out.write(text.data(), static_cast<std::streamsize>(text.size())); });
    }

    template <class Fill>
    static void write_atomically(const std::filesystem::path& path, Fill fill) {
        std::filesystem::path tmp = path;
        tmp += ".tmp";
        {
            std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
            if (!out) raise<Error>("cannot create '", tmp.string(), "'");
            fill(out);
            out.flush();
            if (!out) raise<Error>("writing '", tmp.string(), "' failed");
        }
        std::error_code ec;
        std::filesystem::rename(tmp, path, ec);
        if (ec) raise<Error>("cannot rename '", tmp.string(), "' to '", path.string(), "': ", ec.message());
    }

    void write_file(const std::filesystem::path& path, std::vector<const Entry*> entries) const {
        // Widest elements first keeps every tensor aligned to its element size.
        std::stable_sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) {
            return a->bits != b->bits ? a->bits > b->bits : a->name < b->name;
        });
        Json header = Json::object();
        if (!metadata_.empty()) {
            Json meta = Json::object();
            for (const auto& [k, v] : metadata_) meta.set(k, v);
            header.set("__metadata__", std::move(meta));
        }
        std::uint64_t offset = 0;
        for (const Entry* t : entries) {
            Json shape = Json::array();
            for (std::int64_t d : t->shape) shape.push_back(d);
            const std::uint64_t end = offset + t->bytes.size();
            header.set(t->name, Json(Json::Object{{"dtype", Json(t->dtype)},
                                                  {"shape", std::move(shape)},
                                                  {"data_offsets", Json(Json::Array{Json(offset), Json(end)})}}));
            offset = end;
        }
        std::string text = header.dump();
        text.append((8 - text.size() % 8) % 8, ' ');
        const std::uint64_t header_len = text.size();
        write_atomically(path, [&](std::ofstream& out) {
            out.write(reinterpret_cast<const char*>(&header_len), 8);  // little-endian host (checked)
            out.write(text.data(), static_cast<std::streamsize>(text.size()));
            for (const Entry* t : entries)
                out.write(reinterpret_cast<const char*>(t->bytes.data()), static_cast<std::streamsize>(t->bytes.size()));
        });
    }
};

}  // namespace cpx::io

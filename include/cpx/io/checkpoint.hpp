#pragma once
// A checkpoint: one or several safetensors files seen as one set of named
// tensors, with typed, bounds-checked reads for model loaders.
//
// Checkpoint::open(path) accepts
//   - a directory holding model.safetensors, or else model.safetensors.index.json
//     (the single file wins when both exist, as Hugging Face loaders do);
//   - a *.index.json shard index {"weight_map": {tensor: shard file}}: every
//     shard it names is opened, and every tensor it maps must be in its shard;
//   - a single .safetensors file.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/json.hpp"
#include "cpx/io/safetensors_file.hpp"
#include "cpx/io/tensor_read.hpp"

namespace cpx::io {

/// Names of the files a checkpoint directory holds.
inline constexpr std::string_view single_checkpoint_file = "model.safetensors";
inline constexpr std::string_view checkpoint_index_file = "model.safetensors.index.json";

/// Whether `path` exists. A path that cannot be examined (a symbolic link
/// loop, no permission) is an error naming it, not a silent "absent".
inline bool entry_exists(const std::filesystem::path& path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
        raise<Error>("cannot examine '", path.string(), "': ", ec.message());
    return std::filesystem::exists(status);
}

class Checkpoint {
public:
    // The name index points into the opened files: moves keep it valid (the
    // files' storage moves with them), a copy could not, so there is none.
    Checkpoint(const Checkpoint&) = delete;
    Checkpoint& operator=(const Checkpoint&) = delete;
    Checkpoint(Checkpoint&&) noexcept = default;
    Checkpoint& operator=(Checkpoint&&) noexcept = default;
    ~Checkpoint() = default;

    static Checkpoint open(const std::filesystem::path& path) {
        namespace fs = std::filesystem;
        Checkpoint c;
        c.path_ = path;
        std::error_code ec;
        if (fs::is_directory(path, ec)) {
            if (entry_exists(path / single_checkpoint_file)) {
                c.open_single(path / single_checkpoint_file);
            } else if (entry_exists(path / checkpoint_index_file)) {
                c.open_index(path / checkpoint_index_file);
            } else {
                raise<Error>("checkpoint directory '", path.string(), "' holds neither ", single_checkpoint_file,
                             " nor ", checkpoint_index_file);
            }
        } else if (path.extension() == ".json") {
            c.open_index(path);
        } else {
            c.open_single(path);
        }
        c.build_index();
        return c;
    }

    /// The path given to open().
    const std::filesystem::path& path() const noexcept { return path_; }
    bool sharded() const noexcept { return sharded_; }
    /// The opened files (one, or one per shard in the index's order of first use).
    std::span<const SafetensorsFile> files() const noexcept { return files_; }

    /// Every tensor name, sorted.
    const std::vector<std::string>& names() const noexcept { return names_; }
    std::size_t size() const noexcept { return names_.size(); }
    const TensorInfo* find(std::string_view name) const {
        const auto it = index_.find(name);
        return it == index_.end() ? nullptr : it->second;
    }
    bool contains(std::string_view name) const { return find(name) != nullptr; }
    /// The tensor called `name`; ShapeError if the checkpoint has none.
    const TensorInfo& get(std::string_view name) const {
        if (const TensorInfo* t = find(name)) return *t;
        raise<ShapeError>(context(), "missing tensor '", name, "'");
    }
    /// The tensor called `name`, which must have exactly `shape`; ShapeError
    /// "tensor 'x': expected shape [a, b], found [c, d]" otherwise.
    const TensorInfo& expect(std::string_view name, const std::vector<std::int64_t>& shape) const {
        const TensorInfo& t = get(name);
        if (t.shape != shape)
            raise<ShapeError>(context(), "tensor '", name, "': expected shape ", shape_string(shape), ", found ",
                              t.shape_str());
        return t;
    }

    /// Typed reads (conversions in tensor_read.hpp); `out` must hold numel elements.
    void read(std::string_view name, std::span<float> out) const { read_tensor(get(name), out, context()); }
    void read(std::string_view name, std::span<bf16> out) const { read_tensor(get(name), out, context()); }
    void read(std::string_view name, std::span<fp16> out) const { read_tensor(get(name), out, context()); }
    void read(std::string_view name, std::span<std::int64_t> out) const { read_tensor(get(name), out, context()); }
    void read(std::string_view name, std::span<std::int32_t> out) const { read_tensor(get(name), out, context()); }

    /// The whole tensor as a new vector of T.
    template <class T>
    std::vector<T> read_vector(std::string_view name) const {
        const TensorInfo& t = get(name);
        require_readable<T>(t, context());  // before allocating for a tensor that cannot be read anyway
        std::vector<T> out(static_cast<std::size_t>(t.numel()));
        read_tensor(t, std::span<T>(out), context());
        return out;
    }

    /// "checkpoint '<path>': ", the prefix of this checkpoint's messages.
    std::string context() const { return "checkpoint '" + path_.string() + "': "; }

private:
    Checkpoint() = default;
    std::filesystem::path path_;
    bool sharded_ = false;
    std::vector<SafetensorsFile> files_;
    std::vector<std::pair<std::string, std::size_t>> mapped_;  // tensor name -> index into files_
    std::map<std::string, const TensorInfo*, std::less<>> index_;
    std::vector<std::string> names_;

    void open_single(const std::filesystem::path& file) {
        files_.push_back(SafetensorsFile::open(file));
        for (const std::string& name : files_.back().names()) mapped_.emplace_back(name, 0);
    }

    void open_index(const std::filesystem::path& index_path) {
        sharded_ = true;
        const std::string where = "shard index '" + index_path.string() + "'";
        const Json index = parse_json(read_text_file(index_path), index_path.string());
        if (!index.is_object()) raise<FormatError>(where, ": must be a JSON object");
        const Json* weight_map = index.find("weight_map");
        if (!weight_map || !weight_map->is_object())
            raise<FormatError>(where, ": needs a \"weight_map\" object {tensor name: shard file}");

        std::map<std::string, std::size_t, std::less<>> shard_of_file;
        for (const auto& [name, file] : weight_map->as_object()) {
            if (!file.is_string())
                raise<FormatError>(where, ": weight_map entry '", name, "' must be a file name, found ", file.kind_name());
            const std::filesystem::path rel(file.as_string());
            bool escapes = rel.empty() || rel.is_absolute() || rel.has_root_name();
            for (const auto& part : rel) escapes = escapes || part == "..";
            if (escapes)
                raise<FormatError>(where, ": shard '", file.as_string(), "' of tensor '", name,
                                   "' must be a relative path inside the checkpoint directory");
            auto [it, fresh] = shard_of_file.emplace(file.as_string(), files_.size());
            if (fresh) {
                const std::filesystem::path shard_path = index_path.parent_path() / rel;
                std::error_code ec;
                if (!std::filesystem::exists(shard_path, ec))
                    raise<FormatError>(where, ": shard '", file.as_string(), "' (holding tensor '", name,
                                       "') does not exist");
                files_.push_back(SafetensorsFile::open(shard_path));
            }
            mapped_.emplace_back(name, it->second);
        }

        std::string missing;
        std::size_t n_missing = 0;
        for (const auto& [name, shard] : mapped_) {
            if (!files_[shard].find(name)) {
                missing += cpx::detail::concat("\n  '", name, "' is not in ", files_[shard].path().filename().string());
                ++n_missing;
            }
        }
        if (n_missing)
            raise<FormatError>(where, ": ", n_missing, " mapped tensor(s) missing from their shards:",
                               cpx::detail::verbatim(missing));
    }

    void build_index() {
        for (const auto& [name, file] : mapped_) {
            index_.emplace(name, files_[file].find(name));
            names_.push_back(name);
        }
        std::sort(names_.begin(), names_.end());
    }
};

}  // namespace cpx::io

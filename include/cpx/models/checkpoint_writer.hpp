#pragma once
// Writing a model's weights as a checkpoint, for both families: every tensor
// slot of the model's one tensor description goes into a safetensors writer
// (vectors in fp32, matrices in the storage type W), then the file or shards
// and config.json are written.

#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/checkpoint.hpp"
#include "cpx/io/safetensors_writer.hpp"

namespace cpx {

/// Adds every slot of `weights` to `writer`. `after_matrix(slot, values)` is called with each
/// matrix as stored (PRISM writes a tied lm_head as a copy of wte there).
template <class W, class Weights, class AfterMatrix>
void add_weight_slots(io::SafetensorsWriter& writer, const Weights& weights, AfterMatrix&& after_matrix) {
    writer.add_metadata("format", "pt");
    std::vector<float> values;
    std::vector<W> stored;
    for (const auto& s : weights.slots()) {
        values.resize(static_cast<std::size_t>(s.elements()));
        s.extract(values);
        if (s.f32) {  // vectors (and scalars such as lambda) are kept in fp32 whatever W is
            writer.add(s.name, s.shape, std::span<const float>(values));
            continue;
        }
        stored.resize(values.size());
        for (std::size_t i = 0; i < values.size(); ++i) stored[i] = from_float<W>(values[i]);
        writer.add(s.name, s.shape, std::span<const W>(stored));
        after_matrix(s, std::span<const W>(stored));
    }
}

/// Writes the writer's tensors to `dir` (model.safetensors, or shards and the index with
/// max_shard_bytes > 0) and `config_json` as config.json.
inline void write_checkpoint_files(io::SafetensorsWriter& writer, const std::filesystem::path& dir,
                                   std::uint64_t max_shard_bytes, std::string_view config_json) {
    if (max_shard_bytes > 0) writer.write_sharded(dir, max_shard_bytes);
    else writer.write(dir / io::single_checkpoint_file);
    std::ofstream config(dir / "config.json");
    config << config_json;
    require<Error>(static_cast<bool>(config), "could not write ", (dir / "config.json").string());
}

}  // namespace cpx

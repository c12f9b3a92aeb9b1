#pragma once
// PRISM checkpoints: a directory with config.json (the reference's GPTConfig
// keys) and model.safetensors (or a sharded index) holding the nanoGPT state
// dict names of docs/MODELS.md §18.
//   - `transformer.h.{i}.attn.bias` (the causal mask buffer) is ignored;
//   - `lm_head.weight` is optional: the head is tied to `transformer.wte.weight`.
//     When present it must equal wte (the model cannot untie them); when only
//     lm_head.weight is present (exporters that keep one name of a shared
//     tensor) it serves as wte;
//   - F32, BF16 and F16 tensors are read, into weights stored as W.
// Loading checks the whole checkpoint before reading any weight and reports
// every problem at once (missing tensors, wrong shapes or dtypes, unknown
// tensors); config.json mismatches are reported the same way, one per key.
// Saving writes the matrices in their storage dtype (F32 or BF16) and the
// vectors and lambda_q as F32, plus config.json.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cpx/config/prism_config.hpp"
#include "cpx/core/dtype.hpp"
#include "cpx/config/describe.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/checkpoint.hpp"
#include "cpx/io/checkpoint_validator.hpp"
#include "cpx/io/prism_config_json.hpp"
#include "cpx/io/safetensors_writer.hpp"
#include "cpx/models/checkpoint_writer.hpp"
#include "cpx/models/prism/weights.hpp"

namespace cpx {

namespace detail {
inline constexpr std::string_view prism_wte = prism_embedding_name, prism_lm_head = tied_head_name;

inline bool is_prism_mask_buffer(std::string_view name) {
    constexpr std::string_view prefix = prism_blocks, suffix = ".attn.bias";
    return name.size() > prefix.size() + suffix.size() && name.starts_with(prefix) && name.ends_with(suffix);
}
}  // namespace detail

/// Loads a checkpoint (directory, index.json or .safetensors file) into
/// weights of configuration C stored as W. A directory must hold config.json;
/// a file is checked against a config.json beside it when there is one.
/// `config_keys_not_interpreted`, when given, receives the config.json keys the
/// library does not know and so did not check.
template <PrismConfigType C, class W = float>
PrismWeights<C, W> load_prism_checkpoint(const std::filesystem::path& path,
                                         std::vector<std::string>* config_keys_not_interpreted = nullptr) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const bool is_dir = fs::is_directory(path, ec);
    const fs::path config = (is_dir ? path : path.parent_path()) / "config.json";
    if (io::entry_exists(config)) {
        const io::PrismJsonConfig parsed = io::check_config_file<C>(config);
        if (config_keys_not_interpreted)
            for (const auto& entry : parsed.unrecognized.as_object()) config_keys_not_interpreted->push_back(entry.first);
    } else require<FormatError>(!is_dir, "PRISM checkpoint directory '", path.string(),
                              "' has no config.json (the reference's GPTConfig keys)");
    const io::Checkpoint ckpt = io::Checkpoint::open(path);

    PrismWeights<C, W> weights;
    const auto slots = weights.slots();
    io::CheckpointValidator v(ckpt);
    // An export that kept only one name of the tied tensor may call it lm_head.weight.
    const bool wte_from_head = !ckpt.contains(detail::prism_wte) && ckpt.contains(detail::prism_lm_head);
    const auto source = [&](const std::string& name) {
        return wte_from_head && name == detail::prism_wte ? std::string(detail::prism_lm_head) : name;
    };
    const auto expect = [&](const std::string& name, const std::vector<std::int64_t>& shape) {
        if (v.expect(name, shape)) v.expect_dtype_in(name, {DType::f32, DType::bf16, DType::f16});
    };

    // ---- pass 1: check everything, read nothing
    for (const auto& s : slots) expect(source(s.name), s.shape);
    const bool extra_head = !wte_from_head && ckpt.contains(detail::prism_lm_head);
    if (extra_head) expect(std::string(detail::prism_lm_head), {C::vocab, C::hidden});
    for (const std::string& name : v.unexpected_names())
        if (!detail::is_prism_mask_buffer(name))
            v.note("unexpected tensor '" + printable(name) + "' (not part of the PRISM model compiled here)");
    v.throw_if_errors("PRISM checkpoint for the compiled configuration " + describe(C::dims));

    // ---- pass 2: read
    std::vector<float> values;
    const auto read = [&](std::string_view name) -> const std::vector<float>& {
        values.resize(static_cast<std::size_t>(ckpt.get(name).numel()));
        ckpt.read(name, std::span<float>(values));
        return values;
    };
    for (const auto& s : slots) s.assign(read(source(s.name)));
    for (std::size_t l = 0; l < weights.layers.size(); ++l)
        require<FormatError>(std::isfinite(weights.layers[l].lambda), ckpt.context(), prism_blocks, l,
                             ".attn.lambda_q is not finite (", weights.layers[l].lambda, ")");
    if (extra_head) {
        const std::vector<float> embedding = read(detail::prism_wte);
        const auto& head = read(detail::prism_lm_head);
        std::size_t differ = 0, first = 0;
        for (std::size_t i = 0; i < head.size(); ++i)
            if (head[i] != embedding[i] && differ++ == 0) first = i;
        require<FormatError>(differ == 0, ckpt.context(), detail::prism_lm_head, " differs from ", detail::prism_wte, " in ",
                             differ, " of ", head.size(), " elements (first at ", first,
                             "): PRISM ties its output head to the token embedding");
    }
    return weights;
}

/// Writes `weights` to `dir` as model.safetensors (or, with max_shard_bytes > 0,
/// shards and model.safetensors.index.json) and config.json. lm_head.weight
/// (a copy of wte) is written only when asked, as a tied nanoGPT state dict has it.
template <PrismConfigType C, class W>
void save_prism_checkpoint(const PrismWeights<C, W>& weights, const std::filesystem::path& dir,
                           std::uint64_t max_shard_bytes = 0, bool write_lm_head = false) {
    io::create_output_directory(dir);
    io::SafetensorsWriter writer;
    add_weight_slots<W>(writer, weights, [&](const auto& slot, std::span<const W> stored) {
        if (write_lm_head && slot.name == detail::prism_wte)
            writer.add(std::string(detail::prism_lm_head), slot.shape, stored);
    });
    write_checkpoint_files(writer, dir, max_shard_bytes, io::prism_config_json<C>());
}

}  // namespace cpx

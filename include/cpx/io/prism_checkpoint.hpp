#pragma once
// PRISM checkpoints: a directory with config.json (the reference's GPTConfig
// keys) and model.safetensors (or a sharded index) holding the nanoGPT state
// dict names of spec/prism.md section 4.
//   - `transformer.h.{i}.attn.bias` (the causal mask buffer) is ignored;
//   - `lm_head.weight` is optional: the head is tied to `transformer.wte.weight`.
//     When present it must equal wte (the model cannot untie them); when only
//     lm_head.weight is present (exporters that keep one name of a shared
//     tensor) it serves as wte;
//   - F32, BF16 and F16 tensors are read into the fp32 weights.
// Every problem found (missing tensor, wrong shape, unknown tensor, config
// mismatch) is reported in one exception that names each.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "cpx/config/prism_config.hpp"
#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/checkpoint.hpp"
#include "cpx/io/checkpoint_validator.hpp"
#include "cpx/io/prism_config_json.hpp"
#include "cpx/io/safetensors_writer.hpp"
#include "cpx/models/prism_weights.hpp"

namespace cpx::io {

inline constexpr std::string_view prism_lm_head = "lm_head.weight";
inline constexpr std::string_view prism_config_file = "config.json";

namespace detail {
inline bool is_mask_buffer(std::string_view name) {
    constexpr std::string_view prefix = "transformer.h.", suffix = ".attn.bias";
    return name.starts_with(prefix) && name.ends_with(suffix);
}
}  // namespace detail

/// Reads the weights of configuration C from an opened checkpoint (no config.json check).
template <PrismConfigType C>
PrismWeights<C> read_prism_weights(const Checkpoint& ckpt) {
    PrismWeights<C> w;
    CheckpointValidator v(ckpt);
    constexpr std::string_view wte_name = "transformer.wte.weight";
    const bool wte_from_head = !ckpt.contains(wte_name) && ckpt.contains(prism_lm_head);

    std::vector<std::pair<std::string, std::span<float>>> reads;
    w.for_each_tensor([&](const NamedTensor<float>& t) {
        const std::string source = (wte_from_head && t.name == wte_name) ? std::string(prism_lm_head) : t.name;
        if (!v.expect(source, t.shape)) return;
        if (v.expect_dtype_in(source, {DType::f32, DType::bf16, DType::f16}))
            reads.emplace_back(source, std::span<float>(t.data, static_cast<std::size_t>(t.size())));
    });
    const bool head_is_extra = !wte_from_head && ckpt.contains(prism_lm_head);
    if (head_is_extra) {
        v.expect(prism_lm_head, {C::vocab, C::hidden});
        v.expect_dtype_in(prism_lm_head, {DType::f32, DType::bf16, DType::f16});
    }
    for (const std::string& name : v.unexpected_names())
        if (!detail::is_mask_buffer(name))
            v.note("unexpected tensor '" + name + "' (not part of the PRISM model compiled here)");
    v.throw_if_errors("PRISM");

    for (const auto& [name, out] : reads) ckpt.read(name, out);
    for (std::size_t l = 0; l < w.layers.size(); ++l)
        require<FormatError>(std::isfinite(w.layers[l].lambda), ckpt.context(), "transformer.h.", l,
                             ".attn.lambda_q is not finite (", w.layers[l].lambda, ")");
    if (head_is_extra) {
        const auto head = ckpt.read_vector<float>(prism_lm_head);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < head.size(); ++i) differ += head[i] != w.wte[i];
        require<FormatError>(differ == 0, ckpt.context(), "lm_head.weight differs from transformer.wte.weight in ",
                             differ, " of ", head.size(),
                             " elements; PRISM ties the output head to the token embedding");
    }
    return w;
}

/// Loads a checkpoint directory (or a single .safetensors file with config.json
/// beside it): config.json must exist and match C, then the weights are read.
template <PrismConfigType C>
PrismWeights<C> load_prism_checkpoint(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path dir = fs::is_directory(path, ec) ? path : path.parent_path();
    const fs::path config = dir / prism_config_file;
    require<FormatError>(fs::exists(config, ec), "PRISM checkpoint '", path.string(), "': no ", prism_config_file,
                         " (the reference's GPTConfig keys) in '", dir.string(), "'");
    check_config_file<C>(config);
    return read_prism_weights<C>(Checkpoint::open(path));
}

/// Writes `dir`/model.safetensors (every tensor of the enumeration, stored as
/// `dtype`: f32, bf16 or f16) and `dir`/config.json. lm_head.weight is
/// written only when asked (it duplicates wte).
template <PrismConfigType C>
void save_prism_checkpoint(const PrismWeights<C>& w, const std::filesystem::path& dir, DType dtype = DType::f32,
                           bool write_lm_head = false) {
    require<Error>(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16,
                   "save_prism_checkpoint: weights are stored as F32, BF16 or F16, not ", dtype_name(dtype));
    SafetensorsWriter writer;
    const auto add = [&](const std::string& name, const std::vector<std::int64_t>& shape, const float* data,
                         std::size_t n) {
        const std::span<const float> values(data, n);
        if (dtype == DType::f32) {
            writer.add<float>(name, shape, values);
        } else if (dtype == DType::bf16) {
            std::vector<bf16> narrow(n);
            for (std::size_t i = 0; i < n; ++i) narrow[i] = bf16::from_float(values[i]);
            writer.add<bf16>(name, shape, narrow);
        } else {
            std::vector<fp16> narrow(n);
            for (std::size_t i = 0; i < n; ++i) narrow[i] = fp16::from_float(values[i]);
            writer.add<fp16>(name, shape, narrow);
        }
    };
    w.for_each_tensor([&](const NamedTensor<const float>& t) {
        add(t.name, t.shape, t.data, static_cast<std::size_t>(t.size()));
    });
    if (write_lm_head) add(std::string(prism_lm_head), {C::vocab, C::hidden}, w.wte.data(), w.wte.size());
    std::filesystem::create_directories(dir);
    writer.write(dir / single_checkpoint_file);
    std::ofstream config(dir / prism_config_file, std::ios::binary | std::ios::trunc);
    config << prism_config_json<C>();
    require<Error>(static_cast<bool>(config), "save_prism_checkpoint: cannot write ",
                   (dir / prism_config_file).string());
}

}  // namespace cpx::io

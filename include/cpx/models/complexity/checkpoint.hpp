#pragma once
// Loading and saving COMPLEXITY-DEEP checkpoints: model.safetensors (single
// file, or sharded with model.safetensors.index.json) plus config.json, in the
// authors' tensor names (docs/MODELS.md §12, §13).
//
// Loading checks the whole checkpoint against the compiled configuration
// before reading any weight and reports every problem at once (missing
// tensors, wrong shapes, wrong dtypes, unexpected tensors), then reads.
// Accepted variants, all with the same math:
//   - routed experts as mlp.gate_proj_w / up_proj_w [E, d, I_e] + down_proj_w [E, I_e, d]
//     (the framework), as mlp.gate_up_proj [E, d, 2 I_e] + mlp.down_proj [E, I_e, d]
//     (its first public version and the learned-router ablation), or as
//     mlp.experts.{e}.{gate_proj,up_proj}.weight [I_e, d] + down_proj.weight [d, I_e]
//     (nn.Linear layout, the pilot and the vLLM plugin);
//   - every key prefixed with "model.";
//   - layers.{i}.self_attn.rotary_emb.inv_freq: ignored (recomputed in fp32, docs/MODELS.md §6.3);
//   - mu_to_{q,k,v} in models without mu guidance: ignored (built but unused by the authors);
//   - lm_head.weight: accepted only if it equals embed_tokens.weight element for
//     element (the model ties its head to the embedding), an error otherwise.
// Routing tables are per layer (int64 or int32, every value a valid expert):
// layers.{i}.mlp.topk_token_to_expert [top_k, V] when present, else
// layers.{i}.mlp.token_to_expert [V] extended by the cyclic rule (route r =
// (primary + r) mod E). Either every layer carries a table or none does; a
// checkpoint without tables keeps the routing the caller supplies. A top_k > 1
// checkpoint whose config.json names a routing_strategy other than
// modulo_cyclic must carry the top-k tables (deriving them would change the model).
//
// Saving writes the framework's layout (gate_proj_w / up_proj_w / down_proj_w
// for token-routed models, gate_up_proj / down_proj for the learned router),
// the matrices in their storage dtype (F32 or BF16) and the vectors (norm
// weights, mu, mu_init), which the library keeps in fp32, as F32, token_to_expert as I64 in
// every layer (plus topk_token_to_expert [top_k, V] when top_k > 1), and
// config.json with the authors' keys. Models without mu
// guidance are saved without the unused mu_to_* tensors.

#include <cstdint>
#include <algorithm>
#include <iterator>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/dtype.hpp"
#include "cpx/config/describe.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/checkpoint.hpp"
#include "cpx/io/checkpoint_validator.hpp"
#include "cpx/io/complexity_config_json.hpp"
#include "cpx/io/safetensors_writer.hpp"
#include "cpx/models/checkpoint_writer.hpp"
#include "cpx/models/complexity/weights.hpp"
#include "cpx/models/expert_layouts.hpp"

namespace cpx {

/// What loading found, for a caller who wants to report it.
struct CheckpointReport {
    std::string prefix;                             ///< "" or "model."
    ExpertLayout expert_layout = ExpertLayout::none;
    bool routing_from_checkpoint = false;           ///< the routing tables were read from the file
    bool routing_top_k_tables = false;              ///< ... as topk_token_to_expert (else token_to_expert)
    bool routing_per_layer = false;                 ///< ... and they differ between layers
    std::optional<std::string> routing_strategy;    ///< config.json's routing_strategy, if given
    std::vector<std::string> notes;                 ///< loaded, but worth telling the user
    bool config_checked = false;                    ///< a config.json was found and matched
    std::vector<std::string> ignored;               ///< tensors present but not used
    /// config.json keys the library does not know, so did not check (a newer
    /// framework's option, e.g. top_k, may change the model): worth a warning.
    std::vector<std::string> config_keys_not_interpreted;
};

struct LoadOptions {
    /// Whether a checkpoint directory must hold config.json (a checkpoint given
    /// as a file is checked against a config.json beside it if there is one).
    bool require_config = true;
};

/// Loads a checkpoint (directory, index.json or .safetensors file) into
/// weights of configuration C stored as W. `routing`: the table to use when
/// the checkpoint carries none (empty: keep t mod E).
template <ComplexityConfigType C, class W = float>
ComplexityWeights<C, W> load_complexity_checkpoint(const std::filesystem::path& path, CheckpointReport* report = nullptr,
                                                   std::span<const std::int32_t> routing = {},
                                                   const LoadOptions& options = {}) {
    namespace fs = std::filesystem;
    CheckpointReport found;
    std::error_code ec;
    const fs::path config_path =
        (fs::is_directory(path, ec) ? path : path.parent_path()) / "config.json";
    if (io::entry_exists(config_path)) {
        const io::ComplexityJsonConfig config = io::check_config_file<C>(config_path);
        for (const auto& entry : config.unrecognized.as_object()) found.config_keys_not_interpreted.push_back(entry.first);
        found.config_checked = true;
        found.routing_strategy = config.routing_strategy;
    } else if (options.require_config && fs::is_directory(path, ec)) {
        raise<FormatError>("checkpoint directory '", path.string(), "' has no config.json");
    }
    const std::optional<std::string>& strategy = found.routing_strategy;
    const io::Checkpoint ckpt = io::Checkpoint::open(path);
    const std::string embedding = ComplexityWeights<C, W>::embedding_name;
    if (!ckpt.contains(embedding) && ckpt.contains("model." + embedding)) found.prefix = "model.";
    const std::string& pre = found.prefix;

    ComplexityWeights<C, W> weights;
    const auto slots = weights.slots();
    io::CheckpointValidator v(ckpt);
    constexpr std::int64_t d = C::hidden;

    // ---- pass 1: check everything, read nothing
    for (const auto& s : slots)
        if (!(C::routed && detail::is_expert_slot(s.name))) detail::expect_float(v, pre + s.name, s.shape);
    std::vector<ExpertLayout> layouts(C::layers, ExpertLayout::none);
    std::vector<detail::LayerRouting> tables(C::layers, detail::LayerRouting::none);
    for (int l = 0; C::routed && l < C::layers; ++l) {
        layouts[l] = detail::expect_experts<C>(ckpt, v, pre + layer_prefix(l), l);
        if (C::mlp == MlpKind::token_routed) tables[l] = detail::expect_routing<C>(ckpt, v, pre + layer_prefix(l));
    }
    const auto with_table = C::layers - std::count(tables.begin(), tables.end(), detail::LayerRouting::none);
    const auto with_top_k = std::count(tables.begin(), tables.end(), detail::LayerRouting::top_k);
    if (with_table != 0 && with_table != C::layers)
        v.note_format(std::to_string(with_table) + " of " + std::to_string(C::layers) +
                      " layers carry mlp.token_to_expert or mlp.topk_token_to_expert; every layer needs its table");
    if (C::top_k > 1 && with_top_k != C::layers && strategy && *strategy != "modulo_cyclic")
        v.note_format("config.json's routing_strategy \"" + printable(*strategy) +
                      "\" needs every layer's mlp.topk_token_to_expert [top_k, V]; " + std::to_string(with_top_k) +
                      " of " + std::to_string(C::layers) +
                      " layers carry it (the cyclic rule derives only modulo_cyclic routes)");
    bool has_lm_head = false;
    for (const std::string& name : v.unexpected_names()) {
        if (detail::ends_with(name, "self_attn.rotary_emb.inv_freq")) {
            found.ignored.push_back(name);
        } else if (!C::use_mu && std::any_of(std::begin(MuGqaAttentionParams<C, W>::mu_projections),
                                             std::end(MuGqaAttentionParams<C, W>::mu_projections),
                                             [&](const char* mu) { return detail::ends_with(name, mu); })) {
            found.ignored.push_back(name);
        } else if (name == pre + tied_head_name || name == tied_head_name) {
            has_lm_head = true;
            detail::expect_float(v, name, {C::vocab, d});
            found.ignored.push_back(name);
        } else {
            v.note("unexpected tensor '" + printable(name) + "' (not part of this configuration)");
        }
    }
    v.throw_if_errors("COMPLEXITY-DEEP checkpoint for the compiled configuration " + describe(C::dims));

    // ---- pass 2: read
    std::vector<float> values;
    const auto read = [&](const std::string& name) -> const std::vector<float>& {
        values.resize(static_cast<std::size_t>(ckpt.get(name).numel()));
        ckpt.read(name, std::span<float>(values));
        return values;
    };
    for (const auto& s : slots)
        if (!(C::routed && detail::is_expert_slot(s.name))) s.assign(read(pre + s.name));
    if constexpr (C::routed) {
        for (int l = 0; l < C::layers; ++l)
            detail::read_experts(ckpt, layouts[l], pre + layer_prefix(l), weights.layers[static_cast<std::size_t>(l)].mlp);
        found.expert_layout = layouts[0];
    }
    if constexpr (C::mlp == MlpKind::token_routed) {
        if (with_table == C::layers) {
            for (int l = 0; l < C::layers; ++l)
                weights.layers[static_cast<std::size_t>(l)].routes =
                    detail::read_layer_routes<C>(ckpt, tables[l], pre + layer_prefix(l), &found.notes);
            found.routing_from_checkpoint = true;
            found.routing_top_k_tables = with_top_k == C::layers;
            found.routing_per_layer = !weights.routes_shared_by_layers();
        } else if (!routing.empty()) {
            weights.set_routing(routing);
        }
    }
    if (has_lm_head) {
        const std::string head = ckpt.contains(pre + tied_head_name) ? pre + tied_head_name : tied_head_name;
        const std::vector<float> embedded = read(pre + embedding);
        const auto& lm = read(head);
        for (std::size_t i = 0; i < lm.size(); ++i)
            if (lm[i] != embedded[i])
                raise<FormatError>(ckpt.context(), "tensor '", head, "' differs from ", embedding, " at element ",
                                   i, " (", lm[i], " vs ", embedded[i],
                                   "): this model ties its output head to the embedding");
    }
    if (report) *report = std::move(found);
    return weights;
}

/// Writes `weights` to `dir` as model.safetensors (or, with max_shard_bytes > 0,
/// model-0000i-of-0000N.safetensors shards and model.safetensors.index.json)
/// and config.json.
template <ComplexityConfigType C, class W>
void save_complexity_checkpoint(const ComplexityWeights<C, W>& weights, const std::filesystem::path& dir,
                                std::uint64_t max_shard_bytes = 0) {
    io::create_output_directory(dir);
    io::SafetensorsWriter writer;
    add_weight_slots<W>(writer, weights, [](const auto&, std::span<const W>) {});
    if constexpr (C::mlp == MlpKind::token_routed) {
        for (int l = 0; l < C::layers; ++l) {
            const auto& routes = weights.layers[static_cast<std::size_t>(l)].routes;
            const RoutingNames n{layer_prefix(l)};
            const std::vector<std::int64_t> all(routes.begin(), routes.end());
            writer.add(n.primary(), {C::vocab}, std::span<const std::int64_t>(all).first(C::vocab));
            if constexpr (C::top_k > 1) writer.add(n.top_k(), {C::top_k, C::vocab}, std::span<const std::int64_t>(all));
        }
    }
    write_checkpoint_files(writer, dir, max_shard_bytes, io::complexity_config_json<C>());
}

}  // namespace cpx

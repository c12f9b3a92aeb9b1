#pragma once
// The authors' config.json of COMPLEXITY-DEEP (their ModelConfig.to_dict(),
// docs/MODELS.md §13): read it, write a compiled configuration as one, and list every
// way a file contradicts a compiled configuration.
//
// complexity_keys below lists every key, in the authors' order. Also read:
// rms_norm_eps (the inference code's name for norm_eps), use_token_routed_mlp
// (its alternative to mlp_type), model_type (not interpreted), rope_scaling
// {"type": "linear", "factor": f} (Hugging Face style, for rope_type
// "linear"), and prism_expansion_ratio / prism_freq_multiplier for
// attention_type "prism" (this library's PRISM-attention variant), and the
// keys of the authors' later token-routed models (top_k, route weights, output
// scales and gates; routing_strategy and source_mlp_type are read, not
// interpreted). Any other key is kept in `unrecognized` and not interpreted.
//
// mlp_type values: "token_routed", "swiglu" (dense) and "mixtral" for the
// learned top-1 router: the name the authors' run4 ablation script passes
// (docs/MODELS.md §10.2; complexity-framework scripts/train_ablation_150m.py).

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/json.hpp"
#include "cpx/io/json_fields.hpp"

namespace cpx::io {

/// A parsed config.json. Each member is nullopt when its key is absent or null.
struct ComplexityJsonConfig {
    std::optional<std::int64_t> hidden_size;
    std::optional<std::int64_t> num_hidden_layers;
    std::optional<std::int64_t> intermediate_size;
    std::optional<std::int64_t> vocab_size;
    std::optional<std::int64_t> num_attention_heads;
    std::optional<std::int64_t> num_key_value_heads;
    std::optional<std::string> attention_type;
    std::optional<double> attention_dropout;
    std::optional<bool> use_qk_norm;
    std::optional<std::int64_t> sliding_window;
    std::optional<std::int64_t> max_position_embeddings;
    std::optional<double> rope_theta;
    std::optional<std::string> rope_type;
    std::optional<std::string> rope_scaling_type;  ///< rope_scaling.type (or .rope_type)
    std::optional<double> rope_scaling_factor;     ///< rope_scaling.factor
    std::optional<std::string> mlp_type;
    std::optional<bool> use_token_routed_mlp;
    std::optional<std::string> hidden_act;
    std::optional<std::int64_t> num_experts;
    std::optional<bool> shared_expert;
    std::optional<std::int64_t> shared_intermediate_size;  ///< null: the expert width
    std::optional<std::int64_t> top_k;
    std::optional<double> top_k_primary_weight;  ///< null: 0.95 when top_k > 1
    std::optional<bool> use_shared_routed_gates;
    std::optional<double> shared_gate_init;
    std::optional<double> routed_gate_init;
    std::optional<double> shared_output_scale;
    std::optional<double> routed_output_scale;
    std::optional<std::string> routing_strategy;  ///< how the tables were built; not interpreted
    std::optional<std::string> source_mlp_type;   ///< not interpreted
    std::optional<bool> use_mu_guidance;
    std::optional<bool> use_mu_projection;
    std::optional<bool> disable_mu_guidance;
    std::optional<std::string> norm_type;
    std::optional<double> norm_eps;  ///< norm_eps, or rms_norm_eps when norm_eps is absent
    std::optional<bool> tie_word_embeddings;
    std::optional<bool> use_sdpa;
    std::optional<bool> use_cache;
    std::optional<double> initializer_range;
    std::optional<Json> extra_config;
    std::optional<std::string> model_type;
    std::optional<std::int64_t> prism_expansion_ratio;
    std::optional<double> prism_freq_multiplier;
    Json unrecognized = Json::object();  ///< every other key, in file order

    bool operator==(const ComplexityJsonConfig&) const = default;
};

namespace detail {
using CJ = ComplexityJsonConfig;

/// rope_scaling's own keys; "rope_type" is the newer Hugging Face name of "type".
inline constexpr auto rope_scaling_keys =
    std::tuple{key_when_set("type", &CJ::rope_scaling_type), alias_key("rope_type", &CJ::rope_scaling_type),
               key_when_set("factor", &CJ::rope_scaling_factor)};

inline void read_rope_scaling(JsonFields& f, CJ& c, std::string_view name) {
    const std::optional<Json> scaling = f.object(name);
    if (!scaling) return;
    JsonFields nested(*scaling, f.source() + " " + std::string(name));
    read_keys(nested, c, rope_scaling_keys);
    if (!c.rope_scaling_type || !c.rope_scaling_factor)
        raise<FormatError>(f.source(), ": key '", name, "' needs \"", key_name(rope_scaling_keys, &CJ::rope_scaling_type),
                           "\" and \"", key_name(rope_scaling_keys, &CJ::rope_scaling_factor), "\", found ",
                           scaling->dump());
}

inline void write_rope_scaling(Json& o, const CJ& c, std::string_view name) {
    if (!c.rope_scaling_type && !c.rope_scaling_factor) return;
    Json scaling = Json::object();
    write_keys(scaling, c, rope_scaling_keys);
    o.set(std::string(name), std::move(scaling));
}
}  // namespace detail

inline constexpr std::string_view rope_scaling_key = "rope_scaling";

/// Every config.json key, in the authors' order (the writer's order); keys the
/// authors always write are null when unset, extensions only appear when set.
inline constexpr auto complexity_keys = std::tuple{
    key_when_set("model_type", &detail::CJ::model_type),
    config_key("hidden_size", &detail::CJ::hidden_size),
    config_key("num_hidden_layers", &detail::CJ::num_hidden_layers),
    config_key("intermediate_size", &detail::CJ::intermediate_size),
    config_key("vocab_size", &detail::CJ::vocab_size),
    config_key("num_attention_heads", &detail::CJ::num_attention_heads),
    config_key("num_key_value_heads", &detail::CJ::num_key_value_heads),
    config_key("attention_type", &detail::CJ::attention_type),
    key_when_set("prism_expansion_ratio", &detail::CJ::prism_expansion_ratio),
    key_when_set("prism_freq_multiplier", &detail::CJ::prism_freq_multiplier),
    config_key("attention_dropout", &detail::CJ::attention_dropout),
    config_key("use_qk_norm", &detail::CJ::use_qk_norm),
    config_key("sliding_window", &detail::CJ::sliding_window),
    config_key("max_position_embeddings", &detail::CJ::max_position_embeddings),
    config_key("rope_theta", &detail::CJ::rope_theta),
    config_key("rope_type", &detail::CJ::rope_type),
    custom_key(rope_scaling_key, detail::read_rope_scaling, detail::write_rope_scaling),
    config_key("mlp_type", &detail::CJ::mlp_type),
    key_when_set("use_token_routed_mlp", &detail::CJ::use_token_routed_mlp),
    config_key("hidden_act", &detail::CJ::hidden_act),
    config_key("num_experts", &detail::CJ::num_experts),
    config_key("shared_expert", &detail::CJ::shared_expert),
    config_key("shared_intermediate_size", &detail::CJ::shared_intermediate_size),
    key_when_set("top_k", &detail::CJ::top_k),
    key_when_set("top_k_primary_weight", &detail::CJ::top_k_primary_weight),
    key_when_set("use_shared_routed_gates", &detail::CJ::use_shared_routed_gates),
    key_when_set("shared_gate_init", &detail::CJ::shared_gate_init),
    key_when_set("routed_gate_init", &detail::CJ::routed_gate_init),
    key_when_set("shared_output_scale", &detail::CJ::shared_output_scale),
    key_when_set("routed_output_scale", &detail::CJ::routed_output_scale),
    key_when_set("routing_strategy", &detail::CJ::routing_strategy),
    key_when_set("source_mlp_type", &detail::CJ::source_mlp_type),
    config_key("use_mu_guidance", &detail::CJ::use_mu_guidance),
    config_key("use_mu_projection", &detail::CJ::use_mu_projection),
    config_key("disable_mu_guidance", &detail::CJ::disable_mu_guidance),
    config_key("norm_type", &detail::CJ::norm_type),
    config_key("norm_eps", &detail::CJ::norm_eps),
    alias_key("rms_norm_eps", &detail::CJ::norm_eps),
    config_key("tie_word_embeddings", &detail::CJ::tie_word_embeddings),
    config_key("use_sdpa", &detail::CJ::use_sdpa),
    config_key("use_cache", &detail::CJ::use_cache),
    config_key("initializer_range", &detail::CJ::initializer_range),
    config_key("extra_config", &detail::CJ::extra_config),
};

/// Parses config.json text; `source` names it in errors. A key of the wrong
/// type is a FormatError naming the key.
inline ComplexityJsonConfig parse_complexity_config(std::string_view text, std::string_view source = "config.json") {
    return parse_config<ComplexityJsonConfig>(text, source, complexity_keys);
}

/// Reads and parses a config.json file; errors name the path.
inline ComplexityJsonConfig read_complexity_config(const std::filesystem::path& path) {
    return parse_complexity_config(read_text_file(path), path.string());
}

namespace detail {
constexpr std::string_view mlp_type_name(MlpKind k) {
    switch (k) {
        case MlpKind::dense_swiglu: return "swiglu";
        case MlpKind::token_routed: return "token_routed";
        case MlpKind::learned_router: return "mixtral";
    }
    return "?";
}
}  // namespace detail

/// The config.json object of `c`: complexity_keys in order, then `unrecognized`.
inline Json to_json(const ComplexityJsonConfig& c) {
    return config_to_json(c, complexity_keys);
}

/// The compiled configuration C as the authors' config.json would describe it.
template <ComplexityConfigType C>
ComplexityJsonConfig complexity_json_config() {
    constexpr ComplexityDims d = C::dims;
    ComplexityJsonConfig c;
    c.hidden_size = C::hidden;
    c.num_hidden_layers = C::layers;
    c.intermediate_size = d.intermediate_size;
    c.vocab_size = C::vocab;
    c.num_attention_heads = C::heads;
    c.num_key_value_heads = C::kv_heads;
    if constexpr (C::attention == AttentionKind::prism) {
        c.attention_type = "prism";
        c.prism_expansion_ratio = d.prism_expansion_ratio;
        c.prism_freq_multiplier = d.prism_freq_multiplier;
    } else {
        c.attention_type = "gqa";
    }
    c.attention_dropout = 0.0;
    c.use_qk_norm = true;
    c.max_position_embeddings = C::max_positions;
    c.rope_theta = d.rope_theta;
    if (d.rope_scaling == 1.0) {
        c.rope_type = "standard";
    } else {
        c.rope_type = "linear";
        c.rope_scaling_type = "linear";
        c.rope_scaling_factor = d.rope_scaling;
    }
    c.mlp_type = std::string(detail::mlp_type_name(C::mlp));
    c.hidden_act = "silu";
    c.num_experts = C::experts;
    c.shared_expert = d.shared_expert;  // the dense baselines keep the flag they were written with (unused)
    if (C::has_shared_expert && C::shared_width != C::expert_width) c.shared_intermediate_size = C::shared_width;
    // The later models' keys, written when the configuration departs from the paper's MLP.
    if (uses_later_mlp_knobs(d)) {
        c.top_k = C::top_k;
        if (C::top_k > 1) c.top_k_primary_weight = C::primary_weight;
        c.use_shared_routed_gates = d.use_shared_routed_gates;
        if (d.use_shared_routed_gates) {
            c.shared_gate_init = d.shared_gate_init;
            c.routed_gate_init = d.routed_gate_init;
        }
        c.shared_output_scale = d.shared_output_scale;
        c.routed_output_scale = d.routed_output_scale;
    }
    c.use_mu_guidance = C::use_mu;
    c.use_mu_projection = false;
    c.disable_mu_guidance = false;
    c.norm_type = "rmsnorm";
    c.norm_eps = d.norm_eps;
    c.tie_word_embeddings = true;
    c.use_sdpa = true;
    c.use_cache = true;
    c.initializer_range = 0.02;
    c.extra_config = Json::object();
    return c;
}

/// The compiled configuration C as config.json text (2-space indent, trailing newline).
template <ComplexityConfigType C>
std::string complexity_config_json() {
    return to_json(complexity_json_config<C>()).dump(2) + "\n";
}

/// Every key of `c` that contradicts the compiled configuration C, or that
/// asks for something the library cannot run, one line each in key order:
/// "num_attention_heads: checkpoint 16, compiled 12". Keys that do not affect
/// inference (attention_dropout, use_sdpa, use_cache, initializer_range,
/// extra_config, model_type) are not checked. An absent key takes the
/// framework's default, except the dimensions and the MLP kind, which must be given.
template <ComplexityConfigType C>
std::vector<std::string> config_mismatches(const ComplexityJsonConfig& c) {
    using detail::CJ;
    constexpr ComplexityDims d = C::dims;
    ConfigComparison cmp(c, complexity_keys, " (absent: the default)");
    cmp.required(&CJ::hidden_size, C::hidden);
    cmp.required(&CJ::num_hidden_layers, C::layers);
    cmp.required(&CJ::intermediate_size, d.intermediate_size);
    cmp.required(&CJ::vocab_size, C::vocab);
    cmp.required(&CJ::num_attention_heads, C::heads);
    cmp.required(&CJ::num_key_value_heads, C::kv_heads);

    const std::string attention = c.attention_type.value_or("gqa");
    const bool prism_compiled = C::attention == AttentionKind::prism;
    const std::string compiled_attention = prism_compiled ? "prism" : "gqa";
    if (attention == "prism") {
        if (!prism_compiled) {
            cmp.differ(&CJ::attention_type, attention, compiled_attention);
        } else {
            cmp.compare(&CJ::prism_expansion_ratio, std::int64_t{2}, std::int64_t{d.prism_expansion_ratio});
            cmp.compare(&CJ::prism_freq_multiplier, 3.1415926535, d.prism_freq_multiplier);
        }
    } else if (attention == "gqa" || attention == "mha" || attention == "mqa") {
        if (prism_compiled) cmp.differ(&CJ::attention_type, attention, compiled_attention);
    } else {
        cmp.unsupported(&CJ::attention_type, attention, "only gqa, mha, mqa and prism");
    }
    if (!c.use_qk_norm.value_or(true))
        cmp.unsupported(&CJ::use_qk_norm, false, "the library always applies QK-norm, as the trained models do");
    if (c.sliding_window) cmp.unsupported(&CJ::sliding_window, *c.sliding_window, "only full causal attention");
    cmp.required(&CJ::max_position_embeddings, C::max_positions);

    cmp.compare(&CJ::rope_theta, 10000.0, d.rope_theta);
    const std::string rope_type = c.rope_type.value_or("standard");
    const std::string factor_key =
        std::string(rope_scaling_key) + "." + std::string(key_name(detail::rope_scaling_keys, &CJ::rope_scaling_factor));
    if (rope_type != "standard" && rope_type != "linear") {
        cmp.unsupported(&CJ::rope_type, rope_type, "only standard and linear");
    } else if (c.rope_scaling_type && *c.rope_scaling_type != "linear") {
        cmp.unsupported(std::string(rope_scaling_key), *c.rope_scaling_type, "only linear position interpolation");
    } else if (rope_type == "linear" && !c.rope_scaling_factor) {
        cmp.line(cmp.name(&CJ::rope_type) + ": \"linear\" needs " + factor_key + ", which is absent");
    } else {
        const double factor = c.rope_scaling_factor.value_or(1.0);
        if (factor != d.rope_scaling) cmp.differ(factor_key, factor, d.rope_scaling);
    }

    // MLP kind: mlp_type, or the inference code's use_token_routed_mlp.
    std::optional<MlpKind> mlp;
    if (c.mlp_type) {
        if (*c.mlp_type == "token_routed") mlp = MlpKind::token_routed;
        else if (*c.mlp_type == "swiglu") mlp = MlpKind::dense_swiglu;
        else if (*c.mlp_type == "mixtral") mlp = MlpKind::learned_router;
        else cmp.unsupported(&CJ::mlp_type, *c.mlp_type, "only token_routed, swiglu and mixtral");
    }
    if (c.use_token_routed_mlp) {
        const MlpKind alt = *c.use_token_routed_mlp ? MlpKind::token_routed : MlpKind::dense_swiglu;
        if (mlp && *mlp != alt)
            cmp.line(cmp.name(&CJ::mlp_type) + ": " + cmp.text(*c.mlp_type) + " contradicts " +
                     cmp.name(&CJ::use_token_routed_mlp) + " " + cmp.text(*c.use_token_routed_mlp));
        if (!c.mlp_type) mlp = alt;
    }
    const std::string compiled_mlp(detail::mlp_type_name(C::mlp));
    if (!c.mlp_type && !c.use_token_routed_mlp)
        cmp.line(cmp.name(&CJ::mlp_type) + ": absent, compiled " + cmp.text(compiled_mlp));
    else if (mlp && *mlp != C::mlp)
        cmp.differ(&CJ::mlp_type, std::string(detail::mlp_type_name(*mlp)), compiled_mlp);

    if (const std::string act = c.hidden_act.value_or("silu"); act != "silu")
        cmp.unsupported(&CJ::hidden_act, act, "the SwiGLU experts use silu");
    cmp.compare(&CJ::num_experts, std::int64_t{1}, std::int64_t{C::experts});
    if constexpr (C::routed) {
        const bool shared = c.shared_expert.value_or(true);
        if (shared != C::has_shared_expert) {
            cmp.compare(&CJ::shared_expert, true, C::has_shared_expert);
        } else if (shared) {
            if (!c.shared_intermediate_size) {
                if (C::shared_width != C::expert_width)
                    cmp.line(cmp.name(&CJ::shared_intermediate_size) +
                             ": checkpoint null (the expert width), compiled " + cmp.text(C::shared_width));
            } else if (*c.shared_intermediate_size != C::shared_width) {
                cmp.differ(&CJ::shared_intermediate_size, *c.shared_intermediate_size, C::shared_width);
            }
        }
    }

    // The later models' routing (docs/MODELS.md §8.5), as their code reads it.
    const std::int64_t top_k = c.top_k.value_or(1);
    cmp.compare(&CJ::top_k, std::int64_t{1}, std::int64_t{C::top_k});
    if (top_k == C::top_k && top_k > 1) {
        // Their code clamps the weight to [0, 1] and takes 0.95 when it is absent.
        const double pw = std::clamp(c.top_k_primary_weight.value_or(0.95), 0.0, 1.0);
        if (pw != C::primary_weight)
            cmp.differ(&CJ::top_k_primary_weight, pw, C::primary_weight,
                       c.top_k_primary_weight
                           ? (*c.top_k_primary_weight == pw ? std::string_view{} : " (clamped to [0, 1])")
                           : std::string_view(" (absent: 0.95)"));
    }
    if constexpr (C::routed) {
        // The gates exist only with the shared expert; without gates the scales apply.
        const bool gates = c.use_shared_routed_gates.value_or(false) && c.shared_expert.value_or(true);
        if (gates != C::learned_gates) {
            cmp.compare(&CJ::use_shared_routed_gates, false, C::learned_gates);
        } else if (!gates) {
            cmp.compare(&CJ::routed_output_scale, 1.0, C::dims.routed_output_scale);
            if (C::has_shared_expert) cmp.compare(&CJ::shared_output_scale, 1.0, C::dims.shared_output_scale);
        }
    }

    // The framework runs mu guidance when (use_mu_guidance or use_mu_projection) and not disable_mu_guidance.
    const bool mu_flag = c.use_mu_guidance.value_or(false), mu_proj = c.use_mu_projection.value_or(false),
               mu_off = c.disable_mu_guidance.value_or(false);
    const bool mu = (mu_flag || mu_proj) && !mu_off;
    if (mu != C::use_mu) {
        std::string note;
        if (mu_proj || mu_off)
            note = " (" + cmp.name(&CJ::use_mu_guidance) + " " + cmp.text(mu_flag) + ", " +
                   cmp.name(&CJ::use_mu_projection) + " " + cmp.text(mu_proj) + ", " +
                   cmp.name(&CJ::disable_mu_guidance) + " " + cmp.text(mu_off) + ")";
        else if (!c.use_mu_guidance)
            note = std::string(cmp.absent_note());
        cmp.differ(&CJ::use_mu_guidance, mu, C::use_mu, note);
    }

    if (const std::string norm = c.norm_type.value_or("rmsnorm"); norm != "rmsnorm")
        cmp.unsupported(&CJ::norm_type, norm, "only rmsnorm");
    cmp.compare(&CJ::norm_eps, 1e-6, d.norm_eps);
    if (!c.tie_word_embeddings.value_or(true))
        cmp.unsupported(&CJ::tie_word_embeddings, false, "the output head is the tied embedding");
    return std::move(cmp).lines();
}

/// Throws ShapeError listing every mismatch of config_mismatches<C>(c).
template <ComplexityConfigType C>
void check_config(const ComplexityJsonConfig& c, std::string_view source = "config.json") {
    throw_config_problems(source, config_mismatches<C>(c));
}

/// Reads `path` and checks it against C; errors name the path.
template <ComplexityConfigType C>
ComplexityJsonConfig check_config_file(const std::filesystem::path& path) {
    ComplexityJsonConfig c = read_complexity_config(path);
    check_config<C>(c, path.string());
    return c;
}

}  // namespace cpx::io

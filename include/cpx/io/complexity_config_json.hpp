#pragma once
// The authors' config.json of COMPLEXITY-DEEP (their ModelConfig.to_dict(),
// docs/MODELS.md §13): read it, write a compiled configuration as one, and list every
// way a file contradicts a compiled configuration.
//
// Keys, in the authors' order: hidden_size, num_hidden_layers,
// intermediate_size, vocab_size, num_attention_heads, num_key_value_heads,
// attention_type, attention_dropout, use_qk_norm, sliding_window,
// max_position_embeddings, rope_theta, rope_type, mlp_type, hidden_act,
// num_experts, shared_expert, shared_intermediate_size, use_mu_guidance,
// use_mu_projection, disable_mu_guidance, norm_type, norm_eps,
// tie_word_embeddings, use_sdpa, use_cache, initializer_range, extra_config.
// Also read: rms_norm_eps (the inference code's name for norm_eps),
// use_token_routed_mlp (its alternative to mlp_type), model_type (ignored),
// rope_scaling {"type": "linear", "factor": f} (Hugging Face style, for
// rope_type "linear"), and prism_expansion_ratio / prism_freq_multiplier for
// attention_type "prism" (this library's PRISM-attention variant). Any other
// key is kept in `unrecognized` and not interpreted.
//
// mlp_type values: "token_routed", "swiglu" (dense) and "mixtral" for the
// learned top-1 router: the name the authors' run4 ablation script passes
// (docs/MODELS.md §10.2; complexity-framework scripts/train_ablation_150m.py).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
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

/// Parses config.json text; `source` names it in errors. A key of the wrong
/// type is a FormatError naming the key.
inline ComplexityJsonConfig parse_complexity_config(std::string_view text, std::string_view source = "config.json") {
    const Json doc = parse_json(text, source);
    JsonFields f(doc, std::string(source));
    ComplexityJsonConfig c;
    c.model_type = f.string("model_type");
    c.hidden_size = f.integer("hidden_size");
    c.num_hidden_layers = f.integer("num_hidden_layers");
    c.intermediate_size = f.integer("intermediate_size");
    c.vocab_size = f.integer("vocab_size");
    c.num_attention_heads = f.integer("num_attention_heads");
    c.num_key_value_heads = f.integer("num_key_value_heads");
    c.attention_type = f.string("attention_type");
    c.prism_expansion_ratio = f.integer("prism_expansion_ratio");
    c.prism_freq_multiplier = f.number("prism_freq_multiplier");
    c.attention_dropout = f.number("attention_dropout");
    c.use_qk_norm = f.boolean("use_qk_norm");
    c.sliding_window = f.integer("sliding_window");
    c.max_position_embeddings = f.integer("max_position_embeddings");
    c.rope_theta = f.number("rope_theta");
    c.rope_type = f.string("rope_type");
    if (const auto scaling = f.object("rope_scaling")) {
        JsonFields s(*scaling, std::string(source) + " rope_scaling");
        c.rope_scaling_type = s.string("type");
        if (!c.rope_scaling_type) c.rope_scaling_type = s.string("rope_type");
        c.rope_scaling_factor = s.number("factor");
        if (!c.rope_scaling_type || !c.rope_scaling_factor)
            raise<FormatError>(source, ": key 'rope_scaling' needs \"type\" and \"factor\", found ", scaling->dump());
    }
    c.mlp_type = f.string("mlp_type");
    c.use_token_routed_mlp = f.boolean("use_token_routed_mlp");
    c.hidden_act = f.string("hidden_act");
    c.num_experts = f.integer("num_experts");
    c.shared_expert = f.boolean("shared_expert");
    c.shared_intermediate_size = f.integer("shared_intermediate_size");
    c.use_mu_guidance = f.boolean("use_mu_guidance");
    c.use_mu_projection = f.boolean("use_mu_projection");
    c.disable_mu_guidance = f.boolean("disable_mu_guidance");
    c.norm_type = f.string("norm_type");
    c.norm_eps = f.number("norm_eps");
    if (const auto alias = f.number("rms_norm_eps")) {
        if (c.norm_eps && *c.norm_eps != *alias)
            raise<FormatError>(source, ": norm_eps ", Json(*c.norm_eps).dump(), " and rms_norm_eps ",
                               Json(*alias).dump(), " disagree");
        c.norm_eps = alias;
    }
    c.tie_word_embeddings = f.boolean("tie_word_embeddings");
    c.use_sdpa = f.boolean("use_sdpa");
    c.use_cache = f.boolean("use_cache");
    c.initializer_range = f.number("initializer_range");
    c.extra_config = f.object("extra_config");
    c.unrecognized = f.unread();
    return c;
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

/// The config.json object of `c`: the authors' keys in their order (null where
/// unset), then the alias and extension keys that are set, then `unrecognized`.
inline Json to_json(const ComplexityJsonConfig& c) {
    Json o = Json::object();
    set_if(o, "model_type", c.model_type);
    set_or_null(o, "hidden_size", c.hidden_size);
    set_or_null(o, "num_hidden_layers", c.num_hidden_layers);
    set_or_null(o, "intermediate_size", c.intermediate_size);
    set_or_null(o, "vocab_size", c.vocab_size);
    set_or_null(o, "num_attention_heads", c.num_attention_heads);
    set_or_null(o, "num_key_value_heads", c.num_key_value_heads);
    set_or_null(o, "attention_type", c.attention_type);
    set_if(o, "prism_expansion_ratio", c.prism_expansion_ratio);
    set_if(o, "prism_freq_multiplier", c.prism_freq_multiplier);
    set_or_null(o, "attention_dropout", c.attention_dropout);
    set_or_null(o, "use_qk_norm", c.use_qk_norm);
    set_or_null(o, "sliding_window", c.sliding_window);
    set_or_null(o, "max_position_embeddings", c.max_position_embeddings);
    set_or_null(o, "rope_theta", c.rope_theta);
    set_or_null(o, "rope_type", c.rope_type);
    if (c.rope_scaling_type || c.rope_scaling_factor) {
        Json s = Json::object();
        set_if(s, "type", c.rope_scaling_type);
        set_if(s, "factor", c.rope_scaling_factor);
        o.set("rope_scaling", std::move(s));
    }
    set_or_null(o, "mlp_type", c.mlp_type);
    set_if(o, "use_token_routed_mlp", c.use_token_routed_mlp);
    set_or_null(o, "hidden_act", c.hidden_act);
    set_or_null(o, "num_experts", c.num_experts);
    set_or_null(o, "shared_expert", c.shared_expert);
    set_or_null(o, "shared_intermediate_size", c.shared_intermediate_size);
    set_or_null(o, "use_mu_guidance", c.use_mu_guidance);
    set_or_null(o, "use_mu_projection", c.use_mu_projection);
    set_or_null(o, "disable_mu_guidance", c.disable_mu_guidance);
    set_or_null(o, "norm_type", c.norm_type);
    set_or_null(o, "norm_eps", c.norm_eps);
    set_or_null(o, "tie_word_embeddings", c.tie_word_embeddings);
    set_or_null(o, "use_sdpa", c.use_sdpa);
    set_or_null(o, "use_cache", c.use_cache);
    set_or_null(o, "initializer_range", c.initializer_range);
    set_or_null(o, "extra_config", c.extra_config);
    for (const auto& [k, v] : c.unrecognized.as_object()) o.set(k, v);
    return o;
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
    constexpr ComplexityDims d = C::dims;
    std::vector<std::string> out;
    auto text = [](const auto& v) { return Json(v).dump(); };
    auto differ = [&](std::string_view key, const auto& found, const auto& compiled, std::string_view note = {}) {
        out.push_back(std::string(key) + ": checkpoint " + text(found) + std::string(note) + ", compiled " +
                      text(compiled));
    };
    auto required = [&](std::string_view key, const std::optional<std::int64_t>& found, std::int64_t compiled) {
        if (!found) out.push_back(std::string(key) + ": absent, compiled " + text(compiled));
        else if (*found != compiled) differ(key, *found, compiled);
    };
    auto unsupported = [&](std::string_view key, const Json& found, std::string_view why) {
        out.push_back(std::string(key) + ": " + found.dump() + " is not supported (" + std::string(why) + ")");
    };
    const std::string_view defaulted = " (absent: the default)";

    required("hidden_size", c.hidden_size, C::hidden);
    required("num_hidden_layers", c.num_hidden_layers, C::layers);
    required("intermediate_size", c.intermediate_size, d.intermediate_size);
    required("vocab_size", c.vocab_size, C::vocab);
    required("num_attention_heads", c.num_attention_heads, C::heads);
    required("num_key_value_heads", c.num_key_value_heads, C::kv_heads);

    const std::string attention = c.attention_type.value_or("gqa");
    const bool prism_compiled = C::attention == AttentionKind::prism;
    const std::string compiled_attention = prism_compiled ? "prism" : "gqa";
    if (attention == "prism") {
        if (!prism_compiled) differ("attention_type", attention, compiled_attention);
        else {
            const std::int64_t ratio = c.prism_expansion_ratio.value_or(2);
            if (ratio != d.prism_expansion_ratio)
                differ("prism_expansion_ratio", ratio, d.prism_expansion_ratio,
                       c.prism_expansion_ratio ? std::string_view{} : defaulted);
            const double mult = c.prism_freq_multiplier.value_or(3.1415926535);
            if (mult != d.prism_freq_multiplier)
                differ("prism_freq_multiplier", mult, d.prism_freq_multiplier,
                       c.prism_freq_multiplier ? std::string_view{} : defaulted);
        }
    } else if (attention == "gqa" || attention == "mha" || attention == "mqa") {
        if (prism_compiled) differ("attention_type", attention, compiled_attention);
    } else {
        unsupported("attention_type", attention, "only gqa, mha, mqa and prism");
    }
    if (!c.use_qk_norm.value_or(true))
        unsupported("use_qk_norm", false, "the library always applies QK-norm, as the trained models do");
    if (c.sliding_window) unsupported("sliding_window", *c.sliding_window, "only full causal attention");
    required("max_position_embeddings", c.max_position_embeddings, C::max_positions);

    const double theta = c.rope_theta.value_or(10000.0);
    if (theta != d.rope_theta) differ("rope_theta", theta, d.rope_theta, c.rope_theta ? std::string_view{} : defaulted);
    const std::string rope_type = c.rope_type.value_or("standard");
    if (rope_type != "standard" && rope_type != "linear") {
        unsupported("rope_type", rope_type, "only standard and linear");
    } else if (c.rope_scaling_type && *c.rope_scaling_type != "linear") {
        unsupported("rope_scaling", *c.rope_scaling_type, "only linear position interpolation");
    } else if (rope_type == "linear" && !c.rope_scaling_factor) {
        out.push_back("rope_type: \"linear\" needs rope_scaling.factor, which is absent");
    } else {
        const double factor = c.rope_scaling_factor.value_or(1.0);
        if (factor != d.rope_scaling) differ("rope_scaling.factor", factor, d.rope_scaling);
    }

    // MLP kind: mlp_type, or the inference code's use_token_routed_mlp.
    std::optional<MlpKind> mlp;
    if (c.mlp_type) {
        if (*c.mlp_type == "token_routed") mlp = MlpKind::token_routed;
        else if (*c.mlp_type == "swiglu") mlp = MlpKind::dense_swiglu;
        else if (*c.mlp_type == "mixtral") mlp = MlpKind::learned_router;
        else unsupported("mlp_type", *c.mlp_type, "only token_routed, swiglu and mixtral");
    }
    if (c.use_token_routed_mlp) {
        const MlpKind alt = *c.use_token_routed_mlp ? MlpKind::token_routed : MlpKind::dense_swiglu;
        if (mlp && *mlp != alt)
            out.push_back("mlp_type: " + text(*c.mlp_type) + " contradicts use_token_routed_mlp " +
                          text(*c.use_token_routed_mlp));
        if (!c.mlp_type) mlp = alt;
    }
    const std::string compiled_mlp(detail::mlp_type_name(C::mlp));
    if (!c.mlp_type && !c.use_token_routed_mlp) out.push_back("mlp_type: absent, compiled " + text(compiled_mlp));
    else if (mlp && *mlp != C::mlp) differ("mlp_type", std::string(detail::mlp_type_name(*mlp)), compiled_mlp);

    if (const std::string act = c.hidden_act.value_or("silu"); act != "silu")
        unsupported("hidden_act", act, "the SwiGLU experts use silu");
    const std::int64_t experts = c.num_experts.value_or(1);
    if (experts != C::experts)
        differ("num_experts", experts, C::experts, c.num_experts ? std::string_view{} : defaulted);
    if constexpr (C::routed) {
        const bool shared = c.shared_expert.value_or(true);
        if (shared != C::has_shared_expert)
            differ("shared_expert", shared, C::has_shared_expert, c.shared_expert ? std::string_view{} : defaulted);
        else if (shared) {
            if (!c.shared_intermediate_size) {
                if (C::shared_width != C::expert_width)
                    out.push_back("shared_intermediate_size: checkpoint null (the expert width), compiled " +
                                  text(C::shared_width));
            } else if (*c.shared_intermediate_size != C::shared_width) {
                differ("shared_intermediate_size", *c.shared_intermediate_size, C::shared_width);
            }
        }
    }

    // The framework runs mu guidance when (use_mu_guidance or use_mu_projection) and not disable_mu_guidance.
    const bool mu_flag = c.use_mu_guidance.value_or(false), mu_proj = c.use_mu_projection.value_or(false),
               mu_off = c.disable_mu_guidance.value_or(false);
    const bool mu = (mu_flag || mu_proj) && !mu_off;
    if (mu != C::use_mu) {
        std::string note;
        if (mu_proj || mu_off)
            note = " (use_mu_guidance " + text(mu_flag) + ", use_mu_projection " + text(mu_proj) +
                   ", disable_mu_guidance " + text(mu_off) + ")";
        else if (!c.use_mu_guidance)
            note = std::string(defaulted);
        differ("use_mu_guidance", mu, C::use_mu, note);
    }

    if (const std::string norm = c.norm_type.value_or("rmsnorm"); norm != "rmsnorm")
        unsupported("norm_type", norm, "only rmsnorm");
    const double eps = c.norm_eps.value_or(1e-6);
    if (eps != d.norm_eps) differ("norm_eps", eps, d.norm_eps, c.norm_eps ? std::string_view{} : defaulted);
    if (!c.tie_word_embeddings.value_or(true))
        unsupported("tie_word_embeddings", false, "the output head is the tied embedding");
    return out;
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

#pragma once
// PRISM's model configuration as JSON: the reference code's GPTConfig keys
// (nanoGPT's block_size, vocab_size, n_layer, n_head, n_embd, dropout, bias,
// plus prism_expansion_ratio, prism_freq_multiplier, prism_lambda_start,
// prism_lambda_end), as a checkpoint export writes them. The reference fixes
// the RoPE base at 10000, LayerNorm eps at 1e-5 and interleaved RoPE pairs; a
// compiled configuration that differs is written with the extension keys
// rope_theta / layer_norm_eps and reported as a mismatch against files
// without them. dropout and the lambda schedule only matter in training
// (lambda itself is a checkpoint buffer) and are not checked. Any other key
// is kept in `unrecognized`.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cpx/config/prism_config.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/json.hpp"
#include "cpx/io/json_fields.hpp"

namespace cpx::io {

/// A parsed PRISM config. Each member is nullopt when its key is absent or null.
struct PrismJsonConfig {
    std::optional<std::int64_t> block_size;
    std::optional<std::int64_t> vocab_size;
    std::optional<std::int64_t> n_layer;
    std::optional<std::int64_t> n_head;
    std::optional<std::int64_t> n_embd;
    std::optional<double> dropout;
    std::optional<bool> bias;
    std::optional<std::int64_t> prism_expansion_ratio;
    std::optional<double> prism_freq_multiplier;
    std::optional<double> prism_lambda_start;
    std::optional<double> prism_lambda_end;
    std::optional<double> rope_theta;      ///< extension: absent means the reference's 10000
    std::optional<double> layer_norm_eps;  ///< extension: absent means the reference's 1e-5
    Json unrecognized = Json::object();

    bool operator==(const PrismJsonConfig&) const = default;
};

/// The reference code's fixed values and GPTConfig defaults.
struct PrismReference {
    static constexpr double rope_theta = 10000.0;
    static constexpr double layer_norm_eps = 1e-5;
    static constexpr bool bias = true;
    static constexpr std::int64_t prism_expansion_ratio = 2;
    static constexpr double prism_freq_multiplier = 3.1415926535;
};

inline PrismJsonConfig parse_prism_config(std::string_view text, std::string_view source = "config.json") {
    const Json doc = parse_json(text, source);
    JsonFields f(doc, std::string(source));
    PrismJsonConfig c;
    c.block_size = f.integer("block_size");
    c.vocab_size = f.integer("vocab_size");
    c.n_layer = f.integer("n_layer");
    c.n_head = f.integer("n_head");
    c.n_embd = f.integer("n_embd");
    c.dropout = f.number("dropout");
    c.bias = f.boolean("bias");
    c.prism_expansion_ratio = f.integer("prism_expansion_ratio");
    c.prism_freq_multiplier = f.number("prism_freq_multiplier");
    c.prism_lambda_start = f.number("prism_lambda_start");
    c.prism_lambda_end = f.number("prism_lambda_end");
    c.rope_theta = f.number("rope_theta");
    c.layer_norm_eps = f.number("layer_norm_eps");
    c.unrecognized = f.unread();
    return c;
}

inline PrismJsonConfig read_prism_config(const std::filesystem::path& path) {
    return parse_prism_config(read_text_file(path), path.string());
}

/// The JSON object of `c` in GPTConfig's key order; keys that are unset are left out.
inline Json to_json(const PrismJsonConfig& c) {
    Json o = Json::object();
    set_if(o, "block_size", c.block_size);
    set_if(o, "vocab_size", c.vocab_size);
    set_if(o, "n_layer", c.n_layer);
    set_if(o, "n_head", c.n_head);
    set_if(o, "n_embd", c.n_embd);
    set_if(o, "dropout", c.dropout);
    set_if(o, "bias", c.bias);
    set_if(o, "prism_expansion_ratio", c.prism_expansion_ratio);
    set_if(o, "prism_freq_multiplier", c.prism_freq_multiplier);
    set_if(o, "prism_lambda_start", c.prism_lambda_start);
    set_if(o, "prism_lambda_end", c.prism_lambda_end);
    set_if(o, "rope_theta", c.rope_theta);
    set_if(o, "layer_norm_eps", c.layer_norm_eps);
    for (const auto& [k, v] : c.unrecognized.as_object()) o.set(k, v);
    return o;
}

/// The compiled configuration P as a PRISM config (dropout 0: inference).
template <PrismConfigType P>
PrismJsonConfig prism_json_config() {
    constexpr PrismDims d = P::dims;
    PrismJsonConfig c;
    c.block_size = P::max_positions;
    c.vocab_size = P::vocab;
    c.n_layer = P::layers;
    c.n_head = P::heads;
    c.n_embd = P::hidden;
    c.dropout = 0.0;
    c.bias = P::bias;
    c.prism_expansion_ratio = P::expansion;
    c.prism_freq_multiplier = d.prism_freq_multiplier;
    if (d.rope_theta != PrismReference::rope_theta) c.rope_theta = d.rope_theta;
    if (d.layer_norm_eps != PrismReference::layer_norm_eps) c.layer_norm_eps = d.layer_norm_eps;
    return c;
}

template <PrismConfigType P>
std::string prism_config_json() {
    return to_json(prism_json_config<P>()).dump(2) + "\n";
}

/// Every key of `c` that contradicts the compiled configuration P, one line
/// each: "n_head: checkpoint 8, compiled 4". The dimensions must be given;
/// other keys take the reference's defaults when absent.
template <PrismConfigType P>
std::vector<std::string> config_mismatches(const PrismJsonConfig& c) {
    constexpr PrismDims d = P::dims;
    std::vector<std::string> out;
    auto text = [](const auto& v) { return Json(v).dump(); };
    const std::string_view defaulted = " (absent: the reference's value)";
    auto differ = [&](std::string_view key, const auto& found, const auto& compiled, bool given) {
        out.push_back(std::string(key) + ": checkpoint " + text(found) + std::string(given ? "" : defaulted) +
                      ", compiled " + text(compiled));
    };
    auto required = [&](std::string_view key, const std::optional<std::int64_t>& found, std::int64_t compiled) {
        if (!found) out.push_back(std::string(key) + ": absent, compiled " + text(compiled));
        else if (*found != compiled) differ(key, *found, compiled, true);
    };
    auto optional_value = [&](std::string_view key, const auto& found, const auto& fallback, const auto& compiled) {
        const auto value = found.value_or(fallback);
        if (value != compiled) differ(key, value, compiled, found.has_value());
    };
    required("block_size", c.block_size, P::max_positions);
    required("vocab_size", c.vocab_size, P::vocab);
    required("n_layer", c.n_layer, P::layers);
    required("n_head", c.n_head, P::heads);
    required("n_embd", c.n_embd, P::hidden);
    optional_value("bias", c.bias, PrismReference::bias, P::bias);
    optional_value("prism_expansion_ratio", c.prism_expansion_ratio, PrismReference::prism_expansion_ratio,
                   std::int64_t{P::expansion});
    optional_value("prism_freq_multiplier", c.prism_freq_multiplier, PrismReference::prism_freq_multiplier,
                   d.prism_freq_multiplier);
    optional_value("rope_theta", c.rope_theta, PrismReference::rope_theta, d.rope_theta);
    optional_value("layer_norm_eps", c.layer_norm_eps, PrismReference::layer_norm_eps, d.layer_norm_eps);
    if (d.rope_convention != RopeConvention::interleaved_pairs)
        out.push_back("rope convention: checkpoint interleaved pairs (fixed by the reference code), compiled rotate_half");
    return out;
}

/// Throws ShapeError listing every mismatch of config_mismatches<P>(c).
template <PrismConfigType P>
void check_config(const PrismJsonConfig& c, std::string_view source = "config.json") {
    throw_config_problems(source, config_mismatches<P>(c));
}

template <PrismConfigType P>
PrismJsonConfig check_config_file(const std::filesystem::path& path) {
    PrismJsonConfig c = read_prism_config(path);
    check_config<P>(c, path.string());
    return c;
}

}  // namespace cpx::io

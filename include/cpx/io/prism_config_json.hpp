#pragma once
// PRISM's model configuration as JSON: the reference code's GPTConfig keys
// (nanoGPT's plus PRISM's own; prism_keys below), as a checkpoint export
// writes them. The reference fixes
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
#include <tuple>
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

namespace detail {
using PJ = PrismJsonConfig;
}

/// Every key, in GPTConfig's order; the writer leaves unset keys out.
inline constexpr auto prism_keys = std::tuple{
    key_when_set("block_size", &detail::PJ::block_size),
    key_when_set("vocab_size", &detail::PJ::vocab_size),
    key_when_set("n_layer", &detail::PJ::n_layer),
    key_when_set("n_head", &detail::PJ::n_head),
    key_when_set("n_embd", &detail::PJ::n_embd),
    key_when_set("dropout", &detail::PJ::dropout),
    key_when_set("bias", &detail::PJ::bias),
    key_when_set("prism_expansion_ratio", &detail::PJ::prism_expansion_ratio),
    key_when_set("prism_freq_multiplier", &detail::PJ::prism_freq_multiplier),
    key_when_set("prism_lambda_start", &detail::PJ::prism_lambda_start),
    key_when_set("prism_lambda_end", &detail::PJ::prism_lambda_end),
    key_when_set("rope_theta", &detail::PJ::rope_theta),
    key_when_set("layer_norm_eps", &detail::PJ::layer_norm_eps),
};

inline PrismJsonConfig parse_prism_config(std::string_view text, std::string_view source = "config.json") {
    return parse_config<PrismJsonConfig>(text, source, prism_keys);
}

inline PrismJsonConfig read_prism_config(const std::filesystem::path& path) {
    return parse_prism_config(read_text_file(path), path.string());
}

/// The JSON object of `c`: prism_keys that are set, in order, then `unrecognized`.
inline Json to_json(const PrismJsonConfig& c) {
    return config_to_json(c, prism_keys);
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
    using detail::PJ;
    constexpr PrismDims d = P::dims;
    ConfigComparison cmp(c, prism_keys, " (absent: the reference's value)");
    cmp.required(&PJ::block_size, P::max_positions);
    cmp.required(&PJ::vocab_size, P::vocab);
    cmp.required(&PJ::n_layer, P::layers);
    cmp.required(&PJ::n_head, P::heads);
    cmp.required(&PJ::n_embd, P::hidden);
    cmp.compare(&PJ::bias, PrismReference::bias, P::bias);
    cmp.compare(&PJ::prism_expansion_ratio, PrismReference::prism_expansion_ratio, std::int64_t{P::expansion});
    cmp.compare(&PJ::prism_freq_multiplier, PrismReference::prism_freq_multiplier, d.prism_freq_multiplier);
    cmp.compare(&PJ::rope_theta, PrismReference::rope_theta, d.rope_theta);
    cmp.compare(&PJ::layer_norm_eps, PrismReference::layer_norm_eps, d.layer_norm_eps);
    if (d.rope_convention != RopeConvention::interleaved_pairs)
        cmp.line("rope convention: checkpoint interleaved pairs (fixed by the reference code), compiled rotate_half");
    return std::move(cmp).lines();
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

#pragma once
// One COMPLEXITY-DEEP layer on its own: its parameters (any type of
// models/complexity/layer_params.hpp) drawn with the initialisation of docs/MODELS.md §11 or
// read from one layer of a whole model's checkpoint, without building the
// rest of the model.
//
//   auto mlp = cpx::random_layer<cpx::TokenRoutedMlpParams<C>>(seed);        // as layer 0 of random(seed)
//   auto mlp = cpx::load_layer<cpx::TokenRoutedMlpParams<C>>("run2", 5);     // layers.5.mlp.* of a checkpoint
//   auto table = cpx::load_layer_routing<C>("run2", 5);                      // layer 5's [top_k, V] routes
//
// Both walk the layer's slots, so they use the names, shapes and seeded
// streams of the whole model: random_layer<P>(seed, i) equals layer i of
// ComplexityWeights<C>::random(seed), and load_layer accepts every layout the
// model loader accepts (a "model." prefix, the three expert layouts, F32 /
// BF16 / F16). Tensors of other layers are left unread.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "cpx/config/describe.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/checkpoint.hpp"
#include "cpx/io/checkpoint_validator.hpp"
#include "cpx/io/complexity_config_json.hpp"
#include "cpx/models/complexity/layer_params.hpp"
#include "cpx/models/expert_layouts.hpp"
#include "cpx/models/orthogonal_fill.hpp"
#include "cpx/router/modulo_routing.hpp"

namespace cpx {

/// The parameters of layer `layer` of a model initialised with `seed`.
template <LayerParams P>
P random_layer(std::uint64_t seed, int layer = 0) {
    require<InputError>(layer >= 0 && layer < P::Config::layers, "random_layer: layer ", layer, " outside [0, ",
                        P::Config::layers, ")");
    P params;
    initialize_slots<P::needs_orthogonal>(layer_slots(params, layer), seed);
    return params;
}

namespace detail {
/// "model." when the checkpoint prefixes its keys so (looked up on the layer's own tensors).
inline std::string layer_key_prefix(const io::Checkpoint& ckpt, int layer) {
    const std::string bare = layer_prefix(layer), prefixed = "model." + bare;
    bool has_bare = false, has_prefixed = false;
    for (const std::string& n : ckpt.names()) {
        has_bare = has_bare || n.starts_with(bare);
        has_prefixed = has_prefixed || n.starts_with(prefixed);
    }
    return !has_bare && has_prefixed ? "model." : "";
}

/// Checks config.json beside or inside `path` against the compiled configuration, when there is one.
template <ComplexityConfigType C>
void check_layer_config(const std::filesystem::path& path) {
    std::error_code ec;
    const auto config = (std::filesystem::is_directory(path, ec) ? path : path.parent_path()) / "config.json";
    if (io::entry_exists(config)) (void)io::check_config_file<C>(config);
}
}  // namespace detail

/// Reads layer `layer`'s parameters from a checkpoint (directory, shard index
/// or .safetensors file) of a model with configuration P::Config; a
/// config.json found there must match it. Every missing or misshapen tensor of
/// the layer is reported at once.
template <LayerParams P>
P load_layer(const std::filesystem::path& path, int layer) {
    using C = typename P::Config;
    require<InputError>(layer >= 0 && layer < C::layers, "load_layer: layer ", layer, " outside [0, ", C::layers,
                        ")");
    detail::check_layer_config<C>(path);
    const io::Checkpoint ckpt = io::Checkpoint::open(path);
    const std::string pre = detail::layer_key_prefix(ckpt, layer);
    P params;
    const auto slots = layer_slots(params, layer);
    io::CheckpointValidator v(ckpt);
    constexpr bool routed = std::is_base_of_v<RoutedExpertParams<C, typename P::weight_type>, P>;
    for (const auto& s : slots)
        if (!(routed && detail::is_expert_slot(s.name))) detail::expect_float(v, pre + s.name, s.shape);
    ExpertLayout layout = ExpertLayout::none;
    if constexpr (routed) layout = detail::expect_experts<C>(ckpt, v, pre + layer_prefix(layer), layer);
    v.throw_if_errors("layer " + std::to_string(layer) + " for the compiled configuration " + describe(C::dims));

    std::vector<float> values;
    for (const auto& s : slots) {
        if (routed && detail::is_expert_slot(s.name)) continue;
        values.resize(static_cast<std::size_t>(s.elements()));
        ckpt.read(pre + s.name, std::span<float>(values));
        s.assign(values);
    }
    if constexpr (routed) detail::read_experts(ckpt, layout, pre + layer_prefix(layer), params);
    return params;
}

/// The routing table [top_k, V] of layer `layer` of a token-routed
/// checkpoint: its mlp.topk_token_to_expert, or its mlp.token_to_expert
/// extended by the cyclic rule; every entry checked.
template <ComplexityConfigType C>
std::vector<std::int32_t> load_layer_routing(const std::filesystem::path& path, int layer)
    requires(C::mlp == MlpKind::token_routed)
{
    require<InputError>(layer >= 0 && layer < C::layers, "load_layer_routing: layer ", layer, " outside [0, ",
                        C::layers, ")");
    detail::check_layer_config<C>(path);
    const io::Checkpoint ckpt = io::Checkpoint::open(path);
    const std::string p = detail::layer_key_prefix(ckpt, layer) + layer_prefix(layer);
    io::CheckpointValidator v(ckpt);
    const detail::LayerRouting found = detail::expect_routing<C>(ckpt, v, p);
    if (found == detail::LayerRouting::none)
        v.note("missing tensor '" + RoutingNames{p}.primary() + "' (or '" + RoutingNames{p}.top_k() +
               "')");
    v.throw_if_errors("routing table of layer " + std::to_string(layer));
    return detail::read_layer_routes<C>(ckpt, found, p);
}

/// The table [top_k, V] a model without a checkpoint routes by: token t to
/// experts (t mod E + r) mod E, r < top_k.
template <ComplexityConfigType C>
std::vector<std::int32_t> modulo_routing()
    requires(C::mlp == MlpKind::token_routed)
{
    return router::cyclic_routes(router::modulo_routing(static_cast<std::size_t>(C::vocab), C::experts), C::top_k,
                                 C::experts);
}

}  // namespace cpx

#pragma once
// The layouts in which a checkpoint may store one layer's routed experts, and
// their conversion to the compute layout (RoutedExpertParams: gate_up
// [E, d, 2 I_e] with gate | up columns, down [E, I_e, d]). Used by the model
// loader for every layer and by the single-layer loader.
//   split_input_major   mlp.gate_proj_w / up_proj_w [E, d, I_e] + down_proj_w [E, I_e, d]
//                       (the framework)
//   fused_input_major   mlp.gate_up_proj [E, d, 2 I_e] + mlp.down_proj [E, I_e, d]
//                       (its first public version and the learned-router ablation)
//   per_expert_linear   mlp.experts.{e}.{gate_proj,up_proj}.weight [I_e, d] + down_proj.weight [d, I_e]
//                       (nn.Linear layout: the pilot and the vLLM plugin)
// Also the routing tables a layer may carry (int64 or int32): the primary
// route mlp.token_to_expert [V] and all routes mlp.topk_token_to_expert
// [top_k, V] (the authors' later models, docs/MODELS.md §8.5). The names are
// those of ExpertNames and RoutingNames (models/complexity/layer_params.hpp).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/io/checkpoint.hpp"
#include "cpx/io/checkpoint_validator.hpp"
#include "cpx/models/complexity/layer_params.hpp"
#include "cpx/router/top_k_routing.hpp"

namespace cpx {

/// How the routed experts of a checkpoint were laid out.
enum class ExpertLayout { none, split_input_major, fused_input_major, per_expert_linear };

namespace detail {

inline bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// Whether a slot name is one of the routed experts' (read through the layouts
/// below rather than slot by slot).
inline bool is_expert_slot(std::string_view name) {
    const ExpertNames n{""};
    for (const std::string& suffix : {n.gate(), n.up(), n.down(), n.gate_up(), n.fused_down()})
        if (ends_with(name, suffix)) return true;
    return false;
}

inline void expect_float(io::CheckpointValidator& v, const std::string& name, const std::vector<std::int64_t>& shape) {
    if (v.expect(name, shape)) v.expect_dtype_in(name, {DType::f32, DType::bf16, DType::f16});
}

/// Finds the layout of layer `layer`'s experts and records every expected
/// tensor with `v` (missing or misshapen ones become problems there).
template <ComplexityConfigType C>
ExpertLayout expect_experts(const io::Checkpoint& ckpt, io::CheckpointValidator& v, const std::string& p, int layer) {
    constexpr std::int64_t d = C::hidden, E = C::experts, I = C::expert_width;
    const ExpertNames n{p};
    if (ckpt.contains(n.gate()) || ckpt.contains(n.up()) || ckpt.contains(n.down())) {
        expect_float(v, n.gate(), {E, d, I});
        expect_float(v, n.up(), {E, d, I});
        expect_float(v, n.down(), {E, I, d});
        return ExpertLayout::split_input_major;
    }
    if (ckpt.contains(n.gate_up())) {
        expect_float(v, n.gate_up(), {E, d, 2 * I});
        expect_float(v, n.fused_down(), {E, I, d});
        return ExpertLayout::fused_input_major;
    }
    if (ckpt.contains(n.expert_gate(0))) {
        for (int e = 0; e < E; ++e) {
            expect_float(v, n.expert_gate(e), {I, d});
            expect_float(v, n.expert_up(e), {I, d});
            expect_float(v, n.expert_down(e), {d, I});
        }
        return ExpertLayout::per_expert_linear;
    }
    v.note("layer " + std::to_string(layer) + ": missing routed experts (expected " + n.gate() +
           "/up_proj_w/down_proj_w, or " + n.gate_up() + " with mlp.down_proj, or " + n.expert_gate(0) +
           " and the other experts.{e} tensors)");
    return ExpertLayout::none;
}

/// Reads a validated layer's experts, in `layout`, into the compute layout.
template <ComplexityConfigType C, class W>
void read_experts(const io::Checkpoint& ckpt, ExpertLayout layout, const std::string& p, RoutedExpertParams<C, W>& out) {
    constexpr std::int64_t d = C::hidden, E = C::experts, I = C::expert_width;
    const ExpertNames n{p};
    std::vector<float> gate(E * d * I), up(E * d * I), down(E * I * d), values;
    const auto read = [&](const std::string& name) -> const std::vector<float>& {
        values.resize(static_cast<std::size_t>(ckpt.get(name).numel()));
        ckpt.read(name, std::span<float>(values));
        return values;
    };
    if (layout == ExpertLayout::split_input_major) {
        gate = read(n.gate()), up = read(n.up()), down = read(n.down());
    } else if (layout == ExpertLayout::fused_input_major) {
        const auto& gu = read(n.gate_up());
        for (std::int64_t e = 0; e < E; ++e)
            for (std::int64_t i = 0; i < d; ++i)
                for (std::int64_t j = 0; j < I; ++j) {
                    gate[(e * d + i) * I + j] = gu[(e * d + i) * 2 * I + j];
                    up[(e * d + i) * I + j] = gu[(e * d + i) * 2 * I + I + j];
                }
        down = read(n.fused_down());
    } else {
        require<InputError>(layout == ExpertLayout::per_expert_linear, "read_experts: no expert layout");
        for (int e = 0; e < E; ++e) {  // nn.Linear [out, in] transposed to input-major
            const auto& g = read(n.expert_gate(e));
            for (std::int64_t j = 0; j < I; ++j)
                for (std::int64_t i = 0; i < d; ++i) gate[(e * d + i) * I + j] = g[j * d + i];
            const auto& u = read(n.expert_up(e));
            for (std::int64_t j = 0; j < I; ++j)
                for (std::int64_t i = 0; i < d; ++i) up[(e * d + i) * I + j] = u[j * d + i];
            const auto& dn = read(n.expert_down(e));
            for (std::int64_t c = 0; c < d; ++c)
                for (std::int64_t j = 0; j < I; ++j) down[(e * I + j) * d + c] = dn[c * I + j];
        }
    }
    for (std::int64_t e = 0; e < E; ++e)
        for (std::int64_t i = 0; i < d; ++i)
            for (std::int64_t j = 0; j < I; ++j) {
                out.gate_up[(e * d + i) * 2 * I + j] = from_float<W>(gate[(e * d + i) * I + j]);
                out.gate_up[(e * d + i) * 2 * I + I + j] = from_float<W>(up[(e * d + i) * I + j]);
            }
    for (std::size_t k = 0; k < down.size(); ++k) out.down[k] = from_float<W>(down[k]);
}

/// Which routing tables a layer of a checkpoint carries.
enum class LayerRouting { none, primary, top_k };

/// Records with `v` the shape and dtype each routing table of the layer must
/// have (int64 or int32; [top_k, V] and [V]) and says which it carries.
template <ComplexityConfigType C>
LayerRouting expect_routing(const io::Checkpoint& ckpt, io::CheckpointValidator& v, const std::string& p) {
    const RoutingNames n{p};
    const auto expect = [&](const std::string& name, std::vector<std::int64_t> shape) {
        if (v.expect(name, shape)) v.expect_dtype_in(name, {DType::i64, DType::i32});
    };
    LayerRouting found = LayerRouting::none;
    if (ckpt.contains(n.primary())) {
        expect(n.primary(), {C::vocab});
        found = LayerRouting::primary;
    }
    if (ckpt.contains(n.top_k())) {
        expect(n.top_k(), {C::top_k, C::vocab});
        found = LayerRouting::top_k;
    }
    return found;
}

/// The integer table `name` of `count` entries (int64 or int32), every entry
/// checked to be an expert of [0, E).
template <ComplexityConfigType C>
std::vector<std::int32_t> read_expert_ids(const io::Checkpoint& ckpt, const std::string& name, std::size_t count) {
    std::vector<std::int64_t> ids(count);
    ckpt.read(name, std::span<std::int64_t>(ids));
    std::vector<std::int32_t> out(count);
    for (std::size_t i = 0; i < count; ++i) {
        if (ids[i] < 0 || ids[i] >= C::experts)
            raise<FormatError>(ckpt.context(), "tensor '", name, "' routes token ", i % static_cast<std::size_t>(C::vocab),
                               count > static_cast<std::size_t>(C::vocab)
                                   ? " (route " + std::to_string(i / static_cast<std::size_t>(C::vocab)) + ")"
                                   : std::string(),
                               " to expert ", ids[i], ", outside [0, ", C::experts, ")");
        out[i] = static_cast<std::int32_t>(ids[i]);
    }
    return out;
}

/// Layer routing [top_k, V] of a validated layer: its topk_token_to_expert as
/// stored, or the cyclic rule over its token_to_expert. When a layer carries
/// both and they disagree on route 0, the top-k table wins (as in the authors'
/// loader) and a line is added to `notes`.
template <ComplexityConfigType C>
std::vector<std::int32_t> read_layer_routes(const io::Checkpoint& ckpt, LayerRouting found, const std::string& p,
                                            std::vector<std::string>* notes = nullptr) {
    const RoutingNames n{p};
    const auto vocab = static_cast<std::size_t>(C::vocab);
    if (found == LayerRouting::top_k) {
        std::vector<std::int32_t> table = read_expert_ids<C>(ckpt, n.top_k(), vocab * C::top_k);
        if (notes && ckpt.contains(n.primary())) {
            const std::vector<std::int32_t> primary = read_expert_ids<C>(ckpt, n.primary(), vocab);
            std::size_t differ = 0;
            for (std::size_t t = 0; t < vocab; ++t) differ += primary[t] != table[t] ? 1 : 0;
            if (differ)
                notes->push_back("'" + n.primary() + "' differs from route 0 of '" + n.top_k() + "' for " +
                                 std::to_string(differ) + " tokens; the top-k table is used");
        }
        return table;
    }
    require<InputError>(found == LayerRouting::primary, "read_layer_routes: the layer carries no routing table");
    return router::cyclic_routes(read_expert_ids<C>(ckpt, n.primary(), vocab), C::top_k, C::experts);
}

}  // namespace detail
}  // namespace cpx

#pragma once
// The owning weights of a COMPLEXITY-DEEP model, in the layout the CPU layers
// compute with, and the map from that layout to the authors' checkpoint
// tensors (docs/MODELS.md §12.1; layout §12.3) through which initialisation, loading and saving
// all go.
//
// Compute layout (W = float or bf16 for the matrices; vectors stay fp32):
//   attention qkv     [q_width + 2 kv_width, d or 2d]: rows q, k, v; columns [W | W_mu]
//   o_proj            [d, q_width]
//   routed experts    gate_up [E, d, 2 I_e] (gate | up columns), down [E, I_e, d]  (x . W)
//   shared expert     gate_up [2 I_s, d] (gate rows, then up rows), down [d, I_s]  (x . W^T)
//   dense MLP         gate_up [2 I, d], down [d, I]
// Models without mu guidance keep no mu weights: the authors' checkpoints
// carry unused mu_to_* tensors for them, which loading skips.
// A decoder with PRISM attention (AttentionKind::prism) holds, instead of the
// q/k/v/o projections and QK-norms, PRISM's dictionary and noise weight under
// the names layers.{i}.self_attn.u_proj.weight [2HD, d] and
// layers.{i}.self_attn.lambda_q [] (the reference's names inside this model's
// naming scheme).
// Each layer's tensors, names and initialisation are those of its owning
// parameter type (models/complexity/layer_params.hpp); this adds the
// embedding, the final norm, mu_init and each layer's two RMSNorm weights.
// Free of Eigen and CUDA: the CPU model reads these buffers through views
// (models/complexity/cpu_views.hpp, which makes the per-layer accessors below
// usable), and the GPU model uploads them as they are (models/complexity/model.cuh).

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/runtime/aligned_buffer.hpp"
#include "cpx/cpu/runtime/weight_arena.hpp"
#include "cpx/models/complexity/layer_params.hpp"
#include "cpx/models/initialize_slots.hpp"
#include "cpx/models/stored_matrices.hpp"
#include "cpx/models/tensor_slot.hpp"
#include "cpx/router/modulo_routing.hpp"
#include "cpx/router/token_routing.hpp"
#include "cpx/router/top_k_routing.hpp"

namespace cpx {

/// A layer without mu guidance holds no mu parameters.
struct NoMuGuidance {
    template <class Self, class Wq>
    static void add_slots(Self&, SlotList<Wq>&, const std::string&) {}
};

/// The weights of a model with configuration C, matrices stored as W.
template <ComplexityConfigType C, class W = float>
struct ComplexityWeights : ReleaseMark {
    static_assert(std::is_same_v<W, float> || std::is_same_v<W, bf16>, "weights are stored as float or bf16");
    using Config = C;
    using weight_type = W;

    static constexpr int d = C::hidden;
    static constexpr int input_width = MuGqaAttentionParams<C, W>::input_width;
    static constexpr int qkv_width = MuGqaAttentionParams<C, W>::qkv_width;
    /// Width of the routed experts or of the dense MLP.
    static constexpr int mlp_width = C::expert_width;
    static constexpr int mlp_experts = C::routed ? C::experts : 1;
    static constexpr bool prism = C::attention == AttentionKind::prism;

    /// The token embedding [V, d], also the tied output head.
    static constexpr const char* embedding_name = "embed_tokens.weight";

    using AttentionParams = std::conditional_t<prism, PrismAttentionParams<C, W>, MuGqaAttentionParams<C, W>>;
    using MlpParams = MlpParamsOf<C, W>;
    using MuParams = std::conditional_t<C::use_mu, MuGuidanceParams<C, W>, NoMuGuidance>;

    /// One decoder layer: its two RMSNorm weights and its layers' parameters
    /// (models/complexity/layer_params.hpp).
    struct Layer {
        cpu::AlignedVector<float> input_layernorm = cpu::AlignedVector<float>(d, 0.0f);
        cpu::AlignedVector<float> post_attention_layernorm = cpu::AlignedVector<float>(d, 0.0f);
        AttentionParams attention;
        MlpParams mlp;
        [[no_unique_address]] MuParams mu_guidance;
        /// Token-routed models: this layer's routing table [top_k, V], route r
        /// of token t at r * V + t (mlp.topk_token_to_expert, or built from
        /// mlp.token_to_expert by the cyclic rule). Empty otherwise.
        std::vector<std::int32_t> routes;
    };

    cpu::WeightVector<W> embed_tokens;   // [V, d]
    cpu::AlignedVector<float> norm;      // [d]
    cpu::AlignedVector<float> mu_init;   // [d] (mu models)
    std::vector<Layer> layers;

    /// Every tensor allocated, zero-filled; every layer routes token t to
    /// experts (t mod E + r) mod E, r < top_k. The example programs and
    /// checkpoints replace the tables (set_routing, set_layer_routes).
    ComplexityWeights()
        : embed_tokens(static_cast<std::size_t>(C::vocab) * d), norm(d, 0.0f), layers(C::layers) {
        if constexpr (C::use_mu) mu_init.assign(d, 0.0f);
        if constexpr (C::mlp == MlpKind::token_routed)
            set_routing(router::modulo_routing(static_cast<std::size_t>(C::vocab), C::experts));
    }

    /// The initialisation of docs/MODELS.md §11, each tensor from its own seeded
    /// stream named after it. The routing tables are left as they are.
    static ComplexityWeights random(std::uint64_t seed) {
        ComplexityWeights w;
        w.initialize(seed);
        return w;
    }

    /// Decoders with PRISM attention hold an orthogonal U: their initialisation
    /// needs <cpx/models/orthogonal_fill.hpp> (Eigen's QR; the CPU model includes it).
    void initialize(std::uint64_t seed) { initialize_slots<prism>(slots(), seed); }

    /// The checkpoint tensors this model holds, in the framework's names and
    /// shapes (the routing tables, integer buffers, are separate: routing()).
    /// An InputError once the layer matrices are released.
    std::vector<TensorSlot<W>> slots() { return build_slots(*this); }
    std::vector<TensorSlot<const W>> slots() const { return build_slots(*this); }

    /// Frees layer l's matrices that the packed arithmetic holds in its packs
    /// (models/complexity/packs.hpp: keep the two lists alike): attention's (PRISM attention's U
    /// unless keeps.prism_u), the routed and
    /// shared experts', the dense MLP's and mu guidance's; returns the bytes freed. Layers may
    /// be freed from several threads at once, each layer by one. The models free every layer
    /// once the packs exist (release_stored_matrices) or each as it is packed, then call
    /// finish_release (both through release_packed_layers, models/stored_matrices.hpp);
    /// afterwards slots(), and so saving, converting and uploading to a GPU, are InputErrors.
    std::size_t free_packed_layer(int l, ReleaseKeeps keeps) {
        Layer& layer = layers[static_cast<std::size_t>(l)];
        std::size_t freed = 0;
        if constexpr (prism) {
            if (!keeps.prism_u) freed += cpu::free_weight(layer.attention.u);
        } else {
            freed += cpu::free_weight(layer.attention.qkv) + cpu::free_weight(layer.attention.o_proj);
        }
        freed += cpu::free_weight(layer.mlp.gate_up) + cpu::free_weight(layer.mlp.down);
        if constexpr (C::routed)
            freed += cpu::free_weight(layer.mlp.shared_gate_up) + cpu::free_weight(layer.mlp.shared_down);
        if constexpr (C::use_mu) freed += cpu::free_weight(layer.mu_guidance.mu_proj);
        return freed;
    }
    /// After free_packed_layer of every layer: the pieces that stay (the embedding, read by the
    /// lookup, stays put; the learned router's [E, d], multiplied in fp32 on the stored weights,
    /// moves to fresh storage so as not to keep the freed matrices' slabs alive,
    /// cpu/runtime/weight_arena.hpp) and the weights marked released.
    void finish_release() {
        cpu::KeptWeights<W> kept;
        if constexpr (C::mlp == MlpKind::learned_router)
            for (Layer& l : layers) kept.keep(l.mlp.router);
        kept.restore();
        mark_released();
    }

private:
    template <class Self>
    static auto build_slots(Self& self) {
        self.require_stored();
        using Wq = std::conditional_t<std::is_const_v<Self>, const W, W>;
        SlotList<Wq> out;
        out.matrix(embedding_name, {C::vocab, d}, self.embed_tokens.data(), C::vocab, d, d,
                   ComplexityInit<C>::std0);
        if constexpr (C::use_mu) out.vector("mu_init", {1, 1, d}, self.mu_init.data(), d, 0.0f);
        out.vector("norm.weight", {d}, self.norm.data(), d, 1.0f);
        for (int i = 0; i < C::layers; ++i) {
            auto& l = self.layers[static_cast<std::size_t>(i)];
            const std::string p = layer_prefix(i);
            out.vector(p + "input_layernorm.weight", {d}, l.input_layernorm.data(), d, 1.0f);
            out.vector(p + "post_attention_layernorm.weight", {d}, l.post_attention_layernorm.data(), d, 1.0f);
            AttentionParams::add_slots(l.attention, out, p);
            MlpParams::add_slots(l.mlp, out, p);
            MuParams::add_slots(l.mu_guidance, out, p);
        }
        return std::move(out.slots);
    }

public:
    // ---- routing tables (token-routed models)

    /// Every layer routes by one primary table [V] and the cyclic rule
    /// (route r = (primary + r) mod E): the paper's models (top_k = 1, one
    /// table for all layers) and checkpoints that store only the primary route.
    void set_routing(std::span<const std::int32_t> primary)
        requires(C::mlp == MlpKind::token_routed)
    {
        require<InputError>(primary.size() == static_cast<std::size_t>(C::vocab), "routing table has ",
                            primary.size(), " entries for a vocabulary of ", C::vocab);
        (void)TokenRouting(primary, C::experts);  // validates every entry
        const std::vector<std::int32_t> table = router::cyclic_routes(primary, C::top_k, C::experts);
        for (Layer& l : layers) l.routes = table;
    }

    /// Layer `layer` routes by `table` [top_k, V] (validated).
    void set_layer_routes(int layer, std::span<const std::int32_t> table)
        requires(C::mlp == MlpKind::token_routed)
    {
        require<InputError>(layer >= 0 && layer < C::layers, "set_layer_routes: layer ", layer, " outside [0, ",
                            C::layers, ")");
        require<InputError>(table.size() == static_cast<std::size_t>(C::top_k) * C::vocab, "layer ", layer,
                            ": a routing table of ", table.size(), " entries, expected top_k x vocab = ", C::top_k,
                            " x ", C::vocab);
        (void)TopKRouting(table, C::top_k, C::experts);
        layers[static_cast<std::size_t>(layer)].routes.assign(table.begin(), table.end());
    }

    /// Layer i's routing table, validated (every entry in [0, E)).
    TopKRouting routing(int i) const
        requires(C::mlp == MlpKind::token_routed)
    {
        return TopKRouting(layer(i).routes, C::top_k, C::experts);
    }

    /// Layer i's primary route [V] (route 0).
    std::span<const std::int32_t> primary_routes(int i) const
        requires(C::mlp == MlpKind::token_routed)
    {
        return std::span<const std::int32_t>(layer(i).routes).first(static_cast<std::size_t>(C::vocab));
    }

    /// Whether every layer has the same table (the paper's models).
    bool routes_shared_by_layers() const
        requires(C::mlp == MlpKind::token_routed)
    {
        for (const Layer& l : layers)
            if (l.routes != layers.front().routes) return false;
        return true;
    }

    /// Whether every layer's table is the cyclic extension of its primary route.
    bool routes_cyclic() const
        requires(C::mlp == MlpKind::token_routed)
    {
        for (int i = 0; i < C::layers; ++i)
            if (layer(i).routes != router::cyclic_routes(primary_routes(i), C::top_k, C::experts)) return false;
        return true;
    }

    // ---- the CPU layers' views of layer i (cpu_view: models/complexity/cpu_views.hpp)

    /// MuGqaAttentionWeights, or PrismAttentionWeights for a decoder with PRISM attention.
    auto attention(int i) const { return cpu_view(layer(i).attention); }
    auto experts(int i) const
        requires(C::routed)
    {
        return cpu_experts_view(layer(i).mlp);
    }
    auto shared_expert(int i) const
        requires(C::routed)
    {
        return cpu_shared_expert_view(layer(i).mlp);
    }
    auto dense_mlp(int i) const
        requires(C::mlp == MlpKind::dense_swiglu)
    {
        return cpu_view(layer(i).mlp);
    }
    auto token_routed_mlp(int i) const
        requires(C::mlp == MlpKind::token_routed)
    {
        return cpu_view(layer(i).mlp);
    }
    auto learned_router_mlp(int i) const
        requires(C::mlp == MlpKind::learned_router)
    {
        return cpu_view(layer(i).mlp);
    }
    auto mu_guidance(int i) const
        requires(C::use_mu)
    {
        return cpu_view(layer(i).mu_guidance);
    }

    const Layer& layer(int i) const { return layers[static_cast<std::size_t>(i)]; }
};

/// The same model with its matrices stored as another type (fp32 <-> bf16;
/// to bf16 rounds to nearest even, to fp32 is exact).
template <class To, ComplexityConfigType C, class From>
ComplexityWeights<C, To> convert_weights(const ComplexityWeights<C, From>& from) {
    ComplexityWeights<C, To> to;
    copy_slots(from.slots(), to.slots());
    for (std::size_t i = 0; i < to.layers.size(); ++i) to.layers[i].routes = from.layers[i].routes;
    return to;
}

}  // namespace cpx

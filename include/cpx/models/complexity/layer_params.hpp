#pragma once
// The owning parameters of each COMPLEXITY-DEEP layer, one type per layer:
//
//   MuGqaAttentionParams   layers.{i}.self_attn.{q,k,v,o}_proj, mu_to_{q,k,v}, {q,k}_norm
//   PrismAttentionParams   layers.{i}.self_attn.u_proj.weight, lambda_q (decoders with PRISM attention)
//   TokenRoutedMlpParams   layers.{i}.mlp: routed experts + shared expert
//   LearnedRouterMlpParams layers.{i}.mlp: router + routed experts + shared expert
//   DenseMlpParams         layers.{i}.mlp.{gate,up,down}_proj.weight
//   MuGuidanceParams       layers.{i}.mu_guidance.mu, mu_proj.weight
//
// Each owns its tensors in the compute layout (docs/MODELS.md §12.3) and lists
// its checkpoint tensors as slots (models/tensor_slot.hpp): name, shape, where
// the elements live and the initialisation of docs/MODELS.md §11. The whole
// model (ComplexityWeights) is these types plus the norms and the embedding,
// so a layer's tensor names are written here once, and the CPU layers (views:
// models/complexity/cpu_views.hpp), the GPU upload, the checkpoint loader, validator
// and writer all walk them. This header is free of Eigen and CUDA.
//
// All of them are plain values: copies own their own storage and hold no view
// into another object.

#include <cmath>
#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/dtype.hpp"
#include "cpx/cpu/runtime/aligned_buffer.hpp"
#include "cpx/cpu/runtime/weight_arena.hpp"
#include "cpx/math/prism_lambda.hpp"
#include "cpx/models/tensor_slot.hpp"

namespace cpx {

/// The initialisation scales of docs/MODELS.md §11: N(0, 0.02) for every matrix,
/// N(0, 0.02 / sqrt(2 L)) for the projections that write into the residual
/// stream (o_proj and the routed / dense down projections).
template <ComplexityConfigType C>
struct ComplexityInit {
    static constexpr double std0 = 0.02;
    static double residual_std() { return 0.02 / std::sqrt(2.0 * C::layers); }
};

/// "layers.{i}." — the prefix of layer i's tensors.
inline std::string layer_prefix(int layer) { return "layers." + std::to_string(layer) + "."; }

/// The names of one layer's routed-expert tensors in each layout a checkpoint
/// may use (models/expert_layouts.hpp); `p` is the layer's prefix
/// ("[model.]layers.{i}.").
struct ExpertNames {
    std::string p;
    std::string gate() const { return p + "mlp.gate_proj_w"; }      ///< [E, d, I_e] (the framework)
    std::string up() const { return p + "mlp.up_proj_w"; }          ///< [E, d, I_e]
    std::string down() const { return p + "mlp.down_proj_w"; }      ///< [E, I_e, d]
    std::string gate_up() const { return p + "mlp.gate_up_proj"; }  ///< [E, d, 2 I_e] (fused)
    std::string fused_down() const { return p + "mlp.down_proj"; }  ///< [E, I_e, d]
    /// Expert e in nn.Linear layout: gate and up [I_e, d], down [d, I_e].
    std::string expert_gate(int e) const { return expert_(e) + "gate_proj.weight"; }
    std::string expert_up(int e) const { return expert_(e) + "up_proj.weight"; }
    std::string expert_down(int e) const { return expert_(e) + "down_proj.weight"; }

private:
    std::string expert_(int e) const { return p + "mlp.experts." + std::to_string(e) + "."; }
};

/// The names of a token-routed layer's routing tables (integer buffers, not
/// parameters); `p` is the layer's prefix.
struct RoutingNames {
    std::string p;
    std::string primary() const { return p + "mlp.token_to_expert"; }     ///< [V], route 0
    std::string top_k() const { return p + "mlp.topk_token_to_expert"; }  ///< [top_k, V], every route
};

namespace detail {
inline std::size_t count(std::int64_t a, std::int64_t b = 1, std::int64_t c = 1) {
    return static_cast<std::size_t>(a * b * c);
}
}  // namespace detail

// ---------------------------------------------------------------- attention

/// mu-guided GQA attention: [W | W_mu] stacked per output row (q rows, then
/// k, then v), so one GEMM computes a W^T + mu W_mu^T.
template <ComplexityConfigType C, class W = float>
struct MuGqaAttentionParams {
    using Config = C;
    using weight_type = W;
    static constexpr bool needs_orthogonal = false;
    /// The QKV product's input [a, mu] (width 2d with mu guidance, else d) and output [q | k | v].
    static constexpr int input_width = C::use_mu ? 2 * C::hidden : C::hidden;
    static constexpr int qkv_width = C::q_width + 2 * C::kv_width;
    /// The mu projections of attention (layer-relative names): built but unused by the
    /// authors' models without mu guidance, whose checkpoints still carry them.
    static constexpr const char* mu_projections[3] = {"self_attn.mu_to_q.weight", "self_attn.mu_to_k.weight",
                                                      "self_attn.mu_to_v.weight"};

    cpu::WeightVector<W> qkv;                  ///< [qkv_width, input_width]
    cpu::WeightVector<W> o_proj;               ///< [hidden, q_width]
    cpu::AlignedVector<float> q_norm, k_norm;  ///< [head_dim]

    MuGqaAttentionParams()
        : qkv(detail::count(qkv_width, input_width)), o_proj(detail::count(C::hidden, C::q_width)),
          q_norm(C::head_dim, 0.0f), k_norm(C::head_dim, 0.0f) {}

    template <class Self, class Wq>
    static void add_slots(Self& self, SlotList<Wq>& out, const std::string& layer) {
        constexpr std::int64_t d = C::hidden, q = C::q_width, kv = C::kv_width, in = input_width;
        const std::string p = layer + "self_attn.";
        const double std0 = ComplexityInit<C>::std0;
        Wq* base = self.qkv.data();
        const std::int64_t row_k = q * in, row_v = (q + kv) * in;
        out.matrix(p + "q_proj.weight", {q, d}, base, q, d, in, std0);
        out.matrix(p + "k_proj.weight", {kv, d}, base + row_k, kv, d, in, std0);
        out.matrix(p + "v_proj.weight", {kv, d}, base + row_v, kv, d, in, std0);
        out.matrix(p + "o_proj.weight", {d, q}, self.o_proj.data(), d, q, q, ComplexityInit<C>::residual_std());
        if constexpr (C::use_mu) {  // the right half of each stacked row
            out.matrix(layer + mu_projections[0], {q, d}, base + d, q, d, in, std0);
            out.matrix(layer + mu_projections[1], {kv, d}, base + row_k + d, kv, d, in, std0);
            out.matrix(layer + mu_projections[2], {kv, d}, base + row_v + d, kv, d, in, std0);
        }
        out.vector(p + "q_norm.weight", {C::head_dim}, self.q_norm.data(), C::head_dim, 1.0f);
        out.vector(p + "k_norm.weight", {C::head_dim}, self.k_norm.data(), C::head_dim, 1.0f);
    }
};

/// PRISM's attention inside the COMPLEXITY-DEEP decoder: the dictionary U
/// [2 H D, d] (orthogonal initialisation) and the noise weight lambda, under
/// the reference's names inside this model's naming scheme.
template <ComplexityConfigType C, class W = float>
struct PrismAttentionParams {
    static_assert(C::attention == AttentionKind::prism, "PrismAttentionParams needs attention = AttentionKind::prism");
    using Config = C;
    using weight_type = W;
    static constexpr bool needs_orthogonal = true;
    static constexpr int u_rows = 2 * C::heads * C::prism_head_dim;

    cpu::WeightVector<W> u;  ///< [u_rows, hidden]
    float lambda = static_cast<float>(prism_lambda_start);

    PrismAttentionParams() : u(detail::count(u_rows, C::hidden)) {}

    template <class Self, class Wq>
    static void add_slots(Self& self, SlotList<Wq>& out, const std::string& layer) {
        const std::string p = layer + "self_attn.";
        out.matrix(p + "u_proj.weight", {u_rows, C::hidden}, self.u.data(), u_rows, C::hidden, C::hidden, 0.0);
        out.back().orthogonal = true;
        out.vector(p + "lambda_q", {}, &self.lambda, 1, static_cast<float>(prism_lambda_start));
    }
};

// ---------------------------------------------------------------- MLPs

/// The E routed experts (compute layout gate_up [E, d, 2 I_e] with gate |
/// up columns, down [E, I_e, d]) and the shared expert (gate_up [2 I_s, d],
/// down [d, I_s]) of a routed MLP.
template <ComplexityConfigType C, class W>
struct RoutedExpertParams {
    static_assert(C::routed, "routed experts need a token_routed or learned_router configuration");
    static constexpr int E = C::experts, I = C::expert_width, S = C::shared_width;

    cpu::WeightVector<W> gate_up, down;                ///< routed experts
    cpu::WeightVector<W> shared_gate_up, shared_down;  ///< the shared expert (empty without one)

    RoutedExpertParams()
        : gate_up(detail::count(E, C::hidden, 2 * I)), down(detail::count(E, I, C::hidden)),
          shared_gate_up(detail::count(2 * S, C::hidden)), shared_down(detail::count(C::hidden, S)) {}

    /// `fused`: the experts as the learned router's code names them
    /// (gate_up_proj [E, d, 2 I_e], down_proj [E, I_e, d]); otherwise the
    /// framework's gate_proj_w / up_proj_w [E, d, I_e] and down_proj_w [E, I_e, d].
    template <class Self, class Wq>
    static void add_slots(Self& self, SlotList<Wq>& out, const std::string& layer, bool fused) {
        constexpr std::int64_t d = C::hidden;
        const std::string p = layer + "mlp.";
        const double std0 = ComplexityInit<C>::std0, residual = ComplexityInit<C>::residual_std();
        Wq* gu = self.gate_up.data();
        const ExpertNames n{layer};
        if (fused) {
            out.batched(n.gate_up(), {E, d, 2 * I}, gu, E, d, 2 * I, d * 2 * I, 2 * I, std0);
            out.batched(n.fused_down(), {E, I, d}, self.down.data(), E, I, d, I * d, d, residual);
        } else {
            out.batched(n.gate(), {E, d, I}, gu, E, d, I, d * 2 * I, 2 * I, std0);
            out.batched(n.up(), {E, d, I}, gu + I, E, d, I, d * 2 * I, 2 * I, std0);
            out.batched(n.down(), {E, I, d}, self.down.data(), E, I, d, I * d, d, residual);
        }
        if constexpr (C::has_shared_expert) {
            constexpr std::int64_t s = S;
            Wq* sgu = self.shared_gate_up.data();
            out.matrix(p + "shared_gate.weight", {s, d}, sgu, s, d, d, std0);
            out.matrix(p + "shared_up.weight", {s, d}, sgu + s * d, s, d, d, std0);
            // The framework does not rescale shared_down (docs/MODELS.md §11).
            out.matrix(p + "shared_down.weight", {d, s}, self.shared_down.data(), d, s, s, std0);
        }
    }
};

/// The token-routed MLP: top_k experts per token from this layer's routing
/// table plus the shared expert, and with use_shared_routed_gates the two
/// learned scalar gates (mlp.shared_output_gate, mlp.routed_output_gate,
/// shape []). The routing table is an integer buffer, not a parameter: the
/// model keeps it per layer (ComplexityWeights::Layer::routes) and passes it
/// to the layer.
template <ComplexityConfigType C, class W = float>
struct TokenRoutedMlpParams : RoutedExpertParams<C, W> {
    static_assert(C::mlp == MlpKind::token_routed, "TokenRoutedMlpParams needs mlp = MlpKind::token_routed");
    using Config = C;
    using weight_type = W;
    static constexpr bool needs_orthogonal = false;

    float shared_output_gate = static_cast<float>(C::dims.shared_gate_init);
    float routed_output_gate = static_cast<float>(C::dims.routed_gate_init);

    template <class Self, class Wq>
    static void add_slots(Self& self, SlotList<Wq>& out, const std::string& layer) {
        RoutedExpertParams<C, W>::add_slots(self, out, layer, /*fused=*/false);
        if constexpr (C::learned_gates) {
            out.vector(layer + "mlp.shared_output_gate", {}, &self.shared_output_gate, 1,
                       static_cast<float>(C::dims.shared_gate_init));
            out.vector(layer + "mlp.routed_output_gate", {}, &self.routed_output_gate, 1,
                       static_cast<float>(C::dims.routed_gate_init));
        }
    }
};

/// The learned-router ablation: a router [E, d] choosing the top-1 expert,
/// the experts fused as its code stores them, and the shared expert.
template <ComplexityConfigType C, class W = float>
struct LearnedRouterMlpParams : RoutedExpertParams<C, W> {
    static_assert(C::mlp == MlpKind::learned_router, "LearnedRouterMlpParams needs mlp = MlpKind::learned_router");
    using Config = C;
    using weight_type = W;
    static constexpr bool needs_orthogonal = false;

    cpu::WeightVector<W> router;  ///< [experts, hidden]

    LearnedRouterMlpParams() : router(detail::count(C::experts, C::hidden)) {}

    template <class Self, class Wq>
    static void add_slots(Self& self, SlotList<Wq>& out, const std::string& layer) {
        RoutedExpertParams<C, W>::add_slots(self, out, layer, /*fused=*/true);
        out.matrix(layer + "mlp.router.weight", {C::experts, C::hidden}, self.router.data(), C::experts, C::hidden,
                   C::hidden, ComplexityInit<C>::std0);
    }
};

/// The dense SwiGLU of the dense baselines: gate_up [2 I, d] (gate rows, then
/// up rows), down [d, I].
template <ComplexityConfigType C, class W = float>
struct DenseMlpParams {
    static_assert(C::mlp == MlpKind::dense_swiglu, "DenseMlpParams needs mlp = MlpKind::dense_swiglu");
    using Config = C;
    using weight_type = W;
    static constexpr bool needs_orthogonal = false;
    static constexpr int I = C::expert_width;

    cpu::WeightVector<W> gate_up, down;

    DenseMlpParams() : gate_up(detail::count(2 * I, C::hidden)), down(detail::count(C::hidden, I)) {}

    template <class Self, class Wq>
    static void add_slots(Self& self, SlotList<Wq>& out, const std::string& layer) {
        constexpr std::int64_t d = C::hidden, i = I;
        const std::string& p = layer;
        const double std0 = ComplexityInit<C>::std0;
        out.matrix(p + "mlp.gate_proj.weight", {i, d}, self.gate_up.data(), i, d, d, std0);
        out.matrix(p + "mlp.up_proj.weight", {i, d}, self.gate_up.data() + i * d, i, d, d, std0);
        out.matrix(p + "mlp.down_proj.weight", {d, i}, self.down.data(), d, i, i, ComplexityInit<C>::residual_std());
    }
};

/// The MLP parameters of a configuration's MLP kind.
template <ComplexityConfigType C, class W>
using MlpParamsOf = std::conditional_t<
    C::mlp == MlpKind::token_routed, TokenRoutedMlpParams<C, W>,
    std::conditional_t<C::mlp == MlpKind::learned_router, LearnedRouterMlpParams<C, W>, DenseMlpParams<C, W>>>;

// ---------------------------------------------------------------- mu guidance

/// One layer's mu-guidance: mu [d] (initialised to 1) and W_mu [d, d].
template <ComplexityConfigType C, class W = float>
struct MuGuidanceParams {
    static_assert(C::use_mu, "MuGuidanceParams needs use_mu_guidance = true");
    using Config = C;
    using weight_type = W;
    static constexpr bool needs_orthogonal = false;

    cpu::AlignedVector<float> mu;   ///< [hidden]
    cpu::WeightVector<W> mu_proj;  ///< [hidden, hidden]

    MuGuidanceParams() : mu(C::hidden, 0.0f), mu_proj(detail::count(C::hidden, C::hidden)) {}

    template <class Self, class Wq>
    static void add_slots(Self& self, SlotList<Wq>& out, const std::string& layer) {
        const std::string p = layer + "mu_guidance.";
        out.vector(p + "mu", {C::hidden}, self.mu.data(), C::hidden, 1.0f);
        out.matrix(p + "mu_proj.weight", {C::hidden, C::hidden}, self.mu_proj.data(), C::hidden, C::hidden, C::hidden,
                   ComplexityInit<C>::std0);
    }
};

/// A type with a layer's parameters: owning storage and its checkpoint slots
/// (the CPU layer's view of it: cpu_view, models/complexity/cpu_views.hpp).
template <class P>
concept LayerParams = requires(P& p, SlotList<typename P::weight_type>& out) {
    typename P::Config;
    typename P::weight_type;
    { P::needs_orthogonal } -> std::convertible_to<bool>;
    P::add_slots(p, out, std::string());
};

/// The checkpoint tensors of `params` as layer `layer` of a model.
template <LayerParams P>
std::vector<TensorSlot<typename P::weight_type>> layer_slots(P& params, int layer) {
    SlotList<typename P::weight_type> out;
    P::add_slots(params, out, layer_prefix(layer));
    return std::move(out.slots);
}
template <LayerParams P>
std::vector<TensorSlot<const typename P::weight_type>> layer_slots(const P& params, int layer) {
    SlotList<const typename P::weight_type> out;
    P::add_slots(params, out, layer_prefix(layer));
    return std::move(out.slots);
}

}  // namespace cpx

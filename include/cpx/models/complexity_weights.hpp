#pragma once
// The owning weights of a COMPLEXITY-DEEP model, in the layout the CPU layers
// compute with, and the map from that layout to the authors' checkpoint
// tensors (spec section 9.1) through which initialisation, loading and saving
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

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/aligned_buffer.hpp"
#include "cpx/cpu/expert_dispatch.hpp"
#include "cpx/cpu/learned_router_mlp.hpp"
#include "cpx/cpu/mu_gqa_attention.hpp"
#include "cpx/cpu/mu_guidance.hpp"
#include "cpx/cpu/prism_attention.hpp"
#include "cpx/cpu/swiglu_mlp.hpp"
#include "cpx/cpu/token_routed_mlp.hpp"
#include "cpx/layers/prism_lambda.hpp"
#include "cpx/models/seeded_normal.hpp"
#include "cpx/models/tensor_slot.hpp"
#include "cpx/router/token_routing.hpp"

namespace cpx {

/// The weights of a model with configuration C, matrices stored as W.
template <ComplexityConfigType C, class W = float>
struct ComplexityWeights {
    static_assert(std::is_same_v<W, float> || std::is_same_v<W, bf16>, "weights are stored as float or bf16");
    using Config = C;
    using weight_type = W;

    static constexpr int d = C::hidden;
    static constexpr int input_width = cpu::MuGqaAttentionWeights<C, W>::input_width;
    static constexpr int qkv_width = cpu::MuGqaAttentionWeights<C, W>::qkv_width;
    /// Width of the routed experts or of the dense MLP.
    static constexpr int mlp_width = C::expert_width;
    static constexpr int mlp_experts = C::routed ? C::experts : 1;

    struct Layer {
        cpu::AlignedVector<float> input_layernorm, post_attention_layernorm;  // [d]
        cpu::AlignedVector<W> qkv, o_proj;
        cpu::AlignedVector<float> q_norm, k_norm;  // [head_dim]
        cpu::AlignedVector<W> gate_up, down;       // routed experts or the dense MLP
        cpu::AlignedVector<W> shared_gate_up, shared_down;
        cpu::AlignedVector<W> router;              // learned router [E, d]
        cpu::AlignedVector<float> mu;              // mu_guidance.mu [d]
        cpu::AlignedVector<W> mu_proj;             // [d, d]
        cpu::AlignedVector<W> u;                   // PRISM attention: [2HD, d]
        float lambda = static_cast<float>(prism_lambda_start);  // PRISM attention's noise weight
    };

    static constexpr bool prism = C::attention == AttentionKind::prism;
    /// Rows of PRISM's dictionary U (2 H D; 0 for GQA models).
    static constexpr int u_rows = prism ? 2 * C::heads * C::prism_head_dim : 0;

    cpu::AlignedVector<W> embed_tokens;  // [V, d]
    cpu::AlignedVector<float> norm;      // [d]
    cpu::AlignedVector<float> mu_init;   // [d] (mu models)
    std::vector<Layer> layers;
    std::vector<std::int32_t> token_to_expert;  // [V] (token-routed models)

    /// Every tensor allocated, zero-filled (routing table: t mod E).
    ComplexityWeights() : layers(C::layers) {
        embed_tokens.assign(static_cast<std::size_t>(C::vocab) * d, W{});
        norm.assign(d, 0.0f);
        if constexpr (C::use_mu) mu_init.assign(d, 0.0f);
        for (Layer& l : layers) {
            l.input_layernorm.assign(d, 0.0f);
            l.post_attention_layernorm.assign(d, 0.0f);
            if constexpr (prism) {
                l.u.assign(static_cast<std::size_t>(u_rows) * d, W{});
            } else {
                l.qkv.assign(static_cast<std::size_t>(qkv_width) * input_width, W{});
                l.o_proj.assign(static_cast<std::size_t>(d) * C::q_width, W{});
                l.q_norm.assign(C::head_dim, 0.0f);
                l.k_norm.assign(C::head_dim, 0.0f);
            }
            if constexpr (C::routed) {
                l.gate_up.assign(static_cast<std::size_t>(C::experts) * d * 2 * mlp_width, W{});
                l.down.assign(static_cast<std::size_t>(C::experts) * mlp_width * d, W{});
                if constexpr (C::has_shared_expert) {
                    l.shared_gate_up.assign(static_cast<std::size_t>(2) * C::shared_width * d, W{});
                    l.shared_down.assign(static_cast<std::size_t>(d) * C::shared_width, W{});
                }
            } else {
                l.gate_up.assign(static_cast<std::size_t>(2) * mlp_width * d, W{});
                l.down.assign(static_cast<std::size_t>(d) * mlp_width, W{});
            }
            if constexpr (C::mlp == MlpKind::learned_router)
                l.router.assign(static_cast<std::size_t>(C::experts) * d, W{});
            if constexpr (C::use_mu) {
                l.mu.assign(d, 0.0f);
                l.mu_proj.assign(static_cast<std::size_t>(d) * d, W{});
            }
        }
        if constexpr (C::mlp == MlpKind::token_routed) {
            token_to_expert.resize(C::vocab);
            for (int t = 0; t < C::vocab; ++t) token_to_expert[t] = t % C::experts;
        }
    }

    /// The spec's initialisation (section 8), each tensor from its own seeded
    /// stream named after it. The routing table is left as it is.
    static ComplexityWeights random(std::uint64_t seed) {
        ComplexityWeights w;
        w.initialize(seed);
        return w;
    }

    void initialize(std::uint64_t seed) { initialize_slots(slots(), seed); }

    /// The checkpoint tensors this model holds, in the framework's names and
    /// shapes (token_to_expert, an int64 buffer, is separate: routing()).
    std::vector<TensorSlot<W>> slots() { return build_slots(*this); }
    std::vector<TensorSlot<const W>> slots() const { return build_slots(*this); }

private:
    template <class Self>
    static auto build_slots(Self& self) {
        using Wq = std::conditional_t<std::is_const_v<Self>, const W, W>;
        using Fq = typename TensorSlot<Wq>::Float;
        auto& embed_tokens = self.embed_tokens;
        auto& norm = self.norm;
        auto& mu_init = self.mu_init;
        auto& layers = self.layers;
        std::vector<TensorSlot<Wq>> out;
        const double std0 = 0.02, residual_std = 0.02 / std::sqrt(2.0 * C::layers);
        const auto vec = [&](std::string name, std::vector<std::int64_t> shape, Fq* data, std::int64_t n,
                             float value) {
            TensorSlot<Wq> s;
            s.name = std::move(name), s.shape = std::move(shape), s.f32 = data, s.cols = n, s.init_value = value;
            out.push_back(std::move(s));
        };
        // A [batches, rows, cols] block of W storage.
        const auto mat = [&](std::string name, std::vector<std::int64_t> shape, Wq* base, std::int64_t batches,
                             std::int64_t rows, std::int64_t cols, std::int64_t batch_stride, std::int64_t row_stride,
                             double init_std) {
            TensorSlot<Wq> s;
            s.name = std::move(name), s.shape = std::move(shape), s.w = base;
            s.batches = batches, s.rows = rows, s.cols = cols, s.batch_stride = batch_stride,
            s.row_stride = row_stride, s.init_std = init_std;
            out.push_back(std::move(s));
        };
        mat("embed_tokens.weight", {C::vocab, d}, embed_tokens.data(), 1, C::vocab, d, 0, d, std0);
        if constexpr (C::use_mu) vec("mu_init", {1, 1, d}, mu_init.data(), d, 0.0f);
        vec("norm.weight", {d}, norm.data(), d, 1.0f);
        for (int i = 0; i < C::layers; ++i) {
            auto& l = layers[static_cast<std::size_t>(i)];
            const std::string p = "layers." + std::to_string(i) + ".";
            vec(p + "input_layernorm.weight", {d}, l.input_layernorm.data(), d, 1.0f);
            vec(p + "post_attention_layernorm.weight", {d}, l.post_attention_layernorm.data(), d, 1.0f);
            if constexpr (prism) {
                mat(p + "self_attn.u_proj.weight", {u_rows, d}, l.u.data(), 1, u_rows, d, 0, d, 0.0);
                out.back().orthogonal = true;
                vec(p + "self_attn.lambda_q", {}, &l.lambda, 1, static_cast<float>(prism_lambda_start));
            } else {
                const std::int64_t q = C::q_width, kv = C::kv_width;
                const std::int64_t row_k = q * input_width, row_v = (q + kv) * input_width;
                mat(p + "self_attn.q_proj.weight", {q, d}, l.qkv.data(), 1, q, d, 0, input_width, std0);
                mat(p + "self_attn.k_proj.weight", {kv, d}, l.qkv.data() + row_k, 1, kv, d, 0, input_width, std0);
                mat(p + "self_attn.v_proj.weight", {kv, d}, l.qkv.data() + row_v, 1, kv, d, 0, input_width, std0);
                mat(p + "self_attn.o_proj.weight", {d, q}, l.o_proj.data(), 1, d, q, 0, q, residual_std);
                if constexpr (C::use_mu) {
                    mat(p + "self_attn.mu_to_q.weight", {q, d}, l.qkv.data() + d, 1, q, d, 0, input_width, std0);
                    mat(p + "self_attn.mu_to_k.weight", {kv, d}, l.qkv.data() + row_k + d, 1, kv, d, 0, input_width,
                        std0);
                    mat(p + "self_attn.mu_to_v.weight", {kv, d}, l.qkv.data() + row_v + d, 1, kv, d, 0, input_width,
                        std0);
                }
                vec(p + "self_attn.q_norm.weight", {C::head_dim}, l.q_norm.data(), C::head_dim, 1.0f);
                vec(p + "self_attn.k_norm.weight", {C::head_dim}, l.k_norm.data(), C::head_dim, 1.0f);
            }
            const std::int64_t I = mlp_width, E = C::experts;
            if constexpr (C::routed) {
                // Token-routed models use the framework's gate_proj_w / up_proj_w / down_proj_w;
                // the learned router's experts are the fused gate_up_proj / down_proj of its code.
                const bool fused = C::mlp == MlpKind::learned_router;
                if (fused) {
                    mat(p + "mlp.gate_up_proj", {E, d, 2 * I}, l.gate_up.data(), E, d, 2 * I, d * 2 * I, 2 * I, std0);
                    mat(p + "mlp.down_proj", {E, I, d}, l.down.data(), E, I, d, I * d, d, residual_std);
                } else {
                    mat(p + "mlp.gate_proj_w", {E, d, I}, l.gate_up.data(), E, d, I, d * 2 * I, 2 * I, std0);
                    mat(p + "mlp.up_proj_w", {E, d, I}, l.gate_up.data() + I, E, d, I, d * 2 * I, 2 * I, std0);
                    mat(p + "mlp.down_proj_w", {E, I, d}, l.down.data(), E, I, d, I * d, d, residual_std);
                }
                if constexpr (C::has_shared_expert) {
                    const std::int64_t S = C::shared_width;
                    mat(p + "mlp.shared_gate.weight", {S, d}, l.shared_gate_up.data(), 1, S, d, 0, d, std0);
                    mat(p + "mlp.shared_up.weight", {S, d}, l.shared_gate_up.data() + S * d, 1, S, d, 0, d, std0);
                    // The framework does not rescale shared_down (spec section 8).
                    mat(p + "mlp.shared_down.weight", {d, S}, l.shared_down.data(), 1, d, S, 0, S, std0);
                }
                if constexpr (C::mlp == MlpKind::learned_router)
                    mat(p + "mlp.router.weight", {E, d}, l.router.data(), 1, E, d, 0, d, std0);
            } else {
                mat(p + "mlp.gate_proj.weight", {I, d}, l.gate_up.data(), 1, I, d, 0, d, std0);
                mat(p + "mlp.up_proj.weight", {I, d}, l.gate_up.data() + I * d, 1, I, d, 0, d, std0);
                mat(p + "mlp.down_proj.weight", {d, I}, l.down.data(), 1, d, I, 0, I, residual_std);
            }
            if constexpr (C::use_mu) {
                vec(p + "mu_guidance.mu", {d}, l.mu.data(), d, 1.0f);
                mat(p + "mu_guidance.mu_proj.weight", {d, d}, l.mu_proj.data(), 1, d, d, 0, d, std0);
            }
        }
        return out;
    }

public:
    // ---- non-owning views for the layers

    TokenRouting routing() const
        requires(C::mlp == MlpKind::token_routed)
    {
        return TokenRouting(token_to_expert, C::experts);
    }

    /// The attention weights of layer i: MuGqaAttentionWeights, or
    /// PrismAttentionWeights for a decoder with PRISM attention.
    auto attention(int i) const {
        const Layer& l = layers[static_cast<std::size_t>(i)];
        if constexpr (prism)
            return cpu::PrismAttentionWeights<W>{Matrix<const W>(l.u.data(), u_rows, d), l.lambda};
        else
            return cpu::MuGqaAttentionWeights<C, W>{cpu::rows_of<const W>(l.qkv.data(), qkv_width, input_width),
                                                    cpu::rows_of<const W>(l.o_proj.data(), d, C::q_width),
                                                    l.q_norm.data(), l.k_norm.data()};
    }
    cpu::ExpertWeights<W> experts(int i) const {
        const Layer& l = layers[static_cast<std::size_t>(i)];
        return {l.gate_up.data(), l.down.data(), C::experts, d, mlp_width};
    }
    cpu::SwiGluWeights<W> shared_expert(int i) const {
        const Layer& l = layers[static_cast<std::size_t>(i)];
        return {cpu::rows_of<const W>(l.shared_gate_up.data(), 2 * C::shared_width, d),
                cpu::rows_of<const W>(l.shared_down.data(), d, C::shared_width)};
    }
    cpu::SwiGluWeights<W> dense_mlp(int i) const {
        const Layer& l = layers[static_cast<std::size_t>(i)];
        return {cpu::rows_of<const W>(l.gate_up.data(), 2 * mlp_width, d),
                cpu::rows_of<const W>(l.down.data(), d, mlp_width)};
    }
    cpu::TokenRoutedMlpWeights<C, W> token_routed_mlp(int i) const
        requires(C::mlp == MlpKind::token_routed)
    {
        return {experts(i), C::has_shared_expert ? shared_expert(i) : cpu::SwiGluWeights<W>{}};
    }
    cpu::LearnedRouterMlpWeights<C, W> learned_router_mlp(int i) const
        requires(C::mlp == MlpKind::learned_router)
    {
        const Layer& l = layers[static_cast<std::size_t>(i)];
        return {cpu::rows_of<const W>(l.router.data(), C::experts, d), experts(i),
                C::has_shared_expert ? shared_expert(i) : cpu::SwiGluWeights<W>{}};
    }
    cpu::MuGuidanceWeights<W> mu_guidance(int i) const
        requires(C::use_mu)
    {
        const Layer& l = layers[static_cast<std::size_t>(i)];
        return {l.mu.data(), cpu::rows_of<const W>(l.mu_proj.data(), d, d)};
    }
};

/// The same model with its matrices stored as another type (fp32 <-> bf16;
/// to bf16 rounds to nearest even, to fp32 is exact).
template <class To, ComplexityConfigType C, class From>
ComplexityWeights<C, To> convert_weights(const ComplexityWeights<C, From>& from) {
    ComplexityWeights<C, To> to;
    const auto src = from.slots();
    const auto dst = to.slots();
#pragma omp parallel
    {
        std::vector<float> values;
#pragma omp for schedule(dynamic, 1)
        for (std::size_t i = 0; i < src.size(); ++i) {
            values.resize(static_cast<std::size_t>(src[i].elements()));
            src[i].extract(values);
            dst[i].assign(values);
        }
    }
    to.token_to_expert = from.token_to_expert;
    return to;
}

}  // namespace cpx

#pragma once
// The COMPLEXITY-DEEP decoder on the GPU (docs/MODELS.md
// §4-§8), from the same compile-time configuration as the CPU path:
//     h = Emb[t];  mu_prev = mu_init
//     per layer:  a = RMSNorm(h)
//                 [q | k | v] = [a, mu_prev] [W ; W_mu]^T      one GEMM over [a, mu]
//                 q, k = RoPE(QKNorm(q, k))                   one launch, rotate-half
//                 h += Attention(q, cache(k, v)) W_o^T
//                 h += MLP(RMSNorm(h), t)                     token-routed, learned router, or dense SwiGLU
//                 mu_prev = clamp(clamp(mu_param, 0, 2) + W_mu h, -2, 2)
//     logits = RMSNorm(h) Emb^T
// Storage: weights and activations in T, the residual stream h and the logits
// in fp32, fp32 accumulation everywhere. Token-routed models route the tokens'
// (token, route) pairs once per call when every layer shares one [top_k, V]
// table (the paper's models), else before each layer's MLP by that layer's
// table (the authors' later models); the learned router routes each layer by
// its own top-1 choices, on the device.
//
// Calls: `forward` validates ids and positions on the host, copies them to the
// model's device buffers and enqueues; `enqueue` only reads those buffers and
// allocates nothing, so a decode step can be captured and replayed.
// A decoder with PRISM attention (AttentionKind::prism) runs the same PRISM
// layer as cuda::PrismModel (cuda/layers/prism_attention.cuh) after its RMSNorm.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <variant>
#include <span>
#include <string>
#include <vector>

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/error.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/kernels/attention.cuh"
#include "cpx/cuda/runtime/blas.cuh"
#include "cpx/models/call_inputs.cuh"
#include "cpx/cuda/runtime/device_buffer.cuh"
#include "cpx/cuda/runtime/device_status.cuh"
#include "cpx/cuda/kernels/embedding.cuh"
#include "cpx/cuda/kernels/expert_dispatch.cuh"
#include "cpx/cuda/runtime/kernel_choice.cuh"
#include "cpx/cuda/kernels/kv_cache.cuh"
#include "cpx/cuda/layers/learned_router_mlp.cuh"
#include "cpx/cuda/layers/mu_guidance.cuh"
#include "cpx/cuda/layers/prism_attention.cuh"
#include "cpx/models/logit_rows.cuh"
#include "cpx/cuda/kernels/rmsnorm.cuh"
#include "cpx/cuda/kernels/rope.cuh"
#include "cpx/cuda/layers/swiglu_mlp.cuh"
#include "cpx/cuda/layers/token_routed_mlp.cuh"
#include "cpx/cuda/runtime/weight_upload.cuh"
#include "cpx/math/route_mix.hpp"
#include "cpx/models/complexity/weights.hpp"

namespace cpx::cuda {

namespace detail {
/// The attention shape and cache geometry of a configuration: mu-guided GQA (KV heads of
/// head_dim) or PRISM (2H heads of D = (d / H) R, PrismAttentionOf<C>).
template <ComplexityConfigType C, bool prism = C::attention == AttentionKind::prism>
struct GpuAttentionOf {
    using Prism = void;
    static constexpr int cache_heads = C::kv_heads, head_dim = C::head_dim, u_rows = 0;
};
template <ComplexityConfigType C>
struct GpuAttentionOf<C, true> {
    using Prism = PrismAttentionOf<C>;
    static constexpr int cache_heads = Prism::physical_heads, head_dim = Prism::head_dim, u_rows = Prism::u_rows;
};
}  // namespace detail

template <ComplexityConfigType C, class T = float>
class ComplexityModel : public ModelCalls<ComplexityModel<C, T>> {
public:
    using Config = C;
    static constexpr int d = C::hidden, vocab = C::vocab, context = C::max_positions, layers = C::layers;
    static constexpr int heads = C::heads, kv_heads = C::kv_heads, hd = C::head_dim;
    static constexpr int q_width = C::q_width, kv_width = C::kv_width, qkv_width = q_width + 2 * kv_width;
    static constexpr int in_width = C::use_mu ? 2 * d : d;  ///< the QKV product's input: [a, mu] or a
    /// PRISM's attention in this stack (AttentionKind::prism): U and lambda per layer, 2H cached heads.
    static constexpr bool prism = C::attention == AttentionKind::prism;
    using Gpu = detail::GpuAttentionOf<C>;

    /// Uploads `weights` (the model's one tensor description, models/complexity/weights.hpp:
    /// loaded from a checkpoint by load_complexity_checkpoint, drawn by random(seed) or
    /// converted) and sizes every buffer for calls of up to `max_batch` sequences and
    /// `max_rows` tokens in total. The compute layout of the weights is the device's
    /// (the fused [W | W_mu] QKV rows included); matrices are converted from W to T on the
    /// host (exact when they are equal). A token-routed model keeps one device table when
    /// every layer routes alike, else one per layer. The KV cache holds `cache_slots`
    /// sequences of the whole context (0: max_batch); a call's sequences use slots
    /// 0 .. batch - 1 unless set_inputs names others.
    template <class W>
    ComplexityModel(const ComplexityWeights<C, W>& weights, int max_batch, int max_rows, int cache_slots = 0)
        : inputs_("cuda::ComplexityModel", max_batch, max_rows, vocab, context, cache_slots > 0 ? cache_slots : max_batch),
          rope_(C::rope, Gpu::head_dim, context),
          cache_(layers, inputs_.cache_slots(), Gpu::cache_heads, Gpu::head_dim, context),
          h_(static_cast<std::size_t>(max_rows) * d),
          last_(static_cast<std::size_t>(max_batch) * d),
          a_mu_(static_cast<std::size_t>(max_rows) * in_width),
          qkv_(static_cast<std::size_t>(max_rows) * (prism ? Gpu::u_rows : qkv_width)),
          attn_(static_cast<std::size_t>(max_rows) * (prism ? Gpu::u_rows : q_width)),
          rotated_(prism ? static_cast<std::size_t>(max_rows) * Gpu::u_rows : 0),
          m_(static_cast<std::size_t>(max_rows) * d),
          h_copy_(std::is_same_v<T, float> || !C::use_mu ? 0 : static_cast<std::size_t>(max_rows) * d),
          dense_scratch_(C::routed ? 0 : static_cast<std::size_t>(max_rows) * 2 * C::intermediate) {
        static_assert(ComplexityWeights<C, W>::input_width == in_width && ComplexityWeights<C, W>::qkv_width == qkv_width);
        require<InputError>(!weights.packed_matrices_released(), "cuda::ComplexityModel: these weights' layer matrices "
                            "were released to a CPU model's packs (release_stored_matrices)");
        poison(h_, last_, a_mu_, qkv_, attn_, rotated_, m_, h_copy_, dense_scratch_);
        if constexpr (prism) prism_rope_.emplace(context);
        if constexpr (C::mlp == MlpKind::learned_router) {
            dispatch_.emplace(C::experts, max_rows);
            router_ws_.emplace(max_rows, C::experts, C::expert_width, C::shared_width);
        }
        if constexpr (C::mlp == MlpKind::token_routed) {
            const int tables = weights.routes_shared_by_layers() ? 1 : layers;
            tables_.reserve(static_cast<std::size_t>(tables));
            for (int i = 0; i < tables; ++i) tables_.emplace_back(weights.routing(i));
            dispatch_.emplace(C::experts, max_rows, C::top_k);
            // The [tokens x routes, d] pair buffer is needed unless every layer is the paper's top-1 MLP.
            constexpr bool weighted = C::learned_gates || !route_mix<C>().unit_top1(C::top_k);
            routed_ws_.emplace(max_rows, C::expert_width, C::shared_width, C::top_k, weighted ? d : 0);
        }
        embed_ = upload_weights<T>(weights.embed_tokens);
        norm_ = upload_weights<float>(weights.norm);
        if constexpr (C::use_mu) mu_init_ = upload_weights<float>(weights.mu_init);
        layers_.reserve(layers);
        for (int i = 0; i < layers; ++i) layers_.push_back(upload_layer_<W>(weights.layer(i)));
    }

private:
    friend ModelCalls<ComplexityModel>;
    using value_type = T;
    static constexpr int attention_head_dim = Gpu::head_dim;

    /// The forward pass over the inputs last given to set_inputs (ModelCalls::enqueue). The
    /// learned router's experts stay on the SIMT kernel whatever use_kernels chose.
    void enqueue_call_(Blas& blas, const CallShape& shape, const SequenceRows& seqs, float* logits, LogitRows which,
                       cudaStream_t stream) {
        const int rows = shape.rows;
        const StridedMatrix<float> h(h_.data(), rows, d, d);
        const StridedMatrix<T> a_mu(a_mu_.data(), rows, in_width, in_width);
        const StridedMatrix<T> a = a_mu.columns(0, d);
        const StridedMatrix<T> qkv(qkv_.data(), rows, qkv_width, qkv_width);
        const StridedMatrix<T> attn(attn_.data(), rows, q_width, q_width), m(m_.data(), rows, d, d);

        embedding<std::int32_t, T, float>(inputs_.tokens(), Matrix<const T>(embed_.data(), vocab, d), h, status_.view(),
                                          stream);
        if constexpr (C::use_mu) mu_broadcast<T>(mu_init_.data(), a_mu.columns(d, d), stream);
        if constexpr (C::mlp == MlpKind::token_routed)
            if (tables_.size() == 1) dispatch_->route(inputs_.tokens(), rows, tables_.front(), stream);

        for (int i = 0; i < layers; ++i) {
            const Layer& l = layers_[static_cast<std::size_t>(i)];
            rmsnorm<float, float, T>(h, Vector<const float>(l.input_norm.data(), d), a, C::norm_eps, stream);
            if constexpr (prism) {
                const PrismAttentionScratch<T> scratch{StridedMatrix<T>(qkv_.data(), rows, Gpu::u_rows, Gpu::u_rows),
                                                       StridedMatrix<T>(rotated_.data(), rows, Gpu::u_rows, Gpu::u_rows),
                                                       StridedMatrix<T>(attn_.data(), rows, Gpu::u_rows, Gpu::u_rows)};
                prism_attention_add<typename Gpu::Prism, T, float>(
                    blas, a, l.u.data(), l.lambda, *prism_rope_, cache_.layer(i), scratch, seqs, kernels_.attention, status_.view(), &splits_, h, stream);
            } else {
                linear<T, T>(blas, a_mu, StridedMatrix<const T>(l.qkv.data(), qkv_width, in_width, in_width),
                             WeightLayout::out_in, qkv, 1.0f, 0.0f, stream);
                const StridedMatrix<T> qk = qkv.columns(0, q_width + kv_width);
                rope_heads<T, float>(qk, qk, heads + kv_heads, hd, heads, {&rope_, l.q_norm.data()},
                                     {&rope_, l.k_norm.data()}, seqs, C::qk_norm_eps, status_.view(), stream);
                const KvLayer<T> kv = cache_.layer(i);
                kv_append<T, T>(qkv.columns(q_width, kv_width), qkv.columns(q_width + kv_width, kv_width), kv, seqs,
                                status_.view(), stream);
                AttentionOptions opt;
                opt.kernel = kernels_.attention;
                causal_attention<T>(qkv.columns(0, q_width), kv, attn, heads, seqs, opt, status_.view(), stream, &splits_);
                linear<T, float>(blas, attn, StridedMatrix<const T>(l.o.data(), d, q_width, q_width), WeightLayout::out_in, h,
                                 1.0f, 1.0f, stream);
            }

            rmsnorm<float, float, T>(h, Vector<const float>(l.post_norm.data(), d), m, C::norm_eps, stream);
            if constexpr (C::mlp == MlpKind::token_routed) {
                if (tables_.size() > 1)
                    dispatch_->route(inputs_.tokens(), rows, tables_[static_cast<std::size_t>(i)], stream);
                token_routed_mlp_add<T, float>(blas, *dispatch_, m, l.routed, *routed_ws_, h, stream,
                                                  kernels_.expert_choice());
            } else if constexpr (C::mlp == MlpKind::learned_router)
                learned_router_mlp_add<T, float>(blas, *dispatch_, m, l.learned, *router_ws_, h, stream);
            else
                swiglu_mlp_add<T, float>(blas, m, l.dense,
                                         StridedMatrix<T>(dense_scratch_.data(), rows, 2 * C::intermediate,
                                                          2 * C::intermediate),
                                         h, stream);

            if constexpr (C::use_mu) {
                if (i + 1 < layers) {  // the last layer's mu is never consumed (docs/MODELS.md §7.3)
                    StridedMatrix<const T> h_in;
                    if constexpr (std::is_same_v<T, float>) {
                        h_in = h;
                    } else {
                        const StridedMatrix<T> copy(h_copy_.data(), rows, d, d);
                        convert<float, T>(h, copy, stream);
                        h_in = copy;
                    }
                    const StridedMatrix<T> mu = a_mu.columns(d, d);
                    linear<T, T>(blas, h_in, StridedMatrix<const T>(l.mu_proj.data(), d, d, d), WeightLayout::out_in, mu,
                                 1.0f, 0.0f, stream);
                    mu_finish<T>(l.mu_param.data(), mu, C::mu_param_min, C::mu_param_max, C::mu_clamp, stream);
                }
            }
        }
        // Final norm on the rows that get logits (every row, or each sequence's last), then the tied head.
        const StridedMatrix<float> head_in = logit_rows(h, shape, seqs, which, last_.data(), stream);
        const StridedMatrix<T> normed(m_.data(), head_in.rows, d, d);
        rmsnorm<float, float, T>(head_in, Vector<const float>(norm_.data(), d), normed, C::norm_eps, stream);
        linear<T, float>(blas, normed, StridedMatrix<const T>(embed_.data(), vocab, d, d), WeightLayout::out_in,
                         StridedMatrix<float>(logits, head_in.rows, vocab, vocab), 1.0f, 0.0f, stream);
    }

    struct Layer {
        DeviceBuffer<float> input_norm, post_norm, q_norm, k_norm, mu_param;
        DeviceBuffer<T> qkv, o, mu_proj;
        DeviceBuffer<T> u;  ///< PRISM attention: U [2HD, d]
        float lambda = 0.0f;
        DeviceBuffer<T> gate, up, down, shared_gate_up, shared_down, dense_gate_up, dense_down, router;
        TokenRoutedMlpWeights<T> routed;
        LearnedRouterMlpWeights<T> learned;
        SwiGluWeights<T> dense;
    };

    /// One layer's device buffers. Every buffer is the host compute layout as it is, except the
    /// token-routed experts' gate_up [E, d, 2 I_e] (gate | up columns), split into gate and up
    /// [E, d, I_e] for the grouped GEMMs (the learned router's experts read it strided).
    template <class W>
    static Layer upload_layer_(const typename ComplexityWeights<C, W>::Layer& w) {
        Layer l;
        l.input_norm = upload_weights<float>(w.input_layernorm);
        l.post_norm = upload_weights<float>(w.post_attention_layernorm);
        if constexpr (prism) {
            l.u = upload_weights<T>(w.attention.u);
            l.lambda = w.attention.lambda;
        } else {
            l.q_norm = upload_weights<float>(w.attention.q_norm);
            l.k_norm = upload_weights<float>(w.attention.k_norm);
            l.qkv = upload_weights<T>(w.attention.qkv);  // rows q, k, v; columns [W | W_mu]
            l.o = upload_weights<T>(w.attention.o_proj);
        }
        if constexpr (C::use_mu) {
            l.mu_param = upload_weights<float>(w.mu_guidance.mu);
            l.mu_proj = upload_weights<T>(w.mu_guidance.mu_proj);
        }
        if constexpr (C::routed) {
            constexpr int ie = C::expert_width;
            if constexpr (C::mlp == MlpKind::token_routed) {
                l.gate = upload_weights<T>(expert_half_<W>(w.mlp.gate_up, 0));
                l.up = upload_weights<T>(expert_half_<W>(w.mlp.gate_up, ie));
                l.routed.gate = {l.gate.data(), C::experts, d, ie};
                l.routed.up = {l.up.data(), C::experts, d, ie};
                l.routed.mix = route_mix<C>(w.mlp.shared_output_gate, w.mlp.routed_output_gate);
            } else {
                l.gate = upload_weights<T>(w.mlp.gate_up);
                l.router = upload_weights<T>(w.mlp.router);
                l.routed.gate = {l.gate.data(), C::experts, d, ie, 2 * ie, index_t{d} * 2 * ie};
                l.routed.up = {l.gate.data() + ie, C::experts, d, ie, 2 * ie, index_t{d} * 2 * ie};
            }
            l.down = upload_weights<T>(w.mlp.down);
            l.routed.down = {l.down.data(), C::experts, ie, d};
            if constexpr (C::has_shared_expert) {
                l.shared_gate_up = upload_weights<T>(w.mlp.shared_gate_up);  // [gate; up] rows
                l.shared_down = upload_weights<T>(w.mlp.shared_down);
                l.routed.shared = {l.shared_gate_up.data(), l.shared_down.data(), d, C::shared_width};
            }
            l.learned = {l.router.data(), l.routed};
        } else {
            l.dense_gate_up = upload_weights<T>(w.mlp.gate_up);  // [gate; up] rows
            l.dense_down = upload_weights<T>(w.mlp.down);
            l.dense = {l.dense_gate_up.data(), l.dense_down.data(), d, C::intermediate};
        }
        return l;
    }

    /// Columns [first, first + I_e) of every row of the experts' gate_up [E, d, 2 I_e]: [E, d, I_e].
    template <class W, class A>
    static std::vector<W> expert_half_(const std::vector<W, A>& gate_up, int first) {
        constexpr int ie = C::expert_width;
        const std::size_t rows = static_cast<std::size_t>(C::experts) * d;
        std::vector<W> out(rows * ie);
        for (std::size_t r = 0; r < rows; ++r)
            std::copy_n(gate_up.begin() + static_cast<std::ptrdiff_t>(r * 2 * ie + first), ie,
                        out.begin() + static_cast<std::ptrdiff_t>(r * ie));
        return out;
    }

    CallInputs inputs_;  ///< declared first: its size checks run before any allocation
    RopeTable rope_;
    KvCache<T> cache_;
    AttentionSplits splits_{Gpu::head_dim};  ///< key-split decode attention (few sequences)
    KernelChoice kernels_ = preferred_kernels<T>(attention_head_dim, current_device().major);
    DeviceBuffer<float> h_, last_;  ///< last_: each sequence's last row when lengths differ
    DeviceBuffer<T> a_mu_, qkv_, attn_, rotated_, m_, h_copy_, dense_scratch_;  ///< qkv_ and attn_ hold u and y with PRISM
    /// PRISM attention's signal and noise tables (nothing for mu-guided attention).
    std::conditional_t<prism, std::optional<PrismRope<typename Gpu::Prism>>, std::monostate> prism_rope_;
    DeviceBuffer<T> embed_;
    DeviceBuffer<float> norm_, mu_init_;
    std::vector<DeviceRoutingTable> tables_;  ///< one shared by every layer, or one per layer
    std::optional<ExpertDispatch> dispatch_;
    std::optional<TokenRoutedMlpWorkspace<T>> routed_ws_;
    std::optional<LearnedRouterWorkspace<T>> router_ws_;
    std::vector<Layer> layers_;
    DeviceStatus status_;
};

}  // namespace cpx::cuda

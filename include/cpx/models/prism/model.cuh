#pragma once
// The GPT-2-style PRISM model on the GPU (docs/MODELS.md §16-§17), from
// the same compile-time configuration as the CPU model (cpx::PrismModel):
//     x = wte[token] + wpe[position]
//     per block: x += PrismAttention(LN_1(x));  x += MLP(LN_2(x))
//     logits = LN_f(x) wte^T
// Storage: weights and activations in T (fp32, bf16 or fp16), the residual
// stream x and the logits in fp32; every product accumulates in fp32.
// One layer's attention is five launches: u = LN_1(x) U^T (cuBLAS); the signal
// and noise heads rotated with their own bases in one rope_heads launch; the
// rotated keys and unrotated values appended to the KV cache; one causal
// attention launch over all 2H heads with the noise heads scaled by -lambda;
// x += (y U) / sqrt(2HR) (cuBLAS, beta = 1).
//
// Weights: the CPU model's PrismWeights (one description of the tensors for
// both backends, free of Eigen), uploaded once; a checkpoint loads through
// models/prism/checkpoint.cuh.
//
// Calls: `forward` validates token ids and positions on the host, copies them
// to the model's device input buffers and enqueues the work. `enqueue` reads
// only those device buffers and allocates nothing, so a decode step can be
// captured once (cuda::Graph) and replayed after `set_inputs`.

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cpx/config/prism_attention_shape.hpp"
#include "cpx/config/prism_config.hpp"
#include "cpx/core/error.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/kernels/activations.cuh"
#include "cpx/cuda/kernels/attention.cuh"
#include "cpx/cuda/runtime/blas.cuh"
#include "cpx/models/call_inputs.cuh"
#include "cpx/cuda/runtime/device_buffer.cuh"
#include "cpx/cuda/runtime/device_status.cuh"
#include "cpx/cuda/kernels/embedding.cuh"
#include "cpx/cuda/runtime/kernel_choice.cuh"
#include "cpx/cuda/kernels/kv_cache.cuh"
#include "cpx/cuda/kernels/layernorm.cuh"
#include "cpx/models/logit_rows.cuh"
#include "cpx/cuda/layers/prism_attention.cuh"
#include "cpx/cuda/kernels/rope.cuh"
#include "cpx/cuda/runtime/weight_upload.cuh"
#include "cpx/models/prism/weights.hpp"

namespace cpx::cuda {

template <PrismConfigType C, class T = float>
class PrismModel : public ModelCalls<PrismModel<C, T>> {
public:
    using Config = C;
    using Attention = PrismAttentionOf<C>;
    static constexpr int d = C::hidden, vocab = C::vocab, context = C::max_positions, layers = C::layers;
    static constexpr int H = C::heads, D = C::head_dim, width = C::u_rows, mlp_width = C::mlp_width;

    /// Uploads `weights` (the model's one tensor description, models/prism/weights.hpp:
    /// loaded by load_prism_checkpoint, drawn by random(seed) or converted; matrices
    /// converted from W to T on the host) and sizes every buffer for calls of up to
    /// `max_batch` sequences and `max_rows` tokens in total; the KV cache holds
    /// `cache_slots` sequences of the full context (0: max_batch), a call's sequences
    /// in slots 0 .. batch - 1 unless set_inputs names others.
    template <class W>
    PrismModel(const PrismWeights<C, W>& weights, int max_batch, int max_rows, int cache_slots = 0)
        : inputs_("cuda::PrismModel", max_batch, max_rows, vocab, context, cache_slots > 0 ? cache_slots : max_batch),
          rope_(context),
          cache_(layers, inputs_.cache_slots(), 2 * H, D, context),
          x_(static_cast<std::size_t>(max_rows) * d),
          last_(static_cast<std::size_t>(max_batch) * d),
          normed_(static_cast<std::size_t>(max_rows) * d),
          u_(static_cast<std::size_t>(max_rows) * width),
          rotated_(static_cast<std::size_t>(max_rows) * width),
          y_(static_cast<std::size_t>(max_rows) * width),
          hidden_(static_cast<std::size_t>(max_rows) * mlp_width) {
        require<InputError>(!weights.packed_matrices_released(), "cuda::PrismModel: these weights' layer matrices "
                            "were released to a CPU model's packs (release_stored_matrices)");
        poison(x_, last_, normed_, u_, rotated_, y_, hidden_);
        wte_ = upload_weights<T>(weights.wte);
        wpe_ = upload_weights<T>(weights.wpe);
        ln_f_w_ = upload_weights<float>(weights.ln_f_weight);
        if (C::bias) ln_f_b_ = upload_weights<float>(weights.ln_f_bias);
        layers_.reserve(layers);
        for (const auto& w : weights.layers) {
            Layer l;
            l.ln_1_w = upload_weights<float>(w.ln_1_weight);
            l.u = upload_weights<T>(w.u);
            l.lambda = w.lambda;
            l.ln_2_w = upload_weights<float>(w.ln_2_weight);
            l.c_fc = upload_weights<T>(w.c_fc_weight);
            l.c_proj = upload_weights<T>(w.c_proj_weight);
            if (C::bias) {
                l.ln_1_b = upload_weights<float>(w.ln_1_bias);
                l.ln_2_b = upload_weights<float>(w.ln_2_bias);
                l.c_fc_b = upload_weights<float>(w.c_fc_bias);
                l.c_proj_b = upload_weights<float>(w.c_proj_bias);
            }
            layers_.push_back(std::move(l));
        }
    }

private:
    friend ModelCalls<PrismModel>;
    using value_type = T;
    static constexpr int attention_head_dim = D;

    /// The forward pass over the inputs last given to set_inputs (ModelCalls::enqueue).
    void enqueue_call_(Blas& blas, const CallShape& shape, const SequenceRows& seqs, float* logits, LogitRows which,
                       cudaStream_t stream) {
        const int rows = shape.rows;
        const StridedMatrix<float> x(x_.data(), rows, d, d);
        const StridedMatrix<T> normed(normed_.data(), rows, d, d);
        const StridedMatrix<T> u(u_.data(), rows, width, width), rot(rotated_.data(), rows, width, width),
            y(y_.data(), rows, width, width), hidden(hidden_.data(), rows, mlp_width, mlp_width);
        embedding<std::int32_t, T, float>(inputs_.tokens(), Matrix<const T>(wte_.data(), vocab, d), x, status_.view(),
                                          stream, wpe_.data(), context, seqs);
        const PrismAttentionScratch<T> scratch{u, rot, y};
        for (int i = 0; i < layers; ++i) {
            const Layer& l = layers_[static_cast<std::size_t>(i)];
            layernorm<float, float, T>(x, l.ln_1_w.data(), bias_(l.ln_1_b), normed, C::ln_eps, stream);
            prism_attention_add<Attention, T, float>(blas, normed, l.u.data(), l.lambda, rope_, cache_.layer(i), scratch,
                                                     seqs, kernels_.attention, status_.view(), &splits_, x, stream);

            layernorm<float, float, T>(x, l.ln_2_w.data(), bias_(l.ln_2_b), normed, C::ln_eps, stream);
            linear<T, T>(blas, normed, StridedMatrix<const T>(l.c_fc.data(), mlp_width, d, d), WeightLayout::out_in,
                         hidden, 1.0f, 0.0f, stream);
            bias_gelu<T, float>(hidden, bias_(l.c_fc_b), stream);
            linear<T, float>(blas, hidden, StridedMatrix<const T>(l.c_proj.data(), d, mlp_width, mlp_width),
                             WeightLayout::out_in, x, 1.0f, 1.0f, stream);
            if (C::bias) add_bias<float, float>(x, l.c_proj_b.data(), stream);
        }
        // LN_f on the rows that get logits: every row, or each sequence's last.
        const StridedMatrix<float> head_in = logit_rows(x, shape, seqs, which, last_.data(), stream);
        const StridedMatrix<T> head_normed(normed_.data(), head_in.rows, d, d);
        layernorm<float, float, T>(head_in, ln_f_w_.data(), bias_(ln_f_b_), head_normed, C::ln_eps, stream);
        linear<T, float>(blas, head_normed, StridedMatrix<const T>(wte_.data(), vocab, d, d), WeightLayout::out_in,
                         StridedMatrix<float>(logits, head_in.rows, vocab, vocab), 1.0f, 0.0f, stream);
    }

    struct Layer {
        DeviceBuffer<float> ln_1_w, ln_1_b, ln_2_w, ln_2_b, c_fc_b, c_proj_b;
        DeviceBuffer<T> u, c_fc, c_proj;
        float lambda = 0.0f;
    };
    static const float* bias_(const DeviceBuffer<float>& b) { return b.size() ? b.data() : nullptr; }

    CallInputs inputs_;  ///< declared first: its size checks run before any allocation
    PrismRope<Attention> rope_;
    KvCache<T> cache_;
    AttentionSplits splits_{D};  ///< key-split decode attention (few sequences)
    KernelChoice kernels_ = preferred_kernels<T>(attention_head_dim, current_device().major);
    DeviceBuffer<float> x_, last_;  ///< last_: each sequence's last row when lengths differ
    DeviceBuffer<T> normed_, u_, rotated_, y_, hidden_;
    DeviceBuffer<T> wte_, wpe_;
    DeviceBuffer<float> ln_f_w_, ln_f_b_;
    std::vector<Layer> layers_;
    DeviceStatus status_;
};

}  // namespace cpx::cuda

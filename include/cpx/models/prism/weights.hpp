#pragma once
// The parameters of a PRISM model (docs/MODELS.md §16, §18 and §19), named
// as the reference's nanoGPT state dict names them. Matrices (wte, wpe, U,
// c_fc, c_proj) are stored as W (float or bf16), vectors and lambda in fp32.
// The slots (models/tensor_slot.hpp) list every tensor with its name, shape
// and initialisation; the initialiser, the checkpoint reader and writer, the
// dtype conversion and the GPU upload all walk them or these buffers, so the
// names live in one place. Free of Eigen and CUDA (CPU views:
// models/prism/cpu_views.hpp).

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cpx/config/prism_config.hpp"
#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/aligned_buffer.hpp"
#include "cpx/cpu/runtime/weight_arena.hpp"
#include "cpx/math/prism_lambda.hpp"
#include "cpx/models/initialize_slots.hpp"
#include "cpx/models/stored_matrices.hpp"
#include "cpx/models/tensor_slot.hpp"

namespace cpx {

/// The token embedding [V, d], also the tied output head.
inline constexpr const char* prism_embedding_name = "transformer.wte.weight";
/// "transformer.h.": the prefix of every block's tensors (block i: prism_blocks + i + ".").
inline constexpr const char* prism_blocks = "transformer.h.";

namespace detail {
inline Vector<const float> bias_view(const cpu::AlignedVector<float>& b) {
    return b.empty() ? Vector<const float>() : Vector<const float>(b.data(), static_cast<index_t>(b.size()));
}
}  // namespace detail

/// One PRISM block's tensors (the CPU layers' views of them: models/prism/cpu_views.hpp).
template <PrismConfigType C, class W>
struct PrismLayerWeights {
    static constexpr index_t d = C::hidden;
    cpu::AlignedVector<float> ln_1_weight, ln_1_bias, ln_2_weight, ln_2_bias;  // [d]; biases empty without bias
    cpu::WeightVector<W> u;                                                    // attn.u_proj.weight [2HD, d]
    float lambda = static_cast<float>(prism_lambda_start);                     // attn.lambda_q
    cpu::WeightVector<W> c_fc_weight, c_proj_weight;                           // [4d, d], [d, 4d]
    cpu::AlignedVector<float> c_fc_bias, c_proj_bias;                          // [4d], [d]

    Vector<const float> ln_1_w() const { return Vector<const float>(ln_1_weight.data(), d); }
    Vector<const float> ln_1_b() const { return detail::bias_view(ln_1_bias); }
    Vector<const float> ln_2_w() const { return Vector<const float>(ln_2_weight.data(), d); }
    Vector<const float> ln_2_b() const { return detail::bias_view(ln_2_bias); }
};

template <PrismConfigType C, class W = float>
struct PrismWeights : ReleaseMark {
    static_assert(std::is_same_v<W, float> || std::is_same_v<W, bf16>, "weights are stored as float or bf16");
    using Config = C;
    using weight_type = W;
    static constexpr index_t d = C::hidden, vocab = C::vocab, positions = C::max_positions, width = C::mlp_width,
                             u_rows = C::u_rows;

    using Layer = PrismLayerWeights<C, W>;

    cpu::WeightVector<W> wte, wpe;                     // [V, d] (also the tied head), [block_size, d]
    cpu::AlignedVector<float> ln_f_weight, ln_f_bias;  // [d]
    std::vector<Layer> layers;

    /// Every tensor allocated, zero-filled.
    PrismWeights() : layers(C::layers) {
        wte.assign(static_cast<std::size_t>(vocab * d), W{});
        wpe.assign(static_cast<std::size_t>(positions * d), W{});
        ln_f_weight.assign(d, 0.0f);
        if (C::bias) ln_f_bias.assign(d, 0.0f);
        for (auto& l : layers) {
            l.ln_1_weight.assign(d, 0.0f);
            l.ln_2_weight.assign(d, 0.0f);
            l.u.assign(static_cast<std::size_t>(u_rows * d), W{});
            l.c_fc_weight.assign(static_cast<std::size_t>(width * d), W{});
            l.c_proj_weight.assign(static_cast<std::size_t>(d * width), W{});
            if (C::bias) {
                l.ln_1_bias.assign(d, 0.0f);
                l.ln_2_bias.assign(d, 0.0f);
                l.c_fc_bias.assign(width, 0.0f);
                l.c_proj_bias.assign(d, 0.0f);
            }
        }
    }

    /// The reference's initialisation (docs/MODELS.md §19; the orthogonal U needs
    /// <cpx/models/orthogonal_fill.hpp>, which the CPU model includes): Linear and Embedding
    /// weights N(0, 0.02), c_proj N(0, 0.02 / sqrt(2 n_layer)), U orthogonal,
    /// biases 0, LayerNorm weights 1, lambda at the schedule's start (the
    /// reference's initial buffer value), each tensor from its own seeded stream.
    static PrismWeights random(std::uint64_t seed) {
        PrismWeights w;
        initialize_slots</*orthogonal=*/true>(w.slots(), seed);
        return w;
    }

    /// The checkpoint tensors, in the state dict's order. Biases are listed
    /// only when the configuration has them; the tied lm_head.weight and the
    /// attn.bias mask buffers are not listed. An InputError once the layer matrices are
    /// released.
    std::vector<TensorSlot<W>> slots() { return build_slots(*this); }
    std::vector<TensorSlot<const W>> slots() const { return build_slots(*this); }

    /// Frees layer l's matrices that the packed arithmetic holds in its packs
    /// (models/prism/packs.hpp: keep the two lists alike): U (unless keeps.prism_u), c_fc and
    /// c_proj; returns the bytes freed. One thread per layer. PrismModel frees every layer once the packs exist
    /// (release_stored_matrices) or each as it is packed, then calls finish_release (both
    /// through release_packed_layers, models/stored_matrices.hpp); afterwards slots(), and so
    /// saving, converting and uploading to a GPU, are InputErrors.
    std::size_t free_packed_layer(int l, ReleaseKeeps keeps) {
        Layer& layer = layers[static_cast<std::size_t>(l)];
        const std::size_t u = keeps.prism_u ? 0 : cpu::free_weight(layer.u);
        return u + cpu::free_weight(layer.c_fc_weight) + cpu::free_weight(layer.c_proj_weight);
    }
    /// After free_packed_layer of every layer: wte stays put (the lookup and the head read it),
    /// wpe moves to fresh storage so as not to keep the freed matrices' slabs alive
    /// (cpu/runtime/weight_arena.hpp), and the weights are marked released.
    void finish_release() {
        cpu::KeptWeights<W> kept;
        kept.keep(wpe);
        kept.restore();
        mark_released();
    }

    Vector<const float> ln_f_w() const { return Vector<const float>(ln_f_weight.data(), d); }
    Vector<const float> ln_f_b() const { return detail::bias_view(ln_f_bias); }

private:
    template <class Self>
    static auto build_slots(Self& self) {
        self.require_stored();
        using Wq = std::conditional_t<std::is_const_v<Self>, const W, W>;
        SlotList<Wq> out;
        const auto mat = [&](std::string name, Wq* data, std::int64_t rows, std::int64_t cols, double init_std) {
            out.matrix(std::move(name), {rows, cols}, data, rows, cols, cols, init_std);
        };
        const double std0 = 0.02, proj_std = 0.02 / std::sqrt(2.0 * C::layers);
        mat(prism_embedding_name, self.wte.data(), vocab, d, std0);
        mat("transformer.wpe.weight", self.wpe.data(), positions, d, std0);
        for (int i = 0; i < C::layers; ++i) {
            auto& l = self.layers[static_cast<std::size_t>(i)];
            const std::string p = prism_blocks + std::to_string(i) + ".";
            out.vector(p + "ln_1.weight", {d}, l.ln_1_weight.data(), d, 1.0f);
            if (C::bias) out.vector(p + "ln_1.bias", {d}, l.ln_1_bias.data(), d, 0.0f);
            mat(p + "attn.u_proj.weight", l.u.data(), u_rows, d, 0.0);
            out.back().orthogonal = true;
            out.vector(p + "attn.lambda_q", {}, &l.lambda, 1, static_cast<float>(prism_lambda_start));
            out.vector(p + "ln_2.weight", {d}, l.ln_2_weight.data(), d, 1.0f);
            if (C::bias) out.vector(p + "ln_2.bias", {d}, l.ln_2_bias.data(), d, 0.0f);
            mat(p + "mlp.c_fc.weight", l.c_fc_weight.data(), width, d, std0);
            if (C::bias) out.vector(p + "mlp.c_fc.bias", {width}, l.c_fc_bias.data(), width, 0.0f);
            mat(p + "mlp.c_proj.weight", l.c_proj_weight.data(), d, width, proj_std);
            if (C::bias) out.vector(p + "mlp.c_proj.bias", {d}, l.c_proj_bias.data(), d, 0.0f);
        }
        out.vector("transformer.ln_f.weight", {d}, self.ln_f_weight.data(), d, 1.0f);
        if (C::bias) out.vector("transformer.ln_f.bias", {d}, self.ln_f_bias.data(), d, 0.0f);
        return std::move(out.slots);
    }
};

/// The same PRISM model with its matrices stored as another type (fp32 <->
/// bf16; to bf16 rounds to nearest even, to fp32 is exact).
template <class To, PrismConfigType C, class From>
PrismWeights<C, To> convert_weights(const PrismWeights<C, From>& from) {
    PrismWeights<C, To> to;
    copy_slots(from.slots(), to.slots());
    return to;
}

}  // namespace cpx

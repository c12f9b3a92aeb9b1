#pragma once
// The parameters of a PRISM model (spec/prism.md sections 2 and 4), owned in
// fp32 and named as the reference's nanoGPT state dict names them. One
// enumeration (`for_each_tensor`) lists every tensor with its name and shape;
// the checkpoint reader, the writer and the initialiser all walk it, so the
// names live in one place.

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cpx/config/prism_attention_shape.hpp"
#include "cpx/config/prism_config.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/aligned_buffer.hpp"
#include "cpx/cpu/gelu_mlp.hpp"
#include "cpx/cpu/orthogonal_init.hpp"
#include "cpx/cpu/prism_attention.hpp"
#include "cpx/layers/prism_lambda.hpp"

namespace cpx {

/// One tensor of the enumeration: its checkpoint name, shape and storage.
/// A scalar (lambda_q) has an empty shape and one element.
template <class T>
struct NamedTensor {
    std::string name;
    std::vector<index_t> shape;
    T* data;
    index_t size() const {
        index_t n = 1;
        for (index_t e : shape) n *= e;
        return n;
    }
};

template <PrismConfigType C>
class PrismWeights {
public:
    using Config = C;
    using Attention = PrismAttentionOf<C>;
    static constexpr index_t d = C::hidden, vocab = C::vocab, positions = C::max_positions, width = C::mlp_width,
                             u_rows = C::u_rows;

    struct Layer {
        cpu::AlignedVector<float> ln_1_weight, ln_1_bias, u, ln_2_weight, ln_2_bias, c_fc_weight, c_fc_bias,
            c_proj_weight, c_proj_bias;
        float lambda = static_cast<float>(prism_lambda_start);  ///< attn.lambda_q

        cpu::PrismAttentionWeights attention() const { return {Matrix<const float>(u.data(), u_rows, d), lambda}; }
        cpu::GeluMlpWeights mlp() const {
            return {Matrix<const float>(c_fc_weight.data(), width, d), bias_view(c_fc_bias),
                    Matrix<const float>(c_proj_weight.data(), d, width), bias_view(c_proj_bias)};
        }
        Vector<const float> ln_1_w() const { return Vector<const float>(ln_1_weight.data(), d); }
        Vector<const float> ln_1_b() const { return bias_view(ln_1_bias); }
        Vector<const float> ln_2_w() const { return Vector<const float>(ln_2_weight.data(), d); }
        Vector<const float> ln_2_b() const { return bias_view(ln_2_bias); }
    };

    cpu::AlignedVector<float> wte, wpe, ln_f_weight, ln_f_bias;
    std::vector<Layer> layers;

    /// Every tensor allocated; LayerNorm weights 1, everything else 0, lambda
    /// at the schedule's start (the reference's initial buffer value).
    PrismWeights() : layers(C::layers) {
        wte.assign(vocab * d, 0.0f);
        wpe.assign(positions * d, 0.0f);
        ln_f_weight.assign(d, 1.0f);
        if (C::bias) ln_f_bias.assign(d, 0.0f);
        for (auto& l : layers) {
            l.ln_1_weight.assign(d, 1.0f);
            l.ln_2_weight.assign(d, 1.0f);
            l.u.assign(u_rows * d, 0.0f);
            l.c_fc_weight.assign(width * d, 0.0f);
            l.c_proj_weight.assign(d * width, 0.0f);
            if (C::bias) {
                l.ln_1_bias.assign(d, 0.0f);
                l.ln_2_bias.assign(d, 0.0f);
                l.c_fc_bias.assign(width, 0.0f);
                l.c_proj_bias.assign(d, 0.0f);
            }
        }
    }

    /// The reference's initialisation (spec section 5): Linear and Embedding
    /// weights N(0, 0.02), c_proj N(0, 0.02 / sqrt(2 n_layer)), U orthogonal,
    /// biases 0, LayerNorm weights 1. Deterministic in the seed.
    static PrismWeights random(std::uint64_t seed) {
        PrismWeights w;
        std::mt19937_64 gen(seed);
        const auto normal = [&gen](cpu::AlignedVector<float>& v, double stddev) {
            std::normal_distribution<float> dist(0.0f, static_cast<float>(stddev));
            for (auto& x : v) x = dist(gen);
        };
        normal(w.wte, 0.02);
        normal(w.wpe, 0.02);
        const double proj_std = 0.02 / std::sqrt(2.0 * C::layers);
        for (auto& l : w.layers) {
            cpu::orthogonal_init(Matrix<float>(l.u.data(), u_rows, d), gen);
            normal(l.c_fc_weight, 0.02);
            normal(l.c_proj_weight, proj_std);
        }
        return w;
    }

    /// Calls f(NamedTensor<float>) (f(NamedTensor<const float>) on a const
    /// object) for every tensor a checkpoint holds, in the state dict's order.
    /// Biases are listed only when the configuration has them; the tied
    /// lm_head.weight and the attn.bias mask buffers are not listed.
    template <class F>
    void for_each_tensor(F&& f) { visit(*this, f); }
    template <class F>
    void for_each_tensor(F&& f) const { visit(*this, f); }

    Vector<const float> ln_f_w() const { return Vector<const float>(ln_f_weight.data(), d); }
    Vector<const float> ln_f_b() const { return bias_view(ln_f_bias); }

private:
    template <class Self, class F>
    static void visit(Self& w, F& f) {
        using T = std::remove_reference_t<decltype(*w.wte.data())>;
        using Named = NamedTensor<T>;
        f(Named{"transformer.wte.weight", {vocab, d}, w.wte.data()});
        f(Named{"transformer.wpe.weight", {positions, d}, w.wpe.data()});
        for (int i = 0; i < C::layers; ++i) {
            auto& l = w.layers[static_cast<std::size_t>(i)];
            const std::string p = "transformer.h." + std::to_string(i) + ".";
            f(Named{p + "ln_1.weight", {d}, l.ln_1_weight.data()});
            if (C::bias) f(Named{p + "ln_1.bias", {d}, l.ln_1_bias.data()});
            f(Named{p + "attn.u_proj.weight", {u_rows, d}, l.u.data()});
            f(Named{p + "attn.lambda_q", {}, &l.lambda});
            f(Named{p + "ln_2.weight", {d}, l.ln_2_weight.data()});
            if (C::bias) f(Named{p + "ln_2.bias", {d}, l.ln_2_bias.data()});
            f(Named{p + "mlp.c_fc.weight", {width, d}, l.c_fc_weight.data()});
            if (C::bias) f(Named{p + "mlp.c_fc.bias", {width}, l.c_fc_bias.data()});
            f(Named{p + "mlp.c_proj.weight", {d, width}, l.c_proj_weight.data()});
            if (C::bias) f(Named{p + "mlp.c_proj.bias", {d}, l.c_proj_bias.data()});
        }
        f(Named{"transformer.ln_f.weight", {d}, w.ln_f_weight.data()});
        if (C::bias) f(Named{"transformer.ln_f.bias", {d}, w.ln_f_bias.data()});
    }

    static Vector<const float> bias_view(const cpu::AlignedVector<float>& b) {
        return b.empty() ? Vector<const float>() : Vector<const float>(b.data(), static_cast<index_t>(b.size()));
    }
};

}  // namespace cpx

#pragma once
// bf16 arithmetic for the GPT-2-style PRISM model (docs/BF16.md): packed bf16
// copies of U (read two ways: x U^T and y U), the MLP's c_fc and c_proj, and
// the tied head wte, attached to the layers' weight views.

#include <cstddef>
#include <vector>

#include "cpx/config/prism_config.hpp"
#include "cpx/cpu/attention_distance.hpp"
#include "cpx/cpu/gelu_mlp.hpp"
#include "cpx/cpu/packed_panels.hpp"
#include "cpx/cpu/prism_attention.hpp"
#include "cpx/models/prism_weights.hpp"

namespace cpx {

template <PrismConfigType C, class W>
class PrismBf16 {
public:
    explicit PrismBf16(const PrismWeights<C, W>& w) : layers_(static_cast<std::size_t>(C::layers)) {
        using cpu::PackedBf16;
        using cpu::WeightOrientation;
#pragma omp parallel for schedule(dynamic, 1)
        for (int l = 0; l < C::layers; ++l) {
            const auto& src = w.layers[static_cast<std::size_t>(l)];
            Layer& p = layers_[static_cast<std::size_t>(l)];
            const auto u = cpu::rows_of(src.attention().u);
            p.u = PackedBf16::pack(u, WeightOrientation::out_in);
            p.u_t = PackedBf16::pack(u, WeightOrientation::in_out);
            const auto mlp = src.mlp();
            p.c_fc = PackedBf16::pack(cpu::rows_of(mlp.c_fc_weight), WeightOrientation::out_in);
            p.c_proj = PackedBf16::pack(cpu::rows_of(mlp.c_proj_weight), WeightOrientation::out_in);
        }
        head_ = PackedBf16::pack(cpu::rows_of<const W>(w.wte.data(), C::vocab, C::hidden), WeightOrientation::out_in);
    }

    void attach(int l, cpu::PrismAttentionWeights<W>& v) const { v.u_bf16 = &layer(l).u, v.u_t_bf16 = &layer(l).u_t; }
    void attach(int l, cpu::GeluMlpWeights<W>& v) const {
        v.c_fc_bf16 = &layer(l).c_fc, v.c_proj_bf16 = &layer(l).c_proj;
    }
    const cpu::PackedBf16* head() const { return &head_; }

    std::size_t bytes() const {
        std::size_t b = head_.bytes();
        for (const Layer& p : layers_) b += p.u.bytes() + p.u_t.bytes() + p.c_fc.bytes() + p.c_proj.bytes();
        return b;
    }

private:
    struct Layer {
        cpu::PackedBf16 u, u_t, c_fc, c_proj;
    };
    const Layer& layer(int l) const { return layers_[static_cast<std::size_t>(l)]; }
    std::vector<Layer> layers_;
    cpu::PackedBf16 head_;
};

}  // namespace cpx

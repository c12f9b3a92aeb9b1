#pragma once
// The packed copies of the GPT-2-style PRISM model's matrices for Compute::bf16
// or Compute::fp32_packed (cpu/runtime/compute.hpp, docs/BF16.md): U (read two ways:
// x U^T and y U), the MLP's c_fc and c_proj, and the tied head wte, attached
// to the layers' weight views. PrismWeights::free_packed_layer frees the stored
// layer matrices these replace: keep the two lists alike.

#include <cstddef>
#include <vector>

#include "cpx/config/prism_config.hpp"
#include "cpx/cpu/kernels/attention_distance.hpp"
#include "cpx/cpu/layers/gelu_mlp.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/layers/prism_attention.hpp"
#include "cpx/models/prism/cpu_views.hpp"
#include "cpx/models/prism/weights.hpp"

namespace cpx {

template <PrismConfigType C, class W>
class PrismPacks {
public:
    PrismPacks(const PrismWeights<C, W>& w, cpu::Compute compute) : PrismPacks(w, compute, [](int) {}) {}
    /// Packs every layer, calling after_layer(l) once layer l is packed (from any thread), as
    /// ComplexityPacks does.
    template <class AfterLayer>
    PrismPacks(const PrismWeights<C, W>& w, cpu::Compute compute, AfterLayer after_layer)
        : layers_(static_cast<std::size_t>(C::layers)) {
        using cpu::PackedWeight;
        using cpu::WeightOrientation;
        // One layer at a time per thread; parallel_for carries an exception (std::bad_alloc) out.
        cpu::parallel_for(C::layers, true, [&](int l) {
            const auto& src = w.layers[static_cast<std::size_t>(l)];
            Layer& p = layers_[static_cast<std::size_t>(l)];
            const auto u = cpu::rows_of(cpu_attention_view(src).u);
            p.u = PackedWeight::pack(u, WeightOrientation::out_in, compute);
            p.u_t = PackedWeight::pack(u, WeightOrientation::in_out, compute);
            const auto mlp = cpu_mlp_view(src);
            p.c_fc = PackedWeight::pack(cpu::rows_of(mlp.c_fc_weight), WeightOrientation::out_in, compute);
            p.c_proj = PackedWeight::pack(cpu::rows_of(mlp.c_proj_weight), WeightOrientation::out_in, compute);
            after_layer(l);
        }, cpu::Schedule::one_by_one);
        head_ = PackedWeight::pack(cpu::rows_of<const W>(w.wte.data(), C::vocab, C::hidden), WeightOrientation::out_in,
                                   compute);
    }

public:
    void attach(int l, cpu::PrismAttentionWeights<W>& v) const { v.u_packed = &layer(l).u, v.u_t_packed = &layer(l).u_t; }
    void attach(int l, cpu::GeluMlpWeights<W>& v) const {
        v.c_fc_packed = &layer(l).c_fc, v.c_proj_packed = &layer(l).c_proj;
    }
    const cpu::PackedWeight* head() const { return &head_; }

    std::size_t bytes() const {
        std::size_t b = head_.bytes();
        for (const Layer& p : layers_) b += p.u.bytes() + p.u_t.bytes() + p.c_fc.bytes() + p.c_proj.bytes();
        return b;
    }

private:
    struct Layer {
        cpu::PackedWeight u, u_t, c_fc, c_proj;
    };
    const Layer& layer(int l) const { return layers_[static_cast<std::size_t>(l)]; }
    std::vector<Layer> layers_;
    cpu::PackedWeight head_;
};

}  // namespace cpx

#pragma once
// The packed copies of a COMPLEXITY-DEEP model's matrices for Compute::bf16
// or Compute::fp32_packed (cpu/runtime/compute.hpp, docs/BF16.md): every matrix the
// model multiplies (but the learned router's [E, d], an fp32 product on the stored
// weights), packed once into panels (cpu/kernels/packed_panels.hpp) and
// attached to the layers' weight views, so every product, decode steps included,
// runs on the packed kernels. Norms, the residual stream, softmax, RoPE and mu's
// clamps stay fp32. The packs cost 2 bytes per matrix element on top of
// the stored weights (bf16 arithmetic, or fp32_packed on bf16 weights) or 4 (fp32_packed on
// fp32 weights), unless the model releases the stored layer matrices they replace
// (ComplexityWeights::free_packed_layer: keep the two lists alike).

#include <cstddef>
#include <vector>

#include "cpx/config/complexity_config.hpp"
#include "cpx/models/complexity/cpu_views.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/models/complexity/weights.hpp"

namespace cpx {

template <ComplexityConfigType C, class W>
class ComplexityPacks {
public:
    ComplexityPacks(const ComplexityWeights<C, W>& w, cpu::Compute compute) : ComplexityPacks(w, compute, [](int) {}) {}
    /// Packs every layer, calling after_layer(l) once layer l is packed (from any thread):
    /// ComputeChoice frees that layer's stored matrices there under StoredMatrices::release
    /// (after_layer_packed, models/stored_matrices.hpp).
    template <class AfterLayer>
    ComplexityPacks(const ComplexityWeights<C, W>& w, cpu::Compute compute, AfterLayer after_layer)
        : compute_(compute), layers_(static_cast<std::size_t>(C::layers)) {
        // One layer at a time per thread; parallel_for carries an exception (std::bad_alloc) out.
        cpu::parallel_for(C::layers, true, [&](int l) {
            Layer& p = layers_[static_cast<std::size_t>(l)];
            const auto a = w.attention(l);
            if constexpr (C::attention == AttentionKind::prism) {
                p.qkv_or_u = pack(cpu::rows_of(a.u), cpu::WeightOrientation::out_in);
                p.o_or_u_t = pack(cpu::rows_of(a.u), cpu::WeightOrientation::in_out);
            } else {
                p.qkv_or_u = pack(a.qkv, cpu::WeightOrientation::out_in);
                p.o_or_u_t = pack(a.o_proj, cpu::WeightOrientation::out_in);
            }
            if constexpr (C::routed) {
                const cpu::ExpertWeights<W> e = w.experts(l);
                for (int x = 0; x < C::experts; ++x) {
                    p.expert_gate_up.push_back(pack(e.gate_up_of(x), cpu::WeightOrientation::in_out));
                    p.expert_down.push_back(pack(e.down_of(x), cpu::WeightOrientation::in_out));
                }
                if constexpr (C::has_shared_expert) pack_swiglu(w.shared_expert(l), p);
            } else {
                pack_swiglu(w.dense_mlp(l), p);
            }
            if constexpr (C::use_mu)
                if (l + 1 < C::layers)
                    p.mu_proj = pack(w.mu_guidance(l).mu_proj, cpu::WeightOrientation::out_in);
            after_layer(l);
        }, cpu::Schedule::one_by_one);
        head_ = pack(cpu::rows_of<const W>(w.embed_tokens.data(), C::vocab, C::hidden), cpu::WeightOrientation::out_in);
    }

public:
    /// Attaches layer l's packs to its attention view.
    template <class View>
    void attach_attention(int l, View& v) const {
        const Layer& p = layer(l);
        if constexpr (C::attention == AttentionKind::prism) v.u_packed = &p.qkv_or_u, v.u_t_packed = &p.o_or_u_t;
        else v.qkv_packed = &p.qkv_or_u, v.o_proj_packed = &p.o_or_u_t;
    }
    /// Attaches layer l's packs to its MLP view (token-routed, learned-router or dense).
    template <class View>
    void attach_mlp(int l, View& v) const {
        const Layer& p = layer(l);
        if constexpr (C::routed) {
            v.experts.gate_up_packed = p.expert_gate_up.data();
            v.experts.down_packed = p.expert_down.data();
            if constexpr (C::has_shared_expert) v.shared.gate_up_packed = &p.gate_up, v.shared.down_packed = &p.down;
        } else {
            v.gate_up_packed = &p.gate_up, v.down_packed = &p.down;
        }
    }
    void attach_mu_guidance(int l, cpu::MuGuidanceWeights<W>& v) const
        requires(C::use_mu)
    {
        v.mu_proj_packed = &layer(l).mu_proj;
    }
    /// The tied output head, Emb as [vocab, hidden].
    const cpu::PackedWeight* head() const { return &head_; }

    std::size_t bytes() const {
        std::size_t b = head_.bytes();
        for (const Layer& p : layers_) {
            b += p.qkv_or_u.bytes() + p.o_or_u_t.bytes() + p.gate_up.bytes() + p.down.bytes() + p.mu_proj.bytes();
            for (const auto& e : p.expert_gate_up) b += e.bytes();
            for (const auto& e : p.expert_down) b += e.bytes();
        }
        return b;
    }

private:
    struct Layer {
        cpu::PackedWeight qkv_or_u, o_or_u_t;  // attention: qkv and o_proj, or PRISM's U two ways
        std::vector<cpu::PackedWeight> expert_gate_up, expert_down;
        cpu::PackedWeight gate_up, down;        // shared expert or dense MLP
        cpu::PackedWeight mu_proj;
    };
    cpu::PackedWeight pack(const StridedMatrix<const W>& m, cpu::WeightOrientation o) const {
        return cpu::PackedWeight::pack(m, o, compute_);
    }
    void pack_swiglu(const cpu::SwiGluWeights<W>& s, Layer& p) const {
        p.gate_up = pack(s.gate_up, cpu::WeightOrientation::out_in);
        p.down = pack(s.down, cpu::WeightOrientation::out_in);
    }
    const Layer& layer(int l) const { return layers_[static_cast<std::size_t>(l)]; }

    cpu::Compute compute_;
    std::vector<Layer> layers_;
    cpu::PackedWeight head_;
};

}  // namespace cpx

#pragma once
// The ablation's learned top-1 router (docs/MODELS.md §10.2, run4):
//   p = softmax(x . W_r^T) (fp32),  e = argmax p,  MLP(x) = p_e * Expert_e(x) + Shared(x)
// Each token runs the expert it chose. (The authors' training code ran a
// fixed N/E-chunk sort-and-split, which gives some tokens another expert's
// output depending on the batch; that is a property of their training batches,
// not of the model, and is not reproduced.)

#include <cstdint>
#include <span>
#include <vector>

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/layers/expert_dispatch.hpp"
#include "cpx/cpu/layers/shared_expert.hpp"
#include "cpx/math/router.hpp"

namespace cpx::cpu {

/// Non-owning weights of one learned-router MLP.
template <ComplexityConfigType C, class W>
struct LearnedRouterMlpWeights {
    StridedMatrix<const W, C::hidden> router;  ///< [experts, hidden] (nn.Linear, no bias)
    ExpertWeights<W> experts;
    SwiGluWeights<W> shared;   ///< used when C::has_shared_expert
};

template <ComplexityConfigType C, class W>
class LearnedRouterMlp {
    static_assert(C::mlp == MlpKind::learned_router, "LearnedRouterMlp needs a learned_router configuration");

public:
    void reserve(index_t rows) {
        dispatch_.reserve(rows, C::hidden, C::expert_width, C::experts);
        if constexpr (C::has_shared_expert) shared_.reserve(rows, C::hidden, C::shared_width);
        grow(logits_, static_cast<std::size_t>(rows * C::experts));
        expert_.reserve(static_cast<std::size_t>(rows));
        gate_.reserve(static_cast<std::size_t>(rows));
    }

    void forward(const LearnedRouterMlpWeights<C, W>& w, const StridedMatrix<const float, C::hidden>& x,
                 const StridedMatrix<float, C::hidden>& residual, std::span<index_t> counts = {}) {
        const index_t n = x.rows;
        const StridedMatrix<float, C::experts> logits = block_in<C::experts>(logits_, n);
        linear<W>(x, w.router, logits, Write::overwrite, scratch_);
        expert_.resize(static_cast<std::size_t>(n));
        gate_.resize(static_cast<std::size_t>(n));
        for (index_t r = 0; r < n; ++r) {
            const RouterChoice choice = router_top1(logits.row(r), C::experts);
            expert_[static_cast<std::size_t>(r)] = choice.expert;
            gate_[static_cast<std::size_t>(r)] = choice.probability;
        }
        if constexpr (C::has_shared_expert)
            experts_and_shared<W>(dispatch_, w.experts, w.shared, x, 1, expert_, gate_, residual, counts, shared_);
        else
            dispatch_.forward(w.experts, x, expert_, gate_, residual, counts);
    }

private:
    ExpertDispatch<W> dispatch_;
    SharedExpertScratch shared_;
    AlignedVector<float> logits_;
    std::vector<std::int32_t> expert_;
    std::vector<float> gate_;
    LinearScratch scratch_;
};

}  // namespace cpx::cpu

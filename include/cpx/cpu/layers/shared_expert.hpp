#pragma once
// The routed experts of an MLP together with its shared expert (docs/MODELS.md §8):
//   residual += Experts(x) + shared_scale * Shared(x)
// The shared expert (a SwiGLU block) runs as work beside the dispatch's experts
// (expert_dispatch.hpp, BesideExperts): a decode-sized call gives it a thread of its
// own, as it gives one to each expert, instead of splitting its two products over
// every thread. It writes a buffer of its own, added after the routed experts, so the
// summation order is one whichever way a call runs.

#include <cstdint>
#include <span>

#include "cpx/cpu/layers/expert_dispatch.hpp"
#include "cpx/cpu/layers/swiglu_mlp.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/workspace.hpp"

namespace cpx::cpu {

/// The shared expert's buffers and scratch, kept by the MLP layer that has one.
struct SharedExpertScratch {
    AlignedVector<float> hidden, out;
    LinearScratch linear;

    void reserve(index_t rows, index_t hidden_size, index_t width) {
        grow(hidden, static_cast<std::size_t>(rows * 2 * width));
        grow(out, static_cast<std::size_t>(rows * hidden_size));
    }
};

/// residual[r] += sum_j scale[p] * Expert_{expert[p]}(x[r]) + shared_scale * Shared(x[r])
/// (p = r * routes + j; scale empty: 1), routes per expert added to `counts` when given.
template <class W>
void experts_and_shared(ExpertDispatch<W>& dispatch, const ExpertWeights<W>& experts, const SwiGluWeights<W>& shared,
                        const StridedMatrix<const float>& x, int routes, std::span<const std::int32_t> expert,
                        std::span<const float> scale, const StridedMatrix<float>& residual, std::span<index_t> counts,
                        SharedExpertScratch& s, float shared_scale = 1.0f) {
    const StridedMatrix<float> out = block_in(s.out, x.rows, residual.cols);
    auto run_shared = [&] { swiglu_block<W>(shared, x, out, s.hidden, s.linear, shared_scale, Write::overwrite); };
    using Job = decltype(run_shared);
    dispatch.forward(experts, x, routes, expert, scale, residual, counts,
                     BesideExperts{[](void* job) { (*static_cast<Job*>(job))(); }, &run_shared});
    parallel_for(x.rows, x.rows * residual.cols > 65536, [&](index_t r) {
        float* dst = residual.row(r);
        const float* src = out.row(r);
        for (index_t c = 0; c < residual.cols; ++c) dst[c] += src[c];
    });
}

}  // namespace cpx::cpu

#pragma once
// Mu-guidance (docs/MODELS.md §7.1): after the MLP residual add,
//   mu_l = clamp(mu_param_l, 0, 2) + W_mu,l . h2      (h2: the residual stream after the MLP)
// and the next layer receives clamp(mu_l, -2, 2). This writes that clamped
// next-layer input directly; the last layer's mu is never consumed, so the
// model does not call this for it.

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/kernels/linear.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/math/mu.hpp"

namespace cpx::cpu {

/// Non-owning weights of one layer's mu-guidance.
template <class W>
struct MuGuidanceWeights {
    const float* mu = nullptr;    ///< mu_guidance.mu, [hidden]
    StridedMatrix<const W> mu_proj;    ///< mu_guidance.mu_proj.weight, [hidden, hidden]
    const PackedWeight* mu_proj_packed = nullptr;  ///< packed copy (out_in) for the chosen arithmetic, or null
};

/// next_mu[r] = clamp(clamp(mu, 0, 2) + h2[r] . W_mu^T, -2, 2).
template <ComplexityConfigType C, class W>
void next_mu(const MuGuidanceWeights<W>& w, const StridedMatrix<const float, C::hidden>& h2,
             const StridedMatrix<float, C::hidden>& next, LinearScratch& scratch) {
    static_assert(C::use_mu, "mu guidance is off in this configuration");
    require<ShapeError>(next.rows == h2.rows, "mu guidance: ", next.rows, " output rows for ", h2.rows, " inputs");
    linear<W>(h2, w.mu_proj, next, Write::overwrite, scratch, w.mu_proj_packed);
    parallel_for(next.rows, next.rows * C::hidden > 65536, [&](index_t r) {
        float* m = next.row(r);
        for (int i = 0; i < C::hidden; ++i)
            m[i] = mu_next_layer(w.mu[i], m[i], C::mu_param_min, C::mu_param_max, C::mu_clamp);
    });
}

}  // namespace cpx::cpu

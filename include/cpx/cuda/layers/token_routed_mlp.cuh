#pragma once
// COMPLEXITY-DEEP's token-routed MLP on the GPU (docs/MODELS.md §8.3, §8.5):
//   h += g_s * Shared(m) + sum_r m_r * (SiLU(m G[e_r]) * (m U[e_r])) D[e_r],
//   e_r = route r of the token's id, factors from math/route_mix.hpp
// Order of work, all on one stream and without host synchronisation:
//   1. the shared expert through cuBLAS, added onto h with alpha = g_s;
//   2. the routed gate/up products for every expert segment in one grouped
//      launch with the SwiGLU epilogue, rows gathered from the pairs' tokens;
//   3. the routed down products in one grouped launch. The paper's top-1 MLP
//      (one route, unit factor) scatters each row back to its token and adds
//      it onto h in the epilogue: the inverse permutation fused with the sum
//      of experts. Otherwise every (token, route) pair's output lands in its
//      own row of a [tokens * routes, d] fp32 buffer and one pass adds
//      sum_r m_r * pair[r * T + n] onto h[n], routes in order: deterministic,
//      no atomics.
// The dispatch must have been routed (ExpertDispatch::route) for these tokens.

#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/runtime/blas.cuh"
#include "cpx/cuda/runtime/device_buffer.cuh"
#include "cpx/cuda/kernels/expert_dispatch.cuh"
#include "cpx/cuda/kernels/grouped_gemm.cuh"
#include "cpx/cuda/layers/swiglu_mlp.cuh"
#include "cpx/math/route_mix.hpp"

namespace cpx::cuda {

/// Device weights of one token-routed MLP.
template <class T>
struct TokenRoutedMlpWeights {
    ExpertWeights<T> gate, up, down;  ///< [E, d, I_e], [E, d, I_e], [E, I_e, d], input-major
    SwiGluWeights<T> shared;          ///< the shared expert; shared.width == 0 when the model has none
    RouteMix mix;                     ///< shared and route factors (all 1 in the paper's model)
};

/// Scratch buffers of the token-routed MLP, sized once for the largest batch and
/// the most routes per token. `hidden` sizes the pair buffer (routes > 1 or
/// weighted routes only; 0 leaves it empty).
template <class T>
class TokenRoutedMlpWorkspace {
public:
    TokenRoutedMlpWorkspace(int max_tokens, int expert_width, int shared_width, int max_routes = 1, int hidden = 0)
        : max_tokens_(max_tokens),
          max_routes_(max_routes),
          expert_width_(expert_width),
          shared_width_(shared_width),
          hidden_(hidden),
          act_(static_cast<std::size_t>(max_tokens) * max_routes * expert_width),
          shared_(static_cast<std::size_t>(max_tokens) * 2 * shared_width),
          pairs_(static_cast<std::size_t>(max_tokens) * max_routes * hidden) {
        poison(act_, shared_, pairs_);  // like the model's activations: a read of an unwritten row shows as NaN
    }
    StridedMatrix<T> act(int rows) const {
        require<ShapeError>(rows <= max_tokens_ * max_routes_, "token-routed MLP workspace: ", rows,
                            " sorted rows, sized for ", max_tokens_ * max_routes_);
        return StridedMatrix<T>(act_.data(), rows, expert_width_, expert_width_);
    }
    StridedMatrix<T> shared(int rows) const {
        require<ShapeError>(rows <= max_tokens_, "token-routed MLP workspace: ", rows, " rows, sized for ", max_tokens_);
        return StridedMatrix<T>(shared_.data(), rows, 2 * shared_width_, 2 * shared_width_);
    }
    /// The per-pair outputs [pairs, hidden] in fp32.
    StridedMatrix<float> pairs(int pairs, int hidden) const {
        require<ShapeError>(hidden == hidden_ && pairs <= max_tokens_ * max_routes_,
                            "token-routed MLP workspace: ", pairs, " pair rows of width ", hidden, ", sized for ",
                            max_tokens_ * max_routes_, " of width ", hidden_,
                            " (weighted routes need the workspace built with the model width)");
        return StridedMatrix<float>(pairs_.data(), pairs, hidden, hidden);
    }

private:
    int max_tokens_, max_routes_, expert_width_, shared_width_, hidden_;
    DeviceBuffer<T> act_, shared_;
    DeviceBuffer<float> pairs_;
};

namespace kernels {
// h[n, c] += primary * pairs[n, c] + secondary * sum_{r >= 1} pairs[r * T + n, c].
template <class H>
__global__ void add_weighted_routes(const float* __restrict__ pairs, int tokens, int routes, int cols, RouteMix mix,
                                    H* __restrict__ h, index_t h_ld) {
    const index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<index_t>(tokens) * cols) return;
    const index_t n = i / cols, c = i % cols;
    const index_t route_stride = static_cast<index_t>(tokens) * cols;
    float rest = 0.0f;
    for (int r = 1; r < routes; ++r) rest += pairs[r * route_stride + i];
    H& out = h[n * h_ld + c];
    out = from_float<H>(to_float(out) + mix.primary * pairs[i] + mix.secondary * rest);
}
}  // namespace kernels

/// h += TokenRoutedMLP(m) for the dispatch's routed tokens (every route of each).
/// m: [tokens, d] in T; h: [tokens, d] in T or fp32 (the residual stream).
template <class T, class H = T>
void token_routed_mlp_add(Blas& blas, const ExpertDispatch& dispatch, StridedMatrix<const T> m,
                          const TokenRoutedMlpWeights<T>& w, const TokenRoutedMlpWorkspace<T>& ws, StridedMatrix<H> h,
                          cudaStream_t stream, GroupedGemmChoice kernel = {}) {
    const int tokens = dispatch.tokens(), routes = dispatch.routes();
    require<ShapeError>(m.rows == tokens && h.rows == tokens, "token_routed_mlp_add: ", m.rows, " input rows and ",
                        h.rows, " output rows for ", tokens, " routed tokens");
    if (w.shared.width > 0) swiglu_mlp_add<T, H>(blas, m, w.shared, ws.shared(tokens), h, stream, w.mix.shared);
    const StridedMatrix<T> act = ws.act(dispatch.count());
    grouped_swiglu<T, T, T>(dispatch, m, w.gate, w.up, act, stream, kernel);
    if (w.mix.unit_top1(routes)) {
        grouped_scatter_add<T, T, H>(dispatch, act, w.down, h, true, nullptr, stream, kernel);
        return;
    }
    const StridedMatrix<float> pairs = ws.pairs(dispatch.count(), w.down.n);
    grouped_scatter_add<T, T, float>(dispatch, act, w.down, pairs, false, nullptr, stream, kernel);
    const index_t n = static_cast<index_t>(tokens) * w.down.n;
    if (n == 0) return;
    kernels::add_weighted_routes<H><<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
        pairs.data, tokens, routes, w.down.n, w.mix, h.data, h.ld);
    CPX_CUDA_CHECK_LAUNCH();
}

}  // namespace cpx::cuda

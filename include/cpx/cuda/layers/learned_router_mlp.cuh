#pragma once
// The learned-router ablation's MLP on the GPU (docs/MODELS.md
// §10.2): router logits m W_r^T (cuBLAS, fp32 out), a top-1 choice per token on
// the device (math/router.hpp), the same CUB dispatch and grouped expert
// GEMMs as the token-routed MLP with the expert output scaled by the chosen
// probability in the scatter epilogue, plus the shared expert:
//   h += p_e(m) * Expert_e(m) + Shared(m),  e = argmax softmax(m W_r^T)
// Each token runs its own argmax expert. The reference's training code ran a
// fixed-size chunk per expert after sorting (docs/MODELS.md §10.2), which does not match
// argmax whenever the per-expert counts differ; that quirk is not reproduced.
// No host synchronisation: capturable like the token-routed MLP.

#include <cstdint>

#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/runtime/blas.cuh"
#include "cpx/cuda/runtime/device_buffer.cuh"
#include "cpx/cuda/kernels/expert_dispatch.cuh"
#include "cpx/cuda/kernels/grouped_gemm.cuh"
#include "cpx/cuda/layers/swiglu_mlp.cuh"
#include "cpx/cuda/layers/token_routed_mlp.cuh"
#include "cpx/math/router.hpp"

namespace cpx::cuda {

namespace kernels {
__global__ void router_top1_rows(const float* __restrict__ logits, int rows, int experts, std::int32_t* __restrict__ ids,
                                 float* __restrict__ probs) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const RouterChoice c = router_top1(logits + static_cast<index_t>(r) * experts, experts);
    ids[r] = c.expert;
    probs[r] = c.probability;
}
}  // namespace kernels

/// Device weights of one learned-router MLP: the router and the experts (and shared expert).
template <class T>
struct LearnedRouterMlpWeights {
    const T* router = nullptr;        ///< [experts, d], nn.Linear layout
    TokenRoutedMlpWeights<T> experts;  ///< gate/up/down per expert, and the shared expert
};

/// Scratch of the learned-router MLP, sized once.
template <class T>
class LearnedRouterWorkspace {
public:
    LearnedRouterWorkspace(int max_tokens, int experts, int expert_width, int shared_width)
        : max_tokens_(max_tokens),
          experts_(experts),
          logits_(static_cast<std::size_t>(max_tokens) * experts),
          ids_(static_cast<std::size_t>(max_tokens)),
          probs_(static_cast<std::size_t>(max_tokens)),
          mlp_(max_tokens, expert_width, shared_width) {}
    int max_tokens() const { return max_tokens_; }
    int experts() const { return experts_; }
    float* logits() const { return logits_.data(); }
    std::int32_t* ids() const { return ids_.data(); }
    float* probs() const { return probs_.data(); }
    const TokenRoutedMlpWorkspace<T>& mlp() const { return mlp_; }

private:
    int max_tokens_, experts_;
    DeviceBuffer<float> logits_;
    DeviceBuffer<std::int32_t> ids_;
    DeviceBuffer<float> probs_;
    TokenRoutedMlpWorkspace<T> mlp_;
};

/// h += LearnedRouterMLP(m); routes `dispatch` by the router's choices (overwriting
/// its previous routing). m: [rows, d] in T; h: [rows, d] in T or fp32.
template <class T, class H = T>
void learned_router_mlp_add(Blas& blas, ExpertDispatch& dispatch, StridedMatrix<const T> m,
                            const LearnedRouterMlpWeights<T>& w, const LearnedRouterWorkspace<T>& ws, StridedMatrix<H> h,
                            cudaStream_t stream) {
    const int rows = static_cast<int>(m.rows);
    const int E = dispatch.experts();
    require<ShapeError>(m.rows <= ws.max_tokens() && ws.experts() == E && w.experts.gate.experts == E,
                        "learned_router_mlp_add: ", m.rows, " rows and ", E, " experts against a workspace for ",
                        ws.max_tokens(), " rows and ", ws.experts(), " experts");
    require<ShapeError>(h.rows == m.rows, "learned_router_mlp_add: ", h.rows, " output rows for ", m.rows, " inputs");
    const StridedMatrix<float> logits(ws.logits(), rows, E, E);
    linear<T, float>(blas, m, StridedMatrix<const T>(w.router, E, m.cols, m.cols), WeightLayout::out_in, logits, 1.0f,
                     0.0f, stream);
    if (rows > 0) {
        kernels::router_top1_rows<<<(rows + 127) / 128, 128, 0, stream>>>(ws.logits(), rows, E, ws.ids(), ws.probs());
        CPX_CUDA_CHECK_LAUNCH();
    }
    dispatch.route_ids(ws.ids(), rows, stream);
    if (w.experts.shared.width > 0) swiglu_mlp_add<T, H>(blas, m, w.experts.shared, ws.mlp().shared(rows), h, stream);
    const StridedMatrix<T> act = ws.mlp().act(rows);
    grouped_swiglu<T, T, T>(dispatch, m, w.experts.gate, w.experts.up, act, stream);
    grouped_scatter_add<T, T, H>(dispatch, act, w.experts.down, h, true, ws.probs(), stream);
}

}  // namespace cpx::cuda

#pragma once
// COMPLEXITY-DEEP's token-routed MLP on the GPU (docs/MODELS.md §8.3):
//   h += (SiLU(m G[e]) * (m U[e])) D[e] + SharedSwiGLU(m),  e = token_to_expert[token]
// Order of work, all on one stream and without host synchronisation:
//   1. the shared expert through cuBLAS, added onto h (beta = 1);
//   2. the routed gate/up products for every expert segment in one grouped
//      launch with the SwiGLU epilogue, rows gathered through the permutation;
//   3. the routed down products in one grouped launch whose epilogue scatters
//      each row back to its token and adds it onto h (which now holds
//      h + shared): the inverse permutation fused with the sum of experts.
// The dispatch must have been routed (ExpertDispatch::route) for these tokens.

#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/blas.cuh"
#include "cpx/cuda/device_buffer.cuh"
#include "cpx/cuda/expert_dispatch.cuh"
#include "cpx/cuda/grouped_gemm.cuh"
#include "cpx/cuda/swiglu_mlp.cuh"

namespace cpx::cuda {

/// Device weights of one token-routed MLP.
template <class T>
struct TokenRoutedMlpWeights {
    ExpertWeights<T> gate, up, down;  ///< [E, d, I_e], [E, d, I_e], [E, I_e, d], input-major
    SwiGluWeights<T> shared;          ///< the shared expert; shared.width == 0 when the model has none
};

/// Scratch buffers of the token-routed MLP, sized once for the largest batch.
template <class T>
class TokenRoutedMlpWorkspace {
public:
    TokenRoutedMlpWorkspace(int max_tokens, int expert_width, int shared_width)
        : max_tokens_(max_tokens),
          expert_width_(expert_width),
          shared_width_(shared_width),
          act_(static_cast<std::size_t>(max_tokens) * expert_width),
          shared_(static_cast<std::size_t>(max_tokens) * 2 * shared_width) {}
    StridedMatrix<T> act(int rows) const {
        require<ShapeError>(rows <= max_tokens_, "token-routed MLP workspace: ", rows, " rows, sized for ", max_tokens_);
        return StridedMatrix<T>(act_.data(), rows, expert_width_, expert_width_);
    }
    StridedMatrix<T> shared(int rows) const {
        require<ShapeError>(rows <= max_tokens_, "token-routed MLP workspace: ", rows, " rows, sized for ", max_tokens_);
        return StridedMatrix<T>(shared_.data(), rows, 2 * shared_width_, 2 * shared_width_);
    }

private:
    int max_tokens_, expert_width_, shared_width_;
    DeviceBuffer<T> act_, shared_;
};

/// h += TokenRoutedMLP(m) for the dispatch's routed tokens. m: [count, d] in T;
/// h: [count, d] in T or fp32 (the residual stream).
template <class T, class H = T>
void token_routed_mlp_add(Blas& blas, const ExpertDispatch& dispatch, StridedMatrix<const T> m,
                          const TokenRoutedMlpWeights<T>& w, const TokenRoutedMlpWorkspace<T>& ws, StridedMatrix<H> h,
                          cudaStream_t stream, GroupedGemmKernel kernel = GroupedGemmKernel::simt) {
    const int count = dispatch.count();
    require<ShapeError>(m.rows == count && h.rows == count, "token_routed_mlp_add: ", m.rows, " input rows and ", h.rows,
                        " output rows for ", count, " routed tokens");
    if (w.shared.width > 0) swiglu_mlp_add<T, H>(blas, m, w.shared, ws.shared(count), h, stream);
    const StridedMatrix<T> act = ws.act(count);
    grouped_swiglu<T, T, T>(dispatch, m, w.gate, w.up, act, stream, kernel);
    grouped_scatter_add<T, T, H>(dispatch, act, w.down, h, true, nullptr, stream, kernel);
}

}  // namespace cpx::cuda

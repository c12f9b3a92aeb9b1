#pragma once
// A dense SwiGLU MLP added onto the residual stream, on cuBLAS:
//   h += (SiLU(x W_g^T) * (x W_u^T)) W_d^T
// (COMPLEXITY-DEEP's dense MLP and the token-routed layer's shared expert,
// docs/MODELS.md §10.1 and §8.3). The gate and up weights are stacked at load time
// into one [2I, d] matrix, so one product gives [gate | up]; SwiGLU overwrites
// the gate half, and the down product adds onto h with beta = 1 (and alpha the
// output's factor: the token-routed layer's shared scale or gate, §8.5).

#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/kernels/activations.cuh"
#include "cpx/cuda/runtime/blas.cuh"

namespace cpx::cuda {

/// Device weights of one SwiGLU MLP, nn.Linear layout.
template <class T>
struct SwiGluWeights {
    const T* gate_up = nullptr;  ///< [2 * width, hidden]: rows [0, width) gate, [width, 2 width) up
    const T* down = nullptr;     ///< [hidden, width]
    int hidden = 0, width = 0;
};

/// h += alpha * SwiGLU-MLP(x). x: [M, hidden] in T; h: [M, hidden] in T or fp32
/// (the residual stream); scratch: [M, 2 * width] in T (overwritten).
template <class T, class H = T>
void swiglu_mlp_add(Blas& blas, StridedMatrix<const T> x, const SwiGluWeights<T>& w, StridedMatrix<T> scratch,
                    StridedMatrix<H> h, cudaStream_t stream, float alpha = 1.0f) {
    require<ShapeError>(scratch.rows == x.rows && scratch.cols == 2 * static_cast<index_t>(w.width),
                        "swiglu_mlp_add: scratch is [", scratch.rows, ", ", scratch.cols, "], expected [", x.rows, ", ",
                        2 * w.width, "]");
    linear<T, T>(blas, x, StridedMatrix<const T>(w.gate_up, 2 * static_cast<index_t>(w.width), w.hidden, w.hidden),
                 WeightLayout::out_in, scratch, 1.0f, 0.0f, stream);
    const StridedMatrix<T> gate = scratch.columns(0, w.width);
    swiglu<T>(gate, scratch.columns(w.width, w.width), gate, stream);
    linear<T, H>(blas, gate, StridedMatrix<const T>(w.down, w.hidden, w.width, w.width), WeightLayout::out_in, h, alpha,
                 1.0f, stream);
}

}  // namespace cpx::cuda

#pragma once
// The dense SwiGLU MLP of the dense baselines (docs/MODELS.md §10.1):
//   residual += (SiLU(x . W_gate^T) * (x . W_up^T)) . W_down^T
// gate and up are one GEMM over the stacked [W_gate ; W_up] weight.

#include "cpx/core/error.hpp"
#include "cpx/cpu/kernels/linear.hpp"
#include "cpx/cpu/kernels/swiglu.hpp"
#include "cpx/cpu/runtime/workspace.hpp"

namespace cpx::cpu {

/// Non-owning weights of a SwiGLU block in nn.Linear layout.
template <class W>
struct SwiGluWeights {
    StridedMatrix<const W> gate_up;  ///< [2 * width, hidden]: rows [0, width) gate, [width, 2 width) up
    StridedMatrix<const W> down;     ///< [hidden, width]
    /// Packed copies (out_in) for the chosen arithmetic (cpu/runtime/compute.hpp), or null.
    const PackedWeight* gate_up_packed = nullptr;
    const PackedWeight* down_packed = nullptr;
    index_t width() const { return down.cols; }
};

/// residual += scale * SwiGLU(x) (`mode` overwrite: residual = ...); `hidden` is a scratch
/// buffer the caller keeps. The scale multiplies the activation before the down projection
/// (the same product, one pass over I values per row instead of d).
template <class W>
void swiglu_block(const SwiGluWeights<W>& w, const StridedMatrix<const float>& x, const StridedMatrix<float>& residual,
                  AlignedVector<float>& hidden, LinearScratch& scratch, float scale = 1.0f,
                  Write mode = Write::accumulate) {
    const index_t width = w.width();
    require<ShapeError>(w.gate_up.rows == 2 * width, "swiglu: gate/up weight has ", w.gate_up.rows,
                        " rows for a width of ", width);
    const StridedMatrix<float> h = block_in(hidden, x.rows, 2 * width);
    linear<W>(x, w.gate_up, h, Write::overwrite, scratch, w.gate_up_packed);
    swiglu_inplace(h, width);
    if (scale != 1.0f)
        for (index_t r = 0; r < h.rows; ++r) {
            float* a = h.row(r);
            for (index_t c = 0; c < width; ++c) a[c] *= scale;
        }
    linear<W>(StridedMatrix<const float>(h.columns(0, width)), w.down, residual, mode, scratch, w.down_packed);
}

/// The dense MLP layer with its scratch.
template <class W>
class SwiGluMlp {
public:
    void reserve(index_t rows, index_t width) { grow(hidden_, static_cast<std::size_t>(rows * 2 * width)); }
    void forward(const SwiGluWeights<W>& w, const StridedMatrix<const float>& x, const StridedMatrix<float>& residual) {
        swiglu_block<W>(w, x, residual, hidden_, scratch_);
    }

private:
    AlignedVector<float> hidden_;
    LinearScratch scratch_;
};

}  // namespace cpx::cpu

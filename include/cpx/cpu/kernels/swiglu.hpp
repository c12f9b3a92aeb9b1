#pragma once
// The SwiGLU activation on the CPU, in place on a fused [gate | up] block:
// h[r, j] = SiLU(h[r, j]) * h[r, width + j] for j < width (cpx/math/activation.hpp,
// evaluated with Eigen's vectorised exp).

#include "cpx/cpu/runtime/eigen.hpp"

#include "cpx/core/error.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/cpu/runtime/parallel.hpp"

namespace cpx::cpu {

/// Rows of h hold [gate (width) | up (width)]; the gate half is overwritten
/// with SiLU(gate) * up, which the down projection then reads.
inline void swiglu_inplace(const StridedMatrix<float>& h, index_t width) {
    require<ShapeError>(h.cols == 2 * width, "swiglu: rows of ", h.cols, " values are not [gate | up] of width ",
                        width);
    parallel_for(h.rows, h.rows * width > 65536, [&](index_t r) {
        Eigen::Map<Eigen::ArrayXf> gate(h.row(r), width);
        const Eigen::Map<const Eigen::ArrayXf> up(h.row(r) + width, width);
        gate = gate * up / (1.0f + (-gate).exp());
    });
}

}  // namespace cpx::cpu

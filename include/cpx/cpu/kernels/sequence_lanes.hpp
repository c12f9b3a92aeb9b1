#pragma once
// The input of the few-row "lane" kernels (cpu/kernels/gemv_avx512.hpp, gemv_avx2.hpp): a
// batch of decode rows transposed so that each input feature holds one value per sequence in
// consecutive vector lanes, ready to be multiplied by one broadcast weight.

#include "cpx/core/strided_matrix.hpp"
#include "cpx/core/tensor_view.hpp"

namespace cpx::cpu {

/// xt[lanes * i + m] = x[m, i] for the rows of x (at most `lanes`), zero in the other lanes,
/// for input features [i0, i1).
inline void transpose_to_lanes(const StridedMatrix<const float>& x, float* xt, index_t lanes, index_t i0, index_t i1) {
    for (index_t i = i0; i < i1; ++i) {
        float* v = xt + lanes * i;
        for (index_t m = 0; m < x.rows; ++m) v[m] = x.row(m)[i];
        for (index_t m = x.rows; m < lanes; ++m) v[m] = 0.0f;
    }
}

}  // namespace cpx::cpu

#pragma once
// The arguments of the grouped expert GEMM kernels (tiled SIMT, tensor-core and
// row kernels) and the epilogue they share: one output element of sorted row i,
// scattered to its (token, route) row, scaled, optionally added onto what the
// output holds.

#include <cstdint>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/strided_matrix.hpp"

namespace cpx::cuda::kernels {

template <class TA, class TW, class TO>
struct GroupedGemmArgs {
    const TA* x;
    index_t x_ld;
    const std::int32_t* gather;  // sorted position -> row of x; null: x is in sorted order
    const std::int32_t* offsets;
    int experts;
    const TW* w0;  // expert e, row k, column n at w0[e * w_expert_stride + k * w_ld + n]
    const TW* w1;  // second weight (up projection) for the SwiGLU form, same strides, else null
    int K, N;
    index_t w_ld, w_expert_stride;
    TO* out;
    index_t out_ld;
    const std::int32_t* scatter;  // sorted position -> row of out; null: out is in sorted order
    const float* row_scale;       // per output row factor (the learned router's probability), or null
    bool accumulate;
};

/// Writes v (already through SwiGLU where the kernel has it) as column n of sorted row `sorted_row`.
template <class GroupedArgs>
__device__ __forceinline__ void store_grouped(const GroupedArgs& a, int sorted_row, int n, float v) {
    const index_t dst = a.scatter ? a.scatter[sorted_row] : sorted_row;
    if (a.row_scale) v *= a.row_scale[dst];
    auto* y = a.out + dst * a.out_ld;
    if (a.accumulate) v += to_float(y[n]);
    y[n] = from_float<std::remove_reference_t<decltype(*y)>>(v);
}

}  // namespace cpx::cuda::kernels

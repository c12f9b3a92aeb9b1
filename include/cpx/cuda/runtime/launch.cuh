#pragma once
// Launch-shape helpers shared by the elementwise kernels.

#include <algorithm>

#include "cpx/core/tensor_view.hpp"

namespace cpx::cuda::detail {

/// Blocks for a grid-stride loop over `total` elements with `threads` per block:
/// enough to cover them, capped so the count fits a 1-D grid comfortably.
inline unsigned grid_stride_blocks(long long total, int threads) {
    const long long needed = (total + threads - 1) / threads;
    return static_cast<unsigned>(std::clamp<long long>(needed, 1, 1 << 20));
}

}  // namespace cpx::cuda::detail

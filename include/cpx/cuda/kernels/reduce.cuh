#pragma once
// Warp and block reductions used by the row kernels (norms, attention).

namespace cpx::cuda::kernels {

/// Sum over the 32 lanes of a full warp; every lane gets the total.
__device__ inline float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

/// Maximum over the 32 lanes of a full warp; every lane gets it.
__device__ inline float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

/// Sum over all `Threads` threads of the block; every thread gets the total.
/// Every thread of the block must call it (it contains barriers).
template <int Threads>
__device__ inline float block_sum(float v) {
    static_assert(Threads % 32 == 0 && Threads <= 1024, "block size must be whole warps");
    __shared__ float partial[Threads / 32];
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < Threads / 32; ++w) total += partial[w];
    __syncthreads();  // partial may be reused by the caller's next reduction
    return total;
}

}  // namespace cpx::cuda::kernels

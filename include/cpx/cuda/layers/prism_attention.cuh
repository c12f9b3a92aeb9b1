#pragma once
// PRISM's pi-RoPE differential attention on the GPU (docs/MODELS.md §16-§17),
// one layer, written once for both stacks that use it: the GPT-2-style PRISM
// model (cuda::PrismModel, after LayerNorm) and a COMPLEXITY-DEEP decoder with
// AttentionKind::prism (cuda::ComplexityModel, after RMSNorm). Five launches:
//     u = a U^T                                   [rows, 2HD] (cuBLAS)
//     signal heads rotated with the signal base, noise heads with the noise
//     base (one rope_heads launch); keys cached rotated, values unrotated
//     y = causal attention over the 2H heads, noise heads scaled by -lambda
//     h += (y U) / sqrt(2HR)                      (cuBLAS, beta = 1)

#include <cmath>
#include <cstdint>

#include "cpx/config/prism_attention_shape.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/kernels/attention.cuh"
#include "cpx/cuda/runtime/blas.cuh"
#include "cpx/cuda/runtime/device_status.cuh"
#include "cpx/cuda/runtime/kernel_choice.cuh"
#include "cpx/cuda/kernels/kv_cache.cuh"
#include "cpx/cuda/kernels/rope.cuh"

namespace cpx::cuda {

/// The signal and noise rotation tables of a PRISM attention shape A, for `context` positions.
template <class A>
struct PrismRope {
    static_assert(is_prism_attention_shape<A>::value, "PrismRope takes a PrismAttentionShape");
    RopeTable signal, noise;
    explicit PrismRope(int context) : signal(A::signal_rope, A::head_dim, context), noise(A::noise_rope, A::head_dim, context) {}
};

/// Scratch of one call: u (the projection), the rotated heads and the attention output, [rows, 2HD] each.
template <class T>
struct PrismAttentionScratch {
    StridedMatrix<T> u, rotated, y;
};

/// h += PRISM attention of the normalised rows `a` for one layer: U [2HD, d] and lambda of that
/// layer, its KV cache (2H heads of dim D), where the call's sequences are (SequenceRows).
template <class A, class T, class H>
void prism_attention_add(Blas& blas, StridedMatrix<const T> a, const T* U, float lambda, const PrismRope<A>& rope,
                         const KvLayer<T>& kv, const PrismAttentionScratch<T>& s, const SequenceRows& seqs,
                         AttentionKernel kernel, StatusView status, AttentionSplits* splits, StridedMatrix<H> h,
                         cudaStream_t stream) {
    constexpr int heads = A::heads, D = A::head_dim, width = A::u_rows;
    const StridedMatrix<const T> u_weight(U, width, A::hidden, A::hidden);
    linear<T, T>(blas, a, u_weight, WeightLayout::out_in, s.u, 1.0f, 0.0f, stream);
    rope_heads<T, float>(s.u, s.rotated, 2 * heads, D, heads, {&rope.signal, nullptr}, {&rope.noise, nullptr}, seqs, 0.0f,
                         status, stream);
    kv_append<T, T>(s.rotated, s.u, kv, seqs, status, stream);
    AttentionOptions opt;
    opt.scaled_head_begin = heads;
    opt.scaled_head_factor = -lambda;
    opt.kernel = kernel;
    causal_attention<T>(s.rotated, kv, s.y, 2 * heads, seqs, opt, status, stream, splits);
    const float out_scale = static_cast<float>(1.0 / std::sqrt(A::output_scale_squared_inverse));
    linear<T, H>(blas, s.y, u_weight, WeightLayout::in_out, h, out_scale, 1.0f, stream);
}

}  // namespace cpx::cuda

#pragma once
// Causal attention on tensor cores for prefill-sized launches (bf16 or fp16
// queries and cache, fp32 softmax and accumulation; WMMA 16x16x16, sm_80+),
// the same results as the SIMT kernel of attention.cuh up to the rounding of
// the softmax weights to the storage type before the P.V product.
//
// Block: 64 consecutive queries of one (sequence, head), 4 warps of 16 query
// rows each. Keys and values stream through shared memory 64 at a time:
//   S = Q K^T            WMMA, 16 x 64 scores per warp, stored to shared memory
//   m, l, P              per row: running max and normaliser (in registers,
//                        identical across the warp's lanes), P = e^(s - m) as T
//   O = O * alpha + P V  O lives in shared memory (fp32): rescaled by the lanes,
//                        then loaded into accumulators for the WMMA products.
// Keys past the block's last query are never loaded; rows of a tile past the
// last visible key are zero, so poisoned cache rows never enter a product.
// Shared memory (dynamic): 110 KB at D = 128, 70 KB at D = 64. Rows are padded
// by 8 (16-bit) or 4 (fp32) elements: WMMA wants 32-byte aligned fragment
// pointers and leading dimensions that are multiples of 16 bytes.

#include <mma.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/cuda/kernels/attention_args.cuh"
#include "cpx/cuda/runtime/device_status.cuh"
#include "cpx/cuda/kernels/kv_cache.cuh"
#include "cpx/cuda/kernels/reduce.cuh"

namespace cpx::cuda::kernels {

inline constexpr int tc_attention_queries = 64, tc_attention_keys = 64, tc_attention_threads = 128;

/// Shared-memory layout of the tensor-core attention kernel for head dim D.
template <int D>
struct TcAttentionLayout {
    static constexpr int QB = tc_attention_queries, KB = tc_attention_keys, warps = tc_attention_threads / 32;
    static constexpr int tld = D + 8;   // Q, K, V rows (16-bit elements)
    static constexpr int sld = KB + 4;  // scores (fp32)
    static constexpr int pld = KB + 8;  // probabilities (16-bit)
    static constexpr int old = D + 4;   // output accumulator (fp32)
    static constexpr int q_bytes = QB * tld * 2, kv_bytes = KB * tld * 2;
    static constexpr int s_bytes = warps * 16 * sld * 4, p_bytes = warps * 16 * pld * 2, o_bytes = warps * 16 * old * 4;
    static constexpr int q_at = 0, k_at = q_at + q_bytes, v_at = k_at + kv_bytes, s_at = v_at + kv_bytes,
                         p_at = s_at + s_bytes, o_at = p_at + p_bytes, bytes = o_at + o_bytes;
    static_assert(k_at % 128 == 0 && v_at % 128 == 0 && s_at % 128 == 0 && p_at % 128 == 0 && o_at % 128 == 0,
                  "every region starts on a 128-byte boundary");
};

/// Copies rows [row0, row0 + 64) of a [*, D] 16-bit matrix with row stride `ld`
/// (elements) into shared memory with stride TLD, zero where row >= rows_end.
/// 16-byte vector copies: the caller guarantees 16-byte aligned rows.
template <int D, int TLD>
__device__ inline void load_tile(std::uint16_t* dst, const std::uint16_t* src, index_t ld, int row0, int rows_end) {
    constexpr int vectors_per_row = D / 8;
    for (int idx = threadIdx.x; idx < 64 * vectors_per_row; idx += tc_attention_threads) {
        const int r = idx / vectors_per_row, c = (idx % vectors_per_row) * 8;
        int4 v = make_int4(0, 0, 0, 0);
        if (row0 + r < rows_end) v = *reinterpret_cast<const int4*>(src + static_cast<index_t>(row0 + r) * ld + c);
        *reinterpret_cast<int4*>(dst + r * TLD + c) = v;
    }
}

template <int D, class T>
__global__ void __launch_bounds__(tc_attention_threads) causal_attention_tensor_cores(AttentionArgs<T> a) {
    static_assert(std::is_same_v<T, bf16> || std::is_same_v<T, fp16>, "tensor cores take bf16 or fp16 operands");
    static_assert(D == 64 || D == 128, "the tensor-core attention kernel is compiled for head dims 64 and 128");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();  // the host launcher refuses devices below compute capability 8.0
#else
    namespace wmma = nvcuda::wmma;
    using WT = std::conditional_t<std::is_same_v<T, bf16>, __nv_bfloat16, __half>;
    using L = TcAttentionLayout<D>;
    constexpr int QB = L::QB, KB = L::KB, TLD = L::tld, SLD = L::sld, PLD = L::pld, OLD = L::old;

    const int b = blockIdx.z, h = blockIdx.y, q0 = static_cast<int>(blockIdx.x) * QB;
    const int g = h / a.groups;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (a.seqs.malformed(b)) {  // offsets that cannot be followed: nothing is read or written
        if (threadIdx.x == 0 && blockIdx.x == 0 && h == 0) a.status.position_error(0);
        return;
    }
    const int len = a.seqs.length(b);
    if (q0 >= len) return;  // block-uniform: a sequence shorter than the longest of the call
    const int start = a.seqs.start[b], cache_slot = a.seqs.slot(b);
    const index_t first_row = a.seqs.first_row(b);
    const int q_end = min(q0 + QB, len);  // queries [q0, q_end) of this sequence
    auto out_row = [&](int i) { return a.out + (first_row + i) * a.out_ld + static_cast<index_t>(h) * D; };

    if (start < 0 || start + len > a.cache.capacity || cache_slot < 0 || cache_slot >= a.cache.slots) {  // block-uniform
        for (int idx = threadIdx.x; idx < (q_end - q0) * D; idx += tc_attention_threads)
            out_row(q0 + idx / D)[idx % D] = from_float<T>(NAN);
        if (threadIdx.x == 0) a.status.position_error(first_row + q0);
        return;
    }

    extern __shared__ __align__(128) unsigned char smem[];
    auto* Qs = reinterpret_cast<std::uint16_t*>(smem + L::q_at);
    auto* Ks = reinterpret_cast<std::uint16_t*>(smem + L::k_at);
    auto* Vs = reinterpret_cast<std::uint16_t*>(smem + L::v_at);
    float* Ss = reinterpret_cast<float*>(smem + L::s_at) + warp * 16 * SLD;
    auto* Ps = reinterpret_cast<std::uint16_t*>(smem + L::p_at) + warp * 16 * PLD;
    float* Os = reinterpret_cast<float*>(smem + L::o_at) + warp * 16 * OLD;

    const auto* q_base =
        reinterpret_cast<const std::uint16_t*>(a.q + first_row * a.q_ld + static_cast<index_t>(h) * D);
    load_tile<D, TLD>(Qs, q_base, a.q_ld, q0, len);
    for (int idx = lane; idx < 16 * OLD; idx += 32) Os[idx] = 0.0f;

    const index_t head_base = (static_cast<index_t>(cache_slot) * a.cache.kv_heads + g) * a.cache.capacity * D;
    const auto* kh = reinterpret_cast<const std::uint16_t*>(a.cache.k + head_base);
    const auto* vh = reinterpret_cast<const std::uint16_t*>(a.cache.v + head_base);
    const int kv_end = start + q_end;  // keys 0 .. position of the block's last query
    const int r0 = warp * 16;           // this warp's first query row in the block
    const bool warp_active = q0 + r0 < q_end;

    float m[16], l[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }

    for (int kv0 = 0; kv0 < kv_end; kv0 += KB) {
        __syncthreads();  // the previous tile is consumed (the first time: Q is written)
        load_tile<D, TLD>(Ks, kh, D, kv0, kv_end);
        load_tile<D, TLD>(Vs, vh, D, kv0, kv_end);
        __syncthreads();
        if (!warp_active) continue;  // warp-uniform; the barriers above are still reached

        // Scores of the warp's 16 queries against the 64 keys of the tile.
#pragma unroll
        for (int n = 0; n < KB / 16; ++n) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> s;
            wmma::fill_fragment(s, 0.0f);
#pragma unroll
            for (int k = 0; k < D / 16; ++k) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, WT, wmma::row_major> qa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, WT, wmma::col_major> kb;  // K^T: key-major rows
                wmma::load_matrix_sync(qa, reinterpret_cast<const WT*>(Qs + r0 * TLD + k * 16), TLD);
                wmma::load_matrix_sync(kb, reinterpret_cast<const WT*>(Ks + n * 16 * TLD + k * 16), TLD);
                wmma::mma_sync(s, qa, kb, s);
            }
            wmma::store_matrix_sync(Ss + n * 16, s, SLD, wmma::mem_row_major);
        }
        __syncwarp();

        // Online softmax per row; lanes hold keys lane and lane + 32.
#pragma unroll
        for (int r = 0; r < 16; ++r) {
            const int qpos = start + q0 + r0 + r;
            const bool row_valid = q0 + r0 + r < q_end;
            const int key0 = kv0 + lane, key1 = kv0 + lane + 32;
            const bool v0 = row_valid && key0 <= qpos, v1 = row_valid && key1 <= qpos;
            const float s0 = v0 ? Ss[r * SLD + lane] * a.scale : -INFINITY;
            const float s1 = v1 ? Ss[r * SLD + lane + 32] * a.scale : -INFINITY;
            const float tile_max = warp_max(fmaxf(s0, s1));
            float alpha = 1.0f, p0 = 0.0f, p1 = 0.0f;
            if (tile_max != -INFINITY) {  // uniform across the warp
                const float m_new = fmaxf(m[r], tile_max);
                alpha = expf(m[r] - m_new);  // m = -inf on the first visible tile: 0
                p0 = v0 ? expf(s0 - m_new) : 0.0f;
                p1 = v1 ? expf(s1 - m_new) : 0.0f;
                l[r] = l[r] * alpha + warp_sum(p0 + p1);
                m[r] = m_new;
            }
            Ps[r * PLD + lane] = from_float<T>(p0).bits;
            Ps[r * PLD + lane + 32] = from_float<T>(p1).bits;
            if (alpha != 1.0f)
                for (int d = lane; d < D; d += 32) Os[r * OLD + d] *= alpha;
        }
        __syncwarp();

        // O += P V, the accumulators round-tripping through the warp's O rows.
#pragma unroll
        for (int n = 0; n < D / 16; ++n) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> o;
            wmma::load_matrix_sync(o, Os + n * 16, OLD, wmma::mem_row_major);
#pragma unroll
            for (int k = 0; k < KB / 16; ++k) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, WT, wmma::row_major> pa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, WT, wmma::row_major> vb;
                wmma::load_matrix_sync(pa, reinterpret_cast<const WT*>(Ps + k * 16), PLD);
                wmma::load_matrix_sync(vb, reinterpret_cast<const WT*>(Vs + k * 16 * TLD + n * 16), TLD);
                wmma::mma_sync(o, pa, vb, o);
            }
            wmma::store_matrix_sync(Os + n * 16, o, OLD, wmma::mem_row_major);
        }
        __syncwarp();
    }

    if (!warp_active) return;
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        const int i = q0 + r0 + r;
        if (i >= q_end) break;  // uniform
        // l >= 1: key 0 is visible to every query and the tile holding the maximum adds e^0.
        const float f = (h >= a.scaled_head_begin ? a.scaled_head_factor : 1.0f) / l[r];
        T* y = out_row(i);
        for (int d = lane; d < D; d += 32) y[d] = from_float<T>(Os[r * OLD + d] * f);
    }
#endif
}

}  // namespace cpx::cuda::kernels

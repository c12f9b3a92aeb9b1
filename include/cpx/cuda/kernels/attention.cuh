#pragma once
// Fused causal attention over the KV cache, one kernel for prefill, chunked
// prefill and decode, with grouped-query heads:
//   out[b, i, h] = factor(h) * sum_j softmax_j(scale * q[b, i, h] . K[s, g, j]) V[s, g, j]
//   over keys j <= start[b] + i (the query's absolute position), g = h / groups,
//   s = the cache slot of sequence b.
// Where each sequence's rows, start position and cache slot are is the call's
// SequenceRows (sequence_rows.cuh): sequences of one length, or of different
// lengths packed one after the other. Prefill is start = 0; a chunk appended
// to a cache starts at its offset, with the proper offset causal mask
// (docs/MODELS.md §6.4); decode is one query per sequence. factor(h) is 1, or `scaled_head_factor` for heads from
// `scaled_head_begin` on: PRISM's noise heads get -lambda in the same launch
// as the signal heads (their RoPE bases were chosen per head by rope_heads).
//
// A block serves one (sequence, KV head) and up to 16 query slots, a slot being
// a (query, head of the group) pair, so the K/V tiles in shared memory are
// shared by the whole GQA group. Keys stream through shared memory 32 at a
// time (one per lane); each warp keeps 4 slots' online-softmax state (running
// max m, normaliser l, unnormalised output o) in registers:
//   m' = max(m, max_j s_j), o = o * e^(m - m') + sum_j e^(s_j - m') v_j, l likewise.
// fp32 arithmetic throughout. CPU twin: the double loop in the test and the
// CPU attention layers.
//
// Key splits (flash-decoding): when the grid above has fewer blocks than the
// device has multiprocessors (decode of a few sequences: batch x KV heads
// blocks), the keys are also split into chunks across blocks. Each block then
// writes its slots' partial state (m, l, o) to an AttentionSplits workspace and
// a second kernel merges the chunks:
//   M = max_s m_s,  l = sum_s l_s e^(m_s - M),  out = sum_s o_s e^(m_s - M) / l.
// The split count is chosen on the host from host values only (shapes, cache
// capacity, the device's multiprocessor count), so a captured decode step keeps
// it; chunks past a sequence's last key exit at once.

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/runtime/device_buffer.cuh"
#include "cpx/cuda/kernels/attention_args.cuh"
#include "cpx/cuda/kernels/attention_tensor_cores.cuh"
#include "cpx/cuda/runtime/device_status.cuh"
#include "cpx/cuda/runtime/kernel_choice.cuh"
#include "cpx/cuda/kernels/kv_cache.cuh"
#include "cpx/cuda/kernels/reduce.cuh"

namespace cpx::cuda {

namespace kernels {

inline constexpr int attention_slots = 16;    // query slots per block: 4 warps x 4
inline constexpr int attention_keys = 32;     // keys per shared-memory tile: one per lane
inline constexpr int attention_threads = 128;

template <int D, class T>
__global__ void __launch_bounds__(attention_threads) causal_attention(AttentionArgs<T> a) {
    static_assert(D % 16 == 0 && D <= 128, "head dims are multiples of 16 up to 128 (shared memory holds 48 KB)");
    constexpr int SL = attention_slots, KT = attention_keys, DL = (D + 31) / 32, SPW = SL / 4;
    const int b = blockIdx.z, g = blockIdx.y;
    const int split = static_cast<int>(blockIdx.x) % a.splits;
    const int slot0 = static_cast<int>(blockIdx.x) / a.splits * SL;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (a.seqs.malformed(b)) {  // offsets that cannot be followed: nothing is read or written
        if (threadIdx.x == 0 && blockIdx.x == 0 && g == 0) a.status.position_error(0);
        return;
    }
    const int len = a.seqs.length(b);
    const int total_slots = len * a.groups;
    if (slot0 >= total_slots) return;  // block-uniform: a sequence shorter than the longest of the call
    const int start = a.seqs.start[b], cache_slot = a.seqs.slot(b);
    const index_t first_row = a.seqs.first_row(b);
    const int last_slot = min(slot0 + SL, total_slots) - 1;

    auto slot_row = [&](int slot) { return first_row + slot / a.groups; };
    auto slot_head = [&](int slot) { return g * a.groups + slot % a.groups; };
    auto partial_of = [&](int slot) {
        return a.partial +
               ((slot_row(slot) * a.heads + slot_head(slot)) * static_cast<index_t>(a.splits) + split) * (D + 2);
    };

    if (start < 0 || start + len > a.cache.capacity || cache_slot < 0 ||
        cache_slot >= a.cache.slots) {  // block-uniform: no barrier is skipped by part of it
        for (int idx = threadIdx.x; idx < SL * D; idx += attention_threads) {
            const int slot = slot0 + idx / D;
            if (slot < total_slots)
                a.out[slot_row(slot) * a.out_ld + static_cast<index_t>(slot_head(slot)) * D + idx % D] =
                    from_float<T>(NAN);
            if (a.splits > 1 && slot < total_slots && idx % D == 0)  // the merge must not overwrite the NaN rows
                for (int e = 0; e < D + 2; ++e) partial_of(slot)[e] = NAN;
        }
        if (threadIdx.x == 0 && split == 0) a.status.position_error(slot_row(slot0));
        return;
    }
    // Keys [0, kv_end) are seen by some slot of this block: the last slot has the largest query.
    // This block takes the chunk [kv_begin, kv_end) of them (all of them without splits).
    const int kv_begin = split * a.chunk;
    const int kv_end = min(start + last_slot / a.groups + 1, a.splits > 1 ? kv_begin + a.chunk : INT_MAX);

    __shared__ float Qs[SL][D];
    __shared__ float Ks[KT][D + 1];  // +1: lane j reads row j, so a column access spreads over the banks
    __shared__ float Vs[KT][D];

    for (int idx = threadIdx.x; idx < SL * D; idx += attention_threads) {
        const int s = idx / D, d = idx % D, slot = slot0 + s;
        Qs[s][d] = slot < total_slots
                       ? to_float(a.q[slot_row(slot) * a.q_ld + static_cast<index_t>(slot_head(slot)) * D + d])
                       : 0.0f;
    }

    float m[SPW], l[SPW], o[SPW][DL];
#pragma unroll
    for (int r = 0; r < SPW; ++r) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int t = 0; t < DL; ++t) o[r][t] = 0.0f;
    }

    const index_t head_base = (static_cast<index_t>(cache_slot) * a.cache.kv_heads + g) * a.cache.capacity * D;
    const T* kh = a.cache.k + head_base;
    const T* vh = a.cache.v + head_base;

    for (int kv0 = kv_begin; kv0 < kv_end; kv0 += KT) {
        __syncthreads();  // the previous tile is consumed (and, the first time, Qs is written)
        for (int idx = threadIdx.x; idx < KT * D; idx += attention_threads) {
            const int j = idx / D, d = idx % D, key = kv0 + j;
            const bool in = key < kv_end;
            Ks[j][d] = in ? to_float(kh[static_cast<index_t>(key) * D + d]) : 0.0f;
            Vs[j][d] = in ? to_float(vh[static_cast<index_t>(key) * D + d]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < SPW; ++r) {
            const int s = warp * SPW + r, slot = slot0 + s;
            if (slot >= total_slots) continue;  // warp-uniform
            const int qpos = start + slot / a.groups;
            const int key = kv0 + lane;
            float score = 0.0f;
#pragma unroll 16
            for (int d = 0; d < D; ++d) score = fmaf(Qs[s][d], Ks[lane][d], score);
            const bool valid = key <= qpos && key < kv_end;
            score = valid ? score * a.scale : -INFINITY;
            const float tile_max = warp_max(score);
            if (tile_max == -INFINITY) continue;  // warp-uniform: no key of this tile is visible to the slot
            const float m_new = fmaxf(m[r], tile_max);
            const float alpha = expf(m[r] - m_new);  // m = -inf (first visible tile): e^-inf = 0
            const float p = valid ? expf(score - m_new) : 0.0f;
            l[r] = l[r] * alpha + warp_sum(p);
#pragma unroll
            for (int t = 0; t < DL; ++t) o[r][t] *= alpha;
            for (int j = 0; j < KT; ++j) {
                const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
                for (int t = 0; t < DL; ++t) {
                    const int d = lane + 32 * t;
                    if (D % 32 == 0 || d < D) o[r][t] = fmaf(pj, Vs[j][d], o[r][t]);
                }
            }
            m[r] = m_new;
        }
    }

    if (a.splits > 1) {  // partial state; an empty chunk leaves m = -inf, l = 0, o = 0
#pragma unroll
        for (int r = 0; r < SPW; ++r) {
            const int slot = slot0 + warp * SPW + r;
            if (slot >= total_slots) continue;
            float* p = partial_of(slot);
#pragma unroll
            for (int t = 0; t < DL; ++t) {
                const int d = lane + 32 * t;
                if (D % 32 == 0 || d < D) p[d] = o[r][t];
            }
            if (lane == 0) {
                p[D] = m[r];
                p[D + 1] = l[r];
            }
        }
        return;
    }
#pragma unroll
    for (int r = 0; r < SPW; ++r) {
        const int slot = slot0 + warp * SPW + r;
        if (slot >= total_slots) continue;
        const int h = slot_head(slot);
        // l >= e^0 = 1 after the tile holding the maximum: key 0 is visible to every query.
        const float f = (h >= a.scaled_head_begin ? a.scaled_head_factor : 1.0f) / l[r];
        T* y = a.out + slot_row(slot) * a.out_ld + static_cast<index_t>(h) * D;
#pragma unroll
        for (int t = 0; t < DL; ++t) {
            const int d = lane + 32 * t;
            if (D % 32 == 0 || d < D) y[d] = from_float<T>(o[r][t] * f);
        }
    }
}

/// Merges the key chunks of one (query row, head) per block: see the header comment.
template <class T>
__global__ void __launch_bounds__(128)
    merge_attention_splits(const float* __restrict__ partial, int heads, int D, int splits, T* out, index_t out_ld,
                           int scaled_head_begin, float scaled_head_factor) {
    const index_t row = blockIdx.y;
    const int h = static_cast<int>(blockIdx.x);
    const float* p = partial + (row * heads + h) * static_cast<index_t>(splits) * (D + 2);
    float M = -INFINITY;
    bool nan = false;
    for (int s = 0; s < splits; ++s) {
        const float m = p[static_cast<index_t>(s) * (D + 2) + D];
        nan |= m != m;
        M = fmaxf(M, m);
    }
    float l = 0.0f;
    for (int s = 0; s < splits; ++s) {
        const float* ps = p + static_cast<index_t>(s) * (D + 2);
        if (ps[D] != -INFINITY) l += ps[D + 1] * expf(ps[D] - M);
    }
    // l >= 1: the chunk holding the maximum contributes e^0 times its l >= 1.
    const float f = (h >= scaled_head_begin ? scaled_head_factor : 1.0f) / l;
    T* y = out + row * out_ld + static_cast<index_t>(h) * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < splits; ++s) {
            const float* ps = p + static_cast<index_t>(s) * (D + 2);
            if (ps[D] != -INFINITY) acc = fmaf(ps[d], expf(ps[D] - M), acc);
        }
        y[d] = from_float<T>(nan ? NAN : acc * f);
    }
}

}  // namespace kernels

/// Options of causal_attention beyond the shapes.
struct AttentionOptions {
    float scale = 0.0f;              ///< score scale; 0 means 1/sqrt(head_dim)
    int scaled_head_begin = -1;      ///< heads from here on are multiplied by the factor; -1: none
    float scaled_head_factor = 1.0f;
    int key_splits = 0;              ///< with an AttentionSplits workspace: 0 chooses, n >= 1 forces n chunks
    AttentionKernel kernel = AttentionKernel::simt;
};

/// Workspace of the key-split path: the partial softmax states of up to
/// `max_partials` (query row, head, chunk) triples of head dim up to
/// `max_head_dim`, and the device's multiprocessor count, read once here so
/// that choosing a split count needs no CUDA call inside a forward. The default
/// size, 64 states per multiprocessor, holds every automatic choice (at most 16
/// slots per block, about two blocks per multiprocessor).
class AttentionSplits {
public:
    explicit AttentionSplits(int max_head_dim, long long max_partials = 0) : max_head_dim_(max_head_dim) {
        int device = 0;
        CPX_CUDA_CHECK(cudaGetDevice(&device));
        CPX_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device));
        max_partials_ = max_partials > 0 ? max_partials : 64LL * multiprocessors_;
        require<ShapeError>(max_head_dim >= 1 && max_partials >= 0, "AttentionSplits: ", max_partials,
                            " partial states of head dim ", max_head_dim);
        partial_ = DeviceBuffer<float>(static_cast<std::size_t>(max_partials_) * (max_head_dim + 2));
    }
    long long max_partials() const { return max_partials_; }
    int max_head_dim() const { return max_head_dim_; }
    int multiprocessors() const { return multiprocessors_; }
    float* data() { return partial_.data(); }

private:
    long long max_partials_ = 0;
    int max_head_dim_;
    int multiprocessors_ = 0;
    DeviceBuffer<float> partial_;
};

namespace detail {
/// Key chunks for a launch of `blocks` blocks (without splits) of `partials_per_split`
/// (row, head) states over a cache of `capacity` positions: enough chunks for two
/// blocks per multiprocessor, each at least one key tile, within the workspace.
inline int choose_key_splits(long long blocks, long long partials_per_split, int capacity,
                             const AttentionSplits& ws) {
    if (blocks >= ws.multiprocessors()) return 1;
    const long long want = (2LL * ws.multiprocessors() + blocks - 1) / blocks;
    const long long tiles = (capacity + kernels::attention_keys - 1) / kernels::attention_keys;
    const long long fit = ws.max_partials() / std::max<long long>(partials_per_split, 1);
    return static_cast<int>(std::max<long long>(1, std::min({want, tiles, fit})));
}

/// Launches the tensor-core kernel. Once per kernel and process (not per device):
/// the compute-capability check and the opt-in above 48 KB of dynamic shared memory.
template <int D, class T>
void launch_tensor_core_attention(const kernels::AttentionArgs<T>& a, dim3 grid, cudaStream_t stream) {
    constexpr int bytes = kernels::TcAttentionLayout<D>::bytes;
    [[maybe_unused]] static const bool prepared = [] {
        const CurrentDevice device = current_device();
        require<Error>(device.major >= 8, "causal_attention: the tensor-core kernel needs compute capability 8.0 or "
                       "newer, device ", device.id, " has ", device.major, ".x");
        CPX_CUDA_CHECK(cudaFuncSetAttribute(kernels::causal_attention_tensor_cores<D, T>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        return true;
    }();
    kernels::causal_attention_tensor_cores<D, T><<<grid, kernels::tc_attention_threads, bytes, stream>>>(a);
}

/// The tensor-core path of causal_attention (see AttentionKernel).
template <class T>
void tensor_core_attention(StridedMatrix<const T> q, const KvLayer<T>& cache, StridedMatrix<T> out, int heads,
                           int groups, const SequenceRows& seqs, float scale, int scaled_head_begin,
                           float scaled_head_factor, StatusView status, cudaStream_t stream) {
    if constexpr (std::is_same_v<T, float>) {
        raise<ShapeError>("causal_attention: the tensor-core kernel takes bf16 or fp16, not fp32");
    } else {
        const int D = cache.head_dim;
        require<ShapeError>(D == 64 || D == 128, "causal_attention: the tensor-core kernel is compiled for head dims ",
                            "64 and 128, not ", D);
        require<ShapeError>(reinterpret_cast<std::uintptr_t>(q.data) % 16 == 0 && q.ld % 8 == 0,
                            "causal_attention: the tensor-core kernel reads queries 16 bytes at a time; their rows must ",
                            "start on 16-byte boundaries");
        const long long query_blocks =
            (seqs.longest + kernels::tc_attention_queries - 1) / kernels::tc_attention_queries;
        require<ShapeError>(heads <= 65535 && seqs.batch <= 65535, "causal_attention: the launch is too large");
        const kernels::AttentionArgs<T> a{q.data, q.ld,  cache, out.data, out.ld, heads, groups, seqs, scale,
                                          scaled_head_begin, scaled_head_factor, status, 1, 0, nullptr};
        const dim3 grid(static_cast<unsigned>(query_blocks), static_cast<unsigned>(heads),
                        static_cast<unsigned>(seqs.batch));
        if (D == 64) launch_tensor_core_attention<64>(a, grid, stream);
        else launch_tensor_core_attention<128>(a, grid, stream);
        CPX_CUDA_CHECK_LAUNCH();
    }
}
}  // namespace detail

/// Causal attention of the query rows of q ([rows, heads * head_dim]; `seqs` says
/// which rows are which sequence's, at which positions, in which cache slot) over
/// the cache layer, whose keys up to each query's position must already hold the
/// sequence (kv_append the new tokens first). out: [rows, heads * head_dim].
/// Head dims 16, 32, 64 and 128 are compiled. A sequence whose positions exceed
/// the cache or whose slot is not one of its slots gives NaN rows and a status
/// record. With `splits`, launches that
/// would leave multiprocessors idle split the keys into chunks (see the header).
template <class T>
void causal_attention(StridedMatrix<const T> q, const KvLayer<T>& cache, StridedMatrix<T> out, int heads,
                      const SequenceRows& seqs, AttentionOptions opt = {}, StatusView status = {},
                      cudaStream_t stream = nullptr, AttentionSplits* splits = nullptr) {
    q.validate("causal_attention queries");
    out.validate("causal_attention output");
    const int D = cache.head_dim;
    require<ShapeError>(heads > 0 && heads % cache.kv_heads == 0, "causal_attention: ", heads,
                        " query heads are not groups of the ", cache.kv_heads, " KV heads");
    require<ShapeError>(q.cols == static_cast<index_t>(heads) * D && out.cols == q.cols && out.rows == q.rows,
                        "causal_attention: queries [", q.rows, ", ", q.cols, "] and output [", out.rows, ", ", out.cols,
                        "] must hold ", heads, " heads of ", D);
    seqs.validate(q.rows, "causal_attention");
    require<ShapeError>(seqs.slots || seqs.batch <= cache.slots, "causal_attention: ", seqs.batch,
                        " sequences for ", cache.slots, " cache slots");
    const int batch = seqs.batch;
    const int groups = heads / cache.kv_heads;
    const long long slot_blocks = (static_cast<long long>(seqs.longest) * groups + kernels::attention_slots - 1) /
                                  kernels::attention_slots;
    require<ShapeError>(slot_blocks <= 0x7fffffff && cache.kv_heads <= 65535 && batch <= 65535,
                        "causal_attention: the launch is too large");
    if (q.rows == 0) return;
    const float scale = opt.scale > 0.0f ? opt.scale : 1.0f / std::sqrt(static_cast<float>(D));
    const int scaled_head_begin = opt.scaled_head_begin < 0 ? heads : opt.scaled_head_begin;
    if (opt.kernel == AttentionKernel::tensor_cores && seqs.longest >= 16) {
        detail::tensor_core_attention<T>(q, cache, out, heads, groups, seqs, scale, scaled_head_begin,
                                         opt.scaled_head_factor, status, stream);
        return;
    }
    int key_splits = 1;
    const long long partials_per_split = q.rows * heads;
    if (splits) {
        require<ShapeError>(D <= splits->max_head_dim(), "causal_attention: head dim ", D,
                            " exceeds the split workspace's ", splits->max_head_dim());
        key_splits = opt.key_splits > 0 ? opt.key_splits
                                        : detail::choose_key_splits(slot_blocks * cache.kv_heads * batch,
                                                                    partials_per_split, cache.capacity, *splits);
        // One chunk writes `out` directly and needs no workspace, however many rows the call has.
        require<ShapeError>(key_splits == 1 || partials_per_split * key_splits <= splits->max_partials(),
                            "causal_attention: ",
                            key_splits, " key chunks of ", partials_per_split, " (row, head) states exceed the ",
                            splits->max_partials(), " the workspace holds");
        require<ShapeError>(key_splits == 1 || q.rows <= 65535, "causal_attention: ", q.rows,
                            " query rows are too many to split the keys");
    } else {
        require<ShapeError>(opt.key_splits <= 1, "causal_attention: key splits need an AttentionSplits workspace");
    }
    const int chunk = (cache.capacity + key_splits - 1) / key_splits;
    require<ShapeError>(slot_blocks * key_splits <= 0x7fffffff, "causal_attention: the launch is too large");
    kernels::AttentionArgs<T> a{q.data,
                                q.ld,
                                cache,
                                out.data,
                                out.ld,
                                heads,
                                groups,
                                seqs,
                                scale,
                                scaled_head_begin,
                                opt.scaled_head_factor,
                                status,
                                key_splits,
                                (chunk + kernels::attention_keys - 1) / kernels::attention_keys * kernels::attention_keys,
                                key_splits > 1 ? splits->data() : nullptr};
    const dim3 grid(static_cast<unsigned>(slot_blocks * key_splits), static_cast<unsigned>(cache.kv_heads),
                    static_cast<unsigned>(batch));
    switch (D) {
        case 16: kernels::causal_attention<16><<<grid, kernels::attention_threads, 0, stream>>>(a); break;
        case 32: kernels::causal_attention<32><<<grid, kernels::attention_threads, 0, stream>>>(a); break;
        case 64: kernels::causal_attention<64><<<grid, kernels::attention_threads, 0, stream>>>(a); break;
        case 128: kernels::causal_attention<128><<<grid, kernels::attention_threads, 0, stream>>>(a); break;
        default: raise<ShapeError>("causal_attention: head dim ", D, " is not compiled (16, 32, 64, 128 are)");
    }
    CPX_CUDA_CHECK_LAUNCH();
    if (key_splits > 1) {
        kernels::merge_attention_splits<T><<<dim3(static_cast<unsigned>(heads), static_cast<unsigned>(q.rows)), 128, 0,
                                             stream>>>(splits->data(), heads, D, key_splits, out.data, out.ld,
                                                       a.scaled_head_begin, a.scaled_head_factor);
        CPX_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace cpx::cuda

#pragma once
// The arguments of the causal attention kernels (attention.cuh's SIMT kernel
// and attention_tensor_cores.cuh's), filled by causal_attention.

#include <cstdint>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cuda/runtime/device_status.cuh"
#include "cpx/cuda/kernels/kv_cache.cuh"
#include "cpx/cuda/kernels/sequence_rows.cuh"

namespace cpx::cuda::kernels {

/// The tensor-core kernel ignores the key-split fields (splits, chunk, partial).
template <class T>
struct AttentionArgs {
    const T* q;
    index_t q_ld;  // q of token row r (query i of sequence b: r = seqs.first_row(b) + i), head h: q[r * q_ld + h * D + d]
    KvLayer<T> cache;
    T* out;
    index_t out_ld;
    int heads, groups;
    SequenceRows seqs;
    float scale;
    int scaled_head_begin;
    float scaled_head_factor;
    StatusView status;
    int splits;      // key chunks per slot block (1: no split, out is written directly)
    int chunk;       // keys per chunk, a multiple of the SIMT kernel's key tile (32)
    float* partial;  // splits > 1: [rows][heads][splits][D + 2] = o (unnormalised), m, l
};

}  // namespace cpx::cuda::kernels

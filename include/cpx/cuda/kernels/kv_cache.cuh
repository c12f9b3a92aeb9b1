#pragma once
// The KV cache on the GPU: per layer, K and V of every cache slot as
// [slots][kv_heads][capacity][head_dim], so attention reads each head's keys
// contiguously. Allocated once (capacity = the longest context served); a
// decode step writes one position per sequence and allocates nothing. Which
// slot a sequence of a call uses is SequenceRows' business (slot b by default).

#include <cstdint>

#include "cpx/core/dtype.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/runtime/device_buffer.cuh"
#include "cpx/cuda/runtime/device_status.cuh"
#include "cpx/cuda/kernels/sequence_rows.cuh"

namespace cpx::cuda {

/// Geometry of one layer's cache, passed to kernels by value.
template <class T>
struct KvLayer {
    T* k = nullptr;
    T* v = nullptr;
    int slots = 0, kv_heads = 0, head_dim = 0, capacity = 0;
};

template <class T>
class KvCache {
public:
    KvCache(int layers, int slots, int kv_heads, int head_dim, int capacity)
        : layers_(layers), slots_(slots), kv_heads_(kv_heads), head_dim_(head_dim), capacity_(capacity) {
        require<ShapeError>(layers > 0 && slots > 0 && kv_heads > 0 && head_dim > 0 && capacity > 0,
                            "KvCache: every extent must be positive (layers ", layers, ", slots ", slots, ", kv_heads ",
                            kv_heads, ", head_dim ", head_dim, ", capacity ", capacity, ")");
        k_ = DeviceBuffer<T>(static_cast<std::size_t>(layers) * layer_elements());
        v_ = DeviceBuffer<T>(static_cast<std::size_t>(layers) * layer_elements());
    }
    std::size_t layer_elements() const {
        return static_cast<std::size_t>(slots_) * kv_heads_ * capacity_ * head_dim_;
    }
    KvLayer<T> layer(int l) const {
        require<ShapeError>(l >= 0 && l < layers_, "KvCache: layer ", l, " of ", layers_);
        return {k_.data() + l * layer_elements(), v_.data() + l * layer_elements(), slots_, kv_heads_, head_dim_,
                capacity_};
    }
    int layers() const { return layers_; }
    int slots() const { return slots_; }
    int kv_heads() const { return kv_heads_; }
    int head_dim() const { return head_dim_; }
    int capacity() const { return capacity_; }
    /// Fills every entry with NaN bytes (tests: unwritten positions must never be read).
    void poison(cudaStream_t stream = nullptr) {
        k_.fill_bytes(0xff, stream);
        v_.fill_bytes(0xff, stream);
    }

private:
    int layers_, slots_, kv_heads_, head_dim_, capacity_;
    DeviceBuffer<T> k_, v_;
};

namespace kernels {
/// One block per token row: the row's sequence, position and slot are found once and its
/// kv_heads * head_dim values copied by the block's threads.
template <class TS, class T>
__global__ void __launch_bounds__(128) kv_append(const TS* k, index_t k_ld, const TS* v, index_t v_ld, KvLayer<T> cache,
                                                 SequenceRows seqs, StatusView status) {
    const int r = static_cast<int>(blockIdx.x);
    const int b = seqs.sequence_of(r);
    const int pos = seqs.position(r, b), slot = seqs.slot(b);
    if (pos < 0 || pos >= cache.capacity || slot < 0 || slot >= cache.slots || seqs.malformed(b)) {
        if (threadIdx.x == 0) status.position_error(r);
        return;
    }
    const int width = cache.kv_heads * cache.head_dim;
    for (int c = threadIdx.x; c < width; c += blockDim.x) {
        const int g = c / cache.head_dim, d = c % cache.head_dim;
        const index_t dst =
            ((static_cast<index_t>(slot) * cache.kv_heads + g) * cache.capacity + pos) * cache.head_dim + d;
        cache.k[dst] = from_float<T>(to_float(k[r * k_ld + c]));
        cache.v[dst] = from_float<T>(to_float(v[r * v_ld + c]));
    }
}
}  // namespace kernels

/// Writes the K and V rows of a call's tokens (sequences as `seqs` lays them out)
/// into each sequence's cache slot at its rows' positions. k, v: [rows, kv_heads *
/// head_dim]. A position outside [0, capacity) or a slot outside the cache is not
/// written and is recorded in the status.
template <class TS, class T>
void kv_append(StridedMatrix<const TS> k, StridedMatrix<const TS> v, const KvLayer<T>& cache, const SequenceRows& seqs,
               StatusView status, cudaStream_t stream) {
    k.validate("kv_append keys");
    v.validate("kv_append values");
    const index_t width = static_cast<index_t>(cache.kv_heads) * cache.head_dim;
    require<ShapeError>(k.cols == width && v.cols == width && v.rows == k.rows, "kv_append: keys [", k.rows, ", ", k.cols,
                        "] and values [", v.rows, ", ", v.cols, "] must be [rows, ", width, "]");
    seqs.validate(k.rows, "kv_append");
    require<ShapeError>(seqs.slots || seqs.batch <= cache.slots, "kv_append: ", seqs.batch, " sequences for ",
                        cache.slots, " cache slots");
    require<ShapeError>(k.rows <= 0x7fffffff, "kv_append: too many rows");
    if (k.rows == 0) return;
    kernels::kv_append<<<static_cast<unsigned>(k.rows), 128, 0, stream>>>(k.data, k.ld, v.data, v.ld, cache, seqs,
                                                                           status);
    CPX_CUDA_CHECK_LAUNCH();
}

}  // namespace cpx::cuda

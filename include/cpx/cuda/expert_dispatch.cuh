#pragma once
// Token routing on the GPU, without host synchronisation:
//   1. expert id of every token by table lookup on the device (the checkpoint's
//      token_to_expert, ids clamped to the vocabulary as the reference does:
//      docs/MODELS.md §8.2), or expert ids given by a router;
//   2. a stable CUB radix sort of (expert id, row) pairs: the permutation that
//      lists each expert's tokens contiguously, in their original order
//      (deterministic, unlike atomic slot claiming);
//   3. per-expert segment offsets by binary search in the sorted ids.
// Everything stays on the device and every buffer, CUB's temporary storage
// included, is sized once for `max_tokens`, so a forward can be captured in a
// CUDA graph (CUB's radix sort issues only kernels on the given stream).

#include <cub/device/device_radix_sort.cuh>

#include <cstdint>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/cuda/check.cuh"
#include "cpx/cuda/device_buffer.cuh"
#include "cpx/router/token_routing.hpp"

namespace cpx::cuda {

/// A token routing table on the device. Built only from a TokenRouting, whose
/// constructor checked every entry is an expert in [0, experts): the lookup
/// kernel can therefore never produce an id outside the segments.
class DeviceRoutingTable {
public:
    explicit DeviceRoutingTable(const TokenRouting& routing)
        : table_(std::vector<std::int32_t>(routing.data(), routing.data() + routing.vocab())),
          vocab_(static_cast<long long>(routing.vocab())),
          experts_(routing.experts()) {}
    const std::int32_t* data() const { return table_.data(); }
    long long vocab() const { return vocab_; }
    int experts() const { return experts_; }

private:
    DeviceBuffer<std::int32_t> table_;
    long long vocab_;
    int experts_;
};

namespace kernels {
template <class Tok>
__global__ void lookup_experts(const Tok* __restrict__ tokens, int count, const std::int32_t* __restrict__ table,
                               long long vocab, std::int32_t* __restrict__ keys, std::int32_t* __restrict__ rows) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    long long t = static_cast<long long>(tokens[i]);
    t = t < 0 ? 0 : (t >= vocab ? vocab - 1 : t);  // clamp(t, 0, V-1), as the reference routes
    keys[i] = table[t];
    rows[i] = i;
}

__global__ void copy_expert_ids(const std::int32_t* __restrict__ ids, int count, int experts,
                                std::int32_t* __restrict__ keys, std::int32_t* __restrict__ rows) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const int e = ids[i];
    keys[i] = e < 0 ? 0 : (e >= experts ? experts - 1 : e);  // ids from our own router are in range already
    rows[i] = i;
}

// offsets[e] = number of sorted ids below e = first index whose id is >= e, e in [0, experts].
__global__ void segment_offsets(const std::int32_t* __restrict__ sorted, int count, int experts,
                                std::int32_t* __restrict__ offsets) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e > experts) return;
    int lo = 0, hi = count;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (sorted[mid] < e) lo = mid + 1;
        else hi = mid;
    }
    offsets[e] = lo;
}
}  // namespace kernels

/// Sorts up to `max_tokens` tokens into per-expert segments, on the device.
class ExpertDispatch {
public:
    ExpertDispatch(int experts, int max_tokens)
        : experts_(experts),
          max_tokens_(max_tokens),
          keys_(static_cast<std::size_t>(max_tokens)),
          sorted_keys_(static_cast<std::size_t>(max_tokens)),
          rows_(static_cast<std::size_t>(max_tokens)),
          permutation_(static_cast<std::size_t>(max_tokens)),
          offsets_(static_cast<std::size_t>(experts) + 1) {
        require<ShapeError>(experts >= 1 && experts <= 256, "ExpertDispatch: ", experts, " experts (1 to 256 supported)");
        require<ShapeError>(max_tokens >= 1, "ExpertDispatch: max_tokens must be positive, got ", max_tokens);
        while ((1 << bits_) < experts_) ++bits_;  // at least one bit: a zero-bit sort would not write its output
        temp_bytes_ = sort_bytes_(max_tokens);
        temp_ = DeviceBuffer<std::byte>(temp_bytes_ > 0 ? temp_bytes_ : 1);
    }

    /// Routes `count` tokens (device ids) through the table; enqueued on `stream` only.
    template <class Tok>
    void route(const Tok* tokens, int count, const DeviceRoutingTable& table, cudaStream_t stream) {
        require<ShapeError>(table.experts() == experts_, "ExpertDispatch: table routes to ", table.experts(),
                            " experts, dispatch built for ", experts_);
        check_count_(count);
        if (count > 0) {
            kernels::lookup_experts<<<(count + 255) / 256, 256, 0, stream>>>(tokens, count, table.data(), table.vocab(),
                                                                            keys_.data(), rows_.data());
            CPX_CUDA_CHECK_LAUNCH();
        }
        sort_(count, stream);
    }

    /// Routes `count` tokens whose expert ids (in [0, experts)) are already on the device.
    void route_ids(const std::int32_t* expert_ids, int count, cudaStream_t stream) {
        check_count_(count);
        if (count > 0) {
            kernels::copy_expert_ids<<<(count + 255) / 256, 256, 0, stream>>>(expert_ids, count, experts_, keys_.data(),
                                                                             rows_.data());
            CPX_CUDA_CHECK_LAUNCH();
        }
        sort_(count, stream);
    }

    /// permutation()[i]: the original row at sorted position i (valid for the last route's count).
    const std::int32_t* permutation() const { return permutation_.data(); }
    /// offsets()[e] .. offsets()[e + 1]: expert e's segment of the sorted order (experts + 1 entries).
    const std::int32_t* offsets() const { return offsets_.data(); }
    /// The expert of each sorted position.
    const std::int32_t* sorted_experts() const { return sorted_keys_.data(); }
    int experts() const { return experts_; }
    int count() const { return count_; }
    int max_tokens() const { return max_tokens_; }

private:
    void check_count_(int count) const {
        require<ShapeError>(count >= 0 && count <= max_tokens_, "ExpertDispatch: ", count,
                            " tokens, the dispatch was sized for at most ", max_tokens_);
    }
    std::size_t sort_bytes_(int count) const {
        std::size_t bytes = 0;
        CPX_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                                       static_cast<std::int32_t*>(nullptr),
                                                       static_cast<const std::int32_t*>(nullptr),
                                                       static_cast<std::int32_t*>(nullptr), count, 0, bits_));
        return bytes;
    }
    void sort_(int count, cudaStream_t stream) {
        count_ = count;
        if (count > 0) {
            std::size_t bytes = sort_bytes_(count);
            require<Error>(bytes <= temp_bytes_, "ExpertDispatch: CUB needs ", bytes, " bytes for ", count,
                           " tokens, ", temp_bytes_, " were reserved");
            bytes = temp_bytes_;
            CPX_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_.data(), bytes, keys_.data(), sorted_keys_.data(),
                                                           rows_.data(), permutation_.data(), count, 0, bits_, stream));
        }
        kernels::segment_offsets<<<(experts_ + 1 + 127) / 128, 128, 0, stream>>>(sorted_keys_.data(), count, experts_,
                                                                                 offsets_.data());
        CPX_CUDA_CHECK_LAUNCH();
    }

    int experts_, max_tokens_;
    int bits_ = 1;
    int count_ = 0;
    DeviceBuffer<std::int32_t> keys_, sorted_keys_, rows_, permutation_, offsets_;
    std::size_t temp_bytes_ = 0;
    DeviceBuffer<std::byte> temp_;
};

}  // namespace cpx::cuda

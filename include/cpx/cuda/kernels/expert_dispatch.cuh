#pragma once
// Token routing on the GPU, without host synchronisation:
//   1. the expert of every (token, route) pair by table lookup on the device
//      (the layer's [top_k, V] table, ids clamped to the vocabulary as the
//      reference does: docs/MODELS.md §8.2 and §8.5), or expert ids given by a
//      router (one route);
//   2. a stable CUB radix sort of (expert id, pair) keys: the permutation that
//      lists each expert's pairs contiguously, in their original order
//      (deterministic, unlike atomic slot claiming). Pair p = r * T + n is
//      route r of token n, so with one route the pairs are the tokens;
//   3. per-expert segment offsets by binary search in the sorted ids, and the
//      token row of every sorted pair (p mod T), which the grouped GEMMs gather.
// A token's k routes are k rows of the grouped products: top-k costs k times
// top-1's routed work, never E times.
// Everything stays on the device and every buffer, CUB's temporary storage
// included, is sized once for `max_tokens`, so a forward can be captured in a
// CUDA graph (CUB's radix sort issues only kernels on the given stream).

#include <cub/device/device_radix_sort.cuh>

#include <cstdint>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/runtime/device_buffer.cuh"
#include "cpx/router/token_routing.hpp"
#include "cpx/router/top_k_routing.hpp"

namespace cpx::cuda {

/// A [top_k, V] token routing table on the device. Built only from a TopKRouting
/// (or a one-route TokenRouting), whose constructor checked every entry is an
/// expert in [0, experts): the lookup kernel can never produce an id outside
/// the segments.
class DeviceRoutingTable {
public:
    explicit DeviceRoutingTable(const TopKRouting& routing)
        : table_(std::vector<std::int32_t>(routing.data(), routing.data() + routing.vocab() * routing.top_k())),
          vocab_(static_cast<long long>(routing.vocab())),
          top_k_(routing.top_k()),
          experts_(routing.experts()) {}
    const std::int32_t* data() const { return table_.data(); }
    long long vocab() const { return vocab_; }
    int top_k() const { return top_k_; }
    int experts() const { return experts_; }

private:
    DeviceBuffer<std::int32_t> table_;
    long long vocab_;
    int top_k_;
    int experts_;
};

namespace kernels {
// Pair p = r * count + n: route r of token n.
template <class Tok>
__global__ void lookup_experts(const Tok* __restrict__ tokens, int count, int routes,
                               const std::int32_t* __restrict__ table, long long vocab, std::int32_t* __restrict__ keys,
                               std::int32_t* __restrict__ pairs) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= count * routes) return;
    const int r = p / count, n = p - r * count;
    long long t = static_cast<long long>(tokens[n]);
    t = t < 0 ? 0 : (t >= vocab ? vocab - 1 : t);  // clamp(t, 0, V-1), as the reference routes
    keys[p] = table[r * vocab + t];
    pairs[p] = p;
}

// The token row of each sorted pair: pair mod count.
__global__ void pair_tokens(const std::int32_t* __restrict__ sorted_pairs, int pairs, int count,
                            std::int32_t* __restrict__ tokens) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < pairs) tokens[i] = sorted_pairs[i] % count;
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

/// Sorts the (token, route) pairs of up to `max_tokens` tokens with up to
/// `max_routes` routes each into per-expert segments, on the device.
class ExpertDispatch {
public:
    ExpertDispatch(int experts, int max_tokens, int max_routes = 1)
        : experts_(experts), max_tokens_(max_tokens), max_routes_(max_routes) {
        require<ShapeError>(experts >= 1 && experts <= 256, "ExpertDispatch: ", experts, " experts (1 to 256 supported)");
        require<ShapeError>(max_tokens >= 1, "ExpertDispatch: max_tokens must be positive, got ", max_tokens);
        require<ShapeError>(max_routes >= 1 && max_routes <= experts, "ExpertDispatch: ", max_routes,
                            " routes per token, expected 1 to ", experts, " (the number of experts)");
        const long long pairs = static_cast<long long>(max_tokens) * max_routes;
        require<ShapeError>(pairs <= 0x7fffffff, "ExpertDispatch: ", max_tokens, " tokens x ", max_routes,
                            " routes exceed 32-bit pair indices");
        const auto n = static_cast<std::size_t>(pairs);
        keys_ = DeviceBuffer<std::int32_t>(n);
        sorted_keys_ = DeviceBuffer<std::int32_t>(n);
        rows_ = DeviceBuffer<std::int32_t>(n);
        permutation_ = DeviceBuffer<std::int32_t>(n);
        if (max_routes > 1) sources_ = DeviceBuffer<std::int32_t>(n);
        offsets_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(experts) + 1);
        while ((1 << bits_) < experts_) ++bits_;  // at least one bit: a zero-bit sort would not write its output
        temp_bytes_ = sort_bytes_(static_cast<int>(pairs));
        temp_ = DeviceBuffer<std::byte>(temp_bytes_ > 0 ? temp_bytes_ : 1);
    }

    /// Routes `count` tokens (device ids) through every route of the table; enqueued on `stream` only.
    template <class Tok>
    void route(const Tok* tokens, int count, const DeviceRoutingTable& table, cudaStream_t stream) {
        require<ShapeError>(table.experts() == experts_, "ExpertDispatch: table routes to ", table.experts(),
                            " experts, dispatch built for ", experts_);
        require<ShapeError>(table.top_k() <= max_routes_, "ExpertDispatch: table has ", table.top_k(),
                            " routes per token, dispatch sized for ", max_routes_);
        check_count_(count);
        const int pairs = count * table.top_k();
        if (pairs > 0) {
            kernels::lookup_experts<<<(pairs + 255) / 256, 256, 0, stream>>>(
                tokens, count, table.top_k(), table.data(), table.vocab(), keys_.data(), rows_.data());
            CPX_CUDA_CHECK_LAUNCH();
        }
        sort_(count, table.top_k(), stream);
    }

    /// Routes `count` tokens, one route each, whose expert ids (in [0, experts)) are already on the device.
    void route_ids(const std::int32_t* expert_ids, int count, cudaStream_t stream) {
        check_count_(count);
        if (count > 0) {
            kernels::copy_expert_ids<<<(count + 255) / 256, 256, 0, stream>>>(expert_ids, count, experts_, keys_.data(),
                                                                             rows_.data());
            CPX_CUDA_CHECK_LAUNCH();
        }
        sort_(count, 1, stream);
    }

    /// permutation()[i]: the pair r * tokens() + n at sorted position i (with one route, the
    /// token row n), valid for the last routing.
    const std::int32_t* permutation() const { return permutation_.data(); }
    /// sources()[i]: the token row n of sorted position i (permutation() with one route).
    const std::int32_t* sources() const { return routes_ > 1 ? sources_.data() : permutation_.data(); }
    /// offsets()[e] .. offsets()[e + 1]: expert e's segment of the sorted order (experts + 1 entries).
    const std::int32_t* offsets() const { return offsets_.data(); }
    /// The expert of each sorted position.
    const std::int32_t* sorted_experts() const { return sorted_keys_.data(); }
    int experts() const { return experts_; }
    /// Sorted positions of the last routing: tokens() * routes().
    int count() const { return tokens_ * routes_; }
    int tokens() const { return tokens_; }
    int routes() const { return routes_; }
    int max_tokens() const { return max_tokens_; }
    int max_routes() const { return max_routes_; }

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
    void sort_(int tokens, int routes, cudaStream_t stream) {
        tokens_ = tokens;
        routes_ = routes;
        const int pairs = tokens * routes;
        if (pairs > 0) {
            std::size_t bytes = sort_bytes_(pairs);
            require<Error>(bytes <= temp_bytes_, "ExpertDispatch: CUB needs ", bytes, " bytes for ", pairs,
                           " pairs, ", temp_bytes_, " were reserved");
            bytes = temp_bytes_;
            CPX_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_.data(), bytes, keys_.data(), sorted_keys_.data(),
                                                           rows_.data(), permutation_.data(), pairs, 0, bits_, stream));
            if (routes > 1) {
                kernels::pair_tokens<<<(pairs + 255) / 256, 256, 0, stream>>>(permutation_.data(), pairs, tokens,
                                                                             sources_.data());
                CPX_CUDA_CHECK_LAUNCH();
            }
        }
        kernels::segment_offsets<<<(experts_ + 1 + 127) / 128, 128, 0, stream>>>(sorted_keys_.data(), pairs, experts_,
                                                                                 offsets_.data());
        CPX_CUDA_CHECK_LAUNCH();
    }

    int experts_, max_tokens_, max_routes_;
    int bits_ = 1;
    int tokens_ = 0, routes_ = 1;
    DeviceBuffer<std::int32_t> keys_, sorted_keys_, rows_, permutation_, sources_, offsets_;
    std::size_t temp_bytes_ = 0;
    DeviceBuffer<std::byte> temp_;
};

}  // namespace cpx::cuda

#pragma once
// The KV-cache handle of a GPU model behind the CPU call contract
// (cuda/host_model.cuh). A GPU model owns its KV cache, one slot per sequence
// of a call; a SlotCache is what the caller holds instead of a CPU KVCache:
// the same positions (CachePositions: length, capacity, truncate, clear), the
// slot it was first used in, and an identity the model uses to notice when
// another call has written over that slot. Host-only and free of CUDA.

#include <atomic>
#include <cstdint>

#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/models/cache_positions.hpp"

namespace cpx {

class SlotCache : public CachePositions {
public:
    /// Room for `capacity` positions (checked against the model's context at each call).
    explicit SlotCache(index_t capacity) : CachePositions(capacity), id_(next_id()) {
        require<InputError>(capacity > 0, "KV cache: capacity ", capacity, " must be positive");
    }
    // One handle per cached sequence: a copy would claim the same device slot twice.
    SlotCache(const SlotCache&) = delete;
    SlotCache& operator=(const SlotCache&) = delete;
    SlotCache(SlotCache&&) noexcept = default;
    SlotCache& operator=(SlotCache&&) noexcept = default;

    /// The device slot (the sequence's index in the calls that use it); -1 before the first call.
    int slot() const { return slot_; }
    std::uint64_t id() const { return id_; }
    /// Used by the model when a call writes this cache's slot.
    void claim(int slot) { slot_ = slot; }

private:
    static std::uint64_t next_id() {
        static std::atomic<std::uint64_t> counter{0};
        return ++counter;
    }
    int slot_ = -1;
    std::uint64_t id_ = 0;
};

}  // namespace cpx

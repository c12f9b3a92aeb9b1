#pragma once
// The KV-cache handle of a GPU model behind the CPU call contract
// (cuda/host_model.cuh). A GPU model owns its KV cache, one slot per sequence
// of a call; a SlotCache is what the caller holds instead of a CPU KVCache:
// the same length / capacity / truncate / clear, the slot it was first used
// in, and an identity the model uses to notice when another call has written
// over that slot. Host-only and free of CUDA, so host code can hold one.

#include <atomic>
#include <cstdint>

#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"

namespace cpx {

class SlotCache {
public:
    /// Room for `capacity` positions (checked against the model's context at each call).
    explicit SlotCache(index_t capacity) : capacity_(capacity), id_(next_id()) {
        require<InputError>(capacity > 0, "KV cache: capacity ", capacity, " must be positive");
    }
    // One handle per cached sequence: a copy would claim the same device slot twice.
    SlotCache(const SlotCache&) = delete;
    SlotCache& operator=(const SlotCache&) = delete;
    SlotCache(SlotCache&&) noexcept = default;
    SlotCache& operator=(SlotCache&&) noexcept = default;

    index_t capacity() const { return capacity_; }
    /// Positions already cached: the next token goes to this position.
    index_t length() const { return length_; }
    index_t remaining() const { return capacity_ - length_; }
    /// Forgets everything (the slot stays this cache's).
    void clear() { length_ = 0; }
    /// Keeps the first n positions.
    void truncate(index_t n) {
        require<InputError>(n >= 0 && n <= length_, "KV cache: cannot truncate ", length_, " positions to ", n);
        length_ = n;
    }

    /// The device slot (the sequence's index in the calls that use it); -1 before the first call.
    int slot() const { return slot_; }
    std::uint64_t id() const { return id_; }
    /// Used by the model after a call: the slot, and n more positions filled.
    void claim(int slot) { slot_ = slot; }
    void advance(index_t n) {
        require<InputError>(n >= 0 && length_ + n <= capacity_, "KV cache: ", length_, " + ", n,
                            " positions exceed its capacity of ", capacity_);
        length_ += n;
    }

private:
    static std::uint64_t next_id() {
        static std::atomic<std::uint64_t> counter{0};
        return ++counter;
    }
    index_t capacity_ = 0, length_ = 0;
    int slot_ = -1;
    std::uint64_t id_ = 0;
};

}  // namespace cpx

#pragma once
// The KV cache of one sequence on a GPU model behind the CPU call contract
// (models/host_model.cuh). The ownership rule is the CPU's (models/kv_cache.hpp):
// the caller holds one cache per sequence, may pass it at any place of any
// call, and its contents change only through calls that pass it. What differs
// is where the keys and values live: a CPU KVCache owns host memory, while a
// GPU model allocates its device cache once, as a pool of slots, and a
// SlotCache holds one of them from its first call until it is destroyed
// (clear() and truncate() keep the slot). Host-only and free of CUDA.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/models/cache_positions.hpp"

namespace cpx {

/// The device cache slots of one GPU model that caches may hold, shared by the model
/// and by every SlotCache holding one of them (so either may go away first).
class SlotPool {
public:
    /// Slots [first, first + count) of the model's cache.
    SlotPool(int first, int count) : first_(first), holder_(static_cast<std::size_t>(count), 0) {
        require<ShapeError>(first >= 0 && count >= 1, "SlotPool: ", count, " slots from ", first);
    }
    /// A free slot, now held by `holder`, or -1 when every slot is held.
    int acquire(std::uint64_t holder) {
        const std::lock_guard lock(mutex_);
        for (std::size_t i = 0; i < holder_.size(); ++i)
            if (holder_[i] == 0) {
                holder_[i] = holder;
                return first_ + static_cast<int>(i);
            }
        return -1;
    }
    /// Gives back `slot` if `holder` holds it.
    void release(int slot, std::uint64_t holder) {
        const std::lock_guard lock(mutex_);
        const int i = slot - first_;
        if (i >= 0 && i < size() && holder_[static_cast<std::size_t>(i)] == holder) holder_[static_cast<std::size_t>(i)] = 0;
    }
    int size() const { return static_cast<int>(holder_.size()); }
    int held() const {
        const std::lock_guard lock(mutex_);
        int n = 0;
        for (std::uint64_t h : holder_) n += h != 0;
        return n;
    }

private:
    mutable std::mutex mutex_;
    int first_;
    std::vector<std::uint64_t> holder_;
};

class SlotCache : public CachePositions {
public:
    /// Room for `capacity` positions (checked against the model's context at each call).
    explicit SlotCache(index_t capacity) : CachePositions(capacity), id_(next_id()) {
        require<InputError>(capacity > 0, "KV cache: capacity ", capacity, " must be positive");
    }
    ~SlotCache() { release_(); }
    // One handle per cached sequence: a copy would hold the same device slot twice.
    SlotCache(const SlotCache&) = delete;
    SlotCache& operator=(const SlotCache&) = delete;
    SlotCache(SlotCache&& o) noexcept : CachePositions(o), pool_(std::move(o.pool_)), slot_(o.slot_), id_(o.id_) {
        o.slot_ = -1;
    }
    SlotCache& operator=(SlotCache&& o) noexcept {
        if (this != &o) {
            release_();
            CachePositions::operator=(o);
            pool_ = std::move(o.pool_);
            slot_ = o.slot_;
            id_ = o.id_;
            o.slot_ = -1;
        }
        return *this;
    }

    /// The device slot this cache holds; -1 before its first call.
    int slot() const { return slot_; }
    /// The pool its slot belongs to (null before its first call).
    const SlotPool* pool() const { return pool_.get(); }
    std::uint64_t id() const { return id_; }

    /// Used by a model on this cache's first call: holds `slot` of `pool` until destroyed.
    void hold(std::shared_ptr<SlotPool> pool, int slot) {
        release_();
        pool_ = std::move(pool);
        slot_ = slot;
    }

private:
    void release_() {
        if (pool_ && slot_ >= 0) pool_->release(slot_, id_);
        pool_.reset();
        slot_ = -1;
    }
    static std::uint64_t next_id() {
        static std::atomic<std::uint64_t> counter{0};
        return ++counter;
    }
    std::shared_ptr<SlotPool> pool_;
    int slot_ = -1;
    std::uint64_t id_ = 0;
};

}  // namespace cpx

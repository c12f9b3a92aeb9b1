#pragma once
// How many positions a KV cache holds and how many are filled: the part of a
// cache that is the same for the CPU's KVCache (models/kv_cache.hpp) and the
// GPU model's SlotCache handle (models/slot_cache.hpp).

#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"

namespace cpx {

class CachePositions {
public:
    index_t capacity() const { return capacity_; }
    /// Positions already cached: the next token goes to this position.
    index_t length() const { return length_; }
    /// Positions still free.
    index_t remaining() const { return capacity_ - length_; }

    /// Forgets everything (the storage is kept).
    void clear() { length_ = 0; }
    /// Keeps the first n positions, e.g. to reuse a shared prompt prefix.
    void truncate(index_t n) {
        require<InputError>(n >= 0 && n <= length_, "KV cache: cannot truncate ", length_, " positions to ", n);
        length_ = n;
    }
    /// Marks n more positions as filled (the model calls this after a step).
    void advance(index_t n) {
        require<InputError>(n >= 0 && length_ + n <= capacity_, "KV cache: ", length_, " + ", n,
                            " positions exceed its capacity of ", capacity_);
        length_ += n;
    }

protected:
    explicit CachePositions(index_t capacity) : capacity_(capacity) {}

private:
    index_t capacity_ = 0;
    index_t length_ = 0;
};

}  // namespace cpx

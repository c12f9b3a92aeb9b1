#pragma once
// The key/value cache of one sequence, owned by the caller. Keys are stored
// after QK-norm and RoPE, values as projected (spec section 4.4), for every
// layer, head-major ([layer][kv head][position][head_dim]) so that attention
// streams each head's keys contiguously. Storage is fp32 or bf16.

#include <cstdint>

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/aligned_buffer.hpp"
#include "cpx/cpu/strided.hpp"

namespace cpx {

template <ComplexityConfigType C, class KV = float>
class KVCache {
    static_assert(std::is_same_v<KV, float> || std::is_same_v<KV, bf16>, "the KV cache stores float or bf16");

public:
    using value_type = KV;

    /// Room for `capacity` positions (at most the configuration's context).
    explicit KVCache(index_t capacity = C::max_positions) : capacity_(capacity) {
        require<InputError>(capacity > 0 && capacity <= C::max_positions, "KV cache: capacity ", capacity,
                            " outside [1, ", C::max_positions, "] (max_position_embeddings)");
        const std::size_t n = static_cast<std::size_t>(C::layers) * C::kv_width * static_cast<std::size_t>(capacity);
        keys_.assign(n, KV{});
        values_.assign(n, KV{});
    }

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

    /// This layer's keys / values as [capacity] rows of kv heads.
    cpu::HeadRows<KV> keys(int layer) { return view(keys_.data(), layer); }
    cpu::HeadRows<KV> values(int layer) { return view(values_.data(), layer); }
    cpu::HeadRows<const KV> keys(int layer) const { return view(keys_.data(), layer); }
    cpu::HeadRows<const KV> values(int layer) const { return view(values_.data(), layer); }

    std::size_t bytes() const { return (keys_.size() + values_.size()) * sizeof(KV); }

    /// Marks n more positions as filled (the model calls this after a step).
    void advance(index_t n) {
        require<InputError>(n >= 0 && length_ + n <= capacity_, "KV cache: ", length_, " + ", n,
                            " positions exceed its capacity of ", capacity_);
        length_ += n;
    }

private:
    template <class T>
    cpu::HeadRows<T> view(T* base, int layer) const {
        require<InputError>(layer >= 0 && layer < C::layers, "KV cache: no layer ", layer);
        T* data = base + static_cast<std::size_t>(layer) * C::kv_width * static_cast<std::size_t>(capacity_);
        return {data, capacity_, C::kv_heads, C::head_dim, C::head_dim, capacity_ * C::head_dim};
    }

    cpu::AlignedVector<KV> keys_, values_;
    index_t capacity_ = 0;
    index_t length_ = 0;
};

}  // namespace cpx

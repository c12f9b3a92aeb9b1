#pragma once
// The key/value cache of one sequence, owned by the caller, for either model:
// COMPLEXITY-DEEP stores keys after QK-norm and RoPE and values as projected
// (docs/MODELS.md §6.6), one entry per KV head; PRISM stores the rotated and the
// unrotated projection of each of its 2H signal and noise heads. Every layer
// is head-major ([layer][head][position][head_dim]) so that attention streams
// each head's keys contiguously. Storage is fp32 or bf16.

#include <cstdint>

#include "cpx/config/complexity_config.hpp"
#include "cpx/config/prism_config.hpp"
#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/runtime/aligned_buffer.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/models/cache_positions.hpp"

namespace cpx {

/// What one layer of a model's cache holds per position, and the context.
template <class C> struct KVCacheShape;

template <ComplexityDims D>
struct KVCacheShape<ComplexityConfig<D>> {
    using C = ComplexityConfig<D>;
    static constexpr bool prism = C::attention == AttentionKind::prism;
    static constexpr int layers = C::layers;
    static constexpr int heads = prism ? 2 * C::heads : C::kv_heads;
    static constexpr int head_dim = prism ? C::prism_head_dim : C::head_dim;
    static constexpr index_t max_positions = C::max_positions;
    static constexpr const char* context_name = "max_position_embeddings";
};

template <PrismDims D>
struct KVCacheShape<PrismConfig<D>> {
    using C = PrismConfig<D>;
    static constexpr int layers = C::layers;
    static constexpr int heads = 2 * C::heads;  ///< signal heads, then noise heads
    static constexpr int head_dim = C::head_dim;
    static constexpr index_t max_positions = C::max_positions;
    static constexpr const char* context_name = "block_size";
};

/// A configuration whose model keeps a KV cache.
template <class C>
concept KVCacheConfig = requires { KVCacheShape<C>::heads; };

template <KVCacheConfig C, class KV = float>
class KVCache : public CachePositions {
    static_assert(std::is_same_v<KV, float> || std::is_same_v<KV, bf16>, "the KV cache stores float or bf16");

    using Shape = KVCacheShape<C>;
    static constexpr index_t layer_width = static_cast<index_t>(Shape::heads) * Shape::head_dim;

public:
    using value_type = KV;

    /// Room for `capacity` positions (at most the configuration's context).
    explicit KVCache(index_t capacity = Shape::max_positions) : CachePositions(capacity) {
        require<InputError>(capacity > 0 && capacity <= Shape::max_positions, "KV cache: capacity ", capacity,
                            " outside [1, ", Shape::max_positions, "] (", Shape::context_name, ")");
        const std::size_t n = static_cast<std::size_t>(Shape::layers * layer_width) * static_cast<std::size_t>(capacity);
        keys_.assign(n, KV{});
        values_.assign(n, KV{});
    }

    /// This layer's keys / values as [capacity] rows of the cached heads.
    cpu::HeadRows<KV> keys(int layer) { return view(keys_.data(), layer); }
    cpu::HeadRows<KV> values(int layer) { return view(values_.data(), layer); }
    cpu::HeadRows<const KV> keys(int layer) const { return view(keys_.data(), layer); }
    cpu::HeadRows<const KV> values(int layer) const { return view(values_.data(), layer); }

    std::size_t bytes() const { return (keys_.size() + values_.size()) * sizeof(KV); }

private:
    template <class T>
    cpu::HeadRows<T> view(T* base, int layer) const {
        require<InputError>(layer >= 0 && layer < Shape::layers, "KV cache: no layer ", layer);
        const index_t cap = capacity();
        T* data = base + static_cast<std::size_t>(layer * layer_width) * static_cast<std::size_t>(cap);
        return {data, cap, Shape::heads, Shape::head_dim, Shape::head_dim, cap * Shape::head_dim};
    }

    cpu::AlignedVector<KV> keys_, values_;
};

}  // namespace cpx

#pragma once
// Mean attention distance: for a query at position i with probabilities p_j
// over keys j <= i, its distance is sum_j p_j (i - j); averaged over queries
// it says how far back a head looks. PRISM's paper claims signal heads (low
// RoPE frequencies) look far and noise heads (high frequencies) near; this
// observer measures it per layer and head from any attention core call.

#include <atomic>
#include <memory>

#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"

namespace cpx::cpu {

/// Running sums of attention distance per (layer, head). Thread-safe: the
/// attention core calls observers concurrently.
class AttentionDistance {
public:
    AttentionDistance(int layers, int heads)
        : layers_(layers), heads_(heads),
          sums_(std::make_unique<std::atomic<double>[]>(static_cast<std::size_t>(layers) * heads)),
          counts_(std::make_unique<std::atomic<long long>[]>(static_cast<std::size_t>(layers) * heads)) {
        require<ShapeError>(layers > 0 && heads > 0, "attention distance: ", layers, " layers x ", heads,
                            " heads");
        reset();
    }

    /// The observer for one layer's attention call (heads numbered as the core numbers query heads).
    class LayerObserver {
    public:
        void operator()(int head, index_t position, const float* probs, index_t count) const {
            double d = 0.0;
            for (index_t j = 0; j < count; ++j) d += static_cast<double>(probs[j]) * static_cast<double>(position - j);
            const std::size_t slot = static_cast<std::size_t>(layer_) * owner_->heads_ + head;
            owner_->sums_[slot].fetch_add(d, std::memory_order_relaxed);
            owner_->counts_[slot].fetch_add(1, std::memory_order_relaxed);
        }

    private:
        friend class AttentionDistance;
        LayerObserver(AttentionDistance* owner, int layer) : owner_(owner), layer_(layer) {}
        AttentionDistance* owner_;
        int layer_;
    };

    LayerObserver layer(int l) {
        require<InputError>(l >= 0 && l < layers_, "attention distance: layer ", l, " outside [0, ", layers_, ")");
        return LayerObserver(this, l);
    }

    int layers() const { return layers_; }
    int heads() const { return heads_; }

    /// Queries observed for a head of a layer.
    long long queries(int layer, int head) const { return counts_[slot(layer, head)].load(); }

    /// Mean distance of one head (0 when it saw no query).
    double mean(int layer, int head) const {
        const long long n = queries(layer, head);
        return n ? sums_[slot(layer, head)].load() / static_cast<double>(n) : 0.0;
    }

    /// Mean over the queries of heads [first, first + count), e.g. PRISM's signal or noise group.
    double group_mean(int layer, int first, int count) const {
        double s = 0.0;
        long long n = 0;
        for (int h = first; h < first + count; ++h) {
            s += sums_[slot(layer, h)].load();
            n += counts_[slot(layer, h)].load();
        }
        return n ? s / static_cast<double>(n) : 0.0;
    }

    void reset() {
        for (std::size_t i = 0; i < static_cast<std::size_t>(layers_) * heads_; ++i) {
            sums_[i].store(0.0);
            counts_[i].store(0);
        }
    }

private:
    std::size_t slot(int layer, int head) const {
        require<InputError>(layer >= 0 && layer < layers_ && head >= 0 && head < heads_, "attention distance: (layer ",
                            layer, ", head ", head, ") outside ", layers_, " x ", heads_);
        return static_cast<std::size_t>(layer) * heads_ + head;
    }

    int layers_, heads_;
    std::unique_ptr<std::atomic<double>[]> sums_;
    std::unique_ptr<std::atomic<long long>[]> counts_;
};

}  // namespace cpx::cpu

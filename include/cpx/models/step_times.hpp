#pragma once
// Where a CPU model's calls spend their time, part by part and layer by layer: an
// observer a user attaches to see, inside a real prefill or decode step, what the
// attention, the MLP and mu-guidance of each layer cost (the papers' "negligible"
// and "one expert" claims, measured in the whole model rather than layer by layer).
//
// Wall-clock time at the caller between the parts' boundaries. Every parallel region
// of a part ends before the next part starts, so the parts add up to the call; the
// clock is read only while an observer is attached.

#include <array>
#include <chrono>

#include "cpx/core/tensor_view.hpp"

namespace cpx {

/// Seconds spent in each part of a model's calls, accumulated over calls.
template <int Layers>
struct StepTimes {
    static_assert(Layers > 0, "StepTimes: a model has at least one layer");
    /// The layer's input norm, projections, RoPE, attention over the cache and output projection.
    std::array<double, Layers> attention{};
    /// The post-attention norm and the MLP: routing, routed and shared experts, or the dense MLP.
    std::array<double, Layers> mlp{};
    /// mu-guidance: the next layer's mu from this layer's output (COMPLEXITY-DEEP with mu; else 0).
    std::array<double, Layers> mu{};
    double embed = 0;  ///< token (and position) embedding, mu's initial rows
    double head = 0;   ///< the final norm and the output head on the rows that get logits
    index_t calls = 0;

    /// One part summed over the layers.
    double attention_total() const { return sum(attention); }
    double mlp_total() const { return sum(mlp); }
    double mu_total() const { return sum(mu); }
    /// Every part of every layer.
    double total() const { return embed + head + attention_total() + mlp_total() + mu_total(); }
    void reset() { *this = StepTimes{}; }

private:
    static double sum(const std::array<double, Layers>& part) {
        double t = 0;
        for (double x : part) t += x;
        return t;
    }
};

namespace detail {
/// Laps of a steady clock, read only when `on`.
class PartClock {
public:
    explicit PartClock(bool on) : on_(on) {
        if (on_) last_ = std::chrono::steady_clock::now();
    }
    /// Seconds since the previous lap (or the start); 0 when off.
    double lap() {
        if (!on_) return 0.0;
        const auto now = std::chrono::steady_clock::now();
        const double s = std::chrono::duration<double>(now - last_).count();
        last_ = now;
        return s;
    }

private:
    bool on_;
    std::chrono::steady_clock::time_point last_{};
};
}  // namespace detail

}  // namespace cpx

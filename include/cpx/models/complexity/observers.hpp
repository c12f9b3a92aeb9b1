#pragma once
// Observers a user attaches to a model to check the paper's claims while it
// runs: how many tokens each expert received in each layer, and how much of
// each of Q, K and V comes from mu (cpu::MuContribution).

#include <array>

#include "cpx/config/complexity_config.hpp"
#include "cpx/cpu/layers/mu_gqa_attention.hpp"

namespace cpx {

/// A model's pointer to an observer the caller owns. Copying a model does not
/// copy its observers (two models adding into one table from different
/// threads would race): the copy starts with none attached. Moves keep them.
template <class T>
class ObserverPtr {
public:
    ObserverPtr() = default;
    ObserverPtr(T* p) : p_(p) {}  // NOLINT(google-explicit-constructor): assigned from &observer
    ObserverPtr(const ObserverPtr&) {}
    ObserverPtr& operator=(const ObserverPtr&) {
        p_ = nullptr;
        return *this;
    }
    ObserverPtr(ObserverPtr&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
    ObserverPtr& operator=(ObserverPtr&& o) noexcept {
        p_ = o.p_, o.p_ = nullptr;
        return *this;
    }
    explicit operator bool() const { return p_ != nullptr; }
    T* operator->() const { return p_; }
    T* get() const { return p_; }

private:
    T* p_ = nullptr;
};

/// Tokens routed to each expert of each layer, accumulated over calls.
template <ComplexityConfigType C>
struct ExpertLoad {
    std::array<std::array<index_t, C::experts>, C::layers> tokens{};
    void reset() { tokens = {}; }
};

/// Per layer, the mu share of the q, k and v projections, accumulated over calls.
template <ComplexityConfigType C>
struct MuContributions {
    std::array<cpu::MuContribution, C::layers> layers{};
    void reset() { layers = {}; }
};

}  // namespace cpx

#pragma once
// A model's choice of arithmetic (cpu::Compute) and, for bf16, the packed bf16
// copies of its matrices (`Packs`, built from the model's weights), shared by
// the model types so the rule lives in one place:
//   - fp32, or bf16 on a CPU without bf16 instructions: no packs, fp32 products;
//   - bf16: packs built when chosen (load time, not the first call), rebuilt
//     after the model handed out mutable access to its weights.

#include <cstddef>
#include <optional>

#include "cpx/cpu/gemm_bf16.hpp"

namespace cpx {

template <class Packs>
class ComputeChoice {
public:
    template <class Weights>
    void set(cpu::Compute compute, const Weights& weights) {
        compute_ = compute;
        packs_.reset();
        if (runs_bf16()) packs_.emplace(weights);
    }
    /// The weights may change: the packs are rebuilt before the next use.
    void invalidate() { packs_.reset(); }
    /// The packs of `weights` for bf16 arithmetic, or null for fp32.
    template <class Weights>
    const Packs* packs(const Weights& weights) {
        if (!runs_bf16()) return nullptr;
        if (!packs_) packs_.emplace(weights);
        return &*packs_;
    }

    cpu::Compute compute() const { return compute_; }
    cpu::Bf16Level level() const { return runs_bf16() ? cpu::best_bf16_level() : cpu::Bf16Level::none; }
    std::size_t bytes() const { return packs_ ? packs_->bytes() : 0; }

private:
    bool runs_bf16() const {
        return compute_ == cpu::Compute::bf16 && cpu::best_bf16_level() != cpu::Bf16Level::none;
    }
    cpu::Compute compute_ = cpu::Compute::fp32;
    std::optional<Packs> packs_;
};

}  // namespace cpx

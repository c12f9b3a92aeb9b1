#pragma once
// A model's choice of arithmetic (cpu::Compute) and the packed copies of its
// matrices that the choice needs (`Packs`, built from the model's weights),
// shared by the model types so the rule lives in one place:
//   - fp32: no packs, the stored weights;
//   - bf16: bf16 packs where the CPU has a bf16 level (bf16 instructions, or AVX2
//     and FMA widening the bf16 operands), else fp32 (said by level() and runs());
//   - fp32_packed: fp32 packs (bf16 panels of bf16 weights, widened exactly) where
//     the CPU has AVX2 and FMA or AVX-512, else fp32;
//   - packs are built when chosen (load time, not the first call) and rebuilt
//     after the model handed out mutable access to its weights;
//   - release(), or set() with StoredMatrices::release (layer by layer as they are packed),
//     frees the stored matrices the packs replace (release_packed_layers), so the
//     model holds them once; from then on the arithmetic can no longer change kind
//     (nothing is left to pack anew) and the weights can no longer change.

#include <cstddef>
#include <optional>

#include "cpx/core/error.hpp"
#include "cpx/cpu/runtime/compute_support.hpp"
#include "cpx/models/stored_matrices.hpp"

namespace cpx {

template <class Packs>
class ComputeChoice {
public:
    /// Chooses the arithmetic and builds its packs; with StoredMatrices::release the stored
    /// matrices the packs replace are freed, layer by layer as they are packed, but for
    /// `keeps(runs)`'s (ReleaseKeeps, models/stored_matrices.hpp).
    template <class Weights, class Keeps>
    void set(cpu::Compute compute, Weights& weights, StoredMatrices stored, Keeps keeps) {
        if (weights.packed_matrices_released()) {
            // The packs in hand are all there is: keep them for any choice that runs on them.
            require<InputError>(cpu::runnable_compute(compute) == runs(), "set_compute(",
                                cpu::compute_name(compute), "): the model released its stored matrices "
                                "(release_stored_matrices) and holds them only as packs for ",
                                cpu::compute_name(runs()), "; load the weights again to compute otherwise");
            compute_ = compute;
            return;
        }
        if (stored == StoredMatrices::release) {
            require_packs("set_compute(..., StoredMatrices::release)", compute);
            if (packs_ && cpu::runnable_compute(compute) == runs()) {  // packed already: free what they replace
                compute_ = compute;
                (void)release_packed_layers(weights, keeps(runs()));
                return;
            }
        }
        compute_ = compute;
        packs_.reset();
        if (runs() != cpu::Compute::fp32) packs_.emplace(weights, runs(), stored, keeps(runs()));
    }
    /// The weights may change: the packs are rebuilt before the next use. Refused once the
    /// stored matrices are released (the packs could not be rebuilt).
    template <class Weights>
    void invalidate(const Weights& weights) {
        require<InputError>(!weights.packed_matrices_released(), "the model released its stored matrices "
                            "(release_stored_matrices): its weights can no longer change");
        packs_.reset();
    }
    /// Builds the packs if need be, then frees the stored matrices they replace but for
    /// `keeps(runs)`'s; returns the bytes freed. An InputError where the products run in fp32 on
    /// the stored matrices.
    template <class Weights, class Keeps>
    std::size_t release(Weights& weights, Keeps keeps) {
        if (weights.packed_matrices_released()) return 0;
        require_packs("release_stored_matrices", compute_);
        (void)packs(weights);
        return release_packed_layers(weights, keeps(runs()));
    }
    /// The packs of `weights` for the arithmetic that runs, or null for plain fp32.
    template <class Weights>
    const Packs* packs(const Weights& weights) {
        if (runs() == cpu::Compute::fp32) return nullptr;
        if (!packs_) packs_.emplace(weights, runs());
        return &*packs_;
    }

    /// What the user chose.
    cpu::Compute compute() const { return compute_; }
    /// What runs on this machine: the choice, or fp32 where its kernels are missing.
    cpu::Compute runs() const { return cpu::runnable_compute(compute_); }
    cpu::Bf16Level level() const {
        return runs() == cpu::Compute::bf16 ? cpu::best_bf16_level() : cpu::Bf16Level::none;
    }
    std::size_t bytes() const { return packs_ ? packs_->bytes() : 0; }

private:
    /// Releasing the stored matrices needs packs to hold them.
    static void require_packs(const char* what, cpu::Compute compute) {
        require<InputError>(cpu::runnable_compute(compute) != cpu::Compute::fp32, what, ": the products run in fp32 "
                            "on the stored matrices (", cpu::compute_name(compute), " chosen, ",
                            cpu::compute_name(cpu::runnable_compute(compute)), " runs); choose bf16 or fp32_packed "
                            "where this CPU runs them");
    }

    cpu::Compute compute_ = cpu::Compute::fp32;
    std::optional<Packs> packs_;
};

}  // namespace cpx

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
// ModelArithmetic<Model> is the models' public face of that choice, written once.

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
        require_not_failed(weights);
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
        if (runs() == cpu::Compute::fp32) return;
        if (stored == StoredMatrices::keep) {
            packs_.emplace(weights, runs());
            return;
        }
        // Each layer's stored matrices go as soon as it is packed: the memory peaks at the stored
        // weights and a few layers' packs, not at both whole. If packing throws part way, the
        // layers packed by then are freed already: the weights are marked so that nothing reads
        // them again (require_not_failed).
        try {
            packs_.emplace(weights, runs(), after_layer_packed(weights, stored, keeps(runs())));
        } catch (...) {
            weights.mark_release_failed();
            throw;
        }
        weights.finish_release();
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
        require_not_failed(weights);
        if (weights.packed_matrices_released()) return 0;
        require_packs("release_stored_matrices", compute_);
        (void)packs(weights);
        return release_packed_layers(weights, keeps(runs()));
    }
    /// The packs of `weights` for the arithmetic that runs, or null for plain fp32.
    template <class Weights>
    const Packs* packs(const Weights& weights) {
        require_not_failed(weights);
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
    /// A release whose packing failed (out of memory) freed matrices that no packs hold.
    template <class Weights>
    static void require_not_failed(const Weights& weights) {
        require<InputError>(!weights.release_failed(), "the model's packing failed while it released its stored "
                            "matrices, which are now partly freed: load the weights again");
    }
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

/// The arithmetic calls of a CPU model (ComplexityModel, PrismModel), written once over the
/// model's private `weights_` and `compute_` (a ComputeChoice of its packs) and its static
/// `keeps_under(cpu::Compute runs)` (what a release keeps stored, models/stored_matrices.hpp):
///
///   class MyModel : public ModelArithmetic<MyModel> {
///       friend ModelArithmetic<MyModel>;
///       static ReleaseKeeps keeps_under(cpu::Compute runs);
///       Weights weights_;
///       ComputeChoice<MyPacks> compute_;
///   };
template <class Model>
class ModelArithmetic {
public:
    /// fp32 (stored weights), fp32_packed (fp32 on packed panels: 4 bytes per matrix
    /// element more) or bf16 (bf16 products with fp32 sums: 2 bytes more), packed once
    /// here. A choice whose kernels this CPU lacks runs fp32 (compute_runs() says).
    /// StoredMatrices::release: as release_stored_matrices() after it, but each layer's stored
    /// matrices go as soon as it is packed, so the memory never holds both whole.
    void set_compute(cpu::Compute compute, StoredMatrices stored = StoredMatrices::keep) {
        self().compute_.set(compute, self().weights_, stored, Model::keeps_under);
    }
    /// The arithmetic chosen.
    cpu::Compute compute() const { return self().compute_.compute(); }
    /// The arithmetic that runs on this machine.
    cpu::Compute compute_runs() const { return self().compute_.runs(); }
    /// The bf16 kernels in use: none when the products run in fp32.
    cpu::Bf16Level bf16_level() const { return self().compute_.level(); }
    /// Bytes of the packed copies (0 with plain fp32 arithmetic).
    std::size_t packed_bytes() const { return self().compute_.bytes(); }
    /// Frees the stored copies of the matrices the packs hold, so that a model computing on
    /// packs (bf16 or fp32_packed, where they run) holds each matrix once (187M COMPLEXITY-DEEP,
    /// bf16 weights and arithmetic: 738 -> 424 MB resident; docs/BF16.md). What the lookups
    /// read stays (the embedding, PRISM's wpe), as does what no pack holds (the learned
    /// router's [E, d], an fp32 product on the stored weights) and what release_keeps() names
    /// (PRISM attention's U where batch-1 decode rows read it stored).
    /// Afterwards set_compute accepts only choices that run on the same packs, and the
    /// weights can no longer be saved, converted, uploaded to a GPU or changed
    /// (InputErrors). An InputError where the products run in fp32 on the stored matrices.
    /// Returns the bytes freed (0 when already released).
    std::size_t release_stored_matrices() { return self().compute_.release(self().weights_, Model::keeps_under); }
    /// Whether release_stored_matrices() ran (on this model or the one it was copied from).
    bool stored_matrices_released() const { return self().weights_.packed_matrices_released(); }
    /// What a release keeps stored beside the packs under the arithmetic that runs on this
    /// machine (models/stored_matrices.hpp).
    ReleaseKeeps release_keeps() const { return Model::keeps_under(self().compute_.runs()); }

private:
    Model& self() { return static_cast<Model&>(*this); }
    const Model& self() const { return static_cast<const Model&>(*this); }
};

}  // namespace cpx

#pragma once
// Seeded initialisation of a model's tensors (docs/MODELS.md §11, §19), by
// walking their slots. Each tensor is drawn from its own stream named after
// it, so the result does not depend on the thread count or the slot order.
//
// Only PRISM's dictionary U needs more than a normal generator: an orthogonal
// matrix, from a QR factorisation (Eigen). That part is the class template
// OrthogonalFill, declared here and defined in models/orthogonal_fill.hpp, so
// that weights without an orthogonal tensor (every COMPLEXITY-DEEP decoder
// with mu-guided attention) are initialised without parsing Eigen.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/models/seeded_normal.hpp"
#include "cpx/models/tensor_slot.hpp"

namespace cpx {

/// Fills a [rows, cols] fp32 matrix with a seeded orthogonal matrix:
/// `OrthogonalFill<T>{}(Matrix<float>, SeededRandom&)`. Defined in
/// models/orthogonal_fill.hpp; the parameter only makes uses dependent.
template <class T>
struct OrthogonalFill;

/// Initialises every slot: orthogonal (only when `orthogonal` is true, for
/// weights that hold such a tensor), N(0, init_std), or the constant
/// init_value.
template <bool orthogonal, class W>
void initialize_slots(const std::vector<TensorSlot<W>>& slots, std::uint64_t seed) {
    if constexpr (orthogonal)
        static_assert(requires { sizeof(OrthogonalFill<W>); },
                      "PRISM's orthogonal U needs Eigen's QR: include <cpx/models/orthogonal_fill.hpp>");
    else
        for (const TensorSlot<W>& s : slots)  // checked before the parallel region: no throw inside it
            require<InputError>(!s.orthogonal, "initialize_slots: tensor ", s.name,
                                " is orthogonal, but the caller asked for no orthogonal fills");
    cpu::FirstError error;  // the buffers' allocations may throw: carried out of the region
#pragma omp parallel
    {
        std::vector<float> values;
#pragma omp for schedule(dynamic, 1)
        for (std::size_t i = 0; i < slots.size(); ++i) error.run([&] {
            const TensorSlot<W>& s = slots[i];
            values.resize(static_cast<std::size_t>(s.elements()));
            if constexpr (orthogonal) {
                if (s.orthogonal) {
                    SeededRandom rng(seed, s.name);
                    OrthogonalFill<W>{}(Matrix<float>(values.data(), s.rows, s.cols), rng);
                    s.assign(values);
                    return;
                }
            }
            if (s.init_std > 0.0) {
                SeededRandom rng(seed, s.name);
                for (float& v : values) v = static_cast<float>(s.init_std * rng.normal());
            } else {
                std::fill(values.begin(), values.end(), s.init_value);
            }
            s.assign(values);
        });
    }
    error.rethrow();
}

}  // namespace cpx

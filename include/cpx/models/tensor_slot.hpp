#pragma once
// The bridge between a model's compute layout and its checkpoint tensors,
// shared by both models: each TensorSlot names one checkpoint tensor, gives
// its shape and says where its elements live (and how it is initialised).
// Initialisation (models/initialize_slots.hpp), loading, saving, dtype
// conversion and the GPU upload all walk the slots, so a model's tensor names
// and layouts are written in one place. Free of Eigen and CUDA: host code of
// both backends includes it.

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/parallel.hpp"

namespace cpx {

/// The untied output head some exports add beside the embedding both model
/// families tie their head to: accepted when equal to it, never stored.
inline constexpr const char* tied_head_name = "lm_head.weight";

/// One checkpoint tensor and where its elements live in the compute layout:
/// element (b, r, c) of the tensor viewed as [batches, rows, cols] is at
/// base[b * batch_stride + r * row_stride + c]. Exactly one of f32 / w is set.
/// W is const-qualified for the slots of const weights (read only).
template <class W>
struct TensorSlot {
    using Float = std::conditional_t<std::is_const_v<W>, const float, float>;
    std::string name;
    std::vector<std::int64_t> shape;  ///< the checkpoint's shape
    Float* f32 = nullptr;
    W* w = nullptr;
    std::int64_t batches = 1, rows = 1, cols = 1, batch_stride = 0, row_stride = 0;
    double init_std = 0.0;    ///< seeded N(0, init_std) initialisation (docs/MODELS.md §11, §19) ...
    float init_value = 0.0f;  ///< ... or this constant when init_std == 0 ...
    bool orthogonal = false;  ///< ... or a seeded orthogonal [rows, cols] matrix (PRISM's U)

    std::int64_t elements() const { return batches * rows * cols; }

    /// Copies a tensor in checkpoint order into the compute layout.
    void assign(std::span<const float> src) const
        requires(!std::is_const_v<W>)
    {
        require<ShapeError>(static_cast<std::int64_t>(src.size()) == elements(), "tensor ", name, ": ", src.size(),
                            " values for ", elements(), " elements");
        std::size_t i = 0;
        for (std::int64_t b = 0; b < batches; ++b)
            for (std::int64_t r = 0; r < rows; ++r) {
                const std::int64_t at = b * batch_stride + r * row_stride;
                if (f32)
                    for (std::int64_t c = 0; c < cols; ++c) f32[at + c] = src[i++];
                else
                    for (std::int64_t c = 0; c < cols; ++c) w[at + c] = from_float<std::remove_const_t<W>>(src[i++]);
            }
    }

    /// Copies the tensor out of the compute layout, in checkpoint order.
    void extract(std::span<float> dst) const {
        require<ShapeError>(static_cast<std::int64_t>(dst.size()) == elements(), "tensor ", name, ": ", dst.size(),
                            " values for ", elements(), " elements");
        std::size_t i = 0;
        for (std::int64_t b = 0; b < batches; ++b)
            for (std::int64_t r = 0; r < rows; ++r) {
                const std::int64_t at = b * batch_stride + r * row_stride;
                for (std::int64_t c = 0; c < cols; ++c) dst[i++] = f32 ? f32[at + c] : to_float(w[at + c]);
            }
    }
};

/// Builds a list of slots; W is const-qualified for the slots of const weights.
template <class W>
struct SlotList {
    using Float = typename TensorSlot<W>::Float;
    std::vector<TensorSlot<W>> slots;

    /// An fp32 vector (or scalar) of n values, initialised to `value`.
    void vector(std::string name, std::vector<std::int64_t> shape, Float* data, std::int64_t n, float value) {
        TensorSlot<W> s;
        s.name = std::move(name), s.shape = std::move(shape), s.f32 = data, s.cols = n, s.init_value = value;
        slots.push_back(std::move(s));
    }
    /// A [batches, rows, cols] block of W storage, initialised N(0, init_std).
    void batched(std::string name, std::vector<std::int64_t> shape, W* base, std::int64_t batches, std::int64_t rows,
                 std::int64_t cols, std::int64_t batch_stride, std::int64_t row_stride, double init_std) {
        TensorSlot<W> s;
        s.name = std::move(name), s.shape = std::move(shape), s.w = base;
        s.batches = batches, s.rows = rows, s.cols = cols, s.batch_stride = batch_stride, s.row_stride = row_stride,
        s.init_std = init_std;
        slots.push_back(std::move(s));
    }
    /// A [rows, cols] matrix of W storage with rows `row_stride` apart.
    void matrix(std::string name, std::vector<std::int64_t> shape, W* base, std::int64_t rows, std::int64_t cols,
                std::int64_t row_stride, double init_std) {
        batched(std::move(name), std::move(shape), base, 1, rows, cols, 0, row_stride, init_std);
    }
    TensorSlot<W>& back() { return slots.back(); }
};

/// Copies every tensor of `src` into the slot of the same index in `dst`, the two lists describing
/// the same tensors (names and shapes checked first) in any storage types: the dtype conversion of
/// both model families' weights (to bf16 rounds to nearest even, to fp32 is exact).
template <class From, class To>
void copy_slots(const std::vector<TensorSlot<From>>& src, const std::vector<TensorSlot<To>>& dst) {
    require<ShapeError>(src.size() == dst.size(), "copy_slots: ", src.size(), " tensors into ", dst.size());
    for (std::size_t i = 0; i < src.size(); ++i)  // checked before the parallel region: no throw inside it
        require<ShapeError>(src[i].name == dst[i].name && src[i].shape == dst[i].shape, "copy_slots: tensor ",
                            src[i].name, " into ", dst[i].name, " (another name or shape)");
    cpu::FirstError error;  // the buffers' allocations may throw: carried out of the region
#pragma omp parallel
    {
        std::vector<float> values;
#pragma omp for schedule(dynamic, 1)
        for (std::size_t i = 0; i < src.size(); ++i) error.run([&] {
            values.resize(static_cast<std::size_t>(src[i].elements()));
            src[i].extract(values);
            dst[i].assign(values);
        });
    }
    error.rethrow();
}

}  // namespace cpx

#pragma once
// Growable workspace buffers: a buffer is enlarged only when a call needs more
// than it holds, so a model that ran a prefill (or reserved) runs its decode
// steps without allocating.

#include <cstddef>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/aligned_buffer.hpp"
#include "cpx/cpu/runtime/strided.hpp"

namespace cpx::cpu {

/// Enlarges v to at least n elements (never shrinks) and returns its data.
template <class T>
T* grow(AlignedVector<T>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

/// A contiguous [rows, cols] block at the start of v, enlarging v if needed.
template <class T>
StridedMatrix<T> block_in(AlignedVector<T>& v, index_t rows, index_t cols) {
    return rows_of(grow(v, static_cast<std::size_t>(rows * cols)), rows, cols);
}

/// The same with the width fixed by the type.
template <index_t Cols, class T>
StridedMatrix<T, Cols> block_in(AlignedVector<T>& v, index_t rows) {
    return rows_of<Cols>(grow(v, static_cast<std::size_t>(rows * Cols)), rows);
}

}  // namespace cpx::cpu

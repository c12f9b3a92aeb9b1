#pragma once
// A row-major matrix whose rows are `ld` elements apart (ld >= cols): a block
// of columns inside a wider buffer, such as the Q, K and V parts of a fused
// QKV projection or the [a, mu] halves of its input. Non-owning.

#include <type_traits>

#include "cpx/core/error.hpp"
#include "cpx/core/host_device.hpp"
#include "cpx/core/tensor_view.hpp"

namespace cpx {

template <class T>
struct StridedMatrix {
    T* data = nullptr;
    index_t rows = 0, cols = 0, ld = 0;

    StridedMatrix() = default;
    CPX_HOST_DEVICE StridedMatrix(T* d, index_t r, index_t c, index_t l) : data(d), rows(r), cols(c), ld(l) {}
    /// A contiguous matrix: ld = cols.
    CPX_HOST_DEVICE StridedMatrix(Matrix<T> m) : data(m.data()), rows(m.extent(0)), cols(m.extent(1)), ld(m.extent(1)) {}
    /// Mutable to const.
    template <class U>
    CPX_HOST_DEVICE StridedMatrix(const StridedMatrix<U>& o)
        requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
        : data(o.data), rows(o.rows), cols(o.cols), ld(o.ld) {}

    CPX_HD_INLINE T* row(index_t r) const { return data + r * ld; }
    CPX_HD_INLINE T& operator()(index_t r, index_t c) const { return data[r * ld + c]; }

    /// Columns [begin, begin + count), same rows and stride.
    StridedMatrix columns(index_t begin, index_t count) const {
        require<ShapeError>(begin >= 0 && count >= 0 && begin + count <= cols, "columns [", begin, ", ", begin + count,
                            ") of a matrix with ", cols, " columns");
        return StridedMatrix(data + begin, rows, count, ld);
    }
    /// Rows [begin, begin + count).
    StridedMatrix rows_range(index_t begin, index_t count) const {
        require<ShapeError>(begin >= 0 && count >= 0 && begin + count <= rows, "rows [", begin, ", ", begin + count,
                            ") of a matrix with ", rows, " rows");
        return StridedMatrix(data + begin * ld, count, cols, ld);
    }
    /// Checks the stride invariant; every entry point that takes one calls this.
    void validate(const char* what) const {
        require<ShapeError>(rows >= 0 && cols >= 0 && ld >= cols, what, ": matrix [", rows, ", ", cols,
                            "] with row stride ", ld, " (the stride must be >= the column count)");
    }
};

}  // namespace cpx

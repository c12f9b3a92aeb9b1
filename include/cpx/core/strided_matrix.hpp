#pragma once
// A row-major matrix whose rows are `ld` elements apart (ld >= cols): a block
// of columns inside a wider buffer, such as the Q, K and V parts of a fused
// QKV projection or the [a, mu] halves of its input. Non-owning.
//
// The column count is known at run time (`Cols` = cpx::dynamic, the default)
// or fixed by the type where a configuration fixes it: a layer of a model
// configuration `C` takes `StridedMatrix<const float, C::hidden>`, so its row
// loops see the width as a constant and a block of another width is refused
// where it is handed over (a ShapeError on the host; two different constant
// widths do not compile). A view with a constant width converts implicitly to
// one with a run-time width, so the general kernels take either.

#include <type_traits>

#include "cpx/core/error.hpp"
#include "cpx/core/host_device.hpp"
#include "cpx/core/tensor_view.hpp"

namespace cpx {

namespace detail {
// The fields; the column count is stored only when the type does not fix it.
template <class T, index_t Cols>
struct StridedFields {
    T* data = nullptr;
    index_t rows = 0;
    static constexpr index_t cols = Cols;
    index_t ld = 0;
};
template <class T>
struct StridedFields<T, dynamic> {
    T* data = nullptr;
    index_t rows = 0, cols = 0, ld = 0;
};

// U* converts to T* without a cast: the same element type, or const added.
template <class U, class T>
inline constexpr bool same_or_adds_const = std::is_same_v<U, T> || std::is_same_v<const U, T>;
}  // namespace detail

template <class T, index_t Cols = dynamic>
struct StridedMatrix : detail::StridedFields<T, Cols> {
    static_assert(Cols == dynamic || Cols > 0, "a constant column count must be positive (or cpx::dynamic)");
    using Fields = detail::StridedFields<T, Cols>;
    using Fields::cols;
    using Fields::data;
    using Fields::ld;
    using Fields::rows;
    static constexpr index_t static_cols = Cols;

    StridedMatrix() = default;
    /// Any width: data, rows, columns, row stride. With a constant width the
    /// column count given must equal it (checked on the host).
    CPX_HOST_DEVICE StridedMatrix(T* d, index_t r, index_t c, index_t l)
        requires(Cols == dynamic)
        : Fields{d, r, c, l} {}
    StridedMatrix(T* d, index_t r, index_t c, index_t l)
        requires(Cols != dynamic)
        : Fields{d, r, checked_stride(c, l)} {}
    /// A constant width: data, rows, row stride.
    CPX_HOST_DEVICE StridedMatrix(T* d, index_t r, index_t l)
        requires(Cols != dynamic)
        : Fields{d, r, l} {}
    /// A contiguous matrix: ld = cols.
    CPX_HOST_DEVICE StridedMatrix(Matrix<T> m)
        requires(Cols == dynamic)
        : Fields{m.data(), m.extent(0), m.extent(1), m.extent(1)} {}
    StridedMatrix(Matrix<T> m)
        requires(Cols != dynamic)
        : Fields{m.data(), m.extent(0), checked_stride(m.extent(1), m.extent(1))} {}

    /// Mutable to const, and a constant width to a run-time one: always valid.
    template <class U, index_t C2>
    CPX_HOST_DEVICE StridedMatrix(const StridedMatrix<U, C2>& o)
        requires(detail::same_or_adds_const<U, T> && (C2 == Cols || Cols == dynamic) &&
                 !(std::is_same_v<U, T> && C2 == Cols))
        : StridedMatrix(from_fields(o.data, o.rows, o.cols, o.ld)) {}
    /// A run-time width to a constant one: checked on the host.
    template <class U>
    StridedMatrix(const StridedMatrix<U, dynamic>& o)
        requires(detail::same_or_adds_const<U, T> && Cols != dynamic)
        : Fields{o.data, o.rows, checked_stride(o.cols, o.ld)} {}
    /// Two different constant widths: a configuration mismatch, refused at compile time.
    template <class U, index_t C2>
    StridedMatrix(const StridedMatrix<U, C2>&)
        requires(C2 != dynamic && Cols != dynamic && C2 != Cols)
    {
        static_assert(C2 == Cols, "a StridedMatrix with one constant column count cannot become one with another");
    }

    CPX_HD_INLINE T* row(index_t r) const { return data + r * ld; }
    CPX_HD_INLINE T& operator()(index_t r, index_t c) const { return data[r * ld + c]; }

    /// Columns [begin, begin + count), same rows and stride.
    StridedMatrix<T> columns(index_t begin, index_t count) const {
        require<ShapeError>(begin >= 0 && count >= 0 && begin + count <= cols, "columns [", begin, ", ", begin + count,
                            ") of a matrix with ", cols, " columns");
        return StridedMatrix<T>(data + begin, rows, count, ld);
    }
    /// Columns [begin, begin + Count) as a view of constant width Count.
    template <index_t Count>
    StridedMatrix<T, Count> columns(index_t begin) const {
        return StridedMatrix<T, Count>(columns(begin, Count));
    }
    /// Rows [begin, begin + count).
    StridedMatrix rows_range(index_t begin, index_t count) const {
        require<ShapeError>(begin >= 0 && count >= 0 && begin + count <= rows, "rows [", begin, ", ", begin + count,
                            ") of a matrix with ", rows, " rows");
        return from_fields(data + begin * ld, count, cols, ld);
    }
    /// Checks the stride invariant; every entry point that takes one calls this.
    void validate(const char* what) const {
        require<ShapeError>(rows >= 0 && cols >= 0 && ld >= cols, what, ": matrix [", rows, ", ", cols,
                            "] with row stride ", ld, " (the stride must be >= the column count)");
    }

private:
    // The row stride `l` once the column count `c` is checked against the constant one.
    static index_t checked_stride(index_t c, index_t l) {
        require<ShapeError>(c == Cols, "a matrix with ", c, " columns where the configuration fixes ", Cols);
        return l;
    }
    CPX_HD_INLINE static StridedMatrix from_fields(T* d, index_t r, index_t c, index_t l) {
        if constexpr (Cols == dynamic) return StridedMatrix(d, r, c, l);
        else return StridedMatrix(d, r, l);  // c == Cols: the caller's type guarantees it
    }
};

}  // namespace cpx

#pragma once
// Strided views for the CPU path. Layers read and write sub-blocks of larger
// buffers in place (q, k and v are column ranges of one fused projection; a
// and mu share one [a, mu] input row): a matrix block is the one strided view
// both backends use, cpx::StridedMatrix (core/strided_matrix.hpp); the helpers
// here build it over contiguous storage, and HeadRows adds the per-head layout
// of attention's rows.

#include <type_traits>

#include "cpx/core/error.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/core/tensor_view.hpp"

namespace cpx::cpu {

/// A contiguous [rows, cols] block (stride = cols).
template <class T>
StridedMatrix<T> rows_of(T* data, index_t rows, index_t cols) { return {data, rows, cols, cols}; }

/// A contiguous [rows, Cols] block whose width the type fixes.
template <index_t Cols, class T>
StridedMatrix<T, Cols> rows_of(T* data, index_t rows) { return {data, rows, Cols}; }

/// A row block over a contiguous matrix view.
template <class T>
StridedMatrix<T> rows_of(Matrix<T> m) { return {m.data(), m.extent(0), m.extent(1), m.extent(1)}; }

/// Per-head vectors of a sequence of rows: element i of head h in row r is
/// data[r * row_stride + h * head_stride + i]. Rows are consecutive positions.
template <class T>
struct HeadRows {
    T* data = nullptr;
    index_t rows = 0;
    int heads = 0;
    int head_dim = 0;
    index_t row_stride = 0;
    index_t head_stride = 0;

    T* head(index_t r, int h) const { return data + r * row_stride + static_cast<index_t>(h) * head_stride; }
    HeadRows rows_range(index_t begin, index_t count) const {
        return {data + begin * row_stride, count, heads, head_dim, row_stride, head_stride};
    }
    /// Heads [first, first + count) of every row.
    HeadRows sub_heads(int first, int count) const {
        return {data + static_cast<index_t>(first) * head_stride, rows, count, head_dim, row_stride, head_stride};
    }
    operator HeadRows<const T>() const requires(!std::is_const_v<T>) {
        return {data, rows, heads, head_dim, row_stride, head_stride};
    }
};

/// Heads packed one after another in each row (head_stride = head_dim); the row
/// stride defaults to heads * head_dim, or is given when the heads are a column
/// range of a wider row.
template <class T>
HeadRows<T> packed_heads(T* data, index_t rows, int heads, int head_dim, index_t row_stride = 0) {
    require<ShapeError>(heads > 0 && head_dim > 0, "packed_heads: ", heads, " heads of dimension ", head_dim);
    const index_t width = static_cast<index_t>(heads) * head_dim;
    require<ShapeError>(row_stride == 0 || row_stride >= width, "packed_heads: row stride ", row_stride,
                        " is narrower than ", heads, " heads x ", head_dim);
    return {data, rows, heads, head_dim, row_stride ? row_stride : width, head_dim};
}

}  // namespace cpx::cpu

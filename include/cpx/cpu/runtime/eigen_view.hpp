#pragma once
// Eigen maps over cpx views: the CPU path runs Eigen's algebra on the caller's
// buffers without copies. Only CPU headers include this (never a .cu file).

#include "cpx/cpu/runtime/eigen.hpp"

#include "cpx/core/tensor_view.hpp"

namespace cpx::cpu {

template <class T>
using RowMajorMatrix = Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// A row-major Eigen map of a rank-2 view.
template <class T, index_t R, index_t C>
auto as_eigen(const View<T, R, C>& v) {
    using Plain = Eigen::Matrix<std::remove_const_t<T>, R == dynamic ? Eigen::Dynamic : static_cast<int>(R),
                                C == dynamic ? Eigen::Dynamic : static_cast<int>(C),
                                (C == 1 && R != 1) ? Eigen::ColMajor : Eigen::RowMajor>;
    using MapType = std::conditional_t<std::is_const_v<T>, Eigen::Map<const Plain>, Eigen::Map<Plain>>;
    return MapType(v.data(), v.extent(0), v.extent(1));
}

/// A column-vector Eigen map of a rank-1 view.
template <class T, index_t N>
auto as_eigen(const View<T, N>& v) {
    using Plain = Eigen::Matrix<std::remove_const_t<T>, N == dynamic ? Eigen::Dynamic : static_cast<int>(N), 1>;
    using MapType = std::conditional_t<std::is_const_v<T>, Eigen::Map<const Plain>, Eigen::Map<Plain>>;
    return MapType(v.data(), v.extent(0));
}

}  // namespace cpx::cpu

#pragma once
// Seeded orthogonal initialisation (PRISM's dictionary U, docs/MODELS.md
// §19): the Q factor of a Householder QR of a Gaussian matrix, with the
// column signs fixed by diag(R) so that the result is Haar-distributed, as
// torch.nn.init.orthogonal_ draws it.

#include "cpx/cpu/runtime/eigen.hpp"
CPX_BEGIN_THIRD_PARTY_INCLUDES
#include <Eigen/QR>
CPX_END_THIRD_PARTY_INCLUDES
#include <type_traits>

#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"

namespace cpx::cpu {

namespace orthogonal_detail {
/// Writes the Q factor of the tall m x n matrix `a` (a Householder QR, column signs fixed by
/// diag(R)) into w: [m, n], or [n, m] for a wide w, which takes Q^T. A template over the
/// arithmetic's type so that CPX_EXTERN_KERNELS (below) can keep each source from compiling
/// Eigen's QR again.
template <class Real>
void q_factor(const Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic>& a, Matrix<float> w) {
    using Dense = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic>;
    const index_t rows = w.extent(0), cols = w.extent(1);
    const bool tall = rows >= cols;
    const index_t m = a.rows(), n = a.cols();
    const Eigen::HouseholderQR<Dense> qr(a);
    Dense q = qr.householderQ() * Dense::Identity(m, n);
    const auto& r = qr.matrixQR();
    for (index_t j = 0; j < n; ++j)
        if (r(j, j) < Real(0)) q.col(j) = -q.col(j);
    for (index_t i = 0; i < rows; ++i)
        for (index_t j = 0; j < cols; ++j) w(i, j) = static_cast<float>(tall ? q(i, j) : q(j, i));
}
}  // namespace orthogonal_detail

/// Fills w with a random matrix whose columns (tall w) or rows (wide w) are
/// orthonormal: w^T w = I for rows >= cols. `normal()` draws standard normal
/// doubles (e.g. SeededRandom::normal). The factorisation runs in double so
/// the fp32 result is orthonormal to within fp32 rounding.
template <class Normal>
    requires std::is_invocable_r_v<double, Normal&>
void orthogonal_init(Matrix<float> w, Normal&& normal) {
    const index_t rows = w.extent(0), cols = w.extent(1);
    require<ShapeError>(rows > 0 && cols > 0, "orthogonal_init: the matrix is empty ([", rows, ", ", cols, "])");
    const bool tall = rows >= cols;
    const index_t m = tall ? rows : cols, n = tall ? cols : rows;  // factor an m x n tall matrix
    Eigen::MatrixXd a(m, n);
    for (index_t i = 0; i < m; ++i)
        for (index_t j = 0; j < n; ++j) a(i, j) = normal();
    orthogonal_detail::q_factor<double>(a, w);
}

}  // namespace cpx::cpu

// The double factorisation, declared extern with CPX_EXTERN_KERNELS and defined by
// cpu/kernel_instances.hpp, as CPX_LINEAR_INSTANCES in cpu/kernels/linear.hpp.
#define CPX_ORTHOGONAL_INIT_INSTANCES(extern_) \
    extern_ template void cpx::cpu::orthogonal_detail::q_factor<double>(const Eigen::MatrixXd&, cpx::Matrix<float>);
#ifdef CPX_EXTERN_KERNELS
CPX_ORTHOGONAL_INIT_INSTANCES(extern)
#endif

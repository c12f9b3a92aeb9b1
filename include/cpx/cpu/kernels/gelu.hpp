#pragma once
// The exact (erf) GELU on the CPU, over runs of floats, vectorised. The
// function is cpx/math/gelu.hpp's (the CUDA path evaluates it with
// erff); one scalar erff call per value costs 10-20 ns, the GELU MLP's largest
// cost after its GEMMs, so the CPU evaluates erf with packet arithmetic:
//   |z| <  0.875:  erf(z) = z P(z^2)                              P of degree 6
//   |z| >= 0.875:  erf(z) = sign(z) (1 - exp(-z^2) Q(s)),         Q of degree 10
//                  s = (1/|z| - 0.6964...) / 0.4464..., |z| clamped to [0.875, 4]
// P and Q (cpu/kernels/erf_fit.hpp) are Chebyshev fits (in double) of erf(z)/z and
// erfc(z) exp(z^2) (the latter smooth in 1/|z|); in fp32 the result is within 2.5 ulp of erf
// (erff: 1 ulp), far inside the GELU test's bound. GELU takes 1 + erf(z), which
// for z <= -0.875 is exp(-z^2) Q(s) itself: forming 1 - (1 - exp(-z^2) Q) instead
// (as 0.5 x (1 + erff(z)) does) left GELU(-5) with a 5% relative error. NaN
// propagates; erf(+-inf) = +-1, so GELU(+inf) = +inf and GELU(-inf) = NaN, as the
// scalar definition.
// Where vector_isa() is AVX-512 or AVX2, cpu/kernels/gelu_avx512.hpp or gelu_avx2.hpp
// runs the same arithmetic in registers instead.

#include "cpx/cpu/runtime/eigen.hpp"

#include <algorithm>
#include <cstddef>
#include <iterator>

#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/erf_fit.hpp"
#include "cpx/cpu/kernels/gelu_avx2.hpp"
#include "cpx/cpu/kernels/gelu_avx512.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"

namespace cpx::cpu {

// GCC 12 reports "uninitialized" values inside its own AVX-512 intrinsics
// (_mm512_undefined_ps) once Eigen's exp packets are inlined into fixed-size
// blocks; the values are never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace detail {
/// 1 + erf(z), per value of z (an Eigen array).
template <class A>
A one_plus_erf_packets(const A& z) {
    const A a = z.abs();
    const A u = z.square();
    namespace fit = erf_fit;
    A p = A::Constant(z.rows(), 1, fit::p[0]);
    for (std::size_t i = 1; i < std::size(fit::p); ++i) p = p * u + fit::p[i];
    // |z| clamped to [split, clamp] with selects (GCC 12 warns falsely inside the AVX-512 max intrinsic).
    const A lo = A::Constant(z.rows(), 1, fit::split), hi = A::Constant(z.rows(), 1, fit::clamp);
    const A clamped = (a < fit::split).select(lo, (a > fit::clamp).select(hi, a));
    const A s = (clamped.inverse() - fit::s_centre) * fit::s_scale;
    A q = A::Constant(z.rows(), 1, fit::q[0]);
    for (std::size_t i = 1; i < std::size(fit::q); ++i) q = q * s + fit::q[i];
    // erfc(|z|); exactly 0 from |z| = 10 (erfc(10) ~ 2e-45), where exp's own range limit would
    // leave a tiny value (Eigen's exp clamps its argument) and GELU(-inf) would be -inf, not NaN.
    const A erfc_fit = (-u).exp() * q;
    const A complement = (a < 10.0f).select(erfc_fit, A::Constant(z.rows(), 1, 0.0f));
    return (a < fit::split).select(1.0f + z * p, (z < 0.0f).select(complement, 2.0f - complement));
}


template <class Block>
void gelu_block(float* v, const float* bias, index_t len) {
    Eigen::Map<Block> out(v, len);
    Block x = out;
    if (bias) x += Eigen::Map<const Block>(bias, len);
    out = 0.5f * x * one_plus_erf_packets<Block>(x * 0.70710678118654752f);
}
}  // namespace detail

/// v[i] = GELU(v[i] + bias[i]) for i < n; bias may be null (no bias).
inline void gelu_erf_inplace(float* v, const float* bias, index_t n) {
#ifdef CPX_HAVE_GELU_AVX512
    if (vector_isa() == VectorIsa::avx512) {
        avx512::gelu_erf_inplace(v, bias, n);
        return;
    }
#endif
#ifdef CPX_HAVE_GELU_AVX2
    if (vector_isa() == VectorIsa::avx2) {
        avx2::gelu_erf_inplace(v, bias, n);
        return;
    }
#endif
    constexpr int chunk = 64;  // fixed-size stack blocks: 4 AVX-512 registers per temporary
    index_t i = 0;
    for (; i + chunk <= n; i += chunk)
        detail::gelu_block<Eigen::Array<float, chunk, 1>>(v + i, bias ? bias + i : nullptr, chunk);
    if (i < n)
        detail::gelu_block<Eigen::Array<float, Eigen::Dynamic, 1, Eigen::ColMajor, chunk, 1>>(
            v + i, bias ? bias + i : nullptr, n - i);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace cpx::cpu

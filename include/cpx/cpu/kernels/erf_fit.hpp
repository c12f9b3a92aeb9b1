#pragma once
// The coefficients of the CPU's erf (cpu/kernels/gelu.hpp explains the fits), defined once
// for the portable, AVX2 and AVX-512 GELU kernels: each evaluates the polynomials by Horner's
// rule from the highest coefficient.
//   |z| <  erf_split:  erf(z) = z P(z^2)
//   |z| >= erf_split:  erfc(|z|) = exp(-z^2) Q(s),  s = (1 / clamp(|z|, erf_split, erf_clamp) - erf_s_centre) * erf_s_scale

namespace cpx::cpu::erf_fit {

inline constexpr float split = 0.875f;
inline constexpr float clamp = 4.0f;
inline constexpr float s_centre = 0.6964285714f;
inline constexpr float s_scale = 2.24f;

/// P, degree 6, highest coefficient first.
inline constexpr float p[] = {8.694670665e-05f,  -8.215563116e-04f, 5.207134814e-03f, -2.686174016e-02f,
                              1.128373583e-01f,  -3.761263626e-01f, 1.128379167e+00f};
/// Q, degree 10, highest coefficient first.
inline constexpr float q[] = {-5.595576436e-06f, 8.047444643e-06f,  1.624653354e-05f, -8.245905452e-05f,
                              2.476693228e-04f,  -5.484240513e-04f, 3.787647009e-04f, 4.299308761e-03f,
                              -3.237745059e-02f, 1.599795873e-01f,  3.323958864e-01f};

}  // namespace cpx::cpu::erf_fit

#pragma once
// Few-row products (decode's hot loop) on AVX-512.
//
// fp32 weights, 2-16 rows: a block of four weight rows is loaded once per
// group of up to four input rows, whose 4 x 4 accumulators stay in registers
// (the generic kernel re-read the weights once per input row and was
// compute-bound: four rows took 1.9x one row's time). The input-major
// counterpart (the routed experts) keeps a 4-row x 64-column tile of sums in
// registers over the whole input; further row groups re-read the 64-column
// strip from L2, so the weights come from memory once.
//
// bf16 weights: widening bf16 one value at a time (zero-extend + shift per lane) made the
// generic kernels compute-bound at ~55% of the memory read rate. Here a 32-bit
// word holds two neighbouring bf16 values, and both become fp32 with one
// instruction each: the high one is `word & 0xffff0000`, the low one
// `word << 16`. The products are then split by the parity of the index and
// summed at the end. Software prefetch a few KiB ahead keeps enough reads in
// flight for one core to approach the read rate.
//
// The same fp32 products as the generic kernels, summed in another order.
// Compiled only where the target has AVX-512F; linear.hpp falls back otherwise.

#if defined(__AVX512F__)
#define CPX_HAVE_GEMV_AVX512 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/strided.hpp"

namespace cpx::cpu::avx512 {

/// How far ahead along a weight row the kernels prefetch.
inline constexpr index_t prefetch_ahead_bytes = 4096;

inline __m512 bf16_low_halves(__m512i words) { return _mm512_castsi512_ps(_mm512_slli_epi32(words, 16)); }
inline __m512 bf16_high_halves(__m512i words) {
    return _mm512_castsi512_ps(_mm512_and_si512(words, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}

namespace detail {
/// Calls block(std::integral_constant<int, G>{}, m0) over the rows in groups of
/// four, then once for the remaining one to three: the register-blocked kernels'
/// row schedule.
template <class Block>
void in_row_groups(index_t rows, Block&& block) {
    index_t m0 = 0;
    for (; m0 + 4 <= rows; m0 += 4) block(std::integral_constant<int, 4>{}, m0);
    switch (rows - m0) {
        case 3: block(std::integral_constant<int, 3>{}, m0); break;
        case 2: block(std::integral_constant<int, 2>{}, m0); break;
        case 1: block(std::integral_constant<int, 1>{}, m0); break;
        default: break;
    }
}

/// G input rows from m0 against weight rows [o, o + rows_here), rows_here <= 4.
template <int G>
void gemv_block_nt_f32(const StridedMatrix<const float>& x, index_t m0, const float* const* wr, int rows_here,
                       const StridedMatrix<float>& y, index_t o, bool accumulate, bool prefetch) {
    constexpr int R = 4;
    const index_t in = x.cols, body = in / 16 * 16;
    const float* xr[G];
    for (int g = 0; g < G; ++g) xr[g] = x.row(m0 + g);
    __m512 acc[G][R];
    for (auto& a : acc)
        for (auto& v : a) v = _mm512_setzero_ps();
    for (index_t i = 0; i < body; i += 16) {
        __m512 wv[R];
        for (int k = 0; k < R; ++k) {
            if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(wr[k] + i + prefetch_ahead_bytes / 4), _MM_HINT_T0);
            wv[k] = _mm512_loadu_ps(wr[k] + i);
        }
        for (int g = 0; g < G; ++g) {
            const __m512 xv = _mm512_loadu_ps(xr[g] + i);
            for (int k = 0; k < R; ++k) acc[g][k] = _mm512_fmadd_ps(wv[k], xv, acc[g][k]);
        }
    }
    for (int g = 0; g < G; ++g) {
        float* yr = y.row(m0 + g) + o;
        for (int k = 0; k < rows_here; ++k) {
            float s = _mm512_reduce_add_ps(acc[g][k]);
            for (index_t i = body; i < in; ++i) s += xr[g][i] * wr[k][i];
            yr[k] = accumulate ? yr[k] + s : s;
        }
    }
}
}  // namespace detail

/// y[m, o] (=|+=) sum_i x[m, i] w[o, i] for o in [o0, o1); w: [out, in] fp32 rows.
inline void gemv_rows_nt_f32(const StridedMatrix<const float>& x, const StridedMatrix<const float>& w,
                             const StridedMatrix<float>& y, index_t o0, index_t o1, bool accumulate) {
    for (index_t o = o0; o < o1; o += 4) {
        const int rows_here = static_cast<int>(std::min<index_t>(4, o1 - o));
        const float* wr[4];  // a short last block repeats its last row; those sums are not stored
        for (int k = 0; k < 4; ++k) wr[k] = w.data + (o + std::min(k, rows_here - 1)) * w.ld;
        detail::in_row_groups(x.rows, [&](auto g, index_t m0) {
            detail::gemv_block_nt_f32<decltype(g)::value>(x, m0, wr, rows_here, y, o, accumulate, m0 == 0);
        });
    }
}

namespace detail {
/// G input rows from m0 against columns [j0, j0 + cols) of an input-major fp32
/// weight, cols <= 64: 4G accumulators over the whole input dimension.
template <int G>
void gemv_block_nn_f32(const StridedMatrix<const float>& x, index_t m0, const StridedMatrix<const float>& w, index_t j0,
                       int cols, const StridedMatrix<float>& y, bool accumulate, bool prefetch) {
    constexpr int NB = 4;
    __mmask16 mask[NB];
    for (int k = 0; k < NB; ++k) {
        const int c = cols - 16 * k;
        mask[k] = c >= 16 ? __mmask16(0xffff) : c <= 0 ? __mmask16(0) : __mmask16((1u << c) - 1);
    }
    const float* xr[G];
    for (int g = 0; g < G; ++g) xr[g] = x.row(m0 + g);
    __m512 acc[G][NB];
    for (auto& a : acc)
        for (auto& v : a) v = _mm512_setzero_ps();
    const index_t ahead = 8 * w.ld;  // eight weight rows ahead: the strip is strided in memory
    for (index_t i = 0; i < w.rows; ++i) {
        const float* wr = w.data + i * w.ld + j0;
        if (prefetch && i + 8 < w.rows)
            for (int k = 0; k < NB; ++k) _mm_prefetch(reinterpret_cast<const char*>(wr + ahead + 16 * k), _MM_HINT_T0);
        __m512 wv[NB];
        for (int k = 0; k < NB; ++k) wv[k] = _mm512_maskz_loadu_ps(mask[k], wr + 16 * k);
        for (int g = 0; g < G; ++g) {
            const __m512 xv = _mm512_set1_ps(xr[g][i]);
            for (int k = 0; k < NB; ++k) acc[g][k] = _mm512_fmadd_ps(wv[k], xv, acc[g][k]);
        }
    }
    for (int g = 0; g < G; ++g) {
        float* yr = y.row(m0 + g) + j0;
        for (int k = 0; k < NB; ++k) {
            __m512 v = acc[g][k];
            if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask[k], yr + 16 * k));
            _mm512_mask_storeu_ps(yr + 16 * k, mask[k], v);
        }
    }
}
}  // namespace detail

/// y[m, o0:o1] (=|+=) sum_i x[m, i] w[i, o0:o1]; w: [in, out] fp32 rows.
inline void gemv_rows_nn_f32(const StridedMatrix<const float>& x, const StridedMatrix<const float>& w, const StridedMatrix<float>& y,
                             index_t o0, index_t o1, bool accumulate) {
    for (index_t j0 = o0; j0 < o1; j0 += 64) {
        const int cols = static_cast<int>(std::min<index_t>(64, o1 - j0));
        detail::in_row_groups(x.rows, [&](auto g, index_t m0) {
            detail::gemv_block_nn_f32<decltype(g)::value>(x, m0, w, j0, cols, y, accumulate, m0 == 0);
        });
    }
}

namespace detail {
/// Every input row against weight rows [o, o + R) (bf16): R read streams, 2R accumulators.
template <int R>
void gemv_block_nt_bf16(const StridedMatrix<const float>& x, const StridedMatrix<const bf16>& w, const StridedMatrix<float>& y,
                        index_t o, bool accumulate) {
    const index_t in = x.cols, body = in / 32 * 32;
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const std::uint16_t* rows[R];
    for (int k = 0; k < R; ++k) rows[k] = &w.data[(o + k) * w.ld].bits;
    for (index_t m = 0; m < x.rows; ++m) {
        const float* xr = x.row(m);
        __m512 acc[R][2];
        for (auto& a : acc) a[0] = a[1] = _mm512_setzero_ps();
        for (index_t i = 0; i < body; i += 32) {
            const __m512 x0 = _mm512_loadu_ps(xr + i), x1 = _mm512_loadu_ps(xr + i + 16);
            const __m512 xe = _mm512_permutex2var_ps(x0, even, x1), xo = _mm512_permutex2var_ps(x0, odd, x1);
            for (int k = 0; k < R; ++k) {
                if (m == 0) _mm_prefetch(reinterpret_cast<const char*>(rows[k] + i + prefetch_ahead_bytes / 2), _MM_HINT_T0);
                const __m512i words = _mm512_loadu_si512(rows[k] + i);
                acc[k][0] = _mm512_fmadd_ps(bf16_low_halves(words), xe, acc[k][0]);
                acc[k][1] = _mm512_fmadd_ps(bf16_high_halves(words), xo, acc[k][1]);
            }
        }
        float* yr = y.row(m) + o;
        for (int k = 0; k < R; ++k) {
            const bf16* wr = w.data + (o + k) * w.ld;
            float s = _mm512_reduce_add_ps(_mm512_add_ps(acc[k][0], acc[k][1]));
            for (index_t i = body; i < in; ++i) s += xr[i] * to_float(wr[i]);
            yr[k] = accumulate ? yr[k] + s : s;
        }
    }
}
}  // namespace detail

/// y[m, o] (=|+=) sum_i x[m, i] w[o, i] for o in [o0, o1); w: [out, in] bf16 rows.
inline void gemv_rows_nt_bf16(const StridedMatrix<const float>& x, const StridedMatrix<const bf16>& w,
                              const StridedMatrix<float>& y, index_t o0, index_t o1, bool accumulate) {
    index_t o = o0;
    for (; o + 4 <= o1; o += 4) detail::gemv_block_nt_bf16<4>(x, w, y, o, accumulate);
    for (; o < o1; ++o) detail::gemv_block_nt_bf16<1>(x, w, y, o, accumulate);  // the last rows, one at a time
}

/// Floats of scratch gemv_rows_nn_bf16 needs for `rows` x rows and n columns.
constexpr index_t nn_bf16_scratch(index_t rows, index_t n) { return rows * 2 * (n / 2 + 1); }

/// y[m, o0:o1] (=|+=) sum_i x[m, i] w[i, o0:o1]; w: [in, out] bf16 rows, at
/// most max_rows rows of x; acc: nn_bf16_scratch(x.rows, o1 - o0) floats.
template <index_t max_rows>
void gemv_rows_nn_bf16(const StridedMatrix<const float>& x, const StridedMatrix<const bf16>& w,
                              const StridedMatrix<float>& y, index_t o0, index_t o1, bool accumulate, float* acc) {
    const index_t n = o1 - o0, pairs = n / 2, body = pairs / 16 * 16, rows = x.rows;
    const index_t half = pairs + 1;  // acc per x row: [evens | odds], pairs each (+1 pad)
    std::fill(acc, acc + rows * 2 * half, 0.0f);
    for (index_t i = 0; i < w.rows; ++i) {
        const std::uint16_t* wr = &w.data[i * w.ld + o0].bits;
        const std::uint16_t* ahead = wr + 8 * w.ld;
        __m512 xi[max_rows];
        for (index_t m = 0; m < rows; ++m) xi[m] = _mm512_set1_ps(x.row(m)[i]);
        for (index_t j = 0; j < body; j += 16) {
            if (i + 8 < w.rows) _mm_prefetch(reinterpret_cast<const char*>(ahead + 2 * j), _MM_HINT_T0);
            const __m512i words = _mm512_loadu_si512(wr + 2 * j);
            const __m512 lo = bf16_low_halves(words), hi = bf16_high_halves(words);
            for (index_t m = 0; m < rows; ++m) {
                float* ae = acc + m * 2 * half + j;
                float* ao = ae + half;
                _mm512_storeu_ps(ae, _mm512_fmadd_ps(lo, xi[m], _mm512_loadu_ps(ae)));
                _mm512_storeu_ps(ao, _mm512_fmadd_ps(hi, xi[m], _mm512_loadu_ps(ao)));
            }
        }
        for (index_t j = body; j < pairs; ++j) {
            const float lo = to_float(bf16::from_bits(wr[2 * j])), hi = to_float(bf16::from_bits(wr[2 * j + 1]));
            for (index_t m = 0; m < rows; ++m) {
                const float xi = x.row(m)[i];
                acc[m * 2 * half + j] += lo * xi;
                acc[m * 2 * half + half + j] += hi * xi;
            }
        }
    }
    for (index_t m = 0; m < rows; ++m) {
        const float* xr = x.row(m);
        const float* ae = acc + m * 2 * half;
        const float* ao = ae + half;
        float* yr = y.row(m) + o0;
        for (index_t j = 0; j < pairs; ++j) {
            yr[2 * j] = accumulate ? yr[2 * j] + ae[j] : ae[j];
            yr[2 * j + 1] = accumulate ? yr[2 * j + 1] + ao[j] : ao[j];
        }
        if (n % 2) {  // an odd last column
            float s = 0.0f;
            for (index_t i = 0; i < w.rows; ++i) s += xr[i] * to_float(w.data[i * w.ld + o1 - 1]);
            yr[n - 1] = accumulate ? yr[n - 1] + s : s;
        }
    }
}

}  // namespace cpx::cpu::avx512

#endif

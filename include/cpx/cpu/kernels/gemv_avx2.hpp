#pragma once
// Few-row products (decode's hot loop) on AVX2 + FMA, for CPUs without AVX-512
// (cpu/kernels/gemv_avx512.hpp has the AVX-512 kernels): fp32 sums of fp32 or bf16
// weights, 1 to gemv_max_rows input rows, nn.Linear ([out, in]) and input-major layouts.
//
// A chunk is 16 inputs: two 8-lane vectors of fp32 weights, or one 256-bit load of
// bf16 weights (8 words of two values) widened exactly with one instruction per half
// (`word << 16` is the even value, `word & 0xffff0000` the odd one, cpu/kernels/
// bf16_widen.hpp's rule), multiplied by the input chunk split by parity once per call
// (split_row_by_parity). The portable loop widened every weight once per input row
// and vectorised the widening poorly: on AMD Zen 3 a 187M batch-1 decode step on bf16
// weights read at about half the machine's read rate.
//
// - One or two rows: the weight rows read as four streams (gemv_streams_nt), one row of
//   each at a time, each chunk loaded and widened once for the input rows.
// - 3 to 16 rows: blocks of four weight rows, the next block's lines fetched meanwhile.
//   bf16 weights: each chunk loaded (and widened) once for a pair of input rows: eight
//   accumulators, the pair's four input vectors held in registers (GCC 12 had folded
//   their loads into every FMA: two loads per FMA pair, more than the core issues; 4 and
//   8 rows on bf16 weights in L3 took 1.3-1.45x as long). fp32 weights (3 or 4 rows; the
//   lanes take 5 on): all the rows against two weight rows at a time, twice per block.
// - From lanes_min_rows rows (5 with fp32 weights, 14 with bf16; batched decode) the
//   sequences sit in the vector lanes, as in the AVX-512 kernels: x transposed once per
//   call into 8 or 16 lanes per input feature, each weight broadcast once for one or two
//   vectors of sequences: no sums across lanes, and fp32 weights without the pairs'
//   second pass over each block.
//
// Input-major weights ([in, out], the routed experts, PRISM's u): the input dimension
// is cut into contiguous blocks of weight rows, each read whole, four rows a quarter of
// the block apart at a time (four streams), into partial sums of its own
// (gemv_rows_nn_streamed), widening 8 bf16 weights with one zero-extension and a shift;
// the portable loop's four-row passes over a column panel per thread were slower (Zen 3,
// the 187M expert's products: docs/BF16.md).
//
// The same fp32 products as the portable kernels, summed in another order.
// Compiled for AVX2 by function attribute on every x86 build; linear.hpp calls them
// where vector_isa() is avx2.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86
#define CPX_HAVE_GEMV_AVX2 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include <algorithm>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/bf16_widen.hpp"
#include "cpx/cpu/kernels/prefetch_lines.hpp"  // LineStream
#include "cpx/cpu/kernels/sequence_lanes.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX2

namespace cpx::cpu::avx2 {

/// Inputs per chunk.
inline constexpr index_t chunk = 16;

/// Each whole chunk of x's row as its 8 even inputs, then its 8 odd ones (the tail past
/// the last chunk as is): the input of the bf16 kernels.
CPX_TARGET_AVX2 inline void split_row_by_parity(const float* x, index_t in, float* xs) {
    const index_t body = in / chunk * chunk;
    const __m256i evens = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (index_t i = 0; i < body; i += chunk) {
        // Within each 8: evens to the low half, odds to the high half; then swap the middle quarters.
        const __m256 a = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + i), evens);
        const __m256 b = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + i + 8), evens);
        _mm256_storeu_ps(xs + i, _mm256_permute2f128_ps(a, b, 0x20));
        _mm256_storeu_ps(xs + i + 8, _mm256_permute2f128_ps(a, b, 0x31));
    }
    for (index_t i = body; i < in; ++i) xs[i] = x[i];
}

namespace detail {
CPX_TARGET_AVX2 inline float sum_lanes(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/// The S weight rows `r` against R (1 to 4) input rows `x`: one accumulator per weight row and
/// input row, each chunk's two halves in turn (bf16: its even inputs, then its odd ones); the
/// sums of the first `stored` weight rows go to columns `o` of the rows `y`. The one sum of every
/// few-row nn.Linear kernel below the lane kernels, so a row's result does not depend on how many
/// rows share the product. The first H input rows' chunks are held in registers; the others are
/// read by the FMAs themselves (four rows against two weight rows hold one: of H = 0 to 4, H = 1
/// was the fastest on Zen 4 at the AVX2 level and H = 2 the slowest, 1.25-1.3x its time on the
/// [768 -> 768] and [768 -> 32000] products). `next`: lines to fetch meanwhile, a step per chunk.
template <class W, int R, int S, int H = R>
CPX_TARGET_AVX2 CPX_FORCE_INLINE void rows_against_few(const float* const (&x)[R], const W* const (&r)[S],
                                                       index_t body, index_t in, float* const (&y)[R],
                                                       const index_t (&o)[S], int stored, bool accumulate,
                                                       LineStream<true>& next) {
    static_assert(R >= 1 && R <= 4 && H >= 0 && H <= R, "1 to 4 input rows, at most R of them held");
    __m256 a[S][R];
#pragma GCC unroll 4
    for (int j = 0; j < S; ++j)
#pragma GCC unroll 4
        for (int g = 0; g < R; ++g) a[j][g] = _mm256_setzero_ps();
    for (index_t i = 0; i < body; i += chunk) {
        next.step();
        __m256 xe[R], xo[R];
#pragma GCC unroll 4
        for (int g = 0; g < R; ++g) {
            xe[g] = _mm256_loadu_ps(x[g] + i);
            xo[g] = _mm256_loadu_ps(x[g] + i + 8);
            // In registers for the S weight rows: GCC 12 otherwise folds the loads into each FMA,
            // two loads per FMA pair, more than the core issues.
            if (g < H) asm("" : "+x"(xe[g]), "+x"(xo[g]));
        }
#pragma GCC unroll 4
        for (int j = 0; j < S; ++j) {
            __m256 lo, hi;
            load16_widened(r[j] + i, lo, hi);  // bf16: by parity, as split_row_by_parity
#pragma GCC unroll 4
            for (int g = 0; g < R; ++g) a[j][g] = _mm256_fmadd_ps(hi, xo[g], _mm256_fmadd_ps(lo, xe[g], a[j][g]));
        }
    }
    for (int g = 0; g < R; ++g)
        for (int j = 0; j < stored; ++j) {
            float sum = sum_lanes(a[j][g]);
            for (index_t i = body; i < in; ++i) sum += x[g][i] * to_float(r[j][i]);
            float& out = y[g][o[j]];
            out = accumulate ? out + sum : sum;
        }
}

template <class W, int R>
CPX_TARGET_AVX2 void gemv_streams_nt(const StridedMatrix<const float>& xs, const StridedMatrix<const W>& w,
                                     const StridedMatrix<float>& y, index_t o0, index_t o1, bool accumulate) {
    const index_t in = w.cols, body = in / chunk * chunk;
    const index_t q = (o1 - o0) / 4;  // rows per stream
    const float* x[R];
    float* yr[R];
    for (int g = 0; g < R; ++g) x[g] = xs.row(g), yr[g] = y.row(g);
    LineStream<true> none;  // the hardware follows the four streams
    for (index_t k = 0; k < q; ++k) {
        const index_t o[4] = {o0 + k, o0 + q + k, o0 + 2 * q + k, o0 + 3 * q + k};
        const W* const r[4] = {w.data + o[0] * w.ld, w.data + o[1] * w.ld, w.data + o[2] * w.ld, w.data + o[3] * w.ld};
        rows_against_few<W, R, 4>(x, r, body, in, yr, o, 4, accumulate, none);
    }
    for (index_t row = o0 + 4 * q; row < o1; ++row) {  // the last (o1 - o0) % 4 rows, one at a time
        const index_t o[1] = {row};
        const W* const r[1] = {w.data + row * w.ld};
        rows_against_few<W, R, 1>(x, r, body, in, yr, o, 1, accumulate, none);
    }
}
}  // namespace detail

/// y[m, o] (=|+=) sum_i x[m, i] w[o, i] for one or two input rows (bf16 weights: split by
/// split_row_by_parity; fp32: as is) and o in [o0, o1), the rows of weights read as four
/// streams: [o0, o1) cut into four equal runs of rows, one row of each run at a time. Each
/// weight is used once (twice for two input rows), so the product is a read of the weights,
/// and on Zen 3 one ascending stream per thread was read at ~0.7 of the rate of several:
/// alternated in one process, bf16 weights from memory, one input row, [1536 -> 1280] one
/// thread 11.4-13.5 -> 16.0-18.9 GB/s, two threads 18.9-23.3 -> 27.3-31.8; [768 -> 32000]
/// 13.4-13.7 -> 18.3-20.4 and 23.5-23.8 -> 23.4-32.9 (docs/BF16.md); two input rows 1.2-1.3x
/// (against the blocks of four consecutive rows with the next block fetched, gemv_rows_nt). fp32
/// weights, one row, against Eigen's GEMV that took them before: 1.1-1.3x. Both kernels sum through
/// detail::rows_against_few, so a row's result does not depend on how many rows came with it
/// (below lanes_min_rows).
template <class W>
CPX_TARGET_AVX2 void gemv_streams_nt(const StridedMatrix<const float>& xs, const StridedMatrix<const W>& w,
                                     const StridedMatrix<float>& y, index_t o0, index_t o1, bool accumulate) {
    static_assert(std::is_same_v<W, float> || std::is_same_v<W, bf16>, "fp32 or bf16 weights");
    if (xs.rows == 1) detail::gemv_streams_nt<W, 1>(xs, w, y, o0, o1, accumulate);
    else detail::gemv_streams_nt<W, 2>(xs, w, y, o0, o1, accumulate);
}

/// y[m, o] (=|+=) sum_i x[m, i] w[o, i] for the rows of xs (bf16 weights: each row split by
/// split_row_by_parity; fp32: as is) and o in [o0, o1): blocks of four weight rows against
/// pairs of input rows (a short last block repeats its last row and stores only its own sums);
/// fp32 weights take three or four input rows at once, against the block's first two weight
/// rows and then its last two (6 or 8 sums), so a group reads each weight once rather than once
/// per pair of rows. Zen 4 at the AVX2 level, fp32 weights from memory, against the pairs (the
/// same bits), alternated: 3 rows one thread [768 -> 768] 219-265 -> 166-169 us, [768 -> 32000]
/// 8.9-11.1 -> 5.8-7.0 ms, two threads 112-122 -> 87-96 us and 4.6-4.8 -> 3.6-4.4 ms; 4 rows one
/// thread 217-265 -> 170-197 us and 7.9-9.0 -> 6.5-7.7 ms, two threads 115-125 -> 102-109 us and
/// 4.6-5.3 -> 4.6-4.7 ms; [2048 -> 768] and [1061 -> 1027] level.
/// The first pass reads a block from memory and the others from L1, which the hardware
/// prefetchers do not run ahead of: so the passes fetch the next block's lines while they compute
/// (pass p of `passes` its share), and its stream overlaps this block's arithmetic. The last block
/// of [o0, o1) fetches the first of the rows after o1 (the caller's next panel, usually this
/// thread's next call): linear() cuts few-row products into panels of at most 65,536 / inputs
/// rows (80 at 768 inputs, 32 at 1,536), and each began with a block no one had fetched. Zen 3,
/// 4 rows of bf16 weights from memory, alternated in one process: 0.92-1.00x the time on
/// [1536 -> 1280], [768 -> 768], [768 -> 1024] and [768 -> 32000].
template <class W>
CPX_TARGET_AVX2 void gemv_rows_nt(const StridedMatrix<const float>& xs, const StridedMatrix<const W>& w,
                                  const StridedMatrix<float>& y, index_t o0, index_t o1, bool accumulate) {
    static_assert(std::is_same_v<W, float> || std::is_same_v<W, bf16>, "fp32 or bf16 weights");
    const index_t in = w.cols, body = in / chunk * chunk, steps = body / chunk;
    const index_t row_bytes = in * static_cast<index_t>(sizeof(W));
    // fp32 weights: groups of up to four input rows, three or four of them reading each block in
    // two passes of two weight rows; bf16 weights: pairs against all four (each chunk widened
    // once per pair; in 4 x 2 passes their sums spilled, 1.1-1.3x the time on Zen 3).
    constexpr index_t group_max = std::is_same_v<W, float> ? 4 : 2;
    const auto group_at = [&](index_t m0) { return std::min(group_max, xs.rows - m0); };
    const auto passes_of = [](index_t g) -> index_t { return g >= 3 ? 2 : 1; };
    index_t passes = 0;  // over each block: the next block's fetch is shared among them
    for (index_t m0 = 0; m0 < xs.rows; m0 += group_at(m0)) passes += passes_of(group_at(m0));
    // The next block is one range of memory where the rows are packed (a strided view's gaps are
    // not fetched: it is left to the hardware).
    const bool contiguous = w.ld == in;
    for (index_t o = o0; o < o1; o += 4) {
        const int here = static_cast<int>(o1 - o < 4 ? o1 - o : 4);
        const index_t left = w.rows - (o + 4);  // rows of the next block, past o1 too
        const int next_rows = left <= 0 ? 0 : left < 4 ? static_cast<int>(left) : 4;
        const index_t at[4] = {o, o + 1, o + 2, o + 3};  // a short block stores its own rows only
        const W* const r[4] = {w.data + o * w.ld, w.data + (o + std::min(1, here - 1)) * w.ld,
                               w.data + (o + std::min(2, here - 1)) * w.ld,
                               w.data + (o + std::min(3, here - 1)) * w.ld};
        index_t pass = 0;
        const auto fetch_share = [&] {  // pass `pass`'s share of the next block, then the next pass
            LineStream<true> next;
            if (contiguous && next_rows > 0 && steps > 0) {
                const index_t lines = next_rows * row_bytes / 64;
                const char* block = reinterpret_cast<const char*>(w.data + (o + 4) * w.ld);
                next.next = block + 64 * (pass * lines / passes);
                next.end = block + 64 * ((pass + 1) * lines / passes);
                next.per_step = static_cast<int>(((next.end - next.next) / 64 + steps - 1) / steps);
            }
            ++pass;
            return next;
        };
        for (index_t m0 = 0, g = 0; m0 < xs.rows; m0 += g) {
            g = group_at(m0);
            if constexpr (std::is_same_v<W, float>) {
                if (g >= 3) {  // weight rows 0-1, then 2-3 (a short block skips a pass with nothing to store)
                    const W* const r01[2] = {r[0], r[1]};
                    const W* const r23[2] = {r[2], r[3]};
                    const index_t at01[2] = {at[0], at[1]}, at23[2] = {at[2], at[3]};
                    const int stored01 = std::min(here, 2), stored23 = here - 2;
                    if (g == 4) {
                        const float* const x[4] = {xs.row(m0), xs.row(m0 + 1), xs.row(m0 + 2), xs.row(m0 + 3)};
                        float* const yr[4] = {y.row(m0), y.row(m0 + 1), y.row(m0 + 2), y.row(m0 + 3)};
                        LineStream<true> next = fetch_share();
                        detail::rows_against_few<W, 4, 2, 1>(x, r01, body, in, yr, at01, stored01, accumulate, next);
                        next = fetch_share();
                        if (stored23 > 0)
                            detail::rows_against_few<W, 4, 2, 1>(x, r23, body, in, yr, at23, stored23, accumulate,
                                                                 next);
                    } else {
                        const float* const x[3] = {xs.row(m0), xs.row(m0 + 1), xs.row(m0 + 2)};
                        float* const yr[3] = {y.row(m0), y.row(m0 + 1), y.row(m0 + 2)};
                        LineStream<true> next = fetch_share();
                        detail::rows_against_few<W, 3, 2>(x, r01, body, in, yr, at01, stored01, accumulate, next);
                        next = fetch_share();
                        if (stored23 > 0)
                            detail::rows_against_few<W, 3, 2>(x, r23, body, in, yr, at23, stored23, accumulate, next);
                    }
                    continue;
                }
            }
            LineStream<true> next = fetch_share();
            if (g == 2) {
                const float* const x[2] = {xs.row(m0), xs.row(m0 + 1)};
                float* const yr[2] = {y.row(m0), y.row(m0 + 1)};
                detail::rows_against_few<W, 2, 4>(x, r, body, in, yr, at, here, accumulate, next);
            } else {  // the last of an odd number of rows
                const float* const x[1] = {xs.row(m0)};
                float* const yr[1] = {y.row(m0)};
                detail::rows_against_few<W, 1, 4>(x, r, body, in, yr, at, here, accumulate, next);
            }
        }
    }
}

/// Rows from which nn.Linear products put the sequences in the vector lanes (gemv_lanes_nt)
/// rather than in the pairs of gemv_rows_nt, which widen each bf16 chunk once per pair of rows
/// and reduce across lanes at the end. Measured on AMD Zen 3, two threads, the 187M qkv_mu
/// (1280 x 1536) and o_proj (768 x 768) products from memory, alternated binaries: fp32 weights
/// 0.8-0.95x the pairs' time at 5 rows, 0.75-0.85x at 8, 0.55-0.6x at 16; bf16 weights 1.2-1.3x
/// at 10 and 12 rows, level at 14-16 on qkv_mu and o_proj, 0.9-0.95x on the head (32000 x 768).
template <class W>
inline constexpr index_t lanes_min_rows = std::is_same_v<W, float> ? 5 : 14;
/// Lanes per input feature of the lane kernels: 8 (one vector) up to eight rows, else 16.
constexpr int lane_width(index_t rows) { return rows <= 8 ? 8 : 16; }
/// Floats of the transposed input (lanes_transpose) for `in` input features.
constexpr index_t lanes_scratch(index_t in) { return 16 * in; }

/// xt[L i + m] = x[m, i] for the rows of x (at most L = lane_width(x.rows)), zero in the other
/// lanes: the input of gemv_lanes_nt. Transposes features [i0, i1).
inline void lanes_transpose(const StridedMatrix<const float>& x, float* xt, index_t i0, index_t i1) {
    transpose_to_lanes(x, xt, lane_width(x.rows), i0, i1);
}

namespace detail {
/// dst[r] = the 64-byte line from input i of bf16 row r, widened: dst[r][16 c + j] input
/// i + 16 c + 2 j (c = 0, 1; j < 8), dst[r][16 c + 8 + j] input i + 16 c + 2 j + 1.
template <int R>
CPX_TARGET_AVX2 CPX_FORCE_INLINE void widen_lines(const bf16* const* rows, index_t i, float (*dst)[32]) {
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < 2; ++c) {
            const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&rows[r][i + 16 * c].bits));
            _mm256_store_ps(dst[r] + 16 * c, bf16_low_halves(words));
            _mm256_store_ps(dst[r] + 16 * c + 8, bf16_high_halves(words));
        }
}

/// One input feature of the lane kernels: its V vectors of sequences (x) in registers, times
/// weight k of each of the R rows `w` broadcast, into acc0 (and acc1 for V = 2).
template <int V, int R>
CPX_TARGET_AVX2 CPX_FORCE_INLINE void lanes_input(const float* x, const float* const* w, int k, __m256* acc0,
                                                  __m256* acc1) {
    __m256 x0 = _mm256_load_ps(x), x1 = V == 2 ? _mm256_load_ps(x + 8) : x0;
    // In registers for the R FMAs: GCC otherwise folds the loads into each of them.
    asm("" : "+x"(x0), "+x"(x1));
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
        const __m256 bv = _mm256_broadcast_ss(w[r] + k);
        acc0[r] = _mm256_fmadd_ps(bv, x0, acc0[r]);
        if constexpr (V == 2) acc1[r] = _mm256_fmadd_ps(bv, x1, acc1[r]);
    }
}

/// R weight rows from o (fewer at the end: the last row repeats, unstored) against every lane
/// of xt (8 V lanes per input); adds or writes the rows of y. Each weight is broadcast once
/// and multiplies V vectors of sequences, so the arithmetic is V FMAs per weight whatever the
/// rows, with no sums across lanes. bf16 weights: each row's next 64-byte line is widened
/// into an L1 buffer (even inputs, then odd, per 16) while the current one computes, so
/// every broadcast reads fp32 from memory. The next block's rows are fetched meanwhile, past the
/// caller's panel too (w's last row stands in for rows past the matrix).
template <class W, int V, int R>
CPX_TARGET_AVX2 void gemv_lanes_block(const float* xt, index_t in, const StridedMatrix<const W>& w, index_t o,
                                      int rows_here, const StridedMatrix<float>& y, bool accumulate) {
    constexpr int L = 8 * V;
    const W* wr[R];
    const W* next[R];
    for (int r = 0; r < R; ++r) {
        wr[r] = w.data + (o + std::min(r, rows_here - 1)) * w.ld;
        next[r] = w.data + std::min<index_t>(o + R + r, w.rows - 1) * w.ld;
    }
    // Two named arrays, not one [R][V]: GCC keeps these in registers.
    __m256 acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    constexpr index_t step = 64 / static_cast<index_t>(sizeof(W));  // inputs per line of a weight row
    const index_t body = in / step * step;
    // bf16: two buffers of widened lines (widen_lines' order).
    [[maybe_unused]] alignas(32) float widened[2][R][32];
    if constexpr (std::is_same_v<W, bf16>)
        if (body > 0) widen_lines<R>(wr, 0, widened[0]);
    for (index_t i = 0; i < body; i += step) {
        for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(next[r] + i), _MM_HINT_T1);
        if constexpr (std::is_same_v<W, float>) {
            // Each row through its own pointer: a short last block repeats its last row.
            const float* wi[R];
            for (int r = 0; r < R; ++r) wi[r] = wr[r] + i;
#pragma GCC unroll 16
            for (int k = 0; k < 16; ++k) lanes_input<V, R>(xt + L * (i + k), wi, k, acc0, acc1);
        } else {
            const int b = static_cast<int>((i / step) & 1);
            if (i + step < body) widen_lines<R>(wr, i + step, widened[b ^ 1]);
            // The buffer's address laundered: the broadcasts below stay loads from it (GCC otherwise turns
            // them into shuffles of the widened registers), and the accumulators stay in registers.
            const float* line = widened[b][0];
            asm("" : "+r"(line));
            const float* rows[R];
            for (int r = 0; r < R; ++r) rows[r] = line + 32 * r;
#pragma GCC unroll 32
            for (int k = 0; k < 32; ++k) {
                const int f = 16 * (k / 16) + 2 * (k % 8) + (k % 16) / 8;  // buffer slot k's input
                lanes_input<V, R>(xt + L * (i + f), rows, k, acc0, acc1);
            }
        }
    }
    for (index_t i = body; i < in; ++i)
        for (int r = 0; r < R; ++r) {
            const __m256 bv = _mm256_set1_ps(to_float(wr[r][i]));
            acc0[r] = _mm256_fmadd_ps(bv, _mm256_load_ps(xt + L * i), acc0[r]);
            if constexpr (V == 2) acc1[r] = _mm256_fmadd_ps(bv, _mm256_load_ps(xt + L * i + 8), acc1[r]);
        }
    alignas(32) float sums[R][L];
    for (int r = 0; r < R; ++r) {
        _mm256_store_ps(sums[r], acc0[r]);
        if constexpr (V == 2) _mm256_store_ps(sums[r] + 8, acc1[r]);
    }
    for (index_t m = 0; m < y.rows; ++m) {
        float* yr = y.row(m) + o;
        for (int r = 0; r < rows_here; ++r) yr[r] = accumulate ? yr[r] + sums[r][m] : sums[r][m];
    }
}
}  // namespace detail

/// y[m, o] (=|+=) sum_i x[m, i] w[o, i] for o in [o0, o1), with x given as lanes_transpose made
/// it (xt, 32-byte aligned) and y's rows those of x (at most 16); w: [out, in] fp32 or bf16 rows.
template <class W>
CPX_TARGET_AVX2 void gemv_lanes_nt(const float* xt, index_t in, const StridedMatrix<const W>& w,
                                   const StridedMatrix<float>& y, index_t o0, index_t o1, bool accumulate) {
    static_assert(std::is_same_v<W, float> || std::is_same_v<W, bf16>, "fp32 or bf16 weights");
    // Weight rows per block: eight with one vector of sequences (8 accumulators), four with two
    // (8 too); Zen 3, 16 rows: four took 0.91-0.95x the time of five, 0.82-0.89x that of six.
    // The last block fetches the first rows after o1, the next panel (as gemv_rows_nt's does):
    // Zen 3, alternated in one process, 8 rows of fp32 weights 0.93-0.99x the time, 16 of bf16
    // 0.96-1.00x (187M qkv_mu, o_proj and head shapes, one and two threads).
    if (lane_width(y.rows) == 8) {
        constexpr int R = 8;
        for (index_t o = o0; o < o1; o += R)
            detail::gemv_lanes_block<W, 1, R>(xt, in, w, o, static_cast<int>(std::min<index_t>(R, o1 - o)), y,
                                             accumulate);
    } else {
        constexpr int R = 4;
        for (index_t o = o0; o < o1; o += R)
            detail::gemv_lanes_block<W, 2, R>(xt, in, w, o, static_cast<int>(std::min<index_t>(R, o1 - o)), y,
                                             accumulate);
    }
}

/// Columns of an input-major product's step: 16, as two vectors (load16_widened): fp32 weights in
/// order, bf16 weights widened by parity, whose partial sums keep the 8 even columns of the
/// step, then its 8 odd ones (nn_slot).
inline constexpr index_t nn_span = 16;
/// Where column j of `out` columns sits in a row of rows_nn_part's partial sums.
template <class W>
constexpr index_t nn_slot(index_t j, index_t out) {
    if constexpr (std::is_same_v<W, float>) {
        return j;
    } else {
        return j >= out / 16 * 16 ? j : (j & ~index_t{15}) + ((j & 1) << 3) + ((j & 15) >> 1);
    }
}

namespace detail {
/// One weight row's span times its input feature of one input row (xv) into the span's two sums.
/// (Functions, not lambdas: a lambda does not take its caller's target attribute under clang.)
template <class W>
CPX_TARGET_AVX2 CPX_FORCE_INLINE void span_into(const W* w, __m256 xv, __m256& s0, __m256& s1) {
    __m256 v0, v1;
    load16_widened(w, v0, v1);
    s0 = _mm256_fmadd_ps(xv, v0, s0);
    s1 = _mm256_fmadd_ps(xv, v1, s1);
}
/// The same for two input rows (xv, yv) at once: four chains.
template <class W>
CPX_TARGET_AVX2 CPX_FORCE_INLINE void span_into_pair(const W* w, __m256 xv, __m256 yv, __m256& s0, __m256& t0,
                                                     __m256& s1, __m256& t1) {
    __m256 v0, v1;
    load16_widened(w, v0, v1);
    s0 = _mm256_fmadd_ps(xv, v0, s0);
    t0 = _mm256_fmadd_ps(yv, v0, t0);
    s1 = _mm256_fmadd_ps(xv, v1, s1);
    t1 = _mm256_fmadd_ps(yv, v1, t1);
}

/// part[m, :] += sum over weight rows [i0, i1) of x[m, i] w[i, :] for the rows of x (part: rows
/// of `stride` floats). [i0, i1) is cut into four quarters and read as four streams, one row of
/// each at a time: each widened chunk of the four rows is used for two input rows at once (the
/// widening had been repeated per row: 16 rows of the 187M expert's products, two threads, Zen
/// 3, bf16 2.5-3.2 -> 3.2-3.9 GB/s, fp32 5.7-6.4 -> 6.4-9.0), the rows left over one at a time.
/// Every input row's sums take the same order, so its result does not depend on how many rows
/// come with it.
///
/// The streams: four consecutive rows at a time, four streams a row apart that restart every
/// four rows, had read one input row at 0.42-0.63 of the machine's read rate and one row at a time
/// (one stream) at 0.72-0.80 (the 187M expert's down projection [512 -> 768], bf16, two threads,
/// alternated binaries); for several input rows the first pair had fetched the block two blocks
/// on into L1 in software (1.1-1.5x over the hardware prefetchers alone). The quarters beat both,
/// as in gemv_streams_nt, with no software fetch: alternated in one process, from memory, one input
/// row bf16 [768 -> 2048] one thread 12.6 -> 19.9 GB/s, two threads 15.5 -> 19.0, [512 -> 768]
/// 12.1 -> 20.9 and 18.4 -> 27.2, fp32 1.3-1.6x; 2-8 rows bf16 1.0-1.4x, fp32 1.1-1.3x, 16 rows
/// 1.0-1.08x (bound by the arithmetic and the partial sums' loads and stores, which stay in L1).
///
/// A step takes 16 columns as two vectors (load16_widened; bf16 by parity, one instruction per
/// vector instead of a zero-extension and a shift per 8), so a pair of input rows runs four
/// chains of four FMAs at once. Steps of 8 columns (two chains) were bound by the chains'
/// latency, at about half the FMA peak: the 187M expert's products (Zen 3, two threads, best of
/// five alternations) bf16 at 16 rows 0.72-0.75x the time with the wider steps (gate_up, down
/// 0.78x), at 4 rows 0.82-0.86x; fp32 0.90-1.02x at 16 rows, 0.85-0.86x at 4.
template <class W>
CPX_TARGET_AVX2 void rows_nn_part(const StridedMatrix<const float>& x, const StridedMatrix<const W>& w, index_t i0,
                                  index_t i1, float* part, index_t stride) {
    const index_t n = w.cols, body = n / nn_span * nn_span;
    const index_t q = (i1 - i0) / 4;  // rows per stream
    for (index_t k = 0; k < q; ++k) {
        const index_t r0 = i0 + k, r1 = r0 + q, r2 = r1 + q, r3 = r2 + q;
        const W* w0 = w.data + r0 * w.ld;
        const W* w1 = w.data + r1 * w.ld;
        const W* w2 = w.data + r2 * w.ld;
        const W* w3 = w.data + r3 * w.ld;
        index_t m = 0;
        for (; m + 2 <= x.rows; m += 2) {  // two input rows per widened weight chunk
            const float* xr = x.row(m);
            const float* xq = x.row(m + 1);
            const __m256 x0 = _mm256_set1_ps(xr[r0]), x1 = _mm256_set1_ps(xr[r1]), x2 = _mm256_set1_ps(xr[r2]),
                         x3 = _mm256_set1_ps(xr[r3]);
            const __m256 y0 = _mm256_set1_ps(xq[r0]), y1 = _mm256_set1_ps(xq[r1]), y2 = _mm256_set1_ps(xq[r2]),
                         y3 = _mm256_set1_ps(xq[r3]);
            float* a = part + m * stride;
            float* b = a + stride;
            index_t j = 0;
            for (; j < body; j += nn_span) {  // four chains of four FMAs: two input rows, two halves of the span
                __m256 s0 = _mm256_load_ps(a + j), t0 = _mm256_load_ps(b + j);
                __m256 s1 = _mm256_load_ps(a + j + 8), t1 = _mm256_load_ps(b + j + 8);
                span_into_pair(w0 + j, x0, y0, s0, t0, s1, t1);
                span_into_pair(w1 + j, x1, y1, s0, t0, s1, t1);
                span_into_pair(w2 + j, x2, y2, s0, t0, s1, t1);
                span_into_pair(w3 + j, x3, y3, s0, t0, s1, t1);
                _mm256_store_ps(a + j, s0);
                _mm256_store_ps(b + j, t0);
                _mm256_store_ps(a + j + 8, s1);
                _mm256_store_ps(b + j + 8, t1);
            }
            for (; j < n; ++j) {
                a[j] += xr[r0] * to_float(w0[j]) + xr[r1] * to_float(w1[j]) + xr[r2] * to_float(w2[j]) +
                        xr[r3] * to_float(w3[j]);
                b[j] += xq[r0] * to_float(w0[j]) + xq[r1] * to_float(w1[j]) + xq[r2] * to_float(w2[j]) +
                        xq[r3] * to_float(w3[j]);
            }
        }
        for (; m < x.rows; ++m) {
            const float* xr = x.row(m);
            const __m256 x0 = _mm256_set1_ps(xr[r0]), x1 = _mm256_set1_ps(xr[r1]), x2 = _mm256_set1_ps(xr[r2]),
                         x3 = _mm256_set1_ps(xr[r3]);
            float* a = part + m * stride;
            index_t j = 0;
            for (; j < body; j += nn_span) {
                __m256 s0 = _mm256_load_ps(a + j), s1 = _mm256_load_ps(a + j + 8);
                span_into(w0 + j, x0, s0, s1);
                span_into(w1 + j, x1, s0, s1);
                span_into(w2 + j, x2, s0, s1);
                span_into(w3 + j, x3, s0, s1);
                _mm256_store_ps(a + j, s0);
                _mm256_store_ps(a + j + 8, s1);
            }
            for (; j < n; ++j)
                a[j] += xr[r0] * to_float(w0[j]) + xr[r1] * to_float(w1[j]) + xr[r2] * to_float(w2[j]) +
                        xr[r3] * to_float(w3[j]);
        }
    }
    for (index_t i = i0 + 4 * q; i < i1; ++i) {  // the rows left over
        const W* wr = w.data + i * w.ld;
        for (index_t m = 0; m < x.rows; ++m) {
            const float xi = x.row(m)[i];
            const __m256 xv = _mm256_set1_ps(xi);
            float* a = part + m * stride;
            index_t j = 0;
            for (; j < body; j += nn_span) {
                __m256 v0, v1;
                load16_widened(wr + j, v0, v1);
                _mm256_store_ps(a + j, _mm256_fmadd_ps(xv, v0, _mm256_load_ps(a + j)));
                _mm256_store_ps(a + j + 8, _mm256_fmadd_ps(xv, v1, _mm256_load_ps(a + j + 8)));
            }
            for (; j < n; ++j) a[j] += xi * to_float(wr[j]);
        }
    }
}
}  // namespace detail

/// Floats of one row's partial sums for `out` outputs (whole 64-byte lines).
constexpr index_t nn_stride(index_t out) { return (out + 15) / 16 * 16; }
/// Chunks of the input dimension: one contiguous block of weight rows each.
constexpr index_t nn_chunks(index_t in) { return in < 256 ? 1 : in < 1024 ? 2 : 4; }
/// Floats of scratch gemv_rows_nn_streamed needs for up to max_rows rows.
constexpr index_t nn_scratch(index_t in, index_t out, index_t max_rows) {
    return nn_chunks(in) * max_rows * nn_stride(out);
}

/// y (=|+=) x w for up to 16 input rows (w: [in, out] fp32 or bf16 rows, each row whole), with
/// `parts` nn_scratch(in, out, x.rows) floats, 32-byte aligned. The input dimension is cut into
/// nn_chunks(in) contiguous blocks of weight rows, each summed into its own partial sums (a
/// thread reads one ascending stream), then the partial sums are added in order, so the result
/// does not depend on the thread count.
template <class W>
CPX_TARGET_AVX2 void gemv_rows_nn_streamed(const StridedMatrix<const float>& x, const StridedMatrix<const W>& w,
                                           const StridedMatrix<float>& y, bool accumulate, float* parts) {
    static_assert(std::is_same_v<W, float> || std::is_same_v<W, bf16>, "fp32 or bf16 weights");
    const index_t in = w.rows, out = w.cols, m = x.rows, chunks = nn_chunks(in), stride = nn_stride(out);
    parallel_team(chunks > 1 && m * in * out > 32768 ? max_threads() : 1, [&](int t, int team) {
        for_share(chunks, t, team, [&](index_t c) {
            float* const part = parts + c * m * stride;
            for (index_t j = 0; j < m * stride; ++j) part[j] = 0.0f;
            detail::rows_nn_part<W>(x, w, in * c / chunks, in * (c + 1) / chunks, part, stride);
        });
        team_barrier(team);
        for_share(m, t, team, [&](index_t r) {
            float* yr = y.row(r);
            for (index_t j = 0; j < out; ++j) {
                const index_t at = nn_slot<W>(j, out);
                float sum = parts[r * stride + at];
                for (index_t c = 1; c < chunks; ++c) sum += parts[(c * m + r) * stride + at];
                yr[j] = accumulate ? yr[j] + sum : sum;
            }
        });
    });
}

}  // namespace cpx::cpu::avx2

#endif

#pragma once
// Few-row products (decode's hot loop) on AVX-512, fp32 sums of fp32 or bf16 weights.
//
// nn.Linear weights ([out, in]):
// - From lanes_min_rows rows (6 with fp32 weights, 16 with bf16; batched
//   decode) the sequences sit in the vector lanes: x is transposed once per
//   call into 8 lanes (up to 8 fp32-weight sequences) or 16 per input feature,
//   and a block of eight weight rows runs eight accumulators of those lanes, one
//   FMA per weight with the weight broadcast from memory, and no horizontal
//   sums. bf16 weights are widened a line at a time into an L1 buffer first:
//   widening each word in registers before its two FMAs (a broadcast, a shift
//   and an and per two FMAs) ran at 55-60% of the FMA peak on AMD Zen 4, the
//   buffer at 80-86% (16 rows, two threads, with the prefetch below).
// - One input row on bf16 weights: dot products, one weight row after the
//   other, against x split by parity once per call (below). Reading the four
//   rows of a block side by side, as the few-row kernel does, left one core at
//   62-72% of the read rate; one ascending stream per thread took single-row
//   products 17-25% less time on one core (187M qkv_mu 0.148-0.153 -> 0.114-0.115
//   ms, 384M 0.223-0.231 -> 0.182-0.184), and batch-1 decode steps on bf16
//   weights with fp32 arithmetic 11-21% (187M, 128-2048 cached tokens, one
//   and two threads) and 15-35% (384M); Zen 5, old and new binaries
//   alternated. Several input rows read that way lost to the blocks below
//   (the batch-8 step 15-19% slower). One row on fp32 weights is read the same
//   way (no split needed) instead of by Eigen's GEMV: single-row products 5-22%
//   less time on one core (bench_linear, incl. the 98 MB output head), level
//   to 12% less on two.
// - Two input rows on bf16 weights, on CPUs that fetch nothing ahead: the one-row kernel's
//   single stream with both rows' sums (detail::gemv_two_rows_nt, measured there).
// - Other few-row counts: dot products. A block of four weight rows is loaded (and, for
//   bf16, widened) once per group of up to four input rows, whose
//   accumulators stay in registers. bf16: a 32-bit word holds two neighbouring
//   values, both widened with one instruction each (the high one is
//   `word & 0xffff0000`, the low one `word << 16`), multiplied by the inputs
//   split by parity; widening one value at a time had left the kernel
//   compute-bound at ~55% of the read rate, and widening once per input row
//   made 4 rows cost 1.7x one row (now 1.4x). The inputs are split by parity
//   once per call and held in registers while each weight row of the block is
//   widened and used: the kernel had split them again for every block and,
//   with every row's halves and every input live at once, run out of
//   registers and read each input from L1 four times. One core, weights in
//   L2 (Zen 5): 4 rows 134 -> 170 GFLOP/s, 8 rows 141 -> 190-210, 12 rows
//   132 -> 199. Decode steps from memory did not move with that alone: at 2-4
//   rows the blocks were waiting on memory, which the fetch distance below
//   (rows_nt_block_ahead) addressed.
//
// Input-major weights ([in, out], the routed experts, PRISM's u): the weight's
// rows are read in order into partial sums in memory, one row whole at a
// time for one input row, in bands of eight rows summed in registers for more
// (gemv_rows_nn_streamed, below). The register tiles' loops are unrolled by
// pragma: GCC otherwise kept the accumulators on the stack, storing each on
// every input. The same pragma on the nn.Linear kernels made them slower.
//
// Software prefetch keeps enough reads in flight for one core to approach the
// read rate. The nn.Linear kernel prefetches the next block of four weight
// rows at the offset it is reading, one block ahead in the order the panel is
// read whatever the row length (a fixed 4 KiB along each row fell inside the
// block being read for rows shorter than that: bf16 rows of 1,536 inputs are
// 3 KiB); single-row products on bf16 weights gained 5-16%, fp32 ones were
// level (Zen 5, 2 threads). Tried there without gain: prefetching into L2
// (T1, T2 hints) and blocks of eight weight rows for a single input row.
// On AMD Zen 4 prefetching into L2 (T1) pays where the stream is long: the
// fp32 one-row kernel 4 KiB ahead instead of 1 KiB into L1, the few-row
// nn.Linear blocks (on bf16 weights about 12 KiB ahead, into L1 on Zen 5 only:
// stream_fetch_into_l1); the lane kernel and the experts' bands prefetch the next
// block's (band's) rows at the offset they read, as the few-row blocks do: a
// fixed 1 KiB along each row left the next block's rows but its first
// unfetched, and the lane kernel stalled on them (one core, 16 rows: 64-66
// GFLOP/s, 88-96 with the next block's rows).
// 187M decode steps, 512 cached tokens, alternated binaries: fp32 batch 1
// 15.6-19.6 -> 13.3-16.6 ms on two threads, 24.4-26.7 -> 20.3-21.2 on one;
// batch 4 on bf16 weights (fp32 arithmetic) 17.1-18.3 -> 13.0-13.6 ms, on
// fp32 weights 24.6-28.9 -> 18.1-25.8. The one-row kernels on bf16 weights
// were fastest there with no software prefetch at all; both (the nn.Linear
// row loop, gemv_row_nt, and the experts' row stream) now fetch 4 KiB ahead
// into L1, measured faster on Zen 5 (row_nt_ahead, row_nn_ahead, below) and
// not rechecked on Zen 4.
// The same fp32 products as the portable kernels, summed in another order.
// Compiled for AVX-512 by function attribute on every x86 build; linear.hpp
// calls them where vector_isa() (cpu/runtime/vector_isa.hpp) allows and falls
// back to the portable kernels otherwise.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86
#define CPX_HAVE_GEMV_AVX512 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include <algorithm>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/prefetch_lines.hpp"
#include "cpx/cpu/kernels/bf16_widen.hpp"
#include "cpx/cpu/kernels/sequence_lanes.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX512

namespace cpx::cpu::avx512 {

/// Rows from which nn.Linear products put the sequences in the vector lanes
/// (up to 16: one lane per sequence). The lane kernel costs one FMA per weight
/// whatever the rows (lanes past them idle), the dot-product kernels one per
/// weight and 16 rows plus the sums. Measured on AMD Zen 4, two threads, the
/// 187M products (768-1536 inputs, 768-32000 outputs) from memory, both kernels
/// in one process: fp32 weights take 0.90-0.94x the dot kernel's time in lanes
/// at 6 rows (1.01-1.12x at 5). bf16 weights went to lanes from 14 rows until
/// the dot kernel kept its inputs in registers (gemv_block_nt); one core on
/// AMD Zen 5, weights in L2 or L3, lanes against dot: 0.78x the rate at 12
/// rows, 0.92-0.96x at 14, 0.95-1.0x at 15 and 1.01-1.06x at 16.
template <class W>
inline constexpr index_t lanes_min_rows = std::is_same_v<W, float> ? 6 : 16;
/// Floats of the transposed input (lanes_transpose) for `in` input features.
constexpr index_t lanes_scratch(index_t in) { return 16 * in; }

/// Inputs x[0, 32) as their 16 even ones and their 16 odd ones: the bf16
/// kernels multiply each weight word's low half by the first, its high half by
/// the second.
CPX_TARGET_AVX512 CPX_FORCE_INLINE void split_by_parity(const float* x, __m512& even, __m512& odd) {
    const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
    const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    even = _mm512_permutex2var_ps(x0, evens, x1);
    odd = _mm512_permutex2var_ps(x0, odds, x1);
}

namespace detail {
/// Calls block(std::integral_constant<int, G>{}, m0) over the rows in groups of
/// four, then once for the remaining rows: the register-blocked kernels' row schedule.
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

/// G input rows from m0 against four weight rows wr (fp32 or bf16; a short last
/// block repeats its last row, and only rows_here sums are stored): each chunk
/// of the weights is loaded (bf16: and widened) once for all G rows, G x 4
/// accumulators. A chunk is 16 fp32 inputs, or 32 bf16 ones (16 words of two)
/// against the inputs split by parity (x's bf16-weight rows as split_row_by_parity
/// made them), even and odd summed into one accumulator.
/// pf: rows to prefetch at the offsets read, into L2 for fp32 weights and, for bf16 ones, as
/// BlockFetch says (gemv_rows_nt says how far ahead and where; null: none).
template <class W, int G, Fetch BlockFetch = Fetch::l2>
CPX_TARGET_AVX512 void gemv_block_nt(const StridedMatrix<const float>& x, index_t m0, const W* const* wr, int rows_here,
                                     const StridedMatrix<float>& y, index_t o, bool accumulate, const W* const* pf) {
    const bool prefetch = pf != nullptr;
    constexpr int R = 4;
    constexpr index_t chunk = std::is_same_v<W, float> ? 16 : 32;
    const index_t in = x.cols, body = in / chunk * chunk;
    const float* xr[G];
    for (int g = 0; g < G; ++g) xr[g] = x.row(m0 + g);
    __m512 acc[G][R];
    for (auto& a : acc)
        for (auto& v : a) v = _mm512_setzero_ps();
    for (index_t i = 0; i < body; i += chunk) {
        if constexpr (std::is_same_v<W, float>) {
            __m512 wv[R];
            for (int k = 0; k < R; ++k) {
                if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(pf[k] + i), _MM_HINT_T1);
                wv[k] = _mm512_loadu_ps(wr[k] + i);
            }
            for (int g = 0; g < G; ++g) {
                const __m512 xv = _mm512_loadu_ps(xr[g] + i);
                for (int k = 0; k < R; ++k) acc[g][k] = _mm512_fmadd_ps(wv[k], xv, acc[g][k]);
            }
        } else {
            // The inputs in registers first, then each weight row widened and used at once:
            // G x 4 accumulators, 2G inputs and one row's two halves stay in registers.
            __m512 xe[G], xo[G];
#pragma GCC unroll 16
            for (int g = 0; g < G; ++g) xe[g] = _mm512_loadu_ps(xr[g] + i), xo[g] = _mm512_loadu_ps(xr[g] + i + 16);
#pragma GCC unroll 16
            for (int k = 0; k < R; ++k) {
                if (prefetch) fetch_lines<BlockFetch>(pf[k] + i, 64);
                const __m512i words = _mm512_loadu_si512(&wr[k][i].bits);
                const __m512 lo = bf16_low_halves(words), hi = bf16_high_halves(words);
#pragma GCC unroll 16
                for (int g = 0; g < G; ++g) acc[g][k] = _mm512_fmadd_ps(hi, xo[g], _mm512_fmadd_ps(lo, xe[g], acc[g][k]));
            }
        }
    }
    for (int g = 0; g < G; ++g) {
        float* yr = y.row(m0 + g) + o;
        for (int k = 0; k < rows_here; ++k) {
            float s = _mm512_reduce_add_ps(acc[g][k]);
            for (index_t i = body; i < in; ++i) s += xr[g][i] * to_float(wr[k][i]);
            yr[k] = accumulate ? yr[k] + s : s;
        }
    }
}

/// Two input rows against bf16 weight rows [o0, o1) read one after the other (one ascending
/// stream per thread, as gemv_row_nt reads one row), four lines per step into 2 x 4
/// accumulators; xs: both rows split by parity. Where nothing is fetched ahead (every CPU but
/// Zen 5 and Intel's: stream_fetch_into_l1), two rows take this instead of the blocks of four weight rows,
/// whose four streams one Zen 4 core read at ~20 GB/s with two rows: 187M's products from
/// memory (768 x 512 to 32000 x 768 and 1280 x 1536, both kernels alternated in one process)
/// took 28-34% less time (the 32000 x 768 head 2.48 -> 1.72-1.74 ms, qkv_mu 1280 x 1536 0.186-0.198
/// -> 0.134-0.141 ms). Three or four rows read this way were level to 10% faster on rows of up
/// to 1,024 inputs and up to 2.2x slower on 1,536 (the rows' split inputs, 24 KiB at four rows,
/// no longer stay in L1 beside the stream); two weight rows side by side instead of four were
/// level or slower at every row count.
CPX_TARGET_AVX512 inline void gemv_two_rows_nt(const StridedMatrix<const float>& xs, const StridedMatrix<const bf16>& w,
                                               const StridedMatrix<float>& y, index_t o0, index_t o1, bool accumulate) {
    constexpr int L = 4;
    constexpr index_t line = 32;  // bf16 inputs per 64-byte line
    const index_t in = w.cols, body = in / line * line, steps = body / (L * line) * (L * line);
    const float* xr[2] = {xs.row(0), xs.row(1)};
    for (index_t o = o0; o < o1; ++o) {
        const bf16* r = w.data + o * w.ld;
        __m512 a[2][L];
        for (auto& ag : a)
            for (auto& v : ag) v = _mm512_setzero_ps();
        index_t i = 0;
        for (; i < steps; i += L * line) {
            __m512 lo[L], hi[L];
#pragma GCC unroll 4
            for (int k = 0; k < L; ++k) {
                const __m512i words = _mm512_loadu_si512(&r[i + k * line].bits);
                lo[k] = bf16_low_halves(words), hi[k] = bf16_high_halves(words);
            }
#pragma GCC unroll 2
            for (int g = 0; g < 2; ++g)
#pragma GCC unroll 4
                for (int k = 0; k < L; ++k) {
                    const float* xk = xr[g] + i + k * line;
                    a[g][k] = _mm512_fmadd_ps(hi[k], _mm512_loadu_ps(xk + 16),
                                              _mm512_fmadd_ps(lo[k], _mm512_loadu_ps(xk), a[g][k]));
                }
        }
        for (; i < body; i += line) {
            const __m512i words = _mm512_loadu_si512(&r[i].bits);
            const __m512 lo = bf16_low_halves(words), hi = bf16_high_halves(words);
#pragma GCC unroll 2
            for (int g = 0; g < 2; ++g)
                a[g][0] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xr[g] + i + 16),
                                          _mm512_fmadd_ps(lo, _mm512_loadu_ps(xr[g] + i), a[g][0]));
        }
#pragma GCC unroll 2
        for (int g = 0; g < 2; ++g) {
            float sum = _mm512_reduce_add_ps(
                _mm512_add_ps(_mm512_add_ps(a[g][0], a[g][1]), _mm512_add_ps(a[g][2], a[g][3])));
            for (index_t j = body; j < in; ++j) sum += xr[g][j] * to_float(r[j]);
            float* yo = y.row(g) + o;
            *yo = accumulate ? *yo + sum : sum;
        }
    }
}
}  // namespace detail

/// How far ahead the few-row kernel on bf16 weights fetches, in bytes of its stream, rounded to
/// whole blocks of four weight rows (at least the next block). Two threads on Zen 5, weights on
/// huge pages cycled from memory, 2 and 4 rows, the binaries alternated and compared in minutes
/// when one row read at 80-89 GB/s: the next block into L2, as before, read 768-input rows at
/// 44-61 / 46-56 GB/s, and now 76-78 / 70-71; 512 inputs 47 / 46 -> 63-71 / 63-64; 1,536 inputs
/// (one block ahead either way, now into L1) 61-63 / 60-63 -> 71-72 / 61-62. Two blocks ahead
/// of 1,536- or 2,048-input rows (24-32 KiB) read less than one. In minutes at ~50 GB/s every
/// variant reads at the memory's rate (within 5%); 8 and 12 rows, compute-bound, are level.
inline constexpr index_t rows_nt_block_ahead = 12288;

/// The few-row kernel's fetches on bf16 weights go into L1 on Zen 5 (measured above) and Intel's
/// CPUs, and into L2 elsewhere (stream_fetch_into_l1). On Zen 4 the L1 fetch halved the read: one core, 32000x768
/// and 2048x1536 products cycled from memory on huge pages, 1, 2 and 4 input rows, 12 KiB ahead
/// into L1 10.6-12.7 GB/s, into L2 23.3-25.4 (no software prefetch 9.0-13.0; 6-48 KiB ahead into
/// L2 alike).

/// y[m, o] (=|+=) sum_i x[m, i] w[o, i] for o in [o0, o1); w: [out, in] fp32 or
/// bf16 rows, for bf16 each row of x as split_row_by_parity made it (split once per
/// call: splitting each chunk in the loop repeated it for every block of four
/// weight rows). Row groups after the first find the block's weight rows in L1.
/// The first group prefetches the rows of a block further on: for fp32 weights the next one
/// (into L2), for bf16 the one about rows_nt_block_ahead bytes on (into L1 on Zen 5 and Intel's
/// CPUs, else L2).
template <class W>
CPX_TARGET_AVX512 void gemv_rows_nt(const StridedMatrix<const float>& x, const StridedMatrix<const W>& w,
                                    const StridedMatrix<float>& y, index_t o0, index_t o1, bool accumulate) {
    const index_t block_bytes = std::max<index_t>(1, 4 * w.cols * static_cast<index_t>(sizeof(W)));  // K = 0 too
    const index_t ahead =
        std::is_same_v<W, float> ? 1 : std::max<index_t>(1, (rows_nt_block_ahead + block_bytes / 2) / block_bytes);
    const bool into_l1 = !std::is_same_v<W, float> && stream_fetch_into_l1();
    if constexpr (std::is_same_v<W, bf16>) {
        if (x.rows == 2 && !into_l1) return detail::gemv_two_rows_nt(x, w, y, o0, o1, accumulate);
    }
    for (index_t o = o0; o < o1; o += 4) {
        const int rows_here = static_cast<int>(std::min<index_t>(4, o1 - o));
        const W* wr[4];  // a short last block repeats its last row; those sums are not stored
        for (int k = 0; k < 4; ++k) wr[k] = w.data + (o + std::min(k, rows_here - 1)) * w.ld;
        // That block's rows, past the panel too: linear() cuts these products into panels of a few
        // dozen rows, and the next one, which the same thread usually takes next, started on rows
        // no fetch had asked for (w's last row stands in for rows past the matrix). Zen 4, 4-8
        // rows from memory: 0.81-0.98x the time (docs/BF16.md, "Where a panel starts (Zen 4)").
        const W* next[4];
        for (int k = 0; k < 4; ++k) next[k] = w.data + std::min<index_t>(o + 4 * ahead + k, w.rows - 1) * w.ld;
        detail::in_row_groups(x.rows, [&](auto g, index_t m0) {
            constexpr int G = decltype(g)::value;
            const W* const* pf = m0 == 0 ? next : nullptr;
            if (into_l1) detail::gemv_block_nt<W, G, Fetch::l1>(x, m0, wr, rows_here, y, o, accumulate, pf);
            else detail::gemv_block_nt<W, G, Fetch::l2>(x, m0, wr, rows_here, y, o, accumulate, pf);
        });
    }
}

/// The one-row bf16 kernel's input: each whole chunk of 32 inputs of x as its
/// 16 even inputs, then its 16 odd ones (the tail past the last chunk as is).
CPX_TARGET_AVX512 inline void split_row_by_parity(const float* x, index_t in, float* xs) {
    const index_t body = in / 32 * 32;
    for (index_t i = 0; i < body; i += 32) {
        __m512 even, odd;
        split_by_parity(x + i, even, odd);
        _mm512_storeu_ps(xs + i, even);
        _mm512_storeu_ps(xs + i + 16, odd);
    }
    for (index_t i = body; i < in; ++i) xs[i] = x[i];
}

/// How far ahead along its stream the one-row bf16 loop fetches (the panel's rows are
/// consecutive): 187M batch-1 decode on bf16 weights with fp32 arithmetic (512 cached tokens,
/// Zen 5, alternated binaries) one thread 7.1-7.6 -> 6.7-6.9 ms, two threads level in minutes
/// at ~50 GB/s and 4.2-5.4 -> 3.8-5.3 ms in faster ones; 1 KiB ahead level, 8 KiB as 4. With
/// two lines per step (below) 8 KiB: one core over weights on huge pages, both loops in one
/// process, Zen 5: rows of 768 inputs 31-32 -> 34-36 GB/s, of 512 31-39 -> 39-43 GB/s; 2 KiB and
/// 4 KiB ahead gained nothing there, 12-16 KiB as 8.
inline constexpr index_t row_nt_ahead = 8192;

/// y[o] (=|+=) sum_i x[i] w[o, i] for o in [o0, o1): one input row against
/// weights in nn.Linear layout; for bf16 weights xs is the row as
/// split_row_by_parity made it, for fp32 the row itself. Each weight row is
/// read whole before the next, so a thread's panel is one ascending stream.
/// fp32: four accumulators over 64 inputs (four lines) per step, lines 4 KiB
/// ahead in the stream prefetched into L2 (Zen 4; the file's header has the
/// figures; into L1, four rows ahead, had left one core behind Eigen's GEMV on
/// Zen 5). bf16: four lines (128 inputs, four accumulators) per step, each line fetching the one
/// row_nt_ahead bytes further (the distance measured on Zen 5, above). Short streams gain:
/// with two lines per step one Zen 4 core read 8 MiB products of 512- to 2,048-input rows at
/// 26.7-28.6 GB/s against a 31-33 GB/s read, with four at 28.5-30.4 (29.6-31.2 with no software
/// prefetch, which every CPU but Zen 5, where the prefetch paid, now takes); 48 MiB products were
/// level (27-30 GB/s either way), and so was 187M's decode step. PRISM-mini's (heads of 128 rows
/// of U, products of 128 KiB) on bf16 weights with fp32 arithmetic, 512 cached tokens,
/// alternated binaries (2026-11-30): 6.35-6.38 -> 5.34-5.52 ms on one thread, 3.11-3.80 ->
/// 2.79-3.01 on two; an hour later, the machine slower, 6.53-6.94 -> 6.21-6.24 on one thread;
/// under bf16 arithmetic level. Before that, one line per step:
/// on Zen 4 one core streamed bf16 weights at 29-31 GB/s that way with no software
/// prefetch, where it reads 30-34, against 22-25 with the former two lines per
/// step and the row four ahead prefetched into L1 (26-28 with that loop and no
/// prefetch; 4 lines per step, prefetches into L2 2-8 KiB ahead or into L1 2-4
/// KiB ahead all read less): 2560x768 to 32000x768 products, one thread,
/// alternated in one process.
namespace detail {
/// gemv_row_nt with the bf16 stream's fetch as F says (fp32 rows fetch into L2 4 KiB ahead, whatever F).
template <class W, Fetch F>
CPX_TARGET_AVX512 void gemv_row_nt_fetching(const float* xs, const StridedMatrix<const W>& w, float* y, index_t o0,
                                            index_t o1, bool accumulate) {
    static_assert(std::is_same_v<W, float> || std::is_same_v<W, bf16>, "fp32 or bf16 weights");
    constexpr index_t line = 64 / static_cast<index_t>(sizeof(W));  // inputs per 64-byte line
    const index_t in = w.cols, body = in / line * line;
    for (index_t o = o0; o < o1; ++o) {
        const W* r = w.data + o * w.ld;
        __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        index_t i = 0;
        if constexpr (std::is_same_v<W, float>) {
            constexpr index_t unit = 64;  // four lines, one vector each
            const char* ahead = reinterpret_cast<const char*>(r) + 4096;
            for (const index_t steps = in / unit * unit; i < steps; i += unit) {
#pragma GCC unroll 4
                for (int k = 0; k < 4; ++k) {
                    _mm_prefetch(ahead + 4 * (i + 16 * k), _MM_HINT_T1);
                    a[k] = _mm512_fmadd_ps(_mm512_loadu_ps(r + i + 16 * k), _mm512_loadu_ps(xs + i + 16 * k), a[k]);
                }
            }
            for (; i < body; i += line) a[0] = _mm512_fmadd_ps(_mm512_loadu_ps(r + i), _mm512_loadu_ps(xs + i), a[0]);
        } else {
            for (const index_t quads = in / (4 * line) * (4 * line); i < quads; i += 4 * line) {
                const char* ahead = reinterpret_cast<const char*>(r + i) + row_nt_ahead;
                __m512i words[4];
#pragma GCC unroll 4
                for (int k = 0; k < 4; ++k) {
                    fetch_lines<F>(ahead + 64 * k, 64);
                    words[k] = _mm512_loadu_si512(&r[i + k * line].bits);
                }
#pragma GCC unroll 4
                for (int k = 0; k < 4; ++k) {
                    a[k] = _mm512_fmadd_ps(bf16_low_halves(words[k]), _mm512_loadu_ps(xs + i + 32 * k), a[k]);
                    a[k] = _mm512_fmadd_ps(bf16_high_halves(words[k]), _mm512_loadu_ps(xs + i + 32 * k + 16), a[k]);
                }
            }
            for (; i < body; i += line) {
                fetch_lines<F>(reinterpret_cast<const char*>(r + i) + row_nt_ahead, 64);
                const __m512i words = _mm512_loadu_si512(&r[i].bits);
                a[0] = _mm512_fmadd_ps(bf16_low_halves(words), _mm512_loadu_ps(xs + i), a[0]);
                a[1] = _mm512_fmadd_ps(bf16_high_halves(words), _mm512_loadu_ps(xs + i + 16), a[1]);
            }
        }
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
        for (; i < in; ++i) sum += xs[i] * to_float(r[i]);
        y[o] = accumulate ? y[o] + sum : sum;
    }
}
}  // namespace detail

/// gemv_row_nt_fetching as this CPU reads fastest: bf16 lines fetched row_nt_ahead bytes ahead
/// into L1 on Zen 5 and Intel's CPUs and not at all elsewhere (no fetch read 4-10% more on Zen 4:
/// above).
template <class W>
void gemv_row_nt(const float* xs, const StridedMatrix<const W>& w, float* y, index_t o0, index_t o1, bool accumulate) {
    if (std::is_same_v<W, float> || !stream_fetch_into_l1())
        detail::gemv_row_nt_fetching<W, Fetch::none>(xs, w, y, o0, o1, accumulate);
    else detail::gemv_row_nt_fetching<W, Fetch::l1>(xs, w, y, o0, o1, accumulate);
}

/// Lanes per input feature of the lane kernels: 8 (one 256-bit vector) for up to
/// eight sequences, else 16 (one 512-bit vector). Both cost one FMA instruction
/// per weight, but a 256-bit FMA is half a 512-bit one on cores whose vector
/// units are 256 bits wide (AMD Zen 4: 1 zmm or 2 ymm FMAs per cycle) and the
/// same elsewhere, so eight sequences in 16 lanes left half of every FMA idle:
/// on Zen 4 the 187M qkv_mu product took 0.457 ms for 8 rows, as long as for 16.
/// bf16 weights run in 16 lanes only (they take the lane kernel at 16 rows).
template <class W>
constexpr int lane_width(index_t rows) {
    return std::is_same_v<W, float> && rows <= 8 ? 8 : 16;
}

/// xt[L i + m] = x[m, i] for the rows of x (at most L = lane_width<W>(rows)), zero
/// in the other lanes: the input of the lane kernels on W weights. Transposes
/// features [i0, i1).
template <class W>
inline void lanes_transpose(const StridedMatrix<const float>& x, float* xt, index_t i0, index_t i1) {
    transpose_to_lanes(x, xt, lane_width<W>(x.rows), i0, i1);
}

namespace detail {
/// One vector of L lanes of fp32 sums, L = 8 or 16.
template <int L>
struct Lanes;
template <>
struct Lanes<16> {
    using V = __m512;
    CPX_TARGET_AVX512 static V zero() { return _mm512_setzero_ps(); }
    CPX_TARGET_AVX512 static V load(const float* p) { return _mm512_load_ps(p); }
    CPX_TARGET_AVX512 static V fma(float w, V x, V acc) { return _mm512_fmadd_ps(_mm512_set1_ps(w), x, acc); }
    CPX_TARGET_AVX512 static void store(float* p, V v) { _mm512_store_ps(p, v); }
};
template <>
struct Lanes<8> {
    using V = __m256;
    CPX_TARGET_AVX512 static V zero() { return _mm256_setzero_ps(); }
    CPX_TARGET_AVX512 static V load(const float* p) { return _mm256_load_ps(p); }
    CPX_TARGET_AVX512 static V fma(float w, V x, V acc) { return _mm256_fmadd_ps(_mm256_set1_ps(w), x, acc); }
    CPX_TARGET_AVX512 static void store(float* p, V v) { _mm256_store_ps(p, v); }
};

/// dst[r] = line i / 32 of bf16 row r widened to fp32: dst[r][j] input i + 2j (a word's
/// low half), dst[r][16 + j] input i + 2j + 1.
template <int R>
CPX_TARGET_AVX512 CPX_FORCE_INLINE void widen_lines(const bf16* const* rows, index_t i, float (*dst)[2 * 16]) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        const __m512i words = _mm512_loadu_si512(&rows[r][i].bits);
        _mm512_store_ps(dst[r], bf16_low_halves(words));
        _mm512_store_ps(dst[r] + 16, bf16_high_halves(words));
    }
}

/// Eight (fewer at the end: the last row repeats, unstored) weight rows from o
/// against every lane of xt (L lanes per input); adds or writes the rows of y.
/// The next block's rows are prefetched at the offsets read, past the caller's panel too (w's
/// last row stands in for rows past the matrix).
template <class W, int L>
CPX_TARGET_AVX512
void gemv_lanes_block(const float* xt, index_t in, const StridedMatrix<const W>& w, index_t o, int rows_here,
                      const StridedMatrix<float>& y, bool accumulate) {
    static_assert(L == 16 || std::is_same_v<W, float>, "bf16 weights run in 16 lanes");
    using V = typename Lanes<L>::V;
    constexpr int R = 8;
    const W* wr[R];
    const W* next[R];
    for (int r = 0; r < R; ++r) {
        wr[r] = w.data + (o + std::min(r, rows_here - 1)) * w.ld;
        next[r] = w.data + std::min<index_t>(o + R + r, w.rows - 1) * w.ld;
    }
    V acc[R];
    for (auto& a : acc) a = Lanes<L>::zero();
    // bf16 weights: lines widened to fp32 (below), two buffers.
    [[maybe_unused]] alignas(64) float widened[2][R][2 * 16];
    // One cache line of every weight row per step: 16 fp32 or 32 bf16 inputs.
    constexpr index_t step = 64 / static_cast<index_t>(sizeof(W));
    const index_t body = in / step * step;
    if constexpr (!std::is_same_v<W, float>)
        if (body > 0) widen_lines<R>(wr, 0, widened[0]);
    for (index_t i = 0; i < body; i += step) {
        for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(next[r] + i), _MM_HINT_T1);
        if constexpr (std::is_same_v<W, float>) {
#pragma GCC unroll 16
            for (index_t k = 0; k < step; ++k) {
                const V xv = Lanes<L>::load(xt + L * (i + k));
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r) acc[r] = Lanes<L>::fma(wr[r][i + k], xv, acc[r]);
            }
        } else {
            // Each line widened once into fp32, so that every weight is one FMA with its
            // broadcast from memory, as for fp32 weights. The next line is widened while this
            // one computes, so that no broadcast waits on the store it reads: 16 rows of
            // 768 and 1536 inputs in L2, one thread, 172-189 -> 187-206 GFLOP/s (Zen 5).
            // widened[b][r][j]: input i + 2j (a word's low half), [16 + j]: input i + 2j + 1.
            const int b = static_cast<int>((i / step) & 1);
            if (i + step < body) widen_lines<R>(wr, i + step, widened[b ^ 1]);
            // Keeps GCC from turning the broadcasts below into shuffles of these registers.
            asm volatile("" ::: "memory");
#pragma GCC unroll 16
            for (index_t j = 0; j < 16; ++j) {
                const V x0 = Lanes<L>::load(xt + L * (i + 2 * j)), x1 = Lanes<L>::load(xt + L * (i + 2 * j + 1));
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r) {
                    acc[r] = Lanes<L>::fma(widened[b][r][j], x0, acc[r]);
                    acc[r] = Lanes<L>::fma(widened[b][r][16 + j], x1, acc[r]);
                }
            }
        }
    }
    for (index_t i = body; i < in; ++i) {
        const V xv = Lanes<L>::load(xt + L * i);
        for (int r = 0; r < R; ++r) acc[r] = Lanes<L>::fma(to_float(wr[r][i]), xv, acc[r]);
    }
    alignas(64) float sums[R][L];
    for (int r = 0; r < R; ++r) Lanes<L>::store(sums[r], acc[r]);
    for (index_t m = 0; m < y.rows; ++m) {
        float* yr = y.row(m) + o;
        for (int r = 0; r < rows_here; ++r) yr[r] = accumulate ? yr[r] + sums[r][m] : sums[r][m];
    }
}
}  // namespace detail

/// y[m, o] (=|+=) sum_i x[m, i] w[o, i] for o in [o0, o1), with x given as
/// lanes_transpose<W> made it (xt, 64-byte aligned) and y's rows those of x
/// (at most 16); w: [out, in] fp32 or bf16 rows.
template <class W>
CPX_TARGET_AVX512
void gemv_lanes_nt(const float* xt, index_t in, const StridedMatrix<const W>& w, const StridedMatrix<float>& y,
                   index_t o0, index_t o1, bool accumulate) {
    for (index_t o = o0; o < o1; o += 8) {
        const int rows_here = static_cast<int>(std::min<index_t>(8, o1 - o));
        if constexpr (std::is_same_v<W, float>) {
            if (lane_width<W>(y.rows) == 8) {
                detail::gemv_lanes_block<W, 8>(xt, in, w, o, rows_here, y, accumulate);
                continue;
            }
        }
        detail::gemv_lanes_block<W, 16>(xt, in, w, o, rows_here, y, accumulate);
    }
}

namespace detail {
/// Input-major strips: 64 fp32 columns (256 bytes of a weight row), or 128 bf16
/// columns (the same bytes), so both read whole lines at the same stride.
template <class W>
inline constexpr int nn_strip_vectors = std::is_same_v<W, float> ? 4 : 8;
/// Load masks of a strip whose first `cols` columns exist: one per 16 fp32
/// columns, or one per 32 bf16 columns (one 64-byte load).
template <class W, int NB>
struct StripMasks {
    static constexpr int loads = std::is_same_v<W, float> ? NB : NB / 2;
    static constexpr int per_load = std::is_same_v<W, float> ? 16 : 32;
    using Mask = std::conditional_t<std::is_same_v<W, float>, __mmask16, __mmask32>;
    Mask m[loads];
    CPX_TARGET_AVX512 explicit StripMasks(int cols) {
        for (int k = 0; k < loads; ++k) {
            const int c = cols - per_load * k;
            m[k] = c >= per_load ? static_cast<Mask>(~Mask(0)) : c <= 0 ? Mask(0) : static_cast<Mask>((Mask(1) << c) - 1);
        }
    }
};

/// The weights of input row `wr` for a strip's NB vectors, as fp32; columns
/// past the masks are zero. fp32: vector k holds columns 16k..16k+15. bf16:
/// each 64-byte load holds 32 columns as 16 words of two; vector 2v holds their
/// even columns (the low halves), 2v + 1 the odd ones (the high halves),
/// widened with a shift and an and instead of a shuffle (store_strip reorders
/// them): 16 rows ran 20% faster than with vpmovzxwd.
template <class W, int NB>
CPX_TARGET_AVX512 CPX_FORCE_INLINE void load_strip(const W* wr, const StripMasks<W, NB>& masks, __m512 (&wv)[NB]) {
    if constexpr (std::is_same_v<W, float>) {
#pragma GCC unroll 16
        for (int k = 0; k < NB; ++k) wv[k] = _mm512_maskz_loadu_ps(masks.m[k], wr + 16 * k);
    } else {
#pragma GCC unroll 16
        for (int v = 0; v < NB / 2; ++v) {
            const __m512i words = _mm512_maskz_loadu_epi16(masks.m[v], &wr[32 * v].bits);
            wv[2 * v] = bf16_low_halves(words);
            wv[2 * v + 1] = bf16_high_halves(words);
        }
    }
}

/// Writes (or adds) a strip's NB accumulators to yr[0, cols), putting the bf16
/// strips' even and odd columns back in order.
template <class W, int NB>
CPX_TARGET_AVX512 CPX_FORCE_INLINE void store_strip(__m512 (&acc)[NB], float* yr, int cols, bool accumulate) {
    if constexpr (!std::is_same_v<W, float>) {
        const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
#pragma GCC unroll 16
        for (int v = 0; v < NB / 2; ++v) {
            const __m512 even = acc[2 * v], odd = acc[2 * v + 1];
            acc[2 * v] = _mm512_permutex2var_ps(even, first, odd);
            acc[2 * v + 1] = _mm512_permutex2var_ps(even, second, odd);
        }
    }
#pragma GCC unroll 16
    for (int k = 0; k < NB; ++k) {
        const int c = cols - 16 * k;
        const __mmask16 m = c >= 16 ? __mmask16(0xffff) : c <= 0 ? __mmask16(0) : __mmask16((1u << c) - 1);
        __m512 v = acc[k];
        if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, yr + 16 * k));
        _mm512_mask_storeu_ps(yr + 16 * k, m, v);
    }
}

}  // namespace detail

/// Few input rows against an input-major weight ([in, out], the routed experts
/// of a decode step, PRISM's u): the input dimension is split into chunks,
/// whose partial sums are kept in memory and added in order at the end, so the
/// result does not depend on the thread count. Column strips read over the
/// whole input (256 bytes of each weight row at the row stride) are a pattern
/// the hardware prefetchers follow poorly: on AMD Zen 4 the 187M expert's 768 x
/// 1024 fp32 product ran at 21 GB/s on two threads and 12.5 on one that way.
/// - One row streams the weight's rows in order, each whole, into its partial
///   sums (L1/L2). On Zen 5 each strip's lines are fetched into L1 further along
///   the stream (the rows are consecutive, row_nn_ahead): a profile of the 187M
///   decode step had four fifths of this loop's samples on its weight loads
///   without it. Elsewhere nothing is fetched, and a thread streams bf16 weights
///   of up to row_nn_pair_max_out columns two chunks at a time, a row of each in
///   turn (Zen 4 figures there).
/// - More rows take bands of row_nn_band weight rows: each 64-column strip of
///   the band is summed in registers for up to four input rows, then added to
///   their partial sums, so the sums' loads and stores are an eighth of the
///   FMAs; the band's rows are eight ascending streams, and the next band's
///   lines at the offsets read are prefetched into L2. Measured on Zen 4, one
///   core, the 187M expert's products from memory (bf16 and fp32 alike): 0.58-
///   0.85x the time of streaming each row into the sums (2-4 rows: four sums'
///   loads and stores per FMA bound it) and of column strips (5-16 rows).
inline constexpr index_t row_nn_band = 8;
/// How far ahead of its strip the one-row stream fetches on Zen 5: 187M batch-1 decode on
/// bf16 weights (fp32 arithmetic, 512 cached tokens, alternated binaries) one thread
/// 11.1-12.0 -> 7.3-7.6 ms, two 6.9-7.3 -> 5.5-5.9 ms; 2 and 8 KiB, or into L2, level.
/// On Zen 4 the same fetch cost half the read, and none at all read fastest: through
/// gemv_rows_nn_streamed (four chunks, every variant in turn in one process), one core read
/// the bf16 products of 512-2048 x 768-4096 at 27-31 GB/s without fetches, 24-26 with lines
/// fetched 8 KiB ahead into L2, two cores 33-45 against 31-40.
inline constexpr index_t row_nn_ahead = 4096;
/// Widest bf16 output (partial sums of 7 KiB) a thread streams two chunks at a time where it
/// fetches nothing: one core read the 187M expert's 768 x 1024 and 512 x 768 products at
/// 32-34 and 28-32 GB/s so, against 30-31 and 27-28 one chunk after the other (2048 x 768:
/// 32-34 against 30-32); outputs of 2048 and 4096 columns (two sums of 8 or 16 KiB) read
/// slower so (12-31 against 28-32; 1024 x 2048 25 against 28), as did fp32 weights (28-31
/// against 31-32). Between the two (Zen 4, one core, weights from memory on huge pages, both
/// ways alternated in one process): 1024 inputs x 1280, 1536, 1600 and 1792 outputs 27.5-30.2
/// GB/s in pairs against 25.0-29.0 (384M's routed gate and up, 1024 x 1600: 108-114 us against
/// 113-121), 768 and 2048 x 1600 30.2-30.5 against 28.0-28.1.
inline constexpr index_t row_nn_pair_max_out = 1792;
constexpr index_t row_nn_chunks(index_t in) { return std::clamp<index_t>(in / 128, 1, 4); }
/// Columns of the strips partial sums are kept in (bf16: each 32 columns' even
/// ones, then their odd ones, as load_strip widens them).
inline constexpr index_t row_nn_strip = 64;
/// Floats of one row's partial sums: whole 128-column blocks (the one-row bf16
/// kernel's strips).
constexpr index_t row_nn_stride(index_t out) { return (out + 127) / 128 * 128; }
/// Floats of scratch the row-streaming products need (64-byte aligned), for up to gemv_max_rows rows.
constexpr index_t row_nn_scratch(index_t in, index_t out, index_t max_rows) {
    return row_nn_chunks(in) * max_rows * row_nn_stride(out);
}

namespace detail {
/// parts[0, strips of W's row) += x_i w[i, :] for one weight row `wr`, strip by strip, each
/// strip's lines row_nn_ahead further along the stream fetched as F says.
template <class W, int NB, Fetch F>
CPX_TARGET_AVX512 CPX_FORCE_INLINE void add_row_nn(float x_i, const W* wr, index_t strips,
                                                   const StripMasks<W, NB>& full, const StripMasks<W, NB>& tail,
                                                   float* parts) {
    static_assert(F != Fetch::l2, "the one-row stream fetches into L1 or not at all");
    constexpr index_t strip = 16 * NB;
    const __m512 xv = _mm512_set1_ps(x_i);
    for (index_t s = 0; s < strips; ++s) {
        fetch_lines<F>(reinterpret_cast<const char*>(wr + s * strip) + row_nn_ahead,
                       strip * static_cast<index_t>(sizeof(W)));
        __m512 wv[NB];
        load_strip<W, NB>(wr + s * strip, s + 1 < strips ? full : tail, wv);
        float* ps = parts + s * strip;
#pragma GCC unroll 16
        for (int k = 0; k < NB; ++k) _mm512_store_ps(ps + 16 * k, _mm512_fmadd_ps(wv[k], xv, _mm512_load_ps(ps + 16 * k)));
    }
}

/// parts = sum over weight rows [i0, i1) of x[i] w[i, :] for one input row, strip by strip in
/// load_strip's layout (strips of 16 nn_strip_vectors columns), the rows added one after the other.
template <class W, Fetch F>
CPX_TARGET_AVX512 void gemv_row_nn_part_fetching(const float* x, const StridedMatrix<const W>& w, index_t i0,
                                                 index_t i1, float* parts) {
    constexpr int NB = nn_strip_vectors<W>;
    constexpr index_t strip = 16 * NB;
    const index_t strips = (w.cols + strip - 1) / strip;
    const StripMasks<W, NB> full(static_cast<int>(strip)), tail(static_cast<int>(w.cols - (strips - 1) * strip));
    std::fill_n(parts, strips * strip, 0.0f);
    for (index_t i = i0; i < i1; ++i) add_row_nn<W, NB, F>(x[i], w.data + i * w.ld, strips, full, tail, parts);
}

/// Two gemv_row_nn_part calls at once, without fetches: rows [a0, a1) into parts_a and
/// [b0, b1) into parts_b (each =), a row of each in turn, so that one core reads the weight
/// as two streams; each partial sum gets the bits of its own call.
template <class W>
CPX_TARGET_AVX512 void gemv_row_nn_part_pair(const float* x, const StridedMatrix<const W>& w, index_t a0, index_t a1,
                                             float* parts_a, index_t b0, index_t b1, float* parts_b) {
    constexpr int NB = nn_strip_vectors<W>;
    constexpr index_t strip = 16 * NB;
    const index_t strips = (w.cols + strip - 1) / strip;
    const StripMasks<W, NB> full(static_cast<int>(strip)), tail(static_cast<int>(w.cols - (strips - 1) * strip));
    std::fill_n(parts_a, strips * strip, 0.0f);
    std::fill_n(parts_b, strips * strip, 0.0f);
    index_t a = a0, b = b0;
    for (; a < a1 && b < b1; ++a, ++b) {
        add_row_nn<W, NB, Fetch::none>(x[a], w.data + a * w.ld, strips, full, tail, parts_a);
        add_row_nn<W, NB, Fetch::none>(x[b], w.data + b * w.ld, strips, full, tail, parts_b);
    }
    for (; a < a1; ++a) add_row_nn<W, NB, Fetch::none>(x[a], w.data + a * w.ld, strips, full, tail, parts_a);
    for (; b < b1; ++b) add_row_nn<W, NB, Fetch::none>(x[b], w.data + b * w.ld, strips, full, tail, parts_b);
}

/// gemv_row_nn_part_fetching with the fetch this CPU streams fastest with (row_nn_ahead).
template <class W>
void gemv_row_nn_part(const float* x, const StridedMatrix<const W>& w, index_t i0, index_t i1, float* parts) {
    if (stream_fetch_into_l1()) gemv_row_nn_part_fetching<W, Fetch::l1>(x, w, i0, i1, parts);
    else gemv_row_nn_part_fetching<W, Fetch::none>(x, w, i0, i1, parts);
}

/// parts[g] (= or, with `add`, +=) sum over weight rows [i0, i1) of x[m0 + g, i] w[i, :] for
/// G <= 4 rows, the rows' sums `stride` floats apart, in bands of row_nn_band weight rows. Each
/// sum takes the rows in order, as gemv_row_nn_part_fetching adds them.
template <class W, int G>
CPX_TARGET_AVX512 void gemv_band_nn_part(const StridedMatrix<const float>& x, index_t m0,
                                         const StridedMatrix<const W>& w, index_t i0, index_t i1, float* parts,
                                         index_t stride, bool add = false) {
    constexpr int NB = 4, B = static_cast<int>(row_nn_band);
    constexpr index_t strip = row_nn_strip;
    constexpr int lines = static_cast<int>(strip * sizeof(W) / 64);
    const index_t strips = (w.cols + strip - 1) / strip;
    const StripMasks<W, NB> full(static_cast<int>(strip)), tail(static_cast<int>(w.cols - (strips - 1) * strip));
    if (!add)
        for (int g = 0; g < G; ++g) std::fill_n(parts + g * stride, strips * strip, 0.0f);
    for (index_t ib = i0; ib < i1; ib += B) {
        const int rows_here = static_cast<int>(std::min<index_t>(B, i1 - ib));
        const W* wr[B];    // a short last band repeats its last row, with zero inputs
        const W* next[B];  // the next band's rows (the chunk's last row past its end)
        alignas(64) float xs[G][B];
        for (int b = 0; b < B; ++b) {
            wr[b] = w.data + (ib + std::min(b, rows_here - 1)) * w.ld;
            next[b] = w.data + std::min<index_t>(ib + B + b, i1 - 1) * w.ld;
            for (int g = 0; g < G; ++g) xs[g][b] = b < rows_here ? x.row(m0 + g)[ib + b] : 0.0f;
        }
        for (index_t s = 0; s < strips; ++s) {
#pragma GCC unroll 8
            for (int b = 0; b < B; ++b)
#pragma GCC unroll 4
                for (int l = 0; l < lines; ++l)
                    _mm_prefetch(reinterpret_cast<const char*>(next[b] + s * strip) + 64 * l, _MM_HINT_T1);
            const StripMasks<W, NB>& masks = s + 1 < strips ? full : tail;
            __m512 acc[G][NB];
#pragma GCC unroll 4
            for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
                for (int k = 0; k < NB; ++k) acc[g][k] = _mm512_load_ps(parts + g * stride + s * strip + 16 * k);
#pragma GCC unroll 8
            for (int b = 0; b < B; ++b) {
                __m512 wv[NB];
                load_strip<W, NB>(wr[b] + s * strip, masks, wv);
#pragma GCC unroll 4
                for (int g = 0; g < G; ++g) {
                    const __m512 xv = _mm512_set1_ps(xs[g][b]);
#pragma GCC unroll 4
                    for (int k = 0; k < NB; ++k) acc[g][k] = _mm512_fmadd_ps(wv[k], xv, acc[g][k]);
                }
            }
#pragma GCC unroll 4
            for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
                for (int k = 0; k < NB; ++k) _mm512_store_ps(parts + g * stride + s * strip + 16 * k, acc[g][k]);
        }
    }
}
}  // namespace detail

namespace detail {
/// Row r of y (=|+=) the sum over `chunks` of its partial sums. A function of its own: clang
/// compiles an OpenMP region's body as a separate function without the caller's target.
template <class W>
CPX_TARGET_AVX512 void sum_chunks_nn(const float* parts, index_t r, index_t m, index_t chunks, index_t stride,
                                     index_t out, float* yr, bool accumulate) {
    constexpr int NB = 4;
    constexpr index_t strip = row_nn_strip;
    for (index_t j0 = 0; j0 < out; j0 += strip) {
        __m512 acc[NB];
#pragma GCC unroll 4
        for (int k = 0; k < NB; ++k) acc[k] = _mm512_load_ps(parts + r * stride + j0 + 16 * k);
        for (index_t c = 1; c < chunks; ++c) {
            const float* pc = parts + (c * m + r) * stride + j0;
#pragma GCC unroll 4
            for (int k = 0; k < NB; ++k) acc[k] = _mm512_add_ps(acc[k], _mm512_load_ps(pc + 16 * k));
        }
        store_strip<W, NB>(acc, yr + j0, static_cast<int>(std::min(strip, out - j0)), accumulate);
    }
}
}  // namespace detail

/// y (=|+=) x w for up to 16 input rows (w: [in, out] fp32 or bf16 rows), with
/// `parts` row_nn_scratch(in, out, x.rows) floats, 64-byte aligned. Threads
/// take the chunks, then the rows' sums.
template <class W>
CPX_TARGET_AVX512 void gemv_rows_nn_streamed(const StridedMatrix<const float>& x, const StridedMatrix<const W>& w,
                                             const StridedMatrix<float>& y, bool accumulate, float* parts) {
    const index_t in = w.rows, out = w.cols, m = x.rows, chunks = row_nn_chunks(in), stride = row_nn_stride(out);
    parallel_team(chunks > 1 && m * in * out > 32768 ? max_threads() : 1, [&](int t, int team) {
        const auto first_row = [&](index_t c) { return in * c / chunks; };  // chunk c: [first_row(c), first_row(c + 1))
        if (m == 1 && std::is_same_v<W, bf16> && out <= row_nn_pair_max_out && !stream_fetch_into_l1()) {
            // The thread's chunks two at a time, read as two streams.
            const Share own = equal_share(chunks, team, t);
            for (index_t c = static_cast<index_t>(own.begin); c < static_cast<index_t>(own.end); c += 2) {
                if (c + 1 < static_cast<index_t>(own.end))
                    detail::gemv_row_nn_part_pair<W>(x.row(0), w, first_row(c), first_row(c + 1), parts + c * stride,
                                                     first_row(c + 1), first_row(c + 2), parts + (c + 1) * stride);
                else
                    detail::gemv_row_nn_part<W>(x.row(0), w, first_row(c), first_row(c + 1), parts + c * stride);
            }
        } else {
            for_share(chunks, t, team, [&](index_t c) {
                float* const part = parts + c * m * stride;
                const index_t i0 = first_row(c), i1 = first_row(c + 1);
                if (m == 1) {
                    detail::gemv_row_nn_part<W>(x.row(0), w, i0, i1, part);
                } else {
                    detail::in_row_groups(m, [&](auto g, index_t m0) {
                        detail::gemv_band_nn_part<W, decltype(g)::value>(x, m0, w, i0, i1, part + m0 * stride, stride);
                    });
                }
            });
        }
        team_barrier(team);
        for_share(m, t, team, [&](index_t r) {
            detail::sum_chunks_nn<W>(parts, r, m, chunks, stride, out, y.row(r), accumulate);
        });
    });
}

}  // namespace cpx::cpu::avx512

#endif

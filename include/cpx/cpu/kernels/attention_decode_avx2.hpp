#pragma once
// The attention products of a decode step on AVX2 (CPUs without AVX-512: AMD Zen 2
// and 3, Intel client cores): the same contract as the AVX-512 kernels
// (cpu/kernels/attention_decode_avx512.hpp), a few query rows against every cached
// key and value of one KV head, read in place from the cache, bf16 widened in
// registers (`word << 16` the even element, `word & 0xffff0000` the odd one).
//
// Sixteen 8-lane registers shape both passes:
// - Scores take the query rows three at a time (a GQA group: 187M has three query
//   heads per KV head) against blocks of four keys, twelve partial sums in registers,
//   so each key chunk is loaded and widened once for the three rows; a row alone
//   takes blocks of eight keys. Each block ends in a tree of horizontal adds, the
//   same per key whatever the block, so the scores are those of one row at a time.
//   Against one row at a time on blocks of eight (every key widened once per row),
//   187M's core of 16 sequences at 512 positions on two threads, Zen 3, the best of
//   30 rounds per run, six runs of the two binaries alternated: 0.84-1.02x the time
//   (median 0.92) with the caches in L3, 0.84-0.99x (0.935) from memory; one sequence
//   at 2,048 positions on one thread 0.93-0.95x in L3, 0.87-0.99x from memory. Whole
//   decode steps (the core is ~16% of a 16-sequence step) move within their noise.
// - Values: eight accumulators per query row over 64 output dimensions (then 32, 16),
//   so a pass reads whole 64-dimension stretches of every value row, in blocks of 32
//   keys: each of the group's rows (up to four) goes through a block before the next
//   block, its sums kept in L1 between blocks, so the rows after the first read the
//   block (4 KiB of a 64-wide bf16 head) from L1. One pass per row over the whole head,
//   the later rows reading it again from L2, took (187M's 16-sequence core, Zen 3, best
//   of 30 rounds, three alternations) 1.05-1.12x the time from memory and 0.98-1.07x in
//   L3; one sequence at 2,048 positions on one thread 1.10-1.13x from memory (blocks of
//   16, 32 and 64 keys level; 128 slower). Passes over several rows at once (12
//   accumulators: 16 dimensions for three rows) read each row in 64-byte pieces, one per
//   pass, and were slower where the cache comes from memory: 187M's 16-sequence decode
//   core 0.79 against 0.47 ms for bf16, 2.0 against 1.0-1.2 ms for fp32 (Zen 3). Tried
//   again with a head's first pass fetching whole rows for the later ones: two rows in
//   passes of 32 (eight sums) 1.02-1.16x the time from memory, level in L3; three rows
//   (twelve sums) had GCC 12 keep sums on the stack.
// Queries are laid out once per call in chunks of 16 dimensions matching what one
// key chunk widens to (fp32: the chunk itself; bf16: its even then its odd
// elements), and bf16 value outputs are accumulated by parity and interleaved at the
// end. Both passes prefetch the cached rows they read next, as the AVX-512 ones do.
//
// The general path this replaces on AVX2 widened a bf16 head into an fp32 copy and
// ran one Eigen matrix-vector product per query row over it.
//
// Head dimensions must be multiples of 16 and at most max_decode_head_dim.
// causal_attention.hpp calls these for bf16 and fp32 caches where vector_isa() is AVX2
// (its comment has the measurements against the Eigen GEMVs they replace).
// Compiled by function attribute on every x86 build.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86
#define CPX_HAVE_ATTENTION_DECODE_AVX2 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/bf16_widen.hpp"
#include "cpx/cpu/kernels/prefetch_lines.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX2

namespace cpx::cpu::avx2 {

inline constexpr int max_decode_head_dim = 256;
inline constexpr index_t max_decode_rows = 4;

constexpr bool decode_kernel_fits(index_t rows, int qk_dim, int v_dim) {
    return rows <= max_decode_rows && qk_dim % 16 == 0 && v_dim % 16 == 0 && qk_dim <= max_decode_head_dim &&
           v_dim <= max_decode_head_dim;
}

namespace decode_detail {
/// How many cached rows ahead each pass prefetches.
inline constexpr index_t prefetch_rows = 16;

/// The eight lane sums of a[0..8), in order.
CPX_TARGET_AVX2 CPX_FORCE_INLINE __m256 sum_lanes_8(const __m256 (&a)[8]) {
    const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
    // Lanes [k0 k1 k2 k3 | k0 k1 k2 k3]: each key's sums of its low and high 128-bit halves.
    const __m256 lo = _mm256_hadd_ps(h01, h23), hi = _mm256_hadd_ps(h45, h67);
    return _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31));
}

/// The four lane sums of a0..a3, in order: the same tree per key as sum_lanes_8.
CPX_TARGET_AVX2 CPX_FORCE_INLINE __m128 sum_lanes_4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    // Lanes [k0 k1 k2 k3 | k0 k1 k2 k3]: each key's sums of its low and high 128-bit halves.
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/// Query rows scored together, keys per block for them (one partial-sum register per row and
/// key: 8 or 12 of the 16), and how many rows a group of the score pass takes.
template <int R>
inline constexpr int block_keys = R == 1 ? 8 : 4;
inline constexpr int score_group_rows = 3;

/// Scores of R query rows (`qp`: laid out as load16_widened widens a key chunk) against keys [0, count) of k,
/// count <= block_keys<R> (Full: count is that), into s[i * s_stride + j]. Each key chunk is
/// loaded and widened once for the R rows. Chunks: head width / 16 where constant (0: `chunks`).
template <int R, int Chunks, bool Full, class KV>
CPX_TARGET_AVX2 inline void score_block_rows(const float (*qp)[max_decode_head_dim], const KV* k, index_t k_stride,
                                             index_t count, int chunks, float* s, index_t s_stride) {
    constexpr int K = block_keys<R>;
    __m256 acc[R][K];
#pragma GCC unroll 12
    for (int i = 0; i < R * K; ++i) acc[i / K][i % K] = _mm256_setzero_ps();
    for (int c = 0; c < (Chunks > 0 ? Chunks : chunks); ++c) {
#pragma GCC unroll 8
        for (int j = 0; j < K; ++j) {
            if (!Full && j >= count) break;
            __m256 x0, x1;
            load16_widened(k + j * k_stride + 16 * c, x0, x1);
#pragma GCC unroll 3
            for (int i = 0; i < R; ++i) {
                acc[i][j] = _mm256_fmadd_ps(x0, _mm256_load_ps(qp[i] + 16 * c), acc[i][j]);
                acc[i][j] = _mm256_fmadd_ps(x1, _mm256_load_ps(qp[i] + 16 * c + 8), acc[i][j]);
            }
        }
    }
#pragma GCC unroll 3
    for (int i = 0; i < R; ++i) {
        float* si = s + i * s_stride;
        if constexpr (K == 8) {
            const __m256 sums = sum_lanes_8(acc[i]);
            if (Full) {
                _mm256_storeu_ps(si, sums);
            } else {
                const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                _mm256_maskstore_ps(si, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lane), sums);
            }
        } else {
            const __m128 sums = sum_lanes_4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
            if (Full) {
                _mm_storeu_ps(si, sums);
            } else {
                const __m128i lane = _mm_setr_epi32(0, 1, 2, 3);
                _mm_maskstore_ps(si, _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(count)), lane), sums);
            }
        }
    }
}

template <int R, int Chunks, class KV>
CPX_TARGET_AVX2 void scores_group(const float (*qp)[max_decode_head_dim], int dim, const KV* k, index_t k_stride,
                                  index_t n, float* s, index_t s_stride) {
    constexpr index_t K = block_keys<R>;
    const int chunks = dim / 16;
    const index_t key_bytes = dim * static_cast<index_t>(sizeof(KV));
    index_t j0 = 0;
    for (; j0 + K <= n; j0 += K) {
        for (index_t j = j0 + prefetch_rows; j < std::min(n, j0 + prefetch_rows + K); ++j)
            fetch_lines<Fetch::l1>(k + j * k_stride, key_bytes);
        score_block_rows<R, Chunks, true>(qp, k + j0 * k_stride, k_stride, K, chunks, s + j0, s_stride);
    }
    if (j0 < n) score_block_rows<R, Chunks, false>(qp, k + j0 * k_stride, k_stride, n - j0, chunks, s + j0, s_stride);
}

template <int Chunks, class KV>
CPX_TARGET_AVX2 void scores_rows(const float (*qp)[max_decode_head_dim], index_t rows, int dim, const KV* k,
                                 index_t k_stride, index_t n, float* s, index_t s_stride) {
    for (index_t i = 0; i < rows; i += score_group_rows) {
        const index_t group = std::min<index_t>(score_group_rows, rows - i);
        float* si = s + i * s_stride;
        if (group == 3) scores_group<3, Chunks>(qp + i, dim, k, k_stride, n, si, s_stride);
        else if (group == 2) scores_group<2, Chunks>(qp + i, dim, k, k_stride, n, si, s_stride);
        else scores_group<1, Chunks>(qp + i, dim, k, k_stride, n, si, s_stride);
    }
}

/// Keys per block of the value pass: the block's rows (4 KiB of a 64-wide bf16 head) stay in L1
/// for the query rows after the first.
inline constexpr index_t value_block = 32;

/// Query row p's products with keys [j0, j1) over output dimensions [0, Width) of `v` (already
/// offset to the pass), added to its Width/8 accumulators in `sums` (set, for the first block).
/// The row that reads the block first fetches the rows prefetch_rows ahead.
template <int Width, bool First, class KV>
CPX_TARGET_AVX2 CPX_FORCE_INLINE void values_block_row(const float* p, const KV* v, index_t v_stride, index_t j0,
                                                       index_t j1, index_t n, bool start, float* sums) {
    constexpr int vectors = Width / 8;
    // Every loop over the accumulators unrolled: GCC 12 otherwise kept them in memory too and
    // stored each one after every FMA (eight 256-bit stores per cached row, twice the time of
    // its FMAs on Zen 3).
    __m256 acc[vectors];
#pragma GCC unroll 8
    for (int c = 0; c < vectors; ++c) acc[c] = start ? _mm256_setzero_ps() : _mm256_load_ps(sums + 8 * c);
    for (index_t j = j0; j < j1; ++j) {
        if (First && j + prefetch_rows < n)
            fetch_lines<Fetch::l1>(v + (j + prefetch_rows) * v_stride, Width * static_cast<index_t>(sizeof(KV)));
        const __m256 pj = _mm256_broadcast_ss(p + j);
        const KV* vj = v + j * v_stride;
#pragma GCC unroll 8
        for (int c = 0; c < Width / 16; ++c) {
            __m256 x0, x1;
            load16_widened(vj + 16 * c, x0, x1);
            acc[2 * c] = _mm256_fmadd_ps(x0, pj, acc[2 * c]);
            acc[2 * c + 1] = _mm256_fmadd_ps(x1, pj, acc[2 * c + 1]);
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < vectors; ++c) _mm256_store_ps(sums + 8 * c, acc[c]);
}

/// The value products of `rows` (at most max_decode_rows) query rows over output dimensions
/// [0, Width) of `v`: blocks of value_block keys, every row through a block before the next
/// block, each row's sums over the keys in key order (as one pass per row would add them).
template <int Width, class KV>
CPX_TARGET_AVX2 void values_pass(const float* p, index_t p_stride, index_t rows, const KV* v, index_t v_stride,
                                 index_t n, float* o, index_t o_stride) {
    alignas(32) float sums[max_decode_rows][Width];
    if (n == 0) std::fill_n(&sums[0][0], max_decode_rows * Width, 0.0f);  // no keys: zero outputs
    for (index_t j0 = 0; j0 < n; j0 += value_block) {
        const index_t j1 = std::min(n, j0 + value_block);
        values_block_row<Width, true>(p, v, v_stride, j0, j1, n, j0 == 0, sums[0]);
        for (index_t i = 1; i < rows; ++i)
            values_block_row<Width, false>(p + i * p_stride, v, v_stride, j0, j1, n, j0 == 0, sums[i]);
    }
    for (index_t i = 0; i < rows; ++i) {
        float* oi = o + i * o_stride;
#pragma GCC unroll 4
        for (int c = 0; c < Width / 16; ++c) {
            const __m256 a = _mm256_load_ps(sums[i] + 16 * c), b = _mm256_load_ps(sums[i] + 16 * c + 8);
            if constexpr (std::is_same_v<KV, float>) {
                _mm256_storeu_ps(oi + 16 * c, a);
                _mm256_storeu_ps(oi + 16 * c + 8, b);
            } else {  // a: even dimensions of the chunk, b: odd; interleave them back
                const __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
                _mm256_storeu_ps(oi + 16 * c, _mm256_permute2f128_ps(lo, hi, 0x20));
                _mm256_storeu_ps(oi + 16 * c + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
            }
        }
    }
}
}  // namespace decode_detail

/// s[i * s_stride + j] = q[i] . k[j] for i < rows, j < n. q: rows of `dim` floats,
/// `q_stride` apart; key j starts at k + j * k_stride. dim: a multiple of 16 up to
/// max_decode_head_dim (decode_kernel_fits); rows past max_decode_rows are scored four
/// at a time.
template <class KV>
CPX_TARGET_AVX2
void decode_scores(const float* q, index_t q_stride, index_t rows, int dim, const KV* k, index_t k_stride, index_t n,
                   float* s, index_t s_stride) {
    static_assert(std::is_same_v<KV, float> || std::is_same_v<KV, bf16>, "decode_scores: fp32 or bf16 keys");
    alignas(32) float qp[max_decode_rows][max_decode_head_dim];
    for (index_t i0 = 0; i0 < rows; i0 += max_decode_rows) {
        const index_t group = std::min(rows - i0, max_decode_rows);
        for (index_t i = 0; i < group; ++i) {
            const float* qi = q + (i0 + i) * q_stride;
            if constexpr (std::is_same_v<KV, float>) {
                std::copy_n(qi, dim, qp[i]);
            } else {  // chunk c: its 8 even dimensions, then its 8 odd ones
                for (int c = 0; c < dim / 16; ++c)
                    for (int e = 0; e < 8; ++e) {
                        qp[i][16 * c + e] = qi[16 * c + 2 * e];
                        qp[i][16 * c + 8 + e] = qi[16 * c + 2 * e + 1];
                    }
            }
        }
        float* si = s + i0 * s_stride;
        // Head width 64 (COMPLEXITY-DEEP's) with a constant chunk loop.
        if (dim == 64) decode_detail::scores_rows<4>(qp, group, dim, k, k_stride, n, si, s_stride);
        else decode_detail::scores_rows<0>(qp, group, dim, k, k_stride, n, si, s_stride);
    }
}

/// o[i] = sum_{j < n} p[i * p_stride + j] v[j] for i < rows; value j starts at
/// v + j * v_stride; o rows are `dim` floats (a multiple of 16), `o_stride` apart.
template <class KV>
CPX_TARGET_AVX2
void decode_values(const float* p, index_t p_stride, index_t rows, const KV* v, index_t v_stride, index_t n, int dim,
                   float* o, index_t o_stride) {
    static_assert(std::is_same_v<KV, float> || std::is_same_v<KV, bf16>, "decode_values: fp32 or bf16 values");
    for (index_t i0 = 0; i0 < rows; i0 += max_decode_rows) {
        const index_t group = std::min(rows - i0, max_decode_rows);
        const float* pi = p + i0 * p_stride;
        float* oi = o + i0 * o_stride;
        int c0 = 0;
        for (; c0 + 64 <= dim; c0 += 64)
            decode_detail::values_pass<64>(pi, p_stride, group, v + c0, v_stride, n, oi + c0, o_stride);
        if (c0 + 32 <= dim) {
            decode_detail::values_pass<32>(pi, p_stride, group, v + c0, v_stride, n, oi + c0, o_stride);
            c0 += 32;
        }
        if (c0 < dim) decode_detail::values_pass<16>(pi, p_stride, group, v + c0, v_stride, n, oi + c0, o_stride);
    }
}

}  // namespace cpx::cpu::avx2

// The fp32- and bf16-cache kernels, declared extern with CPX_EXTERN_KERNELS and defined by
// cpu/kernel_instances.hpp, as CPX_LINEAR_INSTANCES in cpu/kernels/linear.hpp.
#define CPX_ATTENTION_DECODE_AVX2_INSTANCE(extern_, KV)                                                        \
    extern_ template void cpx::cpu::avx2::decode_scores<KV>(const float*, cpx::index_t, cpx::index_t, int,     \
                                                            const KV*, cpx::index_t, cpx::index_t, float*,     \
                                                            cpx::index_t);                                     \
    extern_ template void cpx::cpu::avx2::decode_values<KV>(const float*, cpx::index_t, cpx::index_t, const KV*, \
                                                            cpx::index_t, cpx::index_t, int, float*, cpx::index_t);
#define CPX_ATTENTION_DECODE_AVX2_INSTANCES(extern_) \
    CPX_ATTENTION_DECODE_AVX2_INSTANCE(extern_, float) CPX_ATTENTION_DECODE_AVX2_INSTANCE(extern_, cpx::bf16)
#else
#define CPX_ATTENTION_DECODE_AVX2_INSTANCES(extern_)
#endif

#ifdef CPX_EXTERN_KERNELS
CPX_ATTENTION_DECODE_AVX2_INSTANCES(extern)
#endif

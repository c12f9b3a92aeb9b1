#pragma once
// The attention products of a decode step on AVX-512: a few query rows (the
// query heads sharing one KV head) against every cached key and value of that
// head, reading each cached key and value once, straight from the cache.
//
// The general path widens a bf16 cache head to an fp32 copy and then runs one
// matrix-vector product per query row over it; in decode that copy and the
// repeated passes cost about a cycle per cached element, several times the
// memory bound. Here bf16 keys and values are widened in registers, two values
// per 32-bit word (`word << 16` is the even element, `word & 0xffff0000` the
// odd one), so queries are split by parity once and outputs are accumulated
// by parity and interleaved at the end.
//
// The score pass takes keys in blocks of eight and reads and widens each key
// once for all the query rows, whose 8 x rows partial sums stay in registers;
// both passes are compiled per row count, the score pass also for head width 64
// (every width made each model's translation unit ~7 s slower to compile; a
// run-time dimension loop costs ~10% on cached keys). Against a pass that
// widened each key once per query row with a run-time dimension loop (the
// partials through the stack), the 187M batched-decode shape (16 sequences x 18
// layers, 512 cached positions, bf16, two threads, Zen 4, caches cold) took
// 5.8-6.1 ms instead of 7.3-8.2, 1.2x a plain read of the same bytes instead of
// 1.6x; warm in L2 and L3 on one thread, 25.7 GB/s instead of 15.5.
//
// On Zen 5 (stream_fetch_into_l1, cpu/kernels/prefetch_lines.hpp) both passes
// fetch the cached rows they read next into L1 (the keys sixteen to twenty-four
// ahead, the value row eight ahead): one head's keys or values are a contiguous
// stretch of a few hundred KiB at most, too short for the hardware prefetchers
// to reach full speed before it ends. A cold pass over 187M's decode shape (4 KV
// heads of 64, 3 query rows each, bf16 cache, 2 threads) took 16% less time at
// 128 cached positions, 30-35% less at 512 and 2048, also with a layer's worth
// of weights streamed between passes; prefetching further ahead (64 keys) gained
// nothing more. Elsewhere they fetch nothing: on Zen 4 PRISM-mini's eight
// attention layers (one decode row, 511 cached positions, bf16 U and cache, cold)
// took 2.02 ms on one thread without the fetches against 2.24-2.26 with them, and
// 2.06-2.35 with either pass or both fetching into L2 instead (16-72 keys ahead;
// every variant in turn in one process); two threads 1.00-1.07 ms against
// 1.12-1.20. 187M's steps (1-16 sequences) were level or 2-4% faster without them.
//
// Head dimensions must be multiples of 32 and at most max_decode_head_dim;
// causal_attention.hpp falls back to the general path otherwise, and where
// vector_isa() (cpu/runtime/vector_isa.hpp) is not AVX-512. Compiled by
// function attribute on every x86 build.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86
#define CPX_HAVE_ATTENTION_DECODE_AVX512 1

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/kernels/bf16_widen.hpp"
#include "cpx/cpu/kernels/prefetch_lines.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"  // CPX_TARGET_AVX512

namespace cpx::cpu::avx512 {

inline constexpr int max_decode_head_dim = 256;
inline constexpr index_t max_decode_rows = 4;
/// How many cached rows ahead the value pass prefetches where it does (the key pass: keys 16-23 ahead).
inline constexpr index_t decode_value_prefetch_rows = 8;

constexpr bool decode_kernel_fits(index_t rows, int qk_dim, int v_dim) {
    return rows <= max_decode_rows && qk_dim % 32 == 0 && v_dim % 32 == 0 && qk_dim <= max_decode_head_dim &&
           v_dim <= max_decode_head_dim;
}

namespace detail {
/// Lane indices folding groups of 2g lanes of two vectors into groups of g:
/// the first (hi = false) or second half of every group, first vector's groups first.
struct FoldIndex {
    alignas(64) int lanes[16];
};
constexpr FoldIndex fold_index(int g, bool hi) {
    FoldIndex f{};
    for (int lane = 0; lane < 16; ++lane) {
        const int source = lane / 8, within = lane % 8;  // which vector, which of its 8 outputs
        f.lanes[lane] = source * 16 + within / g * 2 * g + within % g + (hi ? g : 0);
    }
    return f;
}
inline constexpr FoldIndex fold_tables[4][2] = {{fold_index(8, false), fold_index(8, true)},
                                                {fold_index(4, false), fold_index(4, true)},
                                                {fold_index(2, false), fold_index(2, true)},
                                                {fold_index(1, false), fold_index(1, true)}};

/// Eight vectors -> their eight lane sums in lanes 0-7, in order (lanes 8-15 repeat them): a
/// tree of permutes and adds (8 -> 4 -> 2 -> 1 vectors, then the last folded with itself),
/// ~3 instructions per vector instead of a full horizontal reduction each.
CPX_TARGET_AVX512 CPX_FORCE_INLINE __m512 sum_lanes_8(__m512 (&v)[8]) {
    for (int level = 0, count = 8; level < 3; ++level, count /= 2) {
        const __m512i lo = _mm512_load_si512(fold_tables[level][0].lanes);
        const __m512i hi = _mm512_load_si512(fold_tables[level][1].lanes);
        for (int k = 0; k < count / 2; ++k)
            v[k] = _mm512_add_ps(_mm512_permutex2var_ps(v[2 * k], lo, v[2 * k + 1]),
                                 _mm512_permutex2var_ps(v[2 * k], hi, v[2 * k + 1]));
    }
    const __m512i lo = _mm512_load_si512(fold_tables[3][0].lanes);
    const __m512i hi = _mm512_load_si512(fold_tables[3][1].lanes);
    return _mm512_add_ps(_mm512_permutex2var_ps(v[0], lo, v[0]), _mm512_permutex2var_ps(v[0], hi, v[0]));
}

/// Keys per block of the score pass: Rows x 8 partial sums stay in registers.
inline constexpr index_t score_block = 8;

/// Adds key j's products with every query row to part[.][slot]: the key is loaded and (bf16)
/// widened once for all rows, 32 dimensions at a time (Chunks of them, or `chunks` where
/// Chunks is 0). even/odd: the queries split by parity (bf16 keys) or whole in `even` (fp32 keys).
template <index_t Rows, int Chunks, class KV>
CPX_TARGET_AVX512 CPX_FORCE_INLINE void key_products(const KV* key, const float (*even)[max_decode_head_dim],
                                                     const float (*odd)[max_decode_head_dim / 2],
                                                     __m512 (&part)[Rows][score_block], int slot, int chunks) {
    for (int c = 0; c < (Chunks > 0 ? Chunks : chunks); ++c) {
        __m512 x0, x1;
        if constexpr (std::is_same_v<KV, float>) {
            x0 = _mm512_loadu_ps(key + 32 * c);
            x1 = _mm512_loadu_ps(key + 32 * c + 16);
        } else {
            const __m512i w = _mm512_loadu_si512(&key->bits + 32 * c);
            x0 = bf16_low_halves(w);
            x1 = bf16_high_halves(w);
        }
#pragma GCC unroll 4
        for (index_t i = 0; i < Rows; ++i) {
            const float* e = std::is_same_v<KV, float> ? even[i] + 32 * c : even[i] + 16 * c;
            const float* o = std::is_same_v<KV, float> ? even[i] + 32 * c + 16 : odd[i] + 16 * c;
            part[i][slot] = _mm512_fmadd_ps(x0, _mm512_load_ps(e), part[i][slot]);
            part[i][slot] = _mm512_fmadd_ps(x1, _mm512_load_ps(o), part[i][slot]);
        }
    }
}

/// s[i * s_stride + j] = the lane sum of part[i][j] for i < Rows, j < count (<= 8).
template <index_t Rows>
CPX_TARGET_AVX512 CPX_FORCE_INLINE void store_block_scores(__m512 (&part)[Rows][score_block], float* s,
                                                           index_t s_stride, index_t count) {
    for (index_t i = 0; i < Rows; ++i) {
        const __m256 sums = _mm512_castps512_ps256(sum_lanes_8(part[i]));
        if (count == score_block) _mm256_storeu_ps(s + i * s_stride, sums);
        else _mm256_mask_storeu_ps(s + i * s_stride, static_cast<__mmask8>((1u << count) - 1u), sums);
    }
}

/// decode_scores for a constant row count: keys in blocks of eight, each key read and
/// widened once for all rows, the Rows x 8 partial sums in registers and reduced eight lanes
/// at a time. Chunks: the head width / 32 where it is a constant (0: `dim` at run time).
template <index_t Rows, int Chunks, class KV>
CPX_TARGET_AVX512 void decode_scores_rows(const float (*even)[max_decode_head_dim],
                                          const float (*odd)[max_decode_head_dim / 2], int dim, const KV* k,
                                          index_t k_stride, index_t n, float* s, index_t s_stride, bool fetch) {
    const int chunks = dim / 32;
    const index_t key_bytes = dim * static_cast<index_t>(sizeof(KV));
    __m512 part[Rows][score_block];
    index_t j0 = 0;
    for (; j0 + score_block <= n; j0 += score_block) {
        if (fetch)
            for (index_t j = j0 + 2 * score_block; j < std::min(n, j0 + 3 * score_block); ++j)
                fetch_lines<Fetch::l1>(k + j * k_stride, key_bytes);
        for (auto& row : part)
            for (auto& x : row) x = _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int j = 0; j < static_cast<int>(score_block); ++j)
            key_products<Rows, Chunks>(k + (j0 + j) * k_stride, even, odd, part, j, chunks);
        store_block_scores(part, s + j0, s_stride, score_block);
    }
    if (j0 < n) {
        for (auto& row : part)
            for (auto& x : row) x = _mm512_setzero_ps();
        for (int j = 0; j < static_cast<int>(n - j0); ++j)
            key_products<Rows, Chunks>(k + (j0 + j) * k_stride, even, odd, part, j, chunks);
        store_block_scores(part, s + j0, s_stride, n - j0);
    }
}
}  // namespace detail

/// s[i * s_stride + j] = q[i] . k[j] for i < rows, j < n. q: rows of `dim`
/// floats, `q_stride` apart; key j starts at k + j * k_stride. dim: a multiple of 32
/// up to max_decode_head_dim (decode_kernel_fits); rows past max_decode_rows are
/// scored four at a time, each group reading the keys again.
template <class KV>
CPX_TARGET_AVX512
void decode_scores(const float* q, index_t q_stride, index_t rows, int dim, const KV* k, index_t k_stride, index_t n,
                   float* s, index_t s_stride) {
    static_assert(std::is_same_v<KV, float> || std::is_same_v<KV, bf16>, "decode_scores: fp32 or bf16 keys");
    static_assert(max_decode_rows == 4, "decode_scores dispatches 1 to 4 rows");
    const bool fetch = stream_fetch_into_l1();
    // Head width 64 (COMPLEXITY-DEEP's) with a constant dimension loop, 10% faster on cached
    // keys; every width compiled so made each model's translation unit ~7 s slower to build.
    const auto run = [&]<index_t Rows>(const float (*e)[max_decode_head_dim], const float (*o)[max_decode_head_dim / 2],
                                      float* si) {
        if (dim == 64) detail::decode_scores_rows<Rows, 2>(e, o, dim, k, k_stride, n, si, s_stride, fetch);
        else detail::decode_scores_rows<Rows, 0>(e, o, dim, k, k_stride, n, si, s_stride, fetch);
    };
    // bf16 keys: the queries split by parity, matching the halves of each key word.
    alignas(64) float even[max_decode_rows][max_decode_head_dim];
    alignas(64) float odd[max_decode_rows][max_decode_head_dim / 2];
    for (index_t i0 = 0; i0 < rows; i0 += max_decode_rows) {
        const index_t group = std::min(rows - i0, max_decode_rows);
        for (index_t i = 0; i < group; ++i) {
            const float* qi = q + (i0 + i) * q_stride;
            if constexpr (std::is_same_v<KV, float>) {
                std::copy_n(qi, dim, even[i]);
            } else {
                for (int c = 0; c < dim / 2; ++c) even[i][c] = qi[2 * c], odd[i][c] = qi[2 * c + 1];
            }
        }
        float* si = s + i0 * s_stride;
        switch (group) {
        case 1: run.template operator()<1>(even, odd, si); break;
        case 2: run.template operator()<2>(even, odd, si); break;
        case 3: run.template operator()<3>(even, odd, si); break;
        default: run.template operator()<4>(even, odd, si); break;
        }
    }
}

namespace detail {
/// decode_values for a constant row count and pass width (32 or 64 output
/// dimensions): the accumulators are then a fixed set of registers. With run-time
/// bounds GCC kept them in a stack array and copied it with memcpy once per value
/// row (~5% of a 16-sequence fp32 decode step).
template <index_t Rows, int Width, class KV>
CPX_TARGET_AVX512 void decode_values_pass(const float* p, index_t p_stride, const KV* v, index_t v_stride, index_t n,
                                          float* o, index_t o_stride, bool fetch) {
    constexpr int vectors = Width / 16;
    __m512 acc[Rows][vectors];
    for (auto& a : acc)
        for (auto& x : a) x = _mm512_setzero_ps();
    for (index_t j = 0; j < n; ++j) {
        if (fetch && j + decode_value_prefetch_rows < n)
            fetch_lines<Fetch::l1>(v + (j + decode_value_prefetch_rows) * v_stride,
                                   Width * static_cast<index_t>(sizeof(KV)));
        __m512 x[vectors];
        if constexpr (std::is_same_v<KV, float>) {
            const float* vj = v + j * v_stride;
            for (int b = 0; b < vectors; ++b) x[b] = _mm512_loadu_ps(vj + 16 * b);
        } else {
            // x[0], x[1]: even and odd dimensions of [0, 32); x[2], x[3]: of the next 32.
            const std::uint16_t* vj = &v[j * v_stride].bits;
            for (int b = 0; b < Width / 32; ++b) {
                const __m512i words = _mm512_loadu_si512(vj + 32 * b);
                x[2 * b] = bf16_low_halves(words);
                x[2 * b + 1] = bf16_high_halves(words);
            }
        }
        for (index_t i = 0; i < Rows; ++i) {
            const __m512 pij = _mm512_set1_ps(p[i * p_stride + j]);
            for (int b = 0; b < vectors; ++b) acc[i][b] = _mm512_fmadd_ps(x[b], pij, acc[i][b]);
        }
    }
    for (index_t i = 0; i < Rows; ++i) {
        float* oi = o + i * o_stride;
        if constexpr (std::is_same_v<KV, float>) {
            for (int b = 0; b < vectors; ++b) _mm512_storeu_ps(oi + 16 * b, acc[i][b]);
        } else {
            alignas(64) float parts[2][16];
            for (int b = 0; b < Width / 32; ++b) {
                _mm512_store_ps(parts[0], acc[i][2 * b]);
                _mm512_store_ps(parts[1], acc[i][2 * b + 1]);
                for (int e = 0; e < 16; ++e) {
                    oi[32 * b + 2 * e] = parts[0][e];
                    oi[32 * b + 2 * e + 1] = parts[1][e];
                }
            }
        }
    }
}

template <index_t Rows, class KV>
CPX_TARGET_AVX512 void decode_values_rows(const float* p, index_t p_stride, const KV* v, index_t v_stride, index_t n,
                                          int dim, float* o, index_t o_stride, bool fetch) {
    // 128 output dimensions per pass for up to two rows (Rows x 8 accumulators in
    // registers), 64 for more rows, then 32. A pass over part of a wider value row
    // reads every other pair of lines and the next pass the rest: with 128-wide
    // passes PRISM-mini (heads of 128, one query row each) took 6.0-6.6 ms per
    // bf16 decode step at 512 cached tokens on one thread instead of 7.0-7.3
    // (Zen 4, alternated binaries). Scoring 128-wide keys with a constant
    // dimension loop, as for 64, was level.
    int c0 = 0;
    if constexpr (Rows <= 2)
        for (; c0 + 128 <= dim; c0 += 128)
            decode_values_pass<Rows, 128>(p, p_stride, v + c0, v_stride, n, o + c0, o_stride, fetch);
    for (; c0 + 64 <= dim; c0 += 64)
        decode_values_pass<Rows, 64>(p, p_stride, v + c0, v_stride, n, o + c0, o_stride, fetch);
    if (c0 < dim) decode_values_pass<Rows, 32>(p, p_stride, v + c0, v_stride, n, o + c0, o_stride, fetch);
}
}  // namespace detail

/// o[i] = sum_{j < n} p[i * p_stride + j] v[j] for i < rows; value j starts at
/// v + j * v_stride; o rows are `dim` floats, `o_stride` apart.
template <class KV>
CPX_TARGET_AVX512
void decode_values(const float* p, index_t p_stride, index_t rows, const KV* v, index_t v_stride, index_t n, int dim,
                   float* o, index_t o_stride) {
    static_assert(std::is_same_v<KV, float> || std::is_same_v<KV, bf16>, "decode_values: fp32 or bf16 values");
    static_assert(max_decode_rows == 4, "decode_values dispatches 1 to 4 rows");
    // Callers keep rows <= max_decode_rows (decode_kernel_fits); more rows are
    // still right, four at a time, each group reading the values again.
    const bool fetch = stream_fetch_into_l1();
    for (index_t i0 = 0; i0 < rows; i0 += max_decode_rows) {
        const float* pi = p + i0 * p_stride;
        float* oi = o + i0 * o_stride;
        switch (std::min(rows - i0, max_decode_rows)) {
        case 1: detail::decode_values_rows<1>(pi, p_stride, v, v_stride, n, dim, oi, o_stride, fetch); break;
        case 2: detail::decode_values_rows<2>(pi, p_stride, v, v_stride, n, dim, oi, o_stride, fetch); break;
        case 3: detail::decode_values_rows<3>(pi, p_stride, v, v_stride, n, dim, oi, o_stride, fetch); break;
        default: detail::decode_values_rows<4>(pi, p_stride, v, v_stride, n, dim, oi, o_stride, fetch); break;
        }
    }
}

}  // namespace cpx::cpu::avx512

// The fp32- and bf16-cache kernels, declared extern with CPX_EXTERN_KERNELS and defined by
// cpu/kernel_instances.hpp, as CPX_LINEAR_INSTANCES in cpu/kernels/linear.hpp.
#define CPX_ATTENTION_DECODE_INSTANCE(extern_, KV)                                                               \
    extern_ template void cpx::cpu::avx512::decode_scores<KV>(const float*, cpx::index_t, cpx::index_t, int,     \
                                                              const KV*, cpx::index_t, cpx::index_t, float*,     \
                                                              cpx::index_t);                                     \
    extern_ template void cpx::cpu::avx512::decode_values<KV>(const float*, cpx::index_t, cpx::index_t, const KV*, \
                                                              cpx::index_t, cpx::index_t, int, float*, cpx::index_t);
#define CPX_ATTENTION_DECODE_INSTANCES(extern_) \
    CPX_ATTENTION_DECODE_INSTANCE(extern_, float) CPX_ATTENTION_DECODE_INSTANCE(extern_, cpx::bf16)
#else
#define CPX_ATTENTION_DECODE_INSTANCES(extern_)
#endif

#ifdef CPX_EXTERN_KERNELS
CPX_ATTENTION_DECODE_INSTANCES(extern)
#endif

#pragma once
// Causal multi-head attention over a key/value sequence, the one attention
// core of the CPU path (COMPLEXITY-DEEP's GQA and PRISM's differential heads
// both call it). For query row t (absolute position offset + t) and query
// head h reading KV head h / groups:
//     out[t, h] = sum_{j <= offset + t} softmax_j(scale * q[t, h] . k[j, h / groups]) v[j, h / groups]
// The softmax is max-subtracted with fp32 accumulation (cpu/kernels/softmax_avx512.hpp or
// softmax_avx2.hpp where vector_isa() allows, Eigen's expressions otherwise). Work is split over
// (KV head, block of query rows); each block stacks the queries of the
// `groups` heads that share a KV head into one GEMM against that head's keys,
// so K and V are read once per block and the products run at GEMM speed.
//
// Arithmetic of those block products (cpu/runtime/compute.hpp), the model's choice:
// each KV head's keys and values packed once per call into panels
// (cpu/kernels/packed_panels.hpp; a block reads the prefix of the keys it sees) for
// our packed fp32 kernel (fp32 and fp32_packed alike, where the vector level is AVX2
// or AVX-512: Eigen's GEMM otherwise) or, for bf16, the vdpbf16ps kernel (queries and
// softmax probabilities rounded to bf16, fp32 sums, fp32 softmax). Problems of 8 query
// rows or fewer (decode) keep the fp32 kernels that read the cache in place
// (cpu/kernels/attention_decode_avx512.hpp or attention_decode_avx2.hpp, as
// vector_isa() allows).

#include "cpx/cpu/runtime/eigen.hpp"

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/runtime/aligned_buffer.hpp"
#include "cpx/cpu/kernels/attention_decode_avx2.hpp"
#include "cpx/cpu/kernels/attention_decode_avx512.hpp"
#include "cpx/cpu/runtime/compute_support.hpp"
#include "cpx/cpu/kernels/gemm_bf16.hpp"
#include "cpx/cpu/kernels/gemm_f32_packed.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"
#include "cpx/cpu/kernels/softmax_avx2.hpp"
#include "cpx/cpu/kernels/softmax_avx512.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/cpu/runtime/vector_isa.hpp"

namespace cpx::cpu {

/// The default observer: attention probabilities are not reported.
struct NoAttentionObserver {};

/// An observer receives, for every (query head, query row), the normalised
/// probabilities over keys 0..position: observe(head, position, probs, count)
/// with count = position + 1. It is called concurrently from several threads,
/// each call for a distinct (head, position) pair, so it must only write
/// state owned by that pair (or synchronise).
template <class F>
concept AttentionObserver =
    std::same_as<F, NoAttentionObserver> || std::invocable<const F&, int, index_t, const float*, index_t>;

/// Query rows of a problem above which its products run on packed keys and values;
/// fewer (decode steps) keep the kernels that read the cache in place: packing the
/// keys and values of a step would read the cache once more to use it once.
inline constexpr index_t attention_packed_max_plain_rows = 8;

/// Query rows per work block: the `groups` heads sharing a KV head are stacked,
/// so a block is a GEMM of about 64 query rows.
constexpr index_t attention_block_rows(int groups) { return std::max<index_t>(1, 64 / std::max(1, groups)); }

/// Per-thread scratch of the attention core. Calls grow it when they need more;
/// `reserve` sizes it up front so that later calls (decode steps) allocate nothing.
class AttentionWorkspace {
public:
    /// Room for calls with up to `max_keys` keys (cache length after the call),
    /// `groups` query heads per KV head and the given head dimensions.
    /// `kv_needs_conversion`: the K/V storage is not fp32 (a bf16 cache).
    void reserve(int groups, int qk_dim, int v_dim, index_t max_keys, bool kv_needs_conversion) {
        ensure(floats_per_thread(groups, qk_dim, v_dim, max_keys, kv_needs_conversion), max_threads());
    }

    static std::size_t floats_per_thread(int groups, int qk_dim, int v_dim, index_t max_keys,
                                         bool kv_needs_conversion) {
        const Layout l = layout(attention_block_rows(groups) * groups, qk_dim, v_dim, max_keys);
        return kv_needs_conversion ? l.total : l.v_wide;
    }

    /// Where each scratch matrix of one block starts (in floats, each on a
    /// cache line): stacked queries [m, qk], scores [m, keys] with a padded row
    /// stride, outputs [m, v], then widened keys and values for a bf16 store.
    struct Layout {
        std::size_t score_stride, scores, outputs, k_wide, v_wide, total;
    };
    static Layout layout(index_t m, int qk_dim, int v_dim, index_t keys) {
        const auto pad = [](index_t n) { return pad_to_cache_line<float>(static_cast<std::size_t>(n)); };
        Layout l{};
        l.score_stride = pad(keys);
        l.scores = pad(m * qk_dim);
        l.outputs = l.scores + static_cast<std::size_t>(m) * l.score_stride;
        l.k_wide = l.outputs + pad(m * v_dim);
        l.v_wide = l.k_wide + pad(keys * qk_dim);
        l.total = l.v_wide + pad(keys * v_dim);
        return l;
    }

    void ensure(std::size_t per_thread, int threads) {
        if (per_thread <= per_thread_ && threads <= threads_) return;
        per_thread_ = pad_to_cache_line<float>(std::max(per_thread, per_thread_));
        threads_ = std::max(threads, threads_);
        buffer_.assign(per_thread_ * static_cast<std::size_t>(threads_), 0.0f);
    }

    float* thread_buffer(int thread) { return buffer_.data() + per_thread_ * static_cast<std::size_t>(thread); }
    std::size_t bytes() const {
        std::size_t b = buffer_.size() * sizeof(float);
        for (const PackedKV& p : packed_) b += p.k16.bytes() + p.v16.bytes() + p.k32.bytes() + p.v32.bytes();
        for (const Bf16Scratch& x : scratch_) b += x.bytes();
        return b;
    }

    /// One KV head's keys and values of one problem, packed for the packed products.
    struct PackedKV {
        PackedBf16 k16, v16;
        PackedF32 k32, v32;
    };
    /// Called before the parallel region: room for `heads` packed KV heads and one bf16
    /// scratch per thread.
    void ensure_packed(std::size_t heads, int threads) {
        if (packed_.size() < heads) packed_.resize(heads);
        if (scratch_.size() < static_cast<std::size_t>(threads)) scratch_.resize(static_cast<std::size_t>(threads));
    }
    PackedKV& packed(std::size_t head) { return packed_[head]; }
    Bf16Scratch& bf16_scratch(int thread) { return scratch_[static_cast<std::size_t>(thread)]; }

private:
    std::vector<PackedKV> packed_;
    std::vector<Bf16Scratch> scratch_;
    AlignedVector<float> buffer_;
    std::size_t per_thread_ = 0;
    int threads_ = 0;
};

namespace detail {
using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using StridedConstMap = Eigen::Map<const RowMajorF, Eigen::Unaligned, Eigen::OuterStride<>>;

template <class KV>
void check_attention_shapes(const HeadRows<const float>& q, const HeadRows<const KV>& k,
                            const HeadRows<const KV>& v, const HeadRows<float>& out, index_t offset) {
    require<ShapeError>(q.heads > 0 && k.heads > 0 && q.heads % k.heads == 0, "attention: ", q.heads,
                        " query heads cannot share ", k.heads, " KV heads evenly");
    require<ShapeError>(v.heads == k.heads, "attention: ", k.heads, " key heads but ", v.heads, " value heads");
    require<ShapeError>(k.head_dim == q.head_dim, "attention: query head dim ", q.head_dim, " but key head dim ",
                        k.head_dim);
    require<ShapeError>(out.heads == q.heads && out.head_dim == v.head_dim && out.rows == q.rows,
                        "attention: output is ", out.rows, " rows x ", out.heads, " heads x ", out.head_dim,
                        ", expected ", q.rows, " x ", q.heads, " x ", v.head_dim);
    require<InputError>(offset >= 0, "attention: negative position offset ", offset);
    require<InputError>(k.rows >= offset + q.rows && v.rows >= offset + q.rows, "attention: ", q.rows,
                        " queries at offset ", offset, " need ", offset + q.rows, " keys and values, have ", k.rows,
                        " and ", v.rows);
}

/// s[0, valid) becomes exp(s - max), s[valid, n) 0, and the return value is 1 / their sum, for
/// the caller to scale its output row with. With the vector kernel of `isa`
/// (cpu/kernels/softmax_avx512.hpp, softmax_avx2.hpp), the caller's vector_isa().
inline float masked_exp_row(float* s, index_t valid, index_t n, [[maybe_unused]] VectorIsa isa) {
#ifdef CPX_HAVE_SOFTMAX_AVX512
    if (isa == VectorIsa::avx512) return avx512::masked_exp_row(s, valid, n);
#endif
#ifdef CPX_HAVE_SOFTMAX_AVX2
    if (isa == VectorIsa::avx2) return avx2::masked_exp_row(s, valid, n);
#endif
    Eigen::Map<Eigen::ArrayXf> live(s, valid);
    const float m = live.maxCoeff();
    live = (live - m).exp();
    std::fill(s + valid, s + n, 0.0f);
    return 1.0f / live.sum();
}

/// Max-subtracted softmax of s[0, valid) in place; s[valid, n) set to 0: masked_exp_row, then
/// the scaling (the vector kernels' own, which scale as they go).
inline void masked_softmax_row(float* s, index_t valid, index_t n, [[maybe_unused]] VectorIsa isa) {
#ifdef CPX_HAVE_SOFTMAX_AVX512
    if (isa == VectorIsa::avx512) return avx512::masked_softmax_row(s, valid, n);
#endif
#ifdef CPX_HAVE_SOFTMAX_AVX2
    if (isa == VectorIsa::avx2) return avx2::masked_softmax_row(s, valid, n);
#endif
    const float inverse = masked_exp_row(s, valid, n, isa);
    Eigen::Map<Eigen::ArrayXf>(s, valid) *= inverse;
}

/// Rows of a block up to which the softmax's 1 / sum is applied to the output rows (dv values
/// each) instead of the probabilities (up to n each); larger blocks (more than 256 query heads
/// per KV head) normalise the probabilities.
inline constexpr index_t max_deferred_rows = 256;

/// Copies rows [0, n) of one head to a contiguous fp32 [n, dim] block.
template <class KV>
void widen_head_rows(const HeadRows<const KV>& x, int head, index_t n, float* dst) {
    for (index_t j = 0; j < n; ++j) {
        const KV* src = x.head(j, head);
        float* d = dst + j * x.head_dim;
        for (int i = 0; i < x.head_dim; ++i) d[i] = to_float(src[i]);
    }
}
}  // namespace detail

/// One attention problem of a batch: the queries of one sequence against its
/// keys and values (see causal_attention for the layout rules).
template <class KV>
struct AttentionProblem {
    HeadRows<const float> q;
    HeadRows<const KV> k, v;
    HeadRows<float> out;
    index_t offset = 0;
};

/// An observer of a batch also learns which problem a row belongs to:
/// observe(problem, head, position, probs, count), with the same concurrency
/// rules as AttentionObserver.
template <class F>
concept BatchAttentionObserver =
    std::same_as<F, NoAttentionObserver> || std::invocable<const F&, std::size_t, int, index_t, const float*, index_t>;

/// Several independent sequences (a batch with different lengths and cache
/// offsets) in one parallel region: all (problem, KV head, row block) items are
/// shared among the threads. Every problem must have the same head shape.
///
/// `compute`: the arithmetic of the blocks' products (see the file comment); a choice
/// whose kernels this machine lacks runs fp32.
template <class KV, class Observer = NoAttentionObserver>
    requires BatchAttentionObserver<Observer>
void causal_attention_batch(std::span<const AttentionProblem<KV>> problems, float scale, AttentionWorkspace& ws,
                            Compute compute = Compute::fp32, const Observer& observe = Observer{}) {
    if (problems.empty()) return;
    const auto& first = problems.front();
    index_t max_keys = 0, total_items = 0;
    double work = 0.0;
    for (const auto& p : problems) {
        detail::check_attention_shapes(p.q, p.k, p.v, p.out, p.offset);
        require<ShapeError>(p.q.heads == first.q.heads && p.k.heads == first.k.heads &&
                                p.q.head_dim == first.q.head_dim && p.v.head_dim == first.v.head_dim,
                            "attention batch: every problem must have the same heads and head dimensions");
        max_keys = std::max(max_keys, p.offset + p.q.rows);
        work += static_cast<double>(p.q.rows) * static_cast<double>(p.offset + p.q.rows);
    }
    constexpr bool convert = !std::is_same_v<KV, float>;
    const int groups = first.q.heads / first.k.heads, dq = first.q.head_dim, dv = first.v.head_dim;
    const int kv_heads = first.k.heads;
    const index_t block = attention_block_rows(groups);
    work *= static_cast<double>(first.q.heads) * (dq + dv);
    ws.ensure(AttentionWorkspace::floats_per_thread(groups, dq, dv, max_keys, convert), max_threads());
    // Packed products only for problems of many query rows (prefill), where packing pays:
    // a decode problem of the same batch reads its cache in place, unpacked.
    const auto packs = [](const AttentionProblem<KV>& p) { return p.q.rows > attention_packed_max_plain_rows; };
    compute = runnable_compute(compute);
    // The default arithmetic packs as well where the packed kernel runs, as its weight products
    // do (cpu/kernels/gemm_repacked.hpp): the packs are per call under either choice. 187M's core
    // (12 query heads on 4 KV heads of 64), Zen 3: docs/BF16.md "fp32 on stored weights".
    if (compute == Compute::fp32 && vector_isa() != VectorIsa::portable)
        compute = runnable_compute(Compute::fp32_packed);
    if (std::none_of(problems.begin(), problems.end(), packs)) compute = Compute::fp32;
    if (compute != Compute::fp32) {
        const std::size_t heads = problems.size() * static_cast<std::size_t>(kv_heads);
        ws.ensure_packed(heads, max_threads());
        parallel_for(heads, heads > 1, [&](std::size_t i) {
            const AttentionProblem<KV>& p = problems[i / static_cast<std::size_t>(kv_heads)];
            if (!packs(p)) return;
            const int kh = static_cast<int>(i % static_cast<std::size_t>(kv_heads));
            const index_t n = p.offset + p.q.rows;
            const StridedMatrix<const KV> keys{p.k.head(0, kh), n, dq, p.k.row_stride};
            const StridedMatrix<const KV> values{p.v.head(0, kh), n, dv, p.v.row_stride};
            AttentionWorkspace::PackedKV& pk = ws.packed(i);
            if (compute == Compute::bf16) {
                pk.k16.assign(keys, WeightOrientation::out_in);  // B of S = Q K^T: keys are outputs
                pk.v16.assign(values, WeightOrientation::in_out);  // B of O = P V: keys are inputs
            } else {
                pk.k32.assign(keys, WeightOrientation::out_in);
                pk.v32.assign(values, WeightOrientation::in_out);
            }
        }, Schedule::one_by_one);
    }

    // Items of problem i are [item_begin[i], item_begin[i+1]); within a problem
    // the largest blocks (latest rows, most keys) come first for the dynamic schedule.
    const auto blocks_of = [&](const AttentionProblem<KV>& p) { return (p.q.rows + block - 1) / block; };
    for (const auto& p : problems) total_items += blocks_of(p) * kv_heads;
    const VectorIsa isa = vector_isa();
    [[maybe_unused]] const bool avx512 = isa == VectorIsa::avx512;
    const Bf16Level level = compute == Compute::bf16 ? best_bf16_level() : Bf16Level::none;
    [[maybe_unused]] const bool rounded_inputs = level == Bf16Level::avx512_bf16 || level == Bf16Level::amx;

    const auto body = [&](index_t item, int slot) {
        std::size_t pi = 0;
        index_t local = item;
        while (local >= blocks_of(problems[pi]) * kv_heads) local -= blocks_of(problems[pi++]) * kv_heads;
        const AttentionProblem<KV>& p = problems[pi];
        const auto& q = p.q;
        const auto& k = p.k;
        const auto& v = p.v;
        const index_t offset = p.offset, rows = q.rows, blocks = blocks_of(p);
        const index_t b = blocks - 1 - local / kv_heads;
        const int kh = static_cast<int>(local % kv_heads);
        const index_t t0 = b * block, nrows = std::min(block, rows - t0);
        const index_t n = offset + t0 + nrows;  // keys seen by the block's last row
        const index_t m = nrows * groups;

        const auto l = AttentionWorkspace::layout(m, dq, dv, n);
        const index_t ss = static_cast<index_t>(l.score_stride);
        float* qg = ws.thread_buffer(slot);
        float* s = qg + l.scores;
        float* o = qg + l.outputs;
        float* kc = qg + l.k_wide;
        float* vc = qg + l.v_wide;
        for (int g = 0; g < groups; ++g)
            for (index_t r = 0; r < nrows; ++r) {
                const float* src = q.head(t0 + r, kh * groups + g);
                float* dst = qg + (g * nrows + r) * dq;
                for (int i = 0; i < dq; ++i) dst[i] = scale * src[i];
            }

        // The softmax of each stacked row, its 1 / sum applied to the output row in emit()
        // instead of the row's probabilities. 187M's attention core (12 query heads on 4 KV
        // heads of 64), one thread, alternated (Zen 5): 512 tokens bf16 1-3% and fp32_packed
        // 1-2% less time, 2048 tokens bf16 3-6% (fp32_packed within the noise). An observer
        // sees the probabilities in the widened-keys scratch (free once the scores exist), so
        // observing a call does not change its result.
        constexpr bool observed = !std::is_same_v<Observer, NoAttentionObserver>;
        const bool deferred = m <= detail::max_deferred_rows;
        float inverse[detail::max_deferred_rows];
        const auto normalise = [&] {
            for (int g = 0; g < groups; ++g)
                for (index_t r = 0; r < nrows; ++r) {
                    float* srow = s + (g * nrows + r) * ss;
                    const index_t position = offset + t0 + r;
                    const float* probs = srow;
                    if (deferred) {
                        const float f = inverse[g * nrows + r] = detail::masked_exp_row(srow, position + 1, n, isa);
                        if constexpr (observed) {
                            for (index_t j = 0; j <= position; ++j) kc[j] = srow[j] * f;
                            probs = kc;
                        }
                    } else {
                        detail::masked_softmax_row(srow, position + 1, n, isa);
                    }
                    if constexpr (observed) observe(pi, kh * groups + g, position, probs, position + 1);
                }
        };
        // The block's output rows to their heads, scaled where the softmax was not.
        const auto emit = [&] {
            for (int g = 0; g < groups; ++g)
                for (index_t r = 0; r < nrows; ++r) {
                    const float* src = o + (g * nrows + r) * dv;
                    float* dst = p.out.head(t0 + r, kh * groups + g);
                    if (deferred) {
                        const float f = inverse[g * nrows + r];
                        for (int i = 0; i < dv; ++i) dst[i] = src[i] * f;
                    } else {
                        std::copy_n(src, dv, dst);
                    }
                }
        };
#ifdef CPX_HAVE_ATTENTION_DECODE_AVX512
        // Decode (a few stacked query rows): keys and values read once, from the
        // cache itself, bf16 widened in registers; one fp32 row too (PRISM's heads,
        // MHA), which Eigen's GEMV ran without the kernel's prefetch of the next
        // cached rows: PRISM-mini decode at 512 cached tokens 5-15% less time (Zen 4).
        if constexpr (std::is_same_v<KV, float> || std::is_same_v<KV, bf16>) {
            if (avx512 && avx512::decode_kernel_fits(m, dq, dv)) {
                avx512::decode_scores(qg, dq, m, dq, k.head(0, kh), k.row_stride, n, s, ss);
                normalise();
                avx512::decode_values(s, ss, m, v.head(0, kh), v.row_stride, n, dv, o, dv);
                emit();
                return;
            }
        }
#endif
#ifdef CPX_HAVE_ATTENTION_DECODE_AVX2
        // The same on AVX2 (cpu/kernels/attention_decode_avx2.hpp), for bf16 caches: 187M's decode
        // core (12 query heads on 4 KV heads of 64, 512 cached positions, Zen 3) one sequence
        // on one thread 0.083-0.102 -> 0.055-0.061 ms, 16 sequences on two 0.81-0.98 -> 0.47-0.50
        // ms. fp32 caches too since the kernels score three query rows per key block and take
        // the values in blocks of keys (they had been level with Eigen's GEMV in place): the
        // 16-sequence core of 18 layers, alternated, 0.80-0.87x the time with the caches from
        // memory and 0.68-0.80x in L3; one sequence at 2,048 positions on one thread 0.57x and 0.64x.
        if (isa == VectorIsa::avx2 && avx2::decode_kernel_fits(m, dq, dv)) {
            avx2::decode_scores(qg, dq, m, dq, k.head(0, kh), k.row_stride, n, s, ss);
            normalise();
            avx2::decode_values(s, ss, m, v.head(0, kh), v.row_stride, n, dv, o, dv);
            emit();
            return;
        }
#endif
        if (compute != Compute::fp32 && packs(p)) {
            // This block sees the first n keys of its head's packed keys and values.
            AttentionWorkspace::PackedKV& pk = ws.packed(pi * static_cast<std::size_t>(kv_heads) + kh);
            const StridedMatrix<const float> queries{qg, m, dq, dq};
            const StridedMatrix<float> scores{s, m, n, ss}, outputs{o, m, dv, dv};
            if (compute == Compute::bf16) {
                Bf16Scratch& x = ws.bf16_scratch(slot);
                gemm_bf16(queries, pk.k16.view().prefix(n, dq), scores, false, x, level, 1);
#if defined(CPX_HAVE_SOFTMAX_AVX512) && defined(CPX_HAVE_GEMM_BF16_AVX512)
                // Where the kernel takes bf16 inputs, the softmax writes its exponentials rounded
                // to bf16 straight into the P V product's input rows: the same bits as rounding
                // the fp32 row in gemm_bf16, one pass over the scores fewer. 187M's core (12
                // query heads on 4 KV heads of 64, fp32 keys), Zen 5, alternated: 2048 tokens
                // 20.3-20.7 -> 19.8-20.1 ms on one thread, 10.5-11.0 -> 10.0-10.5 on two.
                if (!observed && deferred && rounded_inputs) {
                    const index_t ld = (n + 31) / 32 * 32, padded = bf16_rounded_rows(m, level);
                    std::uint16_t* pa = x.rows(padded, ld);
                    for (int g = 0; g < groups; ++g)
                        for (index_t r = 0; r < nrows; ++r) {
                            const index_t row = g * nrows + r;
                            inverse[row] = avx512::masked_exp_row_bf16(s + row * ss, offset + t0 + r + 1,
                                                                       pa + row * ld, ld);
                        }
                    std::fill(pa + m * ld, pa + padded * ld, std::uint16_t{0});
                    gemm_bf16_rounded(pa, ld, m, pk.v16.view().prefix(dv, n), outputs, false, level, 1);
                    emit();
                    return;
                }
#endif
                normalise();
                gemm_bf16(StridedMatrix<const float>(scores), pk.v16.view().prefix(dv, n), outputs, false, x, level, 1);
            } else {
                gemm_f32_packed(queries, pk.k32.view().prefix(n, dq), scores, false, 1);
                normalise();
                gemm_f32_packed(StridedMatrix<const float>(scores), pk.v32.view().prefix(dv, n), outputs, false, 1);
            }
            emit();
            return;
        }
        Eigen::Map<detail::RowMajorF> qm(qg, m, dq), om(o, m, dv);
        Eigen::Map<detail::RowMajorF, Eigen::Aligned64, Eigen::OuterStride<>> sm(s, m, n, Eigen::OuterStride<>(ss));
        const float *kbase, *vbase;
        index_t kstride, vstride;
        if constexpr (convert) {
            detail::widen_head_rows(k, kh, n, kc);
            detail::widen_head_rows(v, kh, n, vc);
            kbase = kc, kstride = dq, vbase = vc, vstride = dv;
        } else {
            kbase = k.head(0, kh), kstride = k.row_stride, vbase = v.head(0, kh), vstride = v.row_stride;
        }
        const detail::StridedConstMap keys(kbase, n, dq, Eigen::OuterStride<>(kstride));
        const detail::StridedConstMap values(vbase, n, dv, Eigen::OuterStride<>(vstride));
        // A few stacked rows (decode) are matrix-vector products: no packing of
        // the keys, no GEMM blocking buffers.
        const bool rowwise = m <= 4;
        if (rowwise)
            for (index_t i = 0; i < m; ++i) sm.row(i).noalias() = qm.row(i) * keys.transpose();
        else
            sm.noalias() = qm * keys.transpose();
        normalise();
        if (rowwise)
            for (index_t i = 0; i < m; ++i) om.row(i).noalias() = sm.row(i) * values;
        else
            om.noalias() = sm * values;
        emit();
    };
    // Batched decode (one new row per sequence, at least two sequences per thread): a thread
    // takes all KV heads of a sequence one after the other, instead of (sequence, head) items
    // dealt one at a time. Measured, not explained: 187M, 16 sequences at 512 cached tokens,
    // compute:bf16, two threads, both orders alternated in one binary: whole steps 12.0-12.3 ->
    // 11.2-11.7 ms in minutes reading 80-90 GB/s, 2-4% less at ~52 GB/s (Zen 5).
    const index_t sequence_items = total_items / kv_heads;
    const bool decode_rows =
        std::all_of(problems.begin(), problems.end(), [](const AttentionProblem<KV>& p) { return p.q.rows == 1; });
    if (kv_heads > 1 && decode_rows && sequence_items >= 2 * max_threads()) {
        parallel_for(sequence_items, work > 1e5, [&](index_t i, int slot) {
            for (int kh = 0; kh < kv_heads; ++kh) body(i * kv_heads + kh, slot);
        }, Schedule::one_by_one);
    } else {
        parallel_for(total_items, total_items > 1 && work > 1e5, body, Schedule::one_by_one);
    }
}

/// The causal attention core (see the file comment). q: [T] rows of
/// `heads` query heads; k, v: at least offset + T rows of the KV heads (a cache
/// holds keys of positions 0.. in rows 0..); out: [T] rows of `heads` heads of
/// v's dimension. KV may be float or bf16 (a bf16 cache is widened per block).
template <class KV, class Observer = NoAttentionObserver>
    requires AttentionObserver<Observer>
void causal_attention(const HeadRows<const float>& q, const HeadRows<const KV>& k, const HeadRows<const KV>& v,
                      const HeadRows<float>& out, index_t offset, float scale, AttentionWorkspace& ws,
                      const Observer& observe = Observer{}, Compute compute = Compute::fp32) {
    const AttentionProblem<KV> problem{q, k, v, out, offset};
    if constexpr (std::is_same_v<Observer, NoAttentionObserver>) {
        causal_attention_batch<KV>(std::span<const AttentionProblem<KV>>(&problem, 1), scale, ws, compute);
    } else {
        const auto forward = [&observe](std::size_t, int head, index_t position, const float* probs, index_t count) {
            observe(head, position, probs, count);
        };
        causal_attention_batch<KV>(std::span<const AttentionProblem<KV>>(&problem, 1), scale, ws, compute, forward);
    }
}

}  // namespace cpx::cpu

// The batched attention's fp32- and bf16-cache instances without an observer (what the models
// run), declared extern with CPX_EXTERN_KERNELS and defined by cpu/kernel_instances.hpp, as
// CPX_LINEAR_INSTANCES in cpu/kernels/linear.hpp.
#define CPX_ATTENTION_INSTANCE(extern_, KV)                                                                 \
    extern_ template void cpx::cpu::causal_attention_batch<KV, cpx::cpu::NoAttentionObserver>(              \
        std::span<const cpx::cpu::AttentionProblem<KV>>, float, cpx::cpu::AttentionWorkspace&, cpx::cpu::Compute, \
        const cpx::cpu::NoAttentionObserver&);
#define CPX_ATTENTION_INSTANCES(extern_) \
    CPX_ATTENTION_INSTANCE(extern_, float) CPX_ATTENTION_INSTANCE(extern_, cpx::bf16)
#ifdef CPX_EXTERN_KERNELS
CPX_ATTENTION_INSTANCES(extern)
#endif

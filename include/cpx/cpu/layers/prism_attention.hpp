#pragma once
// PRISM's pi-RoPE differential attention on the CPU (docs/MODELS.md §17).
// One overcomplete dictionary U [2HD, d] replaces Q, K, V and O:
//     h = x U^T, split into H signal heads and H noise heads of dimension D;
//     values are h, queries and keys the same rotated h (RoPE base theta*m for
//     signal heads, theta/m for noise heads, at absolute positions);
//     y = causal softmax attention per head with scale 1/sqrt(D);
//     out = (concat(y_signal, -lambda * y_noise) U) / sqrt(2 H R).
// The attention itself is the shared causal core (cpu/layers/causal_attention.hpp),
// batched over all 2H heads of every sequence (one call for the sequences that
// run through a KV cache, one for those that do not): signal and noise heads
// differ only in the RoPE applied before it and the weight applied after it.
// The two products with U are the shared weight products (cpu/kernels/linear.hpp).
// One sequence's decode row (batch 1) runs head by head instead (decode_row below).

#include <algorithm>
#include <cmath>
#include <span>
#include <type_traits>
#include <vector>

#include "cpx/config/prism_attention_shape.hpp"
#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/runtime/aligned_buffer.hpp"
#include "cpx/cpu/layers/causal_attention.hpp"
#include "cpx/cpu/kernels/linear.hpp"
#include "cpx/cpu/layers/rope.hpp"
#include "cpx/cpu/layers/sequence_rows.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/cpu/runtime/workspace.hpp"

namespace cpx::cpu {

/// The weights of one layer: the dictionary (stored as W: float or bf16) and
/// the run-time noise weight.
template <class W = float>
struct PrismAttentionWeights {
    Matrix<const W> u;    ///< attn.u_proj.weight, [2HD, d]
    float lambda = 0.0f;  ///< attn.lambda_q
    /// Packed copies of U for the chosen arithmetic, or null: as x U^T (out_in) and as y U (in_out).
    const PackedWeight* u_packed = nullptr;
    const PackedWeight* u_t_packed = nullptr;
};

/// One PRISM attention layer's computation for a configuration shape `S`,
/// with U stored as W and keys and values cached as KV (each float or bf16).
/// The object holds the two RoPE tables and the scratch buffers; one object
/// serves every layer of a model. Not for concurrent use from several threads.
template <PrismAttentionShapeType S, class W = float, class KV = float>
class PrismAttention {
public:
    using Shape = S;
    using Weights = PrismAttentionWeights<W>;
    static constexpr int H = S::heads, D = S::head_dim, width = S::u_rows;

    /// Whether a batch-1 decode row can run head by head (decode_row): the input-major product's
    /// chunks of U's rows hold whole heads. Such a row then does where the CPU runs AVX-512 and
    /// U is unpacked, packed for fp32 arithmetic, or stored in bf16 and packed for bf16 arithmetic
    /// (not fp32 U in bf16 packs).
#ifdef CPX_HAVE_GEMV_AVX512
    static constexpr bool decodes_by_head =
        width % avx512::row_nn_chunks(width) == 0 && (width / avx512::row_nn_chunks(width)) % D == 0;
#else
    static constexpr bool decodes_by_head = false;
#endif

    /// Whether batch-1 decode rows under `compute` (the arithmetic that runs) read the stored U
    /// on this machine (decode_row): a model releasing its stored matrices keeps U then.
    static bool decode_reads_stored_u([[maybe_unused]] Compute compute) {
#ifdef CPX_HAVE_GEMV_AVX512
        if constexpr (decodes_by_head && (std::is_same_v<W, float> || std::is_same_v<W, bf16>))
            return vector_isa() == VectorIsa::avx512 && (compute != Compute::bf16 || std::is_same_v<W, bf16>);
#endif
        return false;
    }

    /// Heads decode_row takes per phase at `keys` cached positions: the most (a power of two
    /// dividing a chunk's heads) whose rows of U, keys and values fit phase_bytes, so that the
    /// first product reads one longer stream of U and its rows are still in L2 for the second.
    /// 768 KiB: three quarters of the 1 MiB L2 of Zen 4 and Zen 5 cores (Sapphire Rapids: 2 MiB).
    /// PRISM-mini batch-1 steps, one thread (Zen 4, both choices in one process, each step over
    /// a read of its bytes): bf16 U and cache at 512 keys (two heads, not one) 1.5-2% less time,
    /// at 128 (four) 3-4%; fp32 at 128 (two) 1.5%; on two threads level. Four heads at 512 keys,
    /// past the budget: 2.5% less on one thread, 2% more on two.
    static constexpr std::size_t phase_bytes = std::size_t{768} << 10;
    static constexpr int heads_per_phase([[maybe_unused]] index_t keys) {
#ifdef CPX_HAVE_GEMV_AVX512
        const std::size_t head =
            std::size_t{D} * (S::hidden * sizeof(W) + 2 * static_cast<std::size_t>(keys) * sizeof(KV));
        int g = 1;
        while (heads_in_chunk % (2 * g) == 0 && static_cast<std::size_t>(2 * g) * head <= phase_bytes) g *= 2;
        return g;
#else
        return 1;
#endif
    }

    explicit PrismAttention(index_t max_positions)
        : signal_(S::signal_rope, D, max_positions), noise_(S::noise_rope, D, max_positions) {}

    index_t max_positions() const { return signal_.positions(); }
    const RopeTable& signal_rope() const { return signal_; }
    const RopeTable& noise_rope() const { return noise_; }

    /// Sizes every buffer for calls of up to `rows` batch rows, `sequences`
    /// sequences and `max_keys` keys per sequence.
    void reserve(index_t rows, index_t sequences, index_t max_keys) {
        const auto n = static_cast<std::size_t>(rows * width);
        grow(h_, n);
        grow(rotated_, n);
        grow(y_, n);
        cached_.reserve(static_cast<std::size_t>(sequences));
        fresh_.reserve(static_cast<std::size_t>(sequences));
        ws_.reserve(1, D, D, max_keys, !std::is_same_v<KV, float>);
        reserve_heads(max_keys);
    }

    /// out (= or +=, per `mode`) PRISM attention of `input` for every sequence
    /// of the batch. input: [N, d]; out: [N, d], not aliasing input, or one row
    /// per sequence under QueryRows::last and none under QueryRows::none
    /// (sequence_rows.hpp). A sequence with a cache appends the rotated keys and
    /// unrotated values of all its new rows at rows [offset, offset + rows) and
    /// attends to all cached positions; one without starts at position 0 and
    /// attends within itself. The observer sees heads 0..H-1 (signal) and
    /// H..2H-1 (noise).
    template <class Observer = NoAttentionObserver>
        requires AttentionObserver<Observer>
    void forward(const Weights& w, const StridedMatrix<const float, S::hidden>& input,
                 std::span<const SequenceRows<KV>> sequences, const StridedMatrix<float, S::hidden>& out, Write mode,
                 const Observer& observe = Observer{}, QueryRows queries = QueryRows::all) {
        const index_t n = input.rows;
        const index_t outs = query_output_rows(queries, n, static_cast<index_t>(sequences.size()));
        check_shapes(w, input, sequences, out, outs, queries);
        if (n == 0) return;
        if constexpr (std::is_same_v<Observer, NoAttentionObserver>) {
            if (decode_row(w, input, sequences, out, mode, queries)) return;
        }

        // h = x U^T: values, and (copied, rotated) queries and keys.
        const StridedMatrix<float, width> h = block_in<width>(h_, n);
        const StridedMatrix<float, width> rotated = block_in<width>(rotated_, n);
        linear<W>(input, w.u, h, Write::overwrite, scratch_, w.u_packed);
        // The row loops of this layer (copy, scale, cache store) stream [n, 2HD]
        // blocks: on one thread they would cap the layer's multi-thread speed-up.
        parallel_for(n, n * width > 65536, [&](index_t r) {
            std::copy_n(h.row(r), width, rotated.row(r));
        });
        const auto all_rot = packed_heads(rotated.data, n, 2 * H, D);
        const auto all_h = packed_heads(h.data, n, 2 * H, D);
        const auto all_y = packed_heads(grow(y_, static_cast<std::size_t>(outs * width)), outs, 2 * H, D);

        // Sequences with a cache read their keys and values from it (type KV);
        // sequences without one read them from this call's projection (fp32).
        cached_.clear();
        fresh_.clear();
        for (std::size_t i = 0; i < sequences.size(); ++i) {
            const SequenceRows<KV>& s = sequences[i];
            if (s.rows == 0) continue;
            const auto rot = all_rot.rows_range(s.begin, s.rows);
            apply_rope(signal_, rot.sub_heads(0, H), s.offset);
            apply_rope(noise_, rot.sub_heads(H, H), s.offset);
            const auto values = all_h.rows_range(s.begin, s.rows);
            // The rows this call finishes: their queries are the same rotated rows.
            const QuerySlice qs = query_slice(queries, s, static_cast<index_t>(i));
            const auto q = all_rot.rows_range(qs.first, qs.count);
            const auto y = all_y.rows_range(qs.out, qs.count);
            const index_t q_offset = s.offset + (qs.first - s.begin);
            if (s.cache_k.data) {
                store(rot, s.cache_k, s.offset);
                store(values, s.cache_v, s.offset);
                if (qs.count) cached_.push_back({q, s.cache_k, s.cache_v, y, q_offset});
            } else if (qs.count) {
                fresh_.push_back({q, rot, values, y, q_offset});
            }
        }
        if (outs == 0) return;
        const float softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
        const Compute compute = compute_of(w.u_packed);
        if constexpr (std::is_same_v<Observer, NoAttentionObserver>) {
            causal_attention_batch<float>(fresh_, softmax_scale, ws_, compute);
            causal_attention_batch<KV>(cached_, softmax_scale, ws_, compute);
        } else {
            const auto batch_observer = [&observe](std::size_t, int head, index_t position, const float* p,
                                                   index_t count) { observe(head, position, p, count); };
            causal_attention_batch<float>(fresh_, softmax_scale, ws_, compute, batch_observer);
            causal_attention_batch<KV>(cached_, softmax_scale, ws_, compute, batch_observer);
        }

        // out = (concat(y_s, -lambda y_n) U) / sqrt(2HR), the scales folded into y.
        const float scale = static_cast<float>(1.0 / std::sqrt(S::output_scale_squared_inverse));
        const float noise_scale = -w.lambda * scale;
        parallel_for(outs, outs * width > 65536, [&](index_t r) {
            float* row = y_.data() + r * width;
            for (index_t i = 0; i < H * D; ++i) row[i] *= scale;
            for (index_t i = H * D; i < width; ++i) row[i] *= noise_scale;
        });
        matmul<W>(rows_of<width, const float>(y_.data(), outs), w.u, out, mode, scratch_, w.u_t_packed);
    }

    /// One sequence without a cache (positions 0..rows-1): the plain layer.
    template <class Observer = NoAttentionObserver>
        requires AttentionObserver<Observer>
    void forward(const Weights& w, Matrix<const float> x, Matrix<float> out,
                 const Observer& observe = Observer{}) {
        const SequenceRows<KV> whole{0, x.extent(0), 0, {}, {}};
        forward(w, rows_of(x), std::span<const SequenceRows<KV>>(&whole, 1), rows_of(out), Write::overwrite, observe);
    }

private:
#ifdef CPX_HAVE_GEMV_AVX512
    /// Chunks of U's rows in the input-major product (gemv_rows_nn_streamed's split).
    static constexpr index_t chunks = avx512::row_nn_chunks(width);
    static constexpr int heads_in_chunk = decodes_by_head ? static_cast<int>(width / chunks / D) : 1;
#endif

    /// One sequence's one new row through its cache (batch-1 decode, AVX-512), head by head:
    /// each thread takes whole chunks of U's rows, as the output product splits them, and for
    /// each phase of its chunk's heads (heads_per_phase) projects the heads' rows of U, rotates
    /// and caches them, attends over the cache and adds the heads' rows of U times their output
    /// to the chunk's partial sums; the chunks are then summed in order. U unpacked or in fp32 packs: every number is
    /// the one the whole-layer path computes (each sum takes the same rows in the same order),
    /// but U's rows are read the second time a head's cache pass after the first (from L2),
    /// not after every head's (from L3 or memory), and the layer forks once instead of three
    /// times. bf16 U in bf16 packs: the products' inputs (the row, the scaled attention output)
    /// are rounded to bf16 as the packed products round them and multiplied with the stored U
    /// in fp32 sums, the bf16 arithmetic's numbers in another order of sums, with U read once
    /// instead of each of its two packs from memory. The second product takes the head's rows
    /// of U in bands of eight (gemv_band_nn_part), its sums held in registers across a band,
    /// where the one-row stream of the whole-layer path loads and stores them for every row,
    /// which bounds it when the rows come from L2: PRISM-mini's attention, eight layers cold
    /// on one thread (Zen 4), 2.01-2.05 ms against 2.11-2.14. Returns false where it does not
    /// apply.
    bool decode_row([[maybe_unused]] const Weights& w,
                    [[maybe_unused]] const StridedMatrix<const float, S::hidden>& input,
                    [[maybe_unused]] std::span<const SequenceRows<KV>> sequences,
                    [[maybe_unused]] const StridedMatrix<float, S::hidden>& out, [[maybe_unused]] Write mode,
                    [[maybe_unused]] QueryRows queries) {
#ifdef CPX_HAVE_GEMV_AVX512
        if constexpr (decodes_by_head && (std::is_same_v<W, float> || std::is_same_v<W, bf16>)) {
            // Packs hold the stored values in another layout (bf16 packs: the stored bf16 values),
            // so the stored U gives the same products read once, where the two packs would each be
            // read from memory; fp32 U in bf16 packs would need rounding on the way.
            const bool bf16_inputs = compute_of(w.u_packed) == Compute::bf16;
            // A released U (kept where this path reads it, models/stored_matrices.hpp, but the
            // vector level may have been forced since) leaves the packs' path.
            if (!w.u.data() || input.rows != 1 || sequences.size() != 1 || queries == QueryRows::none ||
                bf16_inputs != (compute_of(w.u_t_packed) == Compute::bf16) ||
                (bf16_inputs && !std::is_same_v<W, bf16>) || !sequences[0].cache_k.data ||
                vector_isa() != VectorIsa::avx512)
                return false;
            const SequenceRows<KV>& s = sequences[0];
            const index_t position = s.offset, stride = avx512::row_nn_stride(S::hidden);
            reserve_heads(position + 1);
            float* const h = grow(h_, width);
            float* const rotated = grow(rotated_, width);
            float* const y = grow(y_, width);
            float* const parts = head_parts_.data();
            const StridedMatrix<const W> u = rows_of(w.u);
            StridedMatrix<const float> x = input;
            if (bf16_inputs) {
                float* const rounded = grow(rounded_input_, S::hidden);
                for (index_t i = 0; i < S::hidden; ++i) rounded[i] = rounded_to<bf16>(input.row(0)[i]);
                x = StridedMatrix<const float>{rounded, 1, S::hidden, S::hidden};
            }
            const float softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
            const float scale = static_cast<float>(1.0 / std::sqrt(S::output_scale_squared_inverse));
            const float noise_scale = -w.lambda * scale;
            const int g = heads_per_phase(position + 1);
            parallel_team(max_threads(), [&](int t, int team) {
                for_share(chunks, t, team, [&](index_t c) {
                    for (int j = 0; j < heads_in_chunk; j += g) {
                        const int first = static_cast<int>(c) * heads_in_chunk + j;
                        const index_t r0 = static_cast<index_t>(first) * D, n = static_cast<index_t>(g) * D;
                        linear<W>(x, u.rows_range(r0, n), StridedMatrix<float>{h + r0, 1, n, n}, Write::overwrite,
                                  head_scratch_[static_cast<std::size_t>(t)]);
                        std::copy_n(h + r0, n, rotated + r0);
                        const HeadRows<float> q = packed_heads(rotated + r0, 1, g, D);
                        for (int i = 0; i < g; ++i)
                            apply_rope(first + i < H ? signal_ : noise_, q.sub_heads(i, 1), position);
                        store(q, s.cache_k.sub_heads(first, g), position);
                        store(packed_heads(h + r0, 1, g, D), s.cache_v.sub_heads(first, g), position);
                        const AttentionProblem<KV> problem{q, s.cache_k.sub_heads(first, g),
                                                           s.cache_v.sub_heads(first, g),
                                                           packed_heads(y + r0, 1, g, D), position};
                        causal_attention_batch<KV>(std::span(&problem, 1), softmax_scale, ws_, Compute::fp32);
                        for (index_t i = r0; i < r0 + n; ++i) {
                            y[i] *= i < H * D ? scale : noise_scale;
                            if (bf16_inputs) y[i] = rounded_to<bf16>(y[i]);
                        }
                        avx512::detail::gemv_band_nn_part<W, 1>(StridedMatrix<const float>{y, 1, width, width}, 0, u,
                                                                r0, r0 + n, parts + c * stride, stride, j > 0);
                    }
                });
                team_barrier(team);
                for_share(index_t{1}, t, team, [&](index_t) {
                    avx512::detail::sum_chunks_nn<W>(parts, 0, 1, chunks, stride, S::hidden, out.row(0),
                                                     mode == Write::accumulate);
                });
            });
            return true;
        }
#endif
        return false;
    }

    /// Per-thread scratch of decode_row for caches of up to `max_keys` positions, all of it
    /// sized before its parallel region (so that a step allocates nothing in it, and two
    /// threads never grow a shared buffer): the attention workspace's per-thread
    /// buffers (its calls inside the region take their thread's), one product scratch per
    /// thread and the chunks' partial sums.
    void reserve_heads([[maybe_unused]] index_t max_keys) {
#ifdef CPX_HAVE_GEMV_AVX512
        if constexpr (decodes_by_head) {
            const auto threads = static_cast<std::size_t>(max_threads());
            ws_.reserve(1, D, D, max_keys, !std::is_same_v<KV, float>);
            if (head_scratch_.size() < threads) head_scratch_.resize(threads);
            for (LinearScratch& x : head_scratch_) x.lanes(static_cast<std::size_t>(avx512::lanes_scratch(S::hidden)));
            const auto floats = static_cast<std::size_t>(chunks * avx512::row_nn_stride(S::hidden));
            if (head_parts_.size() < floats) head_parts_.assign(floats, 0.0f);
            grow(rounded_input_, S::hidden);
        }
#endif
    }

    void check_shapes(const Weights& w, const StridedMatrix<const float, S::hidden>& input,
                      std::span<const SequenceRows<KV>> sequences, const StridedMatrix<float, S::hidden>& out,
                      index_t outs, QueryRows queries) const {
        require<ShapeError>(w.u.extent(0) == width && w.u.extent(1) == S::hidden, "PRISM attention: U is [",
                            w.u.extent(0), ", ", w.u.extent(1), "], expected [2HD, d] = [", width, ", ", S::hidden,
                            "]");
        require<ShapeError>(out.rows == outs, "PRISM attention: the output has ", out.rows, " rows, the call finishes ",
                            outs, " of ", input.rows, " input rows");
        require<InputError>(std::isfinite(w.lambda), "PRISM attention: lambda is not finite (", w.lambda, ")");
        index_t covered = 0;
        for (const auto& s : sequences) {
            require<ShapeError>(s.rows >= 0 && (s.rows == 0 || s.begin == covered), "PRISM attention: sequence rows [",
                                s.begin, ", ", s.begin + s.rows, ") do not follow the previous sequences' ", covered,
                                " rows (sequences are packed in order)");
            require<ShapeError>(s.rows > 0 || queries != QueryRows::last, "PRISM attention: a sequence is empty, it "
                                "has no last row to finish");
            covered += s.rows;
            require<InputError>(s.offset >= 0 && s.offset + s.rows <= max_positions(), "PRISM attention: positions [",
                                s.offset, ", ", s.offset + s.rows, ") exceed the context length ", max_positions());
            if (s.cache_k.data) {
                require<ShapeError>(s.cache_k.heads == 2 * H && s.cache_k.head_dim == D && s.cache_v.heads == 2 * H &&
                                        s.cache_v.head_dim == D && s.cache_v.data,
                                    "PRISM attention: the cache holds ", s.cache_k.heads, " x ", s.cache_k.head_dim,
                                    " keys and ", s.cache_v.heads, " x ", s.cache_v.head_dim,
                                    " values, expected 2H x D = ", 2 * H, " x ", D);
                require<InputError>(s.offset + s.rows <= s.cache_k.rows && s.offset + s.rows <= s.cache_v.rows,
                                    "PRISM attention: positions up to ", s.offset + s.rows, " do not fit a cache of ",
                                    std::min(s.cache_k.rows, s.cache_v.rows), " positions");
            } else {
                require<InputError>(s.offset == 0, "PRISM attention: a sequence at position ", s.offset,
                                    " needs a cache holding the earlier positions");
            }
        }
        require<ShapeError>(covered == input.rows, "PRISM attention: the sequences cover ", covered, " of the ",
                            input.rows, " input rows");
    }

    static void store(const HeadRows<float>& src, const HeadRows<KV>& dst, index_t first_position) {
        parallel_for(src.rows, src.rows * src.heads * src.head_dim > 65536, [&](index_t r) {
            for (int hd = 0; hd < src.heads; ++hd) {
                const float* s = src.head(r, hd);
                KV* d = dst.head(first_position + r, hd);
                for (int i = 0; i < src.head_dim; ++i) d[i] = from_float<KV>(s[i]);
            }
        });
    }

    RopeTable signal_, noise_;
    AlignedVector<float> h_, rotated_, y_, rounded_input_;
    std::vector<AttentionProblem<KV>> cached_;
    std::vector<AttentionProblem<float>> fresh_;
    AttentionWorkspace ws_;
    LinearScratch scratch_;
    std::vector<LinearScratch> head_scratch_;  // decode_row's, one per thread
    AlignedVector<float> head_parts_;
};

}  // namespace cpx::cpu

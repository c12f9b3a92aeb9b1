#pragma once
// COMPLEXITY-DEEP's attention (docs/MODELS.md §6) on the CPU:
//   [q | k | v] = [a | mu] . [W ; W_mu]^T        (one GEMM over stacked weights)
//   q, k <- RMSNorm per head (one shared weight of head_dim, eps 1e-6), then rotate-half RoPE
//   o = causal GQA softmax(q k^T / sqrt(hd)) v    (query head j reads KV head j / groups)
//   residual += o . W_o^T
// a is the RMS-normalised layer input, mu the raw (clamped) mu of the previous
// layer; without mu guidance the input is a alone. The stacked form sums the
// a and mu products in one accumulation, which docs/MODELS.md §6.1 notes is the
// supplementary code's form and equal up to rounding to the framework's two adds.

#include <cmath>
#include <span>
#include <type_traits>
#include <vector>

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/layers/causal_attention.hpp"
#include "cpx/cpu/kernels/linear.hpp"
#include "cpx/cpu/layers/rope.hpp"
#include "cpx/cpu/kernels/row_norms.hpp"
#include "cpx/cpu/layers/sequence_rows.hpp"
#include "cpx/cpu/runtime/workspace.hpp"

namespace cpx::cpu {

/// Non-owning weights of one attention layer.
template <ComplexityConfigType C, class W>
struct MuGqaAttentionWeights {
    /// Columns of one input row: [a] or [a | mu].
    static constexpr int input_width = C::use_mu ? 2 * C::hidden : C::hidden;
    /// Rows of the stacked projection: q, then k, then v.
    static constexpr int qkv_width = C::q_width + 2 * C::kv_width;

    StridedMatrix<const W, input_width> qkv;  ///< [qkv_width, input_width]: row o = [W_{q|k|v}[o] | W_mu{q|k|v}[o]]
    StridedMatrix<const W, C::q_width> o_proj;  ///< [hidden, q_width]
    const float* q_norm = nullptr;  ///< [head_dim]
    const float* k_norm = nullptr;  ///< [head_dim]
    /// Packed copies of qkv and o_proj (out_in) for the chosen arithmetic, or null.
    const PackedWeight* qkv_packed = nullptr;
    const PackedWeight* o_proj_packed = nullptr;
};

/// How much of each of q, k and v comes from mu: per token
/// ||mu W_mu||_2 / (||a W||_2 + ||mu W_mu||_2), summed over the tokens seen.
struct MuContribution {
    double q = 0.0, k = 0.0, v = 0.0;
    index_t tokens = 0;
    double mean_q() const { return tokens ? q / static_cast<double>(tokens) : 0.0; }
    double mean_k() const { return tokens ? k / static_cast<double>(tokens) : 0.0; }
    double mean_v() const { return tokens ? v / static_cast<double>(tokens) : 0.0; }
};

/// The attention layer with its scratch buffers; one object serves every layer
/// of a model (same shapes). Not for concurrent use from several threads.
template <ComplexityConfigType C, class W, class KV = float>
class MuGqaAttention {
public:
    using Weights = MuGqaAttentionWeights<C, W>;
    static constexpr int qkv_width = Weights::qkv_width;

    MuGqaAttention() : rope_(C::rope, C::head_dim, C::max_positions) {}

    const RopeTable& rope() const { return rope_; }

    /// Sizes every buffer for calls of up to `rows` batch rows, `sequences`
    /// sequences and `max_keys` keys per sequence.
    void reserve(index_t rows, index_t sequences, index_t max_keys) {
        grow(qkv_, static_cast<std::size_t>(rows * qkv_width));
        grow(out_, static_cast<std::size_t>(rows * C::q_width));
        grow(q_input_, static_cast<std::size_t>(sequences * Weights::input_width));
        grow(q_rows_, static_cast<std::size_t>(sequences * C::q_width));
        cached_.reserve(static_cast<std::size_t>(sequences));
        fresh_.reserve(static_cast<std::size_t>(sequences));
        ws_.reserve(C::groups, C::head_dim, C::head_dim, max_keys, !std::is_same_v<KV, float>);
    }

    /// residual += attention(input) for every sequence. input: [N, input_width];
    /// residual: [N, hidden], or one row per sequence under QueryRows::last and
    /// none under QueryRows::none (sequence_rows.hpp). Sequences with a cache
    /// get the keys and values of all their new rows written at rows
    /// [offset, offset + rows) of it, whichever rows the call finishes.
    void forward(const Weights& w, const StridedMatrix<const float, Weights::input_width>& input,
                 std::span<const SequenceRows<KV>> sequences, const StridedMatrix<float, C::hidden>& residual,
                 MuContribution* mu_observer = nullptr, QueryRows queries = QueryRows::all) {
        const index_t n = input.rows;
        const index_t outs = query_output_rows(queries, n, static_cast<index_t>(sequences.size()));
        require<ShapeError>(residual.rows == outs, "attention: residual has ", residual.rows,
                            " rows, the call finishes ", outs, " of ", n, " input rows");
        const StridedMatrix<float> qkv = block_in(qkv_, n, qkv_width);
        // A call that finishes a few of its rows (a prompt's last layer) projects keys and
        // values for every row and queries for those rows alone, on packed weights whose q
        // block ends on a panel: each output the same sum as in the stacked product.
        const bool few_queries = queries != QueryRows::all && outs < n && w.qkv_packed != nullptr &&
                                 C::q_width % packed_panel_cols == 0;
        HeadRows<float> q;
        if (few_queries) {
            linear_outputs<W>(input, w.qkv, C::q_width, 2 * C::kv_width, qkv.columns(C::q_width, 2 * C::kv_width),
                              Write::overwrite, scratch_, w.qkv_packed);
            const StridedMatrix<float> finished = block_in(q_input_, outs, Weights::input_width);
            for (std::size_t i = 0; i < sequences.size(); ++i) {
                const QuerySlice qs = query_slice(queries, checked(sequences[i], i, n, queries), static_cast<index_t>(i));
                for (index_t r = 0; r < qs.count; ++r)
                    std::copy_n(input.row(qs.first + r), Weights::input_width, finished.row(qs.out + r));
            }
            const StridedMatrix<float> q_rows = block_in(q_rows_, outs, C::q_width);
            linear_outputs<W>(StridedMatrix<const float>(finished), w.qkv, 0, C::q_width, q_rows, Write::overwrite,
                              scratch_, w.qkv_packed);
            q = packed_heads(q_rows.data, outs, C::heads, C::head_dim, C::q_width);
        } else {
            linear<W>(input, w.qkv, qkv, Write::overwrite, scratch_, w.qkv_packed);
            q = packed_heads(qkv.data, n, C::heads, C::head_dim, qkv_width);
        }
        if constexpr (C::use_mu)
            if (mu_observer) observe_mu(w, input, *mu_observer);

        const HeadRows<float> k = packed_heads(qkv.data + C::q_width, n, C::kv_heads, C::head_dim, qkv_width);
        const HeadRows<float> v =
            packed_heads(qkv.data + C::q_width + C::kv_width, n, C::kv_heads, C::head_dim, qkv_width);
        rmsnorm_heads(q, w.q_norm, C::qk_norm_eps);
        rmsnorm_heads(k, w.k_norm, C::qk_norm_eps);

        const HeadRows<float> out = packed_heads(grow(out_, static_cast<std::size_t>(outs * C::q_width)), outs,
                                                 C::heads, C::head_dim);
        cached_.clear();
        fresh_.clear();
        for (std::size_t i = 0; i < sequences.size(); ++i) {
            const SequenceRows<KV>& s = checked(sequences[i], i, n, queries);
            if (s.rows == 0) continue;
            // The rows this call finishes (sequence_rows.hpp), and where their queries are.
            const QuerySlice qs = query_slice(queries, s, static_cast<index_t>(i));
            const HeadRows<float> sq =
                qs.count ? q.rows_range(few_queries ? qs.out : qs.first, qs.count) : HeadRows<float>{};
            if (qs.count) apply_rope(rope_, sq, s.offset + (qs.first - s.begin));
            apply_rope(rope_, k.rows_range(s.begin, s.rows), s.offset);
            if (s.cache_k.data) {
                require<InputError>(s.cache_k.rows >= s.offset + s.rows && s.cache_v.rows >= s.offset + s.rows,
                                    "attention: the KV cache holds ", s.cache_k.rows, " positions, ",
                                    s.offset + s.rows, " needed");
                store(k.rows_range(s.begin, s.rows), s.cache_k, s.offset);
                store(v.rows_range(s.begin, s.rows), s.cache_v, s.offset);
                if (qs.count)
                    cached_.push_back({sq, s.cache_k, s.cache_v, out.rows_range(qs.out, qs.count),
                                       s.offset + (qs.first - s.begin)});
            } else {
                // Without a cache the keys and values are this call's own rows, in fp32.
                require<InputError>(s.offset == 0, "attention: a sequence without a cache must start at position 0");
                if (qs.count)
                    fresh_.push_back({sq, k.rows_range(s.begin, s.rows), v.rows_range(s.begin, s.rows),
                                      out.rows_range(qs.out, qs.count), qs.first - s.begin});
            }
        }
        if (outs == 0) return;
        // 1/sqrt(hd), SDPA's default scale (0.125 for hd = 64).
        const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(C::head_dim)));
        causal_attention_batch<float>(fresh_, scale, ws_, compute_of(w.qkv_packed));
        causal_attention_batch<KV>(cached_, scale, ws_, compute_of(w.qkv_packed));
        linear<W>(rows_of<C::q_width, const float>(out.data, outs), w.o_proj, residual, Write::accumulate, scratch_,
                  w.o_proj_packed);
    }

private:
    /// Sequence `s`, the i-th of a call over n batch rows, after checking it.
    static const SequenceRows<KV>& checked(const SequenceRows<KV>& s, std::size_t i, index_t n, QueryRows queries) {
        require<ShapeError>(s.begin >= 0 && s.rows >= 0 && s.begin + s.rows <= n, "attention: sequence rows [",
                            s.begin, ", ", s.begin + s.rows, ") outside the batch of ", n);
        require<ShapeError>(s.rows > 0 || queries != QueryRows::last, "attention: sequence ", i,
                            " is empty, it has no last row to finish");
        return s;
    }

    static void store(const HeadRows<float>& src, const HeadRows<KV>& cache, index_t offset) {
        for (index_t r = 0; r < src.rows; ++r)
            for (int h = 0; h < src.heads; ++h) {
                const float* from = src.head(r, h);
                KV* to = cache.head(offset + r, h);
                for (int i = 0; i < src.head_dim; ++i) to[i] = from_float<KV>(from[i]);
            }
    }

    // The two halves of the stacked product, separately (diagnostics only).
    void observe_mu(const Weights& w, const StridedMatrix<const float, Weights::input_width>& input,
                    MuContribution& sink) {
        const index_t n = input.rows;
        const StridedMatrix<float> from_a = block_in(obs_a_, n, qkv_width);
        const StridedMatrix<float> from_mu = block_in(obs_mu_, n, qkv_width);
        linear<W>(input.columns(0, C::hidden), w.qkv.columns(0, C::hidden), from_a, Write::overwrite, scratch_);
        linear<W>(input.columns(C::hidden, C::hidden), w.qkv.columns(C::hidden, C::hidden), from_mu,
                  Write::overwrite, scratch_);
        const auto ratio = [](const float* a, const float* m, int width) {
            double na = 0, nm = 0;
            for (int i = 0; i < width; ++i) {
                na += double(a[i]) * a[i];
                nm += double(m[i]) * m[i];
            }
            const double denom = std::sqrt(na) + std::sqrt(nm);
            return denom > 0 ? std::sqrt(nm) / denom : 0.0;
        };
        for (index_t r = 0; r < n; ++r) {
            sink.q += ratio(from_a.row(r), from_mu.row(r), C::q_width);
            sink.k += ratio(from_a.row(r) + C::q_width, from_mu.row(r) + C::q_width, C::kv_width);
            sink.v += ratio(from_a.row(r) + C::q_width + C::kv_width, from_mu.row(r) + C::q_width + C::kv_width,
                            C::kv_width);
        }
        sink.tokens += n;
    }

    RopeTable rope_;
    AlignedVector<float> qkv_, out_, q_input_, q_rows_, obs_a_, obs_mu_;
    std::vector<AttentionProblem<KV>> cached_;
    std::vector<AttentionProblem<float>> fresh_;
    AttentionWorkspace ws_;
    LinearScratch scratch_;
};

}  // namespace cpx::cpu

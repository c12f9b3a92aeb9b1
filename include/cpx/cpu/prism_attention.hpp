#pragma once
// PRISM's pi-RoPE differential attention on the CPU (spec/prism.md section 3).
// One overcomplete dictionary U [2HD, d] replaces Q, K, V and O:
//     h = x U^T, split into H signal heads and H noise heads of dimension D;
//     values are h, queries and keys the same rotated h (RoPE base theta*m for
//     signal heads, theta/m for noise heads, at absolute positions);
//     y = causal softmax attention per head with scale 1/sqrt(D);
//     out = (concat(y_signal, -lambda * y_noise) U) / sqrt(2 H R).
// The attention itself is the shared causal core (cpu/causal_attention.hpp),
// one batched call over all 2H heads of every chunk: signal and noise heads
// differ only in the RoPE applied before it and the weight applied after it.
// The two products with U are the shared weight products (cpu/linear.hpp).

#include <Eigen/Core>

#include <cmath>
#include <span>

#include "cpx/config/prism_attention_shape.hpp"
#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/aligned_buffer.hpp"
#include "cpx/cpu/causal_attention.hpp"
#include "cpx/cpu/eigen_view.hpp"
#include "cpx/cpu/linear.hpp"
#include "cpx/cpu/rope.hpp"
#include "cpx/cpu/sequence_chunk.hpp"
#include "cpx/cpu/strided.hpp"

namespace cpx::cpu {

/// The weights of one layer: the dictionary and the run-time noise weight.
struct PrismAttentionWeights {
    Matrix<const float> u;  ///< attn.u_proj.weight, [2HD, d]
    float lambda = 0.0f;    ///< attn.lambda_q
};

/// Scratch of the layer: the projection, its rotated copy and the attention
/// output, [rows, 2HD] each, plus the core's and the products' workspaces.
/// Grows on demand.
class PrismAttentionScratch {
public:
    void reserve(index_t rows, index_t width) {
        const auto n = static_cast<std::size_t>(rows * width);
        if (h_.size() < n) {
            h_.resize(n);
            rotated_.resize(n);
            y_.resize(n);
        }
    }
    float* h() { return h_.data(); }
    float* rotated() { return rotated_.data(); }
    float* y() { return y_.data(); }
    AttentionWorkspace& attention() { return attention_; }
    LinearScratch& linear() { return linear_; }

private:
    AlignedVector<float> h_, rotated_, y_;
    AttentionWorkspace attention_;
    LinearScratch linear_;
};

/// One PRISM attention layer's computation for a configuration shape `S`. It
/// owns only the two RoPE tables (shared by every layer of a model); weights,
/// caches and scratch are the caller's.
template <PrismAttentionShapeType S>
class PrismAttention {
public:
    using Shape = S;
    static constexpr int H = S::heads, D = S::head_dim, width = S::u_rows;

    explicit PrismAttention(index_t max_positions)
        : signal_(S::signal_rope, D, max_positions), noise_(S::noise_rope, D, max_positions) {}

    index_t max_positions() const { return signal_.positions(); }
    const RopeTable& signal_rope() const { return signal_; }
    const RopeTable& noise_rope() const { return noise_; }

    /// The layer for a batch of sequence chunks: x rows [first_row, first_row + rows)
    /// of chunk c are positions [offset, offset + rows) of its sequence. A chunk
    /// with a cache appends its rotated keys and unrotated values there and attends
    /// to all cached positions; a chunk without one must start at position 0 and
    /// attends within itself. The output is written or, with Write::accumulate,
    /// added (a residual stream). The observer sees heads 0..H-1 (signal) and
    /// H..2H-1 (noise). out must not alias x.
    template <class KV = float, class Observer = NoAttentionObserver>
        requires AttentionObserver<Observer>
    void forward(Matrix<const float> x, const PrismAttentionWeights& w, std::span<const SequenceChunk<KV>> chunks,
                 Matrix<float> out, PrismAttentionScratch& scratch, Write mode = Write::overwrite,
                 const Observer& observe = Observer{}) const {
        const index_t n = x.extent(0);
        check_shapes(x, w, chunks, out);
        if (n == 0) return;
        scratch.reserve(n, width);

        // h = x U^T: values, and (copied, rotated) queries and keys.
        linear<float>(rows_of(x), w.u, rows_of(scratch.h(), n, width), Write::overwrite, scratch.linear());
        // The row loops of this layer (copy, scale, cache store) stream [n, 2HD]
        // blocks: on one thread they would cap the layer's multi-thread speed-up.
        {
            const float* from = scratch.h();
            float* to = scratch.rotated();
#pragma omp parallel for schedule(static) if (n * width > parallel_elements)
            for (index_t r = 0; r < n; ++r) std::copy_n(from + r * width, width, to + r * width);
        }
        const auto all_rot = packed_heads(scratch.rotated(), n, 2 * H, D);
        const auto all_h = packed_heads(scratch.h(), n, 2 * H, D);
        const auto all_y = packed_heads(scratch.y(), n, 2 * H, D);

        // Chunks with a cache read their keys and values from it (type KV);
        // chunks without one read them from the projection itself (fp32).
        std::vector<AttentionProblem<KV>> cached;
        std::vector<AttentionProblem<float>> uncached;
        for (const auto& c : chunks) {
            const auto rot = all_rot.sub_rows(c.first_row, c.rows);
            apply_rope(signal_, rot.sub_heads(0, H), c.offset);
            apply_rope(noise_, rot.sub_heads(H, H), c.offset);
            const auto values = all_h.sub_rows(c.first_row, c.rows);
            const auto y = all_y.sub_rows(c.first_row, c.rows);
            if (c.cache.has_value()) {
                const auto& kv = *c.cache;
                store_rows(rot, kv.k, c.offset);
                store_rows(values, kv.v, c.offset);
                cached.push_back({rot, kv.k.sub_rows(0, c.offset + c.rows), kv.v.sub_rows(0, c.offset + c.rows), y,
                                  c.offset});
            } else {
                uncached.push_back({rot, rot, values, y, 0});
            }
        }
        const float softmax_scale = 1.0f / std::sqrt(static_cast<float>(D));
        if constexpr (std::is_same_v<Observer, NoAttentionObserver>) {
            causal_attention_batch<KV>(std::span<const AttentionProblem<KV>>(cached), softmax_scale, scratch.attention());
            causal_attention_batch<float>(std::span<const AttentionProblem<float>>(uncached), softmax_scale,
                                          scratch.attention());
        } else {
            const auto batch_observer = [&observe](std::size_t, int head, index_t position, const float* p,
                                                   index_t count) { observe(head, position, p, count); };
            causal_attention_batch<KV>(std::span<const AttentionProblem<KV>>(cached), softmax_scale, scratch.attention(),
                                       batch_observer);
            causal_attention_batch<float>(std::span<const AttentionProblem<float>>(uncached), softmax_scale,
                                          scratch.attention(), batch_observer);
        }

        // out = (concat(y_s, -lambda y_n) U) / sqrt(2HR), the scales folded into y.
        const float scale = static_cast<float>(1.0 / std::sqrt(S::output_scale_squared_inverse));
        const float noise_scale = -w.lambda * scale;
        float* y = scratch.y();
#pragma omp parallel for schedule(static) if (n * width > parallel_elements)
        for (index_t r = 0; r < n; ++r) {
            float* row = y + r * width;
            for (index_t i = 0; i < H * D; ++i) row[i] *= scale;
            for (index_t i = H * D; i < width; ++i) row[i] *= noise_scale;
        }
        matmul<float>(rows_of(scratch.y(), n, width), w.u, rows_of(out), mode, scratch.linear());
    }

    /// One sequence chunk without a cache (positions 0..rows-1): the plain layer.
    template <class Observer = NoAttentionObserver>
        requires AttentionObserver<Observer>
    void forward(Matrix<const float> x, const PrismAttentionWeights& w, Matrix<float> out,
                 PrismAttentionScratch& scratch, const Observer& observe = Observer{}) const {
        const SequenceChunk<float> whole{0, x.extent(0), 0, {}};
        forward<float>(x, w, std::span<const SequenceChunk<float>>(&whole, 1), out, scratch, Write::overwrite, observe);
    }

private:
    template <class KV>
    void check_shapes(Matrix<const float> x, const PrismAttentionWeights& w, std::span<const SequenceChunk<KV>> chunks,
                      Matrix<float> out) const {
        require<ShapeError>(x.extent(1) == S::hidden, "PRISM attention: input rows have ", x.extent(1),
                            " values, the layer expects d = ", S::hidden);
        require<ShapeError>(w.u.extent(0) == width && w.u.extent(1) == S::hidden, "PRISM attention: U is [",
                            w.u.extent(0), ", ", w.u.extent(1), "], expected [2HD, d] = [", width, ", ", S::hidden,
                            "]");
        require<ShapeError>(out.extent(0) == x.extent(0) && out.extent(1) == S::hidden, "PRISM attention: output is [",
                            out.extent(0), ", ", out.extent(1), "], expected [", x.extent(0), ", ", S::hidden, "]");
        require<InputError>(std::isfinite(w.lambda), "PRISM attention: lambda is not finite (", w.lambda, ")");
        for (const auto& c : chunks) {
            require<ShapeError>(c.first_row >= 0 && c.rows >= 0 && c.first_row + c.rows <= x.extent(0),
                                "PRISM attention: chunk rows [", c.first_row, ", ", c.first_row + c.rows,
                                ") outside the input's ", x.extent(0), " rows");
            require<InputError>(c.offset >= 0 && c.offset + c.rows <= max_positions(), "PRISM attention: positions [",
                                c.offset, ", ", c.offset + c.rows, ") exceed the context length ", max_positions());
            if (c.cache.has_value()) {
                const auto& kv = *c.cache;
                require<ShapeError>(kv.k.heads == 2 * H && kv.k.head_dim == D && kv.v.heads == 2 * H &&
                                        kv.v.head_dim == D,
                                    "PRISM attention: the cache holds ", kv.k.heads, " x ", kv.k.head_dim,
                                    " keys and ", kv.v.heads, " x ", kv.v.head_dim, " values, expected 2H x D = ",
                                    2 * H, " x ", D);
                require<InputError>(c.offset + c.rows <= kv.k.rows && c.offset + c.rows <= kv.v.rows,
                                    "PRISM attention: positions up to ", c.offset + c.rows,
                                    " do not fit a cache of ", std::min(kv.k.rows, kv.v.rows), " positions");
            } else {
                require<InputError>(c.offset == 0, "PRISM attention: a chunk at position ", c.offset,
                                    " needs a cache holding the earlier positions");
            }
        }
    }

    /// Row loops below this many elements stay on the calling thread.
    static constexpr index_t parallel_elements = 32768;

    template <class KV>
    static void store_rows(const HeadRows<float>& src, const HeadRows<KV>& dst, index_t first_position) {
#pragma omp parallel for schedule(static) if (src.rows * src.heads * src.head_dim > parallel_elements)
        for (index_t r = 0; r < src.rows; ++r)
            for (int hd = 0; hd < src.heads; ++hd) {
                const float* s = src.head(r, hd);
                KV* d = dst.head(first_position + r, hd);
                for (int i = 0; i < src.head_dim; ++i) d[i] = from_float<KV>(s[i]);
            }
    }

    RopeTable signal_, noise_;
};

}  // namespace cpx::cpu

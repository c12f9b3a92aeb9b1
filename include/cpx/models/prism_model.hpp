#pragma once
// The GPT-2-style PRISM model of the reference code on the CPU
// (spec/prism.md section 2):
//     x = wte[token] + wpe[position]
//     per block: x += PrismAttention(LN_1(x));  x += MLP(LN_2(x))
//     logits = LN_f(x) wte^T                     (lm_head tied to wte)
// A call processes a batch of sequence chunks (cpu/sequence_chunk.hpp): whole
// sequences, prefill chunks or single decode tokens, each at its own position
// offset and, when it has one, with its sequence's key/value cache.

#include <Eigen/Core>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cpx/config/prism_attention_shape.hpp"
#include "cpx/config/prism_config.hpp"
#include "cpx/core/error.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cpu/aligned_buffer.hpp"
#include "cpx/cpu/attention_distance.hpp"
#include "cpx/cpu/gelu_mlp.hpp"
#include "cpx/cpu/layernorm.hpp"
#include "cpx/cpu/linear.hpp"
#include "cpx/cpu/prism_attention.hpp"
#include "cpx/cpu/sequence_chunk.hpp"
#include "cpx/models/prism_weights.hpp"

namespace cpx {

/// Which rows of a call get logits.
enum class LogitRows {
    all,            ///< every input row (training-style evaluation, tests)
    last_of_chunk,  ///< the last row of each chunk (prefill and decode: the next-token distribution)
};

template <PrismConfigType C>
class PrismModel {
public:
    using Config = C;
    using Attention = PrismAttentionOf<C>;
    static constexpr index_t d = C::hidden, vocab = C::vocab, context = C::max_positions;
    static constexpr int layers = C::layers;

    explicit PrismModel(PrismWeights<C> weights) : weights_(std::move(weights)), attention_(context) {}

    const PrismWeights<C>& weights() const { return weights_; }
    /// Mutable access, e.g. to set each layer's lambda for a training-time schedule.
    PrismWeights<C>& weights() { return weights_; }

    /// Logits of every position of `batch` sequences of equal length starting at
    /// position 0: tokens [batch, T] row-major, logits [batch * T, vocab].
    /// `distance`, when given, accumulates each layer's mean attention distance.
    void forward(std::span<const std::int32_t> tokens, index_t batch, Matrix<float> logits,
                 cpu::AttentionDistance* distance = nullptr) {
        require<InputError>(batch > 0 && static_cast<index_t>(tokens.size()) % batch == 0, "PRISM forward: ",
                            tokens.size(), " tokens do not split into ", batch, " sequences of equal length");
        const index_t t = static_cast<index_t>(tokens.size()) / batch;
        std::vector<cpu::SequenceChunk<float>> chunks;
        for (index_t b = 0; b < batch; ++b) chunks.push_back({b * t, t, 0, {}});
        run<float>(tokens, chunks, [](std::size_t, int) { return std::optional<cpu::LayerKv<float>>{}; }, logits,
                   LogitRows::all, distance);
    }

    /// The general call. chunks[c] covers rows [first_row, first_row + rows) of
    /// `tokens` at positions [offset, offset + rows); layer_kv(c, layer) returns
    /// that chunk's cache rows for the layer (std::nullopt: attend within the
    /// chunk, which must then start at position 0). logits has one row per input
    /// row (LogitRows::all) or per chunk (LogitRows::last_of_chunk).
    template <class KV, class LayerKvOf>
    void run(std::span<const std::int32_t> tokens, std::span<const cpu::SequenceChunk<KV>> chunks,
             LayerKvOf&& layer_kv, Matrix<float> logits, LogitRows which, cpu::AttentionDistance* distance = nullptr) {
        const index_t n = static_cast<index_t>(tokens.size());
        check_inputs(tokens, chunks, logits, which, distance);
        if (n == 0) return;
        reserve(n);
        const Matrix<float> x(x_.data(), n, d), normed(normed_.data(), n, d);
        const Matrix<float> hidden(hidden_.data(), n, C::mlp_width);

        embed(tokens, chunks, x);
        std::vector<cpu::SequenceChunk<KV>> layer_chunks(chunks.begin(), chunks.end());
        for (int l = 0; l < layers; ++l) {
            const auto& w = weights_.layers[static_cast<std::size_t>(l)];
            for (std::size_t c = 0; c < chunks.size(); ++c) layer_chunks[c].cache = layer_kv(c, l);
            cpu::layernorm<float, float, float>(x, w.ln_1_w(), w.ln_1_b(), normed, C::ln_eps);
            if (distance)
                attention_.template forward<KV>(normed, w.attention(), layer_chunks, x, attention_scratch_,
                                                cpu::Write::accumulate, distance->layer(l));
            else
                attention_.template forward<KV>(normed, w.attention(), layer_chunks, x, attention_scratch_,
                                                cpu::Write::accumulate);
            cpu::layernorm<float, float, float>(x, w.ln_2_w(), w.ln_2_b(), normed, C::ln_eps);
            cpu::gelu_mlp(normed, w.mlp(), hidden, x, linear_scratch_, cpu::Write::accumulate);
        }
        head(x, chunks, logits, which);
    }

private:
    template <class KV>
    void check_inputs(std::span<const std::int32_t> tokens, std::span<const cpu::SequenceChunk<KV>> chunks,
                      Matrix<float> logits, LogitRows which, cpu::AttentionDistance* distance) const {
        const index_t n = static_cast<index_t>(tokens.size());
        for (index_t i = 0; i < n; ++i)
            require<InputError>(tokens[i] >= 0 && tokens[i] < vocab, "PRISM: token id ", tokens[i], " at index ", i,
                                " is outside the vocabulary [0, ", vocab, ")");
        index_t covered = 0;
        for (const auto& c : chunks) {
            require<ShapeError>(c.first_row == covered && c.rows >= 1, "PRISM: chunks must cover the ", n,
                                " input rows in order, without gaps or empty chunks (chunk at row ", c.first_row,
                                " with ", c.rows, " rows)");
            require<InputError>(c.offset >= 0 && c.offset + c.rows <= context, "PRISM: positions [", c.offset, ", ",
                                c.offset + c.rows, ") exceed the context length (block_size) ", context);
            covered += c.rows;
        }
        require<ShapeError>(covered == n, "PRISM: chunks cover ", covered, " rows of ", n, " tokens");
        const index_t want_rows = which == LogitRows::all ? n : static_cast<index_t>(chunks.size());
        require<ShapeError>(logits.extent(0) == want_rows && logits.extent(1) == vocab, "PRISM: logits are [",
                            logits.extent(0), ", ", logits.extent(1), "], expected [", want_rows, ", ", vocab, "]");
        require<ShapeError>(!distance || (distance->layers() == layers && distance->heads() == 2 * C::heads),
                            "PRISM: the attention-distance table must be ", layers, " layers x ", 2 * C::heads,
                            " heads");
    }

    void reserve(index_t n) {
        const auto rows = static_cast<std::size_t>(n);
        if (x_.size() >= rows * d) return;
        x_.resize(rows * d);
        normed_.resize(rows * d);
        hidden_.resize(rows * C::mlp_width);
    }

    template <class KV>
    void embed(std::span<const std::int32_t> tokens, std::span<const cpu::SequenceChunk<KV>> chunks,
               Matrix<float> x) const {
        for (const auto& c : chunks)
            for (index_t r = 0; r < c.rows; ++r) {
                const index_t row = c.first_row + r;
                const float* te = weights_.wte.data() + static_cast<index_t>(tokens[row]) * d;
                const float* pe = weights_.wpe.data() + (c.offset + r) * d;
                float* xr = x.data() + row * d;
                for (index_t i = 0; i < d; ++i) xr[i] = te[i] + pe[i];
            }
    }

    /// LN_f and the tied head on the rows that get logits.
    template <class KV>
    void head(Matrix<float> x, std::span<const cpu::SequenceChunk<KV>> chunks, Matrix<float> logits, LogitRows which) {
        Matrix<float> rows = x;
        if (which == LogitRows::last_of_chunk) {
            // Gather each chunk's last row to the front (rows only move upwards).
            for (std::size_t c = 0; c < chunks.size(); ++c) {
                const index_t src = chunks[c].first_row + chunks[c].rows - 1;
                if (src != static_cast<index_t>(c))
                    std::copy_n(x.data() + src * d, d, x.data() + static_cast<index_t>(c) * d);
            }
            rows = x.rows(0, static_cast<index_t>(chunks.size()));
        }
        cpu::layernorm<float, float, float>(rows, weights_.ln_f_w(), weights_.ln_f_b(), rows, C::ln_eps);
        cpu::linear<float>(cpu::rows_of(Matrix<const float>(rows)), Matrix<const float>(weights_.wte.data(), vocab, d),
                           cpu::rows_of(logits), cpu::Write::overwrite, linear_scratch_);
    }

    PrismWeights<C> weights_;
    cpu::PrismAttention<Attention> attention_;
    cpu::PrismAttentionScratch attention_scratch_;
    cpu::LinearScratch linear_scratch_;
    cpu::AlignedVector<float> x_, normed_, hidden_;
};

}  // namespace cpx

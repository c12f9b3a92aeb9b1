#pragma once
// The GPT-2-style PRISM model of the reference code on the CPU
// (docs/MODELS.md §16):
//     x = wte[token] + wpe[position]
//     per block: x += PrismAttention(LN_1(x));  x += MLP(LN_2(x))
//     logits = LN_f(x) wte^T                     (lm_head tied to wte)
// Its calls are those of the COMPLEXITY-DEEP model (models/sequence_batch.hpp,
// models/kv_cache.hpp): a batch of sequences of any lengths, packed row after
// row so every product is one GEMM over all tokens, each sequence either on
// its own (from position 0) or appended to its KV cache (prefill, chunked
// prefill, decode). Generation and sampling work on either model.
//
// A model object owns its weights and workspaces and is not for concurrent use
// from several threads (each call is itself multi-threaded). Models are
// values: a copy owns its own weights and workspaces and starts with no
// observers attached.
//
// Arithmetic: fp32 by default; Compute::bf16 and Compute::fp32_packed run
// every product on packed copies of the matrices
// (models/prism/packs.hpp, docs/BF16.md), rebuilt after mutable access to the
// weights; release_stored_matrices() frees the stored copies the packs replace.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "cpx/config/prism_attention_shape.hpp"
#include "cpx/config/prism_config.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/kernels/attention_distance.hpp"
#include "cpx/cpu/layers/gelu_mlp.hpp"
#include "cpx/cpu/layers/layernorm.hpp"
#include "cpx/cpu/kernels/linear.hpp"
#include "cpx/cpu/layers/prism_attention.hpp"
#include "cpx/models/compute_choice.hpp"
#include "cpx/models/stored_matrices.hpp"
#include "cpx/models/prism/packs.hpp"
#include "cpx/cpu/layers/sequence_rows.hpp"
#include "cpx/cpu/runtime/workspace.hpp"
#include "cpx/models/complexity/observers.hpp"
#include "cpx/models/kv_cache.hpp"
#include "cpx/models/orthogonal_fill.hpp"
#include "cpx/models/prism/weights.hpp"
#include "cpx/models/sequence_batch.hpp"
#include "cpx/models/sequence_model.hpp"
#include "cpx/models/step_times.hpp"

namespace cpx {

/// The model with matrices stored as W and keys/values cached as KV (each
/// float or bf16; arithmetic is fp32), like ComplexityModel<C, W, KV>.
template <PrismConfigType C, class W = float, class KV = float>
class PrismModel : public SequenceModel<PrismModel<C, W, KV>, C, KVCache<C, KV>>,
                   public ModelArithmetic<PrismModel<C, W, KV>> {
public:
    using Config = C;
    using Weights = PrismWeights<C, W>;
    using Cache = KVCache<C, KV>;
    using Tokens = TokenSpan;
    using Attention = PrismAttentionOf<C>;

    explicit PrismModel(Weights weights, cpu::Compute compute = cpu::Compute::fp32)
        : weights_(std::move(weights)), attention_(C::max_positions) {
        this->set_compute(compute);
    }

    const Weights& weights() const { return weights_; }
    /// Mutable access, e.g. to set each layer's lambda along a training-time schedule
    /// (with packed arithmetic, the packed copies are rebuilt before the next call; an
    /// InputError once the stored matrices are released).
    Weights& weights() {
        compute_.invalidate(weights_);
        return weights_;
    }

    // ---- arithmetic: set_compute, compute_runs, release_stored_matrices, ...
    // (ModelArithmetic, models/compute_choice.hpp)

    // ---- observers

    /// Accumulates every layer's mean attention distance per physical head
    /// (signal heads 0..H-1, noise heads H..2H-1) over the calls that follow.
    void attach(cpu::AttentionDistance& distance) {
        require<ShapeError>(distance.layers() == C::layers && distance.heads() == 2 * C::heads,
                            "PRISM: the attention-distance table must be ", C::layers, " layers x ", 2 * C::heads,
                            " heads, it is ", distance.layers(), " x ", distance.heads());
        distance_ = &distance;
    }
    /// Time per part and layer of every call (models/step_times.hpp); changes nothing the call
    /// computes.
    void attach(StepTimes<C::layers>& times) { step_times_ = &times; }
    void detach_observers() { distance_ = nullptr, step_times_ = nullptr; }

    // ---- sizes

    /// Sizes the workspaces for calls of up to `rows` tokens in `sequences`
    /// sequences attending to up to `max_keys` positions.
    void reserve(index_t rows, index_t sequences, index_t max_keys) {
        attention_.reserve(rows, sequences, max_keys);
        cpu::grow(x_, static_cast<std::size_t>(rows * C::hidden));
        cpu::grow(normed_, static_cast<std::size_t>(rows * C::hidden));
        cpu::grow(hidden_, static_cast<std::size_t>(rows * C::mlp_width));
        rows_.reserve(static_cast<std::size_t>(sequences));
    }

    // ---- calls: forward, extend, decode, logits_rows (models/sequence_model.hpp)

private:
    friend SequenceModel<PrismModel, C, Cache>;
    friend ModelArithmetic<PrismModel>;

    /// One validated call (SequenceModel::run_).
    void forward_pass(std::span<const Tokens> batch, std::span<Cache* const> caches, LogitsAt at,
                      const StridedMatrix<float>& logits, CallSize size) {
        StepTimes<C::layers>* const times = step_times_.get();
        detail::PartClock clock(times != nullptr);
        const index_t n = size.rows;
        reserve(n, size.sequences, size.max_keys);

        const Matrix<float> x(x_.data(), n, C::hidden), normed(normed_.data(), n, C::hidden);
        const Matrix<float> hidden(hidden_.data(), n, C::mlp_width);
        embed(batch, caches, x);
        if (times) times->embed += clock.lap(), ++times->calls;
        const PrismPacks<C, W>* packs = compute_.packs(weights_);
        const cpu::QueryRows last_queries = last_layer_queries(at, static_cast<bool>(distance_));
        index_t carried = n;  // rows [0, carried) of x: the residual rows the current layer carries on
        for (int l = 0; l < C::layers; ++l) {
            const auto& w = weights_.layers[static_cast<std::size_t>(l)];
            auto attention = cpu_attention_view(w);
            auto mlp = cpu_mlp_view(w);
            if (packs) packs->attach(l, attention), packs->attach(l, mlp);
            describe_sequences(batch, caches, l, rows_);
            cpu::layernorm<float, float, float>(x, w.ln_1_w(), w.ln_1_b(), normed, C::ln_eps);
            const auto attention_in = cpu::rows_of<C::hidden, const float>(normed.data(), n);
            const cpu::QueryRows queries = l + 1 == C::layers ? last_queries : cpu::QueryRows::all;
            if (queries != cpu::QueryRows::all) carried = last_rows_to_front(batch, queries, x);
            const StridedMatrix<float, C::hidden> residual = cpu::rows_of<C::hidden>(x.data(), carried);
            if (distance_)
                attention_.forward(attention, attention_in, rows_, residual, cpu::Write::accumulate,
                                   distance_->layer(l));
            else
                attention_.forward(attention, attention_in, rows_, residual, cpu::Write::accumulate,
                                   cpu::NoAttentionObserver{}, queries);
            if (times) times->attention[l] += clock.lap();
            if (carried == 0) break;  // QueryRows::none: no logits, the caches are complete
            const Matrix<float> r = x.rows(0, carried), rn = normed.rows(0, carried);
            cpu::layernorm<float, float, float>(r, w.ln_2_w(), w.ln_2_b(), rn, C::ln_eps);
            cpu::gelu_mlp(rn, mlp, hidden.rows(0, carried), r, scratch_, cpu::Write::accumulate);
            if (times) times->mlp[l] += clock.lap();
        }
        for (std::size_t s = 0; s < caches.size(); ++s) caches[s]->advance(static_cast<index_t>(batch[s].size()));
        if (at == LogitsAt::none) return;
        // Rows [0, carried) get logits unless the distance observer kept the last layer on every row.
        if (at == LogitsAt::last && last_queries == cpu::QueryRows::all)
            carried = last_rows_to_front(batch, cpu::QueryRows::last, x);
        head(x.rows(0, carried), logits);
        if (times) times->head += clock.lap();
    }

    /// Each sequence's last row of x moved to row s (rows only move up, so none is overwritten
    /// early); returns the rows that now lead x: one per sequence, none for QueryRows::none.
    static index_t last_rows_to_front(std::span<const Tokens> batch, cpu::QueryRows queries, Matrix<float> x) {
        if (queries == cpu::QueryRows::none) return 0;
        index_t end = 0;
        for (std::size_t s = 0; s < batch.size(); ++s) {
            end += static_cast<index_t>(batch[s].size());
            if (end - 1 != static_cast<index_t>(s))
                std::copy_n(x.data() + (end - 1) * C::hidden, C::hidden, x.data() + s * C::hidden);
        }
        return static_cast<index_t>(batch.size());
    }

    void embed(std::span<const Tokens> batch, std::span<Cache* const> caches, Matrix<float> x) const {
        index_t row = 0;
        for (std::size_t s = 0; s < batch.size(); ++s) {
            const index_t offset = caches.empty() ? 0 : caches[s]->length();
            for (std::size_t i = 0; i < batch[s].size(); ++i, ++row) {
                const W* te = weights_.wte.data() + batch[s][i] * C::hidden;
                const W* pe = weights_.wpe.data() + (offset + static_cast<index_t>(i)) * C::hidden;
                float* xr = x.data() + row * C::hidden;
                for (int c = 0; c < C::hidden; ++c) xr[c] = to_float(te[c]) + to_float(pe[c]);
            }
        }
    }

    /// LN_f and the tied head on the rows that get logits.
    void head(Matrix<float> rows, const StridedMatrix<float>& logits) {
        cpu::layernorm<float, float, float>(rows, weights_.ln_f_w(), weights_.ln_f_b(), rows, C::ln_eps);
        const PrismPacks<C, W>* packs = compute_.packs(weights_);
        cpu::linear<W>(cpu::rows_of(Matrix<const float>(rows)), Matrix<const W>(weights_.wte.data(), C::vocab, C::hidden),
                       logits, cpu::Write::overwrite, scratch_, packs ? packs->head() : nullptr);
    }

    Weights weights_;
    ComputeChoice<PrismPacks<C, W>> compute_;
    cpu::PrismAttention<Attention, W, KV> attention_;
    /// What a release keeps stored under the arithmetic that runs (models/stored_matrices.hpp).
    static ReleaseKeeps keeps_under(cpu::Compute runs) {
        return {.prism_u = cpu::PrismAttention<Attention, W, KV>::decode_reads_stored_u(runs)};
    }
    cpu::LinearScratch scratch_;
    cpu::AlignedVector<float> x_, normed_, hidden_;
    std::vector<cpu::SequenceRows<KV>> rows_;
    ObserverPtr<cpu::AttentionDistance> distance_;
    ObserverPtr<StepTimes<C::layers>> step_times_;
};

}  // namespace cpx

#pragma once
// The COMPLEXITY-DEEP decoder on the CPU (docs/MODELS.md §4-§8, §11):
//   h = Emb[t];  mu = mu_init
//   per layer: a = RMSNorm(h); h += Attn(a, mu); m = RMSNorm(h); h += MLP(m, t);
//              mu = clamp(clamp(mu_param, 0, 2) + W_mu h, -2, 2)   (not after the last layer)
//   logits = RMSNorm(h) . Emb^T
// With `attention = AttentionKind::prism` in the configuration, Attn is PRISM's
// pi-RoPE differential attention (cpu/layers/prism_attention.hpp) and there is no mu
// (the configuration requires use_mu_guidance = false): the same decoder with
// the other attention front end, chosen by template arguments alone.
// A call runs a batch of sequences of any lengths, packed row after row, so
// every projection is one GEMM over all tokens; attention runs per sequence,
// either over the tokens of the call alone or appended to the sequence's
// KV cache (prefill, chunked prefill at any offset, decode).
//
// A model object owns its weights and workspaces and is not for concurrent use
// from several threads (each call is itself multi-threaded). Once a call of a
// given size has run, calls no larger allocate nothing. Models are values: a
// copy owns its own weights and workspaces (it holds no view into the source,
// which may then be destroyed) and starts with no observers attached.
//
// Arithmetic: fp32 by default; Compute::bf16 and Compute::fp32_packed pack a
// copy of the matrices (models/complexity/packs.hpp) and run every product on
// it, decode steps included, in bf16 with fp32 sums or in fp32
// (cpu/runtime/compute.hpp, docs/BF16.md), where the CPU has the instructions;
// release_stored_matrices() then frees the stored copies the packs replace.

#include <algorithm>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "cpx/config/complexity_config.hpp"
#include "cpx/core/error.hpp"
#include "cpx/config/prism_attention_shape.hpp"
#include "cpx/cpu/kernels/attention_distance.hpp"
#include "cpx/cpu/kernels/linear.hpp"
#include "cpx/cpu/layers/mu_gqa_attention.hpp"
#include "cpx/cpu/layers/prism_attention.hpp"
#include "cpx/cpu/kernels/row_norms.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/workspace.hpp"
#include "cpx/models/complexity/cpu_views.hpp"
#include "cpx/models/complexity/packs.hpp"
#include "cpx/models/complexity/observers.hpp"
#include "cpx/models/step_times.hpp"
#include "cpx/models/compute_choice.hpp"
#include "cpx/models/stored_matrices.hpp"
#include "cpx/models/complexity/weights.hpp"
#include "cpx/models/kv_cache.hpp"
#include "cpx/models/orthogonal_fill.hpp"
#include "cpx/models/sequence_batch.hpp"
#include "cpx/models/sequence_model.hpp"

namespace cpx {

namespace detail {
/// The attention front end of a decoder: mu-guided GQA or PRISM's.
template <class C, class W, class KV, bool Prism = C::attention == AttentionKind::prism>
struct attention_layer_of {
    using type = cpu::MuGqaAttention<C, W, KV>;
};
template <class C, class W, class KV>
struct attention_layer_of<C, W, KV, true> {
    using type = cpu::PrismAttention<PrismAttentionOf<C>, W, KV>;
};
}  // namespace detail

template <ComplexityConfigType C, class W = float, class KV = float>
class ComplexityModel : public SequenceModel<ComplexityModel<C, W, KV>, C, KVCache<C, KV>>,
                        public ModelArithmetic<ComplexityModel<C, W, KV>> {
public:
    using Config = C;
    using Weights = ComplexityWeights<C, W>;
    using Cache = KVCache<C, KV>;
    using Tokens = TokenSpan;

    explicit ComplexityModel(Weights weights, cpu::Compute compute = cpu::Compute::fp32)
        : weights_(std::move(weights)), attention_(make_attention()) {
        if constexpr (C::mlp == MlpKind::token_routed)
            for (int l = 0; l < C::layers; ++l) (void)weights_.routing(l);  // validates every table once
        this->set_compute(compute);
    }

    const Weights& weights() const { return weights_; }

    // ---- arithmetic: set_compute, compute_runs, release_stored_matrices, ...
    // (ModelArithmetic, models/compute_choice.hpp)

    // ---- observers

    void attach(ExpertLoad<C>& load) { expert_load_ = &load; }
    void attach(MuContributions<C>& mu)
        requires(C::use_mu)
    {
        mu_contributions_ = &mu;
    }
    /// PRISM attention: every layer's mean attention distance per physical head
    /// (signal heads 0..H-1, noise heads H..2H-1).
    void attach(cpu::AttentionDistance& distance)
        requires(C::attention == AttentionKind::prism)
    {
        require<ShapeError>(distance.layers() == C::layers && distance.heads() == 2 * C::heads,
                            "the attention-distance table must be ", C::layers, " layers x ", 2 * C::heads,
                            " heads, it is ", distance.layers(), " x ", distance.heads());
        distance_ = &distance;
    }
    /// Time per part and layer of every call (models/step_times.hpp). Unlike the observers
    /// above it changes nothing the call computes: the last layer still skips the rows that get
    /// no logits.
    void attach(StepTimes<C::layers>& times) { step_times_ = &times; }
    void detach_observers() {
        expert_load_ = nullptr, mu_contributions_ = nullptr, distance_ = nullptr, step_times_ = nullptr;
    }

    // ---- sizes

    /// Sizes the workspaces for calls of up to `rows` tokens in `sequences`
    /// sequences attending to up to `max_keys` positions.
    void reserve(index_t rows, index_t sequences, index_t max_keys) {
        attention_.reserve(rows, sequences, max_keys);
        if constexpr (C::mlp == MlpKind::dense_swiglu) mlp_.reserve(rows, C::expert_width);
        else mlp_.reserve(rows);
        grow(h_, static_cast<std::size_t>(rows * C::hidden));
        grow(x_, static_cast<std::size_t>(rows * input_width));
        grow(m_, static_cast<std::size_t>(rows * C::hidden));
        grow(final_, static_cast<std::size_t>(rows * C::hidden));
        tokens_.reserve(static_cast<std::size_t>(rows));
        last_tokens_.reserve(static_cast<std::size_t>(sequences));
        rows_.reserve(static_cast<std::size_t>(sequences));
    }

    // ---- calls: forward, extend, decode, logits_rows (models/sequence_model.hpp)

private:
    static constexpr int input_width = Weights::input_width;
    /// Blocks of rows whose width the configuration fixes: the residual stream
    /// and normed rows (hidden), the attention input ([a] or [a | mu]).
    template <index_t Width>
    using Rows = StridedMatrix<float, Width>;
    using Mlp = std::conditional_t<
        C::mlp == MlpKind::token_routed, cpu::TokenRoutedMlp<C, W>,
        std::conditional_t<C::mlp == MlpKind::learned_router, cpu::LearnedRouterMlp<C, W>, cpu::SwiGluMlp<W>>>;

    friend SequenceModel<ComplexityModel, C, Cache>;
    friend ModelArithmetic<ComplexityModel>;

    /// One validated call (SequenceModel::run_).
    void forward_pass(std::span<const Tokens> batch, std::span<Cache* const> caches, LogitsAt at,
                      const StridedMatrix<float>& logits, CallSize size) {
        StepTimes<C::layers>* const times = step_times_.get();
        detail::PartClock clock(times != nullptr);
        const index_t n = size.rows;
        reserve(n, size.sequences, size.max_keys);

        const ComplexityPacks<C, W>* packs = compute_.packs(weights_);
        tokens_.clear();
        for (const Tokens& t : batch) tokens_.insert(tokens_.end(), t.begin(), t.end());
        const Rows<C::hidden> h = cpu::block_in<C::hidden>(h_, n);
        const Rows<input_width> x = cpu::block_in<input_width>(x_, n);
        embed(h);
        if constexpr (C::use_mu)
            for (index_t r = 0; r < n; ++r) std::copy_n(weights_.mu_init.data(), C::hidden, x.row(r) + C::hidden);
        if (times) times->embed += clock.lap(), ++times->calls;

        const cpu::QueryRows last_queries = last_layer_queries(at, observed());
        Rows<C::hidden> r = h;  // the residual rows the current layer carries on
        for (int l = 0; l < C::layers; ++l) {
            describe_sequences(batch, caches, l, rows_);
            cpu::rmsnorm_rows(h, weights_.layers[l].input_layernorm.data(), x.template columns<C::hidden>(0),
                              C::norm_eps);
            const cpu::QueryRows queries = l + 1 == C::layers ? last_queries : cpu::QueryRows::all;
            std::span<const std::int64_t> tokens = tokens_;
            if (queries != cpu::QueryRows::all) {
                r = finished_rows(batch, queries, h);
                tokens = last_tokens_;
            }
            auto attention = weights_.attention(l);
            if (packs) packs->attach_attention(l, attention);
            if constexpr (C::attention == AttentionKind::prism) {
                if (distance_)
                    attention_.forward(attention, x, rows_, r, cpu::Write::accumulate, distance_->layer(l));
                else
                    attention_.forward(attention, x, rows_, r, cpu::Write::accumulate, cpu::NoAttentionObserver{},
                                       queries);
            } else {
                cpu::MuContribution* mu_obs = nullptr;
                if constexpr (C::use_mu)
                    if (mu_contributions_) mu_obs = &mu_contributions_->layers[l];
                attention_.forward(attention, x, rows_, r, mu_obs, queries);
            }
            if (times) times->attention[l] += clock.lap();
            if (r.rows == 0) break;  // QueryRows::none: no logits, the caches are complete
            const Rows<C::hidden> m = cpu::block_in<C::hidden>(m_, r.rows);
            cpu::rmsnorm_rows(r, weights_.layers[l].post_attention_layernorm.data(), m, C::norm_eps);
            std::span<index_t> counts;
            if constexpr (C::routed)
                if (expert_load_) counts = expert_load_->tokens[l];
            auto mlp = mlp_weights(l);
            if (packs) packs->attach_mlp(l, mlp);
            if constexpr (C::mlp == MlpKind::token_routed) mlp_.forward(mlp, m, tokens, routing(l), r, counts);
            else if constexpr (C::mlp == MlpKind::learned_router) mlp_.forward(mlp, m, r, counts);
            else mlp_.forward(mlp, m, r);
            if (times) times->mlp[l] += clock.lap();
            if constexpr (C::use_mu)
                if (l + 1 < C::layers) {
                    auto mu = weights_.mu_guidance(l);
                    if (packs) packs->attach_mu_guidance(l, mu);
                    cpu::next_mu<C, W>(mu, h, x.template columns<C::hidden>(C::hidden), scratch_);
                    if (times) times->mu[l] += clock.lap();
                }
        }
        for (std::size_t s = 0; s < caches.size(); ++s) caches[s]->advance(static_cast<index_t>(batch[s].size()));
        if (at == LogitsAt::none) return;
        // r holds the rows that get logits unless an observer kept the last layer on every row.
        head(at == LogitsAt::last && last_queries == cpu::QueryRows::all ? finished_rows(batch, cpu::QueryRows::last, h)
                                                                          : r,
             logits);
        if (times) times->head += clock.lap();
    }

    bool observed() const { return expert_load_ || mu_contributions_ || distance_; }

    /// Each sequence's last row of h, copied to the front of final_ (with their token ids in
    /// last_tokens_), or no rows for QueryRows::none.
    Rows<C::hidden> finished_rows(std::span<const Tokens> batch, cpu::QueryRows queries, const Rows<C::hidden>& h) {
        last_tokens_.clear();
        if (queries == cpu::QueryRows::none) return cpu::block_in<C::hidden>(final_, 0);
        const Rows<C::hidden> last = cpu::block_in<C::hidden>(final_, static_cast<index_t>(batch.size()));
        index_t end = 0;
        for (std::size_t s = 0; s < batch.size(); ++s) {
            end += static_cast<index_t>(batch[s].size());
            std::copy_n(h.row(end - 1), C::hidden, last.row(static_cast<index_t>(s)));
            last_tokens_.push_back(batch[s].back());
        }
        return last;
    }

    void embed(const Rows<C::hidden>& h) const {
        const W* table = weights_.embed_tokens.data();
        cpu::parallel_for(h.rows, h.rows * C::hidden > 65536, [&](index_t r) {
            const W* e = table + tokens_[static_cast<std::size_t>(r)] * C::hidden;
            float* dst = h.row(r);
            for (int i = 0; i < C::hidden; ++i) dst[i] = to_float(e[i]);
        });
    }

    /// The final norm and the tied head on the rows that get logits.
    void head(const Rows<C::hidden>& rows, const StridedMatrix<float>& logits) {
        const Rows<C::hidden> normed = cpu::block_in<C::hidden>(m_, rows.rows);
        cpu::rmsnorm_rows(rows, weights_.norm.data(), normed, C::norm_eps);
        const ComplexityPacks<C, W>* packs = compute_.packs(weights_);
        cpu::linear<W>(normed, cpu::rows_of<const W>(weights_.embed_tokens.data(), C::vocab, C::hidden), logits,
                       cpu::Write::overwrite, scratch_, packs ? packs->head() : nullptr);
    }

    auto mlp_weights(int l) const {
        if constexpr (C::mlp == MlpKind::token_routed) return weights_.token_routed_mlp(l);
        else if constexpr (C::mlp == MlpKind::learned_router) return weights_.learned_router_mlp(l);
        else return weights_.dense_mlp(l);
    }

    using Attention = typename detail::attention_layer_of<C, W, KV>::type;
    /// What a release keeps stored under the arithmetic that runs (models/stored_matrices.hpp).
    static ReleaseKeeps keeps_under(cpu::Compute runs) {
        if constexpr (C::attention == AttentionKind::prism) return {.prism_u = Attention::decode_reads_stored_u(runs)};
        else return {};
    }
    static Attention make_attention() {
        if constexpr (C::attention == AttentionKind::prism) return Attention(C::max_positions);
        else return Attention();
    }

    /// Layer l's table, validated by the constructor (the weights are not
    /// mutable through the model). A view made per call, never stored, so
    /// that copies and moves of the model cannot point at another's table.
    TopKRouting routing(int l) const
        requires(C::mlp == MlpKind::token_routed)
    {
        return TopKRouting::prevalidated(weights_.layers[static_cast<std::size_t>(l)].routes, C::top_k, C::experts);
    }

    Weights weights_;
    ComputeChoice<ComplexityPacks<C, W>> compute_;
    Attention attention_;
    Mlp mlp_;
    cpu::LinearScratch scratch_;
    cpu::AlignedVector<float> h_, x_, m_, final_;
    std::vector<std::int64_t> tokens_, last_tokens_;
    std::vector<cpu::SequenceRows<KV>> rows_;
    ObserverPtr<ExpertLoad<C>> expert_load_;
    ObserverPtr<MuContributions<C>> mu_contributions_;
    ObserverPtr<cpu::AttentionDistance> distance_;
    ObserverPtr<StepTimes<C::layers>> step_times_;
};

}  // namespace cpx

#pragma once
// A GPU model (cuda::ComplexityModel or cuda::PrismModel) behind the CPU
// models' call contract (models/sequence_model.hpp): the same batch type
// (int64 token ids, one span per sequence, of any lengths), the same LogitsAt
// choice, logits in host rows, the same forward / extend / decode methods, the
// same validation and messages, and so generate() (greedy or seeded sampling)
// drives either backend:
//
//   cuda::HostModel<cuda::ComplexityModel<C, bf16>> model(weights, /*max_batch=*/4, /*max_rows=*/2048);
//   SlotCache cache(512);
//   auto out = generate(model, cache, prompt, {.max_new_tokens = 64});
//
// KV caches follow the CPU rule (one per sequence, held by the caller, passed
// at any place of any call): a SlotCache holds one of the model's `max_caches`
// device cache slots from its first call until it is destroyed; calls without
// caches use `max_batch` scratch slots of their own. A call whose new caches
// find every slot held is refused with a clear InputError.
// Sequences of different lengths run in one device call (packed rows). Calls
// longer than the model's max_rows run as chunked prefill in rounds of up to
// max_rows tokens shared among the sequences with tokens left
// (models/chunk_plan.hpp), so short sequences pass their share on to long ones
// and a call takes the fewest device calls. Each call synchronises its
// stream once per chunk that returns logits; serving loops that stay on the
// device use the GPU model itself.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/cuda/runtime/blas.cuh"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/runtime/device_buffer.cuh"
#include "cpx/cuda/runtime/graph.cuh"
#include "cpx/models/chunk_plan.hpp"
#include "cpx/models/logit_rows.cuh"
#include "cpx/models/sequence_model.hpp"
#include "cpx/models/slot_cache.hpp"

namespace cpx::cuda {

template <class M>
class HostModel : public SequenceModel<HostModel<M>, typename M::Config, SlotCache> {
public:
    using Config = typename M::Config;
    using Cache = SlotCache;
    using Tokens = TokenSpan;
    using Device = M;

    /// Builds the GPU model from host weights (ComplexityWeights or PrismWeights) for
    /// calls of up to `max_batch` sequences and `max_rows` tokens per device call, with
    /// device cache slots for `max_caches` live SlotCaches (0: max_batch) besides the
    /// `max_batch` scratch slots of calls without caches.
    template <class Weights>
    HostModel(const Weights& weights, int max_batch, int max_rows, int max_caches = 0)
        : model_(weights, max_batch, max_rows, max_batch + (max_caches > 0 ? max_caches : max_batch)),
          pool_(std::make_shared<SlotPool>(max_batch, max_caches > 0 ? max_caches : max_batch)),
          logits_(static_cast<std::size_t>(max_rows) * Config::vocab) {}

    /// The GPU model (kernel choice, device-side decoding loops).
    M& device() { return model_; }
    const M& device() const { return model_; }
    /// Device cache slots for caches, and how many live caches hold one.
    int max_caches() const { return pool_->size(); }
    int held_caches() const { return pool_->held(); }

private:
    friend SequenceModel<HostModel, Config, SlotCache>;

    void forward_pass(std::span<const Tokens> batch, std::span<Cache* const> caches, LogitsAt at,
                      const StridedMatrix<float>& logits, CallSize) {
        const int B = static_cast<int>(batch.size());
        require<InputError>(B <= model_.max_batch(), "the GPU model was built for ", model_.max_batch(),
                            " sequences per call; this call has ", B);
        hold_slots_(caches);
        row_of_.assign(1, 0);  // each sequence's first row in the caller's LogitsAt::all rows
        lengths_of_.clear();
        for (const Tokens& t : batch) {
            row_of_.push_back(row_of_.back() + t.size());
            lengths_of_.push_back(t.size());
        }
        const LogitRows which = at == LogitsAt::all ? LogitRows::all : LogitRows::last;

        // Rounds of up to max_rows tokens (chunked prefill through the device cache).
        done_.assign(batch.size(), 0);
        count_.resize(batch.size());
        while (next_chunk(lengths_of_, done_, static_cast<std::size_t>(model_.max_rows()), count_) > 0) {
            tokens_.clear();
            lengths_.resize(static_cast<std::size_t>(B));
            starts_.resize(static_cast<std::size_t>(B));
            bool returns_rows = false;
            for (std::size_t b = 0; b < batch.size(); ++b) {
                const std::size_t from = done_[b], n = count_[b];
                for (std::size_t j = 0; j < n; ++j) tokens_.push_back(static_cast<std::int32_t>(batch[b][from + j]));
                lengths_[b] = static_cast<std::int32_t>(n);
                starts_[b] = static_cast<std::int32_t>((caches.empty() ? 0 : caches[b]->length()) + from);
                returns_rows |= n > 0 && (at == LogitsAt::all || (at == LogitsAt::last && from + n == batch[b].size()));
            }
            model_.forward(blas_, tokens_, lengths_, starts_, slots_, logits_.data(), which, stream_);
            model_.check(stream_);  // waits for the stream; throws on an id or position the kernels refused
            if (returns_rows) {
                // Device rows: sequence after sequence (lengths_); each lands straight in the caller's rows.
                std::size_t device_row = 0;
                for (std::size_t b = 0; b < batch.size(); ++b) {
                    const std::size_t n = count_[b], from = done_[b];
                    if (at == LogitsAt::all && n > 0) download_rows_(logits, row_of_[b] + from, device_row, n);
                    else if (at == LogitsAt::last && n > 0 && from + n == batch[b].size())
                        download_rows_(logits, b, b, 1);
                    device_row += n;
                }
                CPX_CUDA_CHECK(cudaStreamSynchronize(stream_));
            }
            for (std::size_t b = 0; b < batch.size(); ++b) done_[b] += count_[b];
        }
        for (std::size_t b = 0; b < caches.size(); ++b) caches[b]->advance(static_cast<index_t>(batch[b].size()));
    }

    /// The device slot of each sequence of the call: its cache's (held from the cache's first
    /// call on), or scratch slot b for calls without caches.
    void hold_slots_(std::span<Cache* const> caches) {
        slots_.clear();
        if (caches.empty()) return;  // scratch slots 0 .. batch - 1
        for (std::size_t b = 0; b < caches.size(); ++b) {
            Cache& c = *caches[b];
            require<InputError>(c.pool() == nullptr || c.pool() == pool_.get(), "the KV cache of sequence ", b,
                                " holds a slot of another GPU model; a cache serves the model it was first used with");
            if (c.pool() == nullptr) {
                const int slot = pool_->acquire(c.id());
                require<InputError>(slot >= 0, "the KV cache of sequence ", b, " finds all ", pool_->size(),
                                    " device cache slots of this GPU model held by live caches; destroy one, or build ",
                                    "the model with more max_caches");
                c.hold(pool_, slot);
            }
            slots_.push_back(c.slot());
        }
    }

    /// Enqueues the copy of `rows` device logits rows from row `from` into the caller's rows from `to`.
    void download_rows_(const StridedMatrix<float>& logits, std::size_t to, std::size_t from, std::size_t rows) {
        constexpr std::size_t row_bytes = Config::vocab * sizeof(float);
        CPX_CUDA_CHECK(cudaMemcpy2DAsync(logits.row(static_cast<index_t>(to)),
                                         static_cast<std::size_t>(logits.ld) * sizeof(float),
                                         logits_.data() + from * Config::vocab, row_bytes, row_bytes, rows,
                                         cudaMemcpyDeviceToHost, stream_));
    }

    M model_;
    Blas blas_;
    Stream stream_;
    std::shared_ptr<SlotPool> pool_;  ///< the cache slots past the max_batch scratch slots
    DeviceBuffer<float> logits_;
    std::vector<std::int32_t> tokens_, lengths_, starts_, slots_;
    std::vector<std::size_t> row_of_, lengths_of_, done_, count_;
};

}  // namespace cpx::cuda

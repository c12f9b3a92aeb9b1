#pragma once
// A GPU model (cuda::ComplexityModel or cuda::PrismModel) behind the CPU
// models' call contract (models/sequence_model.hpp): the same batch type
// (int64 token ids, one span per sequence), the same LogitsAt choice, logits
// in host rows, the same forward / extend / decode methods, the same
// validation and messages, and so generate() (greedy or seeded sampling)
// drives either backend:
//
//   cuda::HostModel<cuda::ComplexityModel<C, bf16>> model(weights, /*max_batch=*/4, /*max_rows=*/2048);
//   SlotCache cache(512);
//   auto out = generate(model, cache, prompt, {.max_new_tokens = 64});
//
// What differs, and is checked with a clear InputError:
//   - the KV cache lives on the device, one slot per sequence of a call; a
//     SlotCache (models/slot_cache.hpp) is the caller's handle. Sequence i of
//     a call uses slot i, so a cache must keep its position in the calls that
//     use it, and a call that writes a slot (forward without caches, or a
//     cache given at that position) makes the older cache of that slot stale;
//   - the sequences of one call have equal lengths (the GPU kernels take one
//     length per call; decode steps always qualify).
// Calls longer than the model's max_rows run as chunked prefill. Each call
// synchronises its stream once per chunk (the logits come back to the host);
// serving loops that stay on the device use the GPU model itself.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/cpu/strided.hpp"
#include "cpx/cuda/blas.cuh"
#include "cpx/cuda/check.cuh"
#include "cpx/cuda/device_buffer.cuh"
#include "cpx/cuda/graph.cuh"
#include "cpx/cuda/logit_rows.cuh"
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
    /// calls of up to `max_batch` sequences and `max_rows` tokens per device call.
    template <class Weights>
    HostModel(const Weights& weights, int max_batch, int max_rows)
        : model_(weights, max_batch, max_rows),
          owner_(static_cast<std::size_t>(max_batch), 0),
          logits_(static_cast<std::size_t>(max_rows) * Config::vocab) {}

    /// The GPU model (kernel choice, device-side decoding loops).
    M& device() { return model_; }

private:
    friend SequenceModel<HostModel, Config, SlotCache>;

    void forward_pass(std::span<const Tokens> batch, std::span<Cache* const> caches, LogitsAt at,
                      const cpu::RowBlock<float>& logits, CallSize) {
        const int B = static_cast<int>(batch.size());
        const std::size_t S = batch[0].size();
        for (std::size_t s = 1; s < batch.size(); ++s)
            require<InputError>(batch[s].size() == S, "the GPU model takes sequences of one length per call: sequence ",
                                s, " has ", batch[s].size(), " tokens, sequence 0 has ", S);
        require<InputError>(B <= model_.max_batch(), "the GPU model was built for ", model_.max_batch(),
                            " sequences per call; this call has ", B);
        claim_slots_(caches, B);

        // Chunks of up to max_rows / B tokens per sequence (chunked prefill through the device cache).
        const std::size_t chunk = std::max<std::size_t>(1, static_cast<std::size_t>(model_.max_rows() / B));
        for (std::size_t begin = 0; begin < S; begin += chunk) {
            const std::size_t n = std::min(chunk, S - begin);
            const bool last_chunk = begin + n == S;
            tokens_.resize(static_cast<std::size_t>(B) * n);
            starts_.resize(static_cast<std::size_t>(B));
            for (int b = 0; b < B; ++b) {
                const auto bs = static_cast<std::size_t>(b);
                for (std::size_t j = 0; j < n; ++j) tokens_[bs * n + j] = static_cast<std::int32_t>(batch[bs][begin + j]);
                starts_[bs] = static_cast<std::int32_t>((caches.empty() ? 0 : caches[bs]->length()) + begin);
            }
            const LogitRows which = at == LogitsAt::all ? LogitRows::all : LogitRows::last;
            model_.forward(blas_, tokens_, B, starts_, logits_.data(), which, stream_);
            model_.check(stream_);  // waits for the stream; throws on an id or position the kernels refused
            // Device rows b * n + j are sequence b's positions begin + j: each sequence's rows land
            // straight in the caller's rows (S apart per sequence), one strided copy per sequence.
            if (at == LogitsAt::all)
                for (int b = 0; b < B; ++b)
                    download_rows_(logits, static_cast<std::size_t>(b) * S + begin, static_cast<std::size_t>(b) * n, n);
            else if (at == LogitsAt::last && last_chunk)
                download_rows_(logits, 0, 0, static_cast<std::size_t>(B));
            else
                continue;  // no logits rows from this chunk
            CPX_CUDA_CHECK(cudaStreamSynchronize(stream_));
        }
        for (Cache* c : caches) c->advance(static_cast<index_t>(S));
    }

    /// Sequence i of the call uses device slot i: a cache keeps its slot, and a slot written
    /// for someone else leaves its earlier cache stale.
    void claim_slots_(std::span<Cache* const> caches, int batch) {
        if (caches.empty()) {
            for (int b = 0; b < batch; ++b) owner_[static_cast<std::size_t>(b)] = 0;  // written, by no cache
            return;
        }
        for (int b = 0; b < batch; ++b) {
            Cache& c = *caches[static_cast<std::size_t>(b)];
            require<InputError>(c.slot() < 0 || c.slot() == b, "the KV cache of sequence ", b, " lives in device slot ",
                                c.slot(), "; on the GPU a cache keeps its position in the calls that use it");
            require<InputError>(c.length() == 0 || owner_[static_cast<std::size_t>(b)] == c.id(),
                                "the KV cache of sequence ", b, " is stale: another call wrote over device slot ", b,
                                " since (clear() it to start again)");
        }
        for (int b = 0; b < batch; ++b) {
            caches[static_cast<std::size_t>(b)]->claim(b);
            owner_[static_cast<std::size_t>(b)] = caches[static_cast<std::size_t>(b)]->id();
        }
    }

    /// Enqueues the copy of `rows` device logits rows from row `from` into the caller's rows from `to`.
    void download_rows_(const cpu::RowBlock<float>& logits, std::size_t to, std::size_t from, std::size_t rows) {
        constexpr std::size_t row_bytes = Config::vocab * sizeof(float);
        CPX_CUDA_CHECK(cudaMemcpy2DAsync(logits.row(static_cast<index_t>(to)),
                                         static_cast<std::size_t>(logits.stride) * sizeof(float),
                                         logits_.data() + from * Config::vocab, row_bytes, row_bytes, rows,
                                         cudaMemcpyDeviceToHost, stream_));
    }

    M model_;
    Blas blas_;
    Stream stream_;
    std::vector<std::uint64_t> owner_;  ///< the cache each device slot holds (0: none)
    DeviceBuffer<float> logits_;
    std::vector<std::int32_t> tokens_, starts_;
};

}  // namespace cpx::cuda

#pragma once
// The per-call inputs of a GPU sequence model, one implementation for both
// model families: the token ids, each sequence's start position and, when they
// need them, the sequences' row offsets (lengths that differ) and cache slots,
// in device buffers sized once; the call checked on the host against the sizes
// the model was built for, its vocabulary and its context (the same messages
// from cuda::ComplexityModel and cuda::PrismModel). enqueue() reads only these
// buffers, so a device-side decoding loop may write them instead of set().

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/runtime/device_buffer.cuh"
#include "cpx/cuda/kernels/embedding.cuh"
#include "cpx/cuda/runtime/kernel_choice.cuh"
#include "cpx/models/logit_rows.cuh"
#include "cpx/cuda/kernels/sequence_rows.cuh"

namespace cpx::cuda {

/// The host-side shape of one call, as CallInputs::set validated and uploaded it.
struct CallShape {
    int batch = 0;         ///< sequences
    int rows = 0;          ///< tokens in total
    int longest = 0;       ///< tokens of the longest sequence
    bool packed = false;   ///< lengths differ: sequence offsets on the device
    bool slotted = false;  ///< sequences use the cache slots given to set, not slots 0 .. batch - 1

    /// `batch` sequences of `tokens_per_sequence` tokens each, in slots 0 .. batch - 1.
    static CallShape equal(int batch, int tokens_per_sequence) {
        return {batch, batch * tokens_per_sequence, tokens_per_sequence, false, false};
    }
};

class CallInputs {
public:
    /// `model` names the model in errors ("cuda::ComplexityModel"); `cache_slots` is the
    /// number of KV-cache slots the model holds (at least max_batch).
    CallInputs(const char* model, int max_batch, int max_rows, int vocab, int context, int cache_slots)
        : model_(model), max_batch_(max_batch), max_rows_(max_rows), vocab_(vocab), context_(context),
          cache_slots_(cache_slots) {
        require<ShapeError>(max_batch >= 1 && max_rows >= max_batch, model_, ": max_batch ", max_batch,
                            " and max_rows ", max_rows, " (need 1 <= max_batch <= max_rows)");
        require<ShapeError>(cache_slots >= max_batch, model_, ": ", cache_slots, " KV-cache slots for calls of up to ",
                            max_batch, " sequences");
        tokens_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(max_rows));
        starts_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(max_batch));
        offsets_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(max_batch) + 1);
        slots_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(max_batch));
    }

    /// Checks a call's shape against the sizes the model was built for.
    void check(const CallShape& c) const {
        require<ShapeError>(c.batch >= 1 && c.batch <= max_batch_, model_, ": batch ", c.batch, " outside [1, ",
                            max_batch_, "]");
        require<ShapeError>(c.rows >= 1 && c.rows <= max_rows_, model_, ": ", c.rows, " tokens outside [1, ", max_rows_,
                            "], the rows the model was sized for");
        require<ShapeError>(c.longest >= 1 && c.longest <= c.rows &&
                                (c.packed ? c.rows <= static_cast<long long>(c.batch) * c.longest
                                          : c.rows == static_cast<long long>(c.batch) * c.longest),
                            model_, ": ", c.rows, " tokens are not ", c.batch, c.packed ? " sequences of up to " : " sequences of ",
                            c.longest);
    }

    /// Validates one call of `batch` sequences of S = tokens.size() / batch tokens on the
    /// host and copies it to the device: sequence b at positions [starts[b], starts[b] + S),
    /// in cache slot b.
    CallShape set(std::span<const std::int32_t> tokens, int batch, std::span<const std::int32_t> starts,
                  cudaStream_t stream) {
        require<ShapeError>(batch >= 1 && tokens.size() % static_cast<std::size_t>(batch) == 0, model_, ": ",
                            tokens.size(), " tokens are not ", batch, " equal sequences");
        const CallShape shape = CallShape::equal(batch, static_cast<int>(tokens.size() / static_cast<std::size_t>(batch)));
        check(shape);
        require<ShapeError>(static_cast<int>(starts.size()) == batch, model_, ": ", starts.size(),
                            " start positions for ", batch, " sequences");
        for (int b = 0; b < batch; ++b) check_positions_(b, starts[b], shape.longest);
        upload_(tokens, starts, stream);
        return shape;
    }

    /// Validates and uploads a call of sequences of any lengths (`lengths`, summing to
    /// tokens.size(); a sequence may have none), packed one after the other in `tokens`:
    /// sequence b at positions [starts[b], starts[b] + lengths[b]), in cache slot slots[b]
    /// (distinct, in [0, cache_slots)), or slot b when `slots` is empty.
    CallShape set(std::span<const std::int32_t> tokens, std::span<const std::int32_t> lengths,
                  std::span<const std::int32_t> starts, std::span<const std::int32_t> slots, cudaStream_t stream) {
        const int batch = static_cast<int>(lengths.size());
        require<ShapeError>(starts.size() == lengths.size() && (slots.empty() || slots.size() == lengths.size()),
                            model_, ": ", lengths.size(), " sequence lengths, ", starts.size(), " start positions and ",
                            slots.size(), " cache slots");
        CallShape shape{batch, 0, 0, false, !slots.empty()};
        long long rows = 0;
        for (int b = 0; b < batch; ++b) {
            require<ShapeError>(lengths[b] >= 0, model_, ": sequence ", b, " has length ", lengths[b]);
            rows += lengths[b];
            shape.longest = std::max(shape.longest, static_cast<int>(lengths[b]));
            shape.packed |= lengths[b] != lengths[0];
        }
        require<ShapeError>(rows == static_cast<long long>(tokens.size()), model_, ": ", tokens.size(),
                            " tokens for sequences of ", rows, " in total");
        require<ShapeError>(rows <= max_rows_, model_, ": ", rows, " tokens exceed the ", max_rows_,
                            " rows the model was sized for");
        shape.rows = static_cast<int>(rows);
        check(shape);
        for (int b = 0; b < batch; ++b) check_positions_(b, starts[b], lengths[b]);
        for (std::size_t b = 0; b < slots.size(); ++b) {
            require<InputError>(slots[b] >= 0 && slots[b] < cache_slots_, model_, ": sequence ", b, " names cache slot ",
                                slots[b], " of ", cache_slots_);
            for (std::size_t e = 0; e < b; ++e)
                require<InputError>(slots[e] != slots[b], model_, ": sequences ", e, " and ", b,
                                    " both name cache slot ", slots[b]);
        }
        upload_(tokens, starts, stream);
        if (shape.packed) {
            host_offsets_.assign(1, 0);
            for (int b = 0; b < batch; ++b) host_offsets_.push_back(host_offsets_.back() + lengths[b]);
            copy_(offsets_, host_offsets_, stream);
        }
        if (shape.slotted) copy_(slots_, slots, stream);
        return shape;
    }

    /// Where the sequences of a call of this shape sit, for the kernels.
    SequenceRows rows(const CallShape& c) const {
        return {starts_.data(), c.packed ? offsets_.data() : nullptr, c.slotted ? slots_.data() : nullptr, c.batch,
                c.longest};
    }

    std::int32_t* tokens() const { return tokens_.data(); }  ///< [max_rows]
    std::int32_t* starts() const { return starts_.data(); }  ///< [max_batch]
    int max_batch() const { return max_batch_; }
    int max_rows() const { return max_rows_; }
    int cache_slots() const { return cache_slots_; }
    const char* model() const { return model_; }

private:
    void check_positions_(int b, std::int32_t start, int length) const {
        require<InputError>(start >= 0 && static_cast<long long>(start) + length <= context_, model_, ": sequence ", b,
                            " at positions [", start, ", ", static_cast<long long>(start) + length,
                            ") exceeds the context ", context_);
    }
    void upload_(std::span<const std::int32_t> tokens, std::span<const std::int32_t> starts, cudaStream_t stream) {
        validate_tokens<std::int32_t>(tokens, vocab_);
        CPX_CUDA_CHECK(cudaMemcpyAsync(tokens_.data(), tokens.data(), tokens.size_bytes(), cudaMemcpyHostToDevice, stream));
        CPX_CUDA_CHECK(cudaMemcpyAsync(starts_.data(), starts.data(), starts.size_bytes(), cudaMemcpyHostToDevice, stream));
    }
    /// Pageable host memory: the copy has read `from` when cudaMemcpyAsync returns.
    static void copy_(DeviceBuffer<std::int32_t>& to, std::span<const std::int32_t> from, cudaStream_t stream) {
        CPX_CUDA_CHECK(cudaMemcpyAsync(to.data(), from.data(), from.size_bytes(), cudaMemcpyHostToDevice, stream));
    }

    const char* model_;
    int max_batch_, max_rows_, vocab_, context_, cache_slots_;
    DeviceBuffer<std::int32_t> tokens_, starts_, offsets_, slots_;
    std::vector<std::int32_t> host_offsets_;
};

/// The rows of h ([shape.rows, cols]) that get logits: all of them, or each sequence's
/// last, which are rows `longest` apart when the lengths are equal and are gathered into
/// `last` ([batch, cols], device) when they differ.
inline StridedMatrix<float> logit_rows(StridedMatrix<float> h, const CallShape& shape, const SequenceRows& seqs,
                                       LogitRows which, float* last, cudaStream_t stream) {
    if (which == LogitRows::all) return h;
    if (!shape.packed)
        return StridedMatrix<float>(h.data + static_cast<index_t>(shape.longest - 1) * h.ld, shape.batch, h.cols,
                                    static_cast<index_t>(shape.longest) * h.ld);
    const StridedMatrix<float> out(last, shape.batch, h.cols, h.cols);
    last_rows(h, seqs, out, stream);
    return out;
}

/// The calls both GPU models expose on top of their CallInputs (`inputs_`), DeviceStatus
/// (`status_`), KV cache (`cache_`), kernel choice (`kernels_`) and `enqueue_call_`,
/// written once (the models befriend it).
template <class Model>
class ModelCalls {
public:
    /// Copies one call's inputs to the device (CallInputs::set: validated on the host):
    /// `batch` sequences of tokens.size() / batch tokens in cache slots 0 .. batch - 1.
    CallShape set_inputs(std::span<const std::int32_t> tokens, int batch, std::span<const std::int32_t> starts,
                         cudaStream_t stream) {
        return self().inputs_.set(tokens, batch, starts, stream);
    }
    /// The same for sequences of any lengths packed in `tokens`, each in the cache slot
    /// `slots` names (slot b when empty).
    CallShape set_inputs(std::span<const std::int32_t> tokens, std::span<const std::int32_t> lengths,
                         std::span<const std::int32_t> starts, std::span<const std::int32_t> slots, cudaStream_t stream) {
        return self().inputs_.set(tokens, lengths, starts, slots, stream);
    }

    /// Enqueues the forward pass over the inputs last given to set_inputs (of this shape).
    /// logits: device fp32, [shape.rows, vocab] (LogitRows::all) or [shape.batch, vocab]
    /// (LogitRows::last; an empty sequence's row is NaN). No host synchronisation, no allocation.
    template <class Blas>
    void enqueue(Blas& blas, const CallShape& shape, float* logits, LogitRows which, cudaStream_t stream) {
        cself().inputs_.check(shape);
        self().status_.reset(stream);
        self().enqueue_call_(blas, shape, cself().inputs_.rows(shape), logits, which, stream);
    }
    /// enqueue for `batch` sequences of S tokens in slots 0 .. batch - 1 (decode steps).
    template <class Blas>
    void enqueue(Blas& blas, int batch, int S, float* logits, LogitRows which, cudaStream_t stream) {
        enqueue(blas, CallShape::equal(batch, S), logits, which, stream);
    }

    /// set_inputs + enqueue: `batch` sequences of tokens.size() / batch tokens.
    template <class Blas>
    void forward(Blas& blas, std::span<const std::int32_t> tokens, int batch, std::span<const std::int32_t> starts,
                 float* logits, LogitRows which, cudaStream_t stream) {
        enqueue(blas, set_inputs(tokens, batch, starts, stream), logits, which, stream);
    }
    /// set_inputs + enqueue for sequences of any lengths (see set_inputs).
    template <class Blas>
    void forward(Blas& blas, std::span<const std::int32_t> tokens, std::span<const std::int32_t> lengths,
                 std::span<const std::int32_t> starts, std::span<const std::int32_t> slots, float* logits,
                 LogitRows which, cudaStream_t stream) {
        enqueue(blas, set_inputs(tokens, lengths, starts, slots, stream), logits, which, stream);
    }

    /// Waits for `stream` and throws InputError if a kernel found an invalid id or position.
    void check(cudaStream_t stream) const { cself().status_.check(stream, cself().inputs_.model()); }

    /// The device input buffers enqueue reads: token ids [max_rows] and each sequence's
    /// start position [max_batch]. A device-side decoding loop writes the next step's
    /// inputs here (cuda::greedy_feedback) instead of calling set_inputs; ids and positions
    /// written this way are still checked by the kernels (NaN rows + a status record).
    std::int32_t* device_tokens() { return self().inputs_.tokens(); }
    std::int32_t* device_starts() { return self().inputs_.starts(); }
    int max_batch() const { return cself().inputs_.max_batch(); }
    int max_rows() const { return cself().inputs_.max_rows(); }
    /// KV-cache slots the model holds (a call's sequences use distinct ones).
    int cache_slots() const { return cself().inputs_.cache_slots(); }
    /// The model's KV cache, every slot of it.
    auto& cache() { return self().cache_; }

    /// The kernels the next calls run: preferred_kernels() until use_kernels() sets others
    /// (KernelChoice{}: SIMT everywhere), checked against the model's storage type and head dim.
    void use_kernels(const KernelChoice& k) {
        check_kernel_choice<typename Model::value_type>(k, Model::attention_head_dim, cself().inputs_.model());
        self().kernels_ = k;
    }
    const KernelChoice& kernels() const { return cself().kernels_; }

private:
    Model& self() { return static_cast<Model&>(*this); }
    const Model& cself() const { return static_cast<const Model&>(*this); }
};

}  // namespace cpx::cuda

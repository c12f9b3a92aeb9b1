#pragma once
// The per-call inputs of a GPU sequence model, one implementation for both
// model families: the token ids and each sequence's start position in device
// buffers sized once, the call checked on the host against the sizes the model
// was built for, its vocabulary and its context (the same messages from
// cuda::ComplexityModel and cuda::PrismModel). enqueue() reads only these
// buffers, so a device-side decoding loop may write them instead of set().

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "cpx/core/error.hpp"
#include "cpx/cuda/check.cuh"
#include "cpx/cuda/device_buffer.cuh"
#include "cpx/cuda/embedding.cuh"
#include "cpx/cuda/logit_rows.cuh"

namespace cpx::cuda {

class CallInputs {
public:
    /// `model` names the model in errors ("cuda::ComplexityModel").
    CallInputs(const char* model, int max_batch, int max_rows, int vocab, int context)
        : model_(model), max_batch_(max_batch), max_rows_(max_rows), vocab_(vocab), context_(context) {
        require<ShapeError>(max_batch >= 1 && max_rows >= max_batch, model_, ": max_batch ", max_batch,
                            " and max_rows ", max_rows, " (need 1 <= max_batch <= max_rows)");
        tokens_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(max_rows));
        starts_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(max_batch));
    }

    /// Checks that `rows` tokens are `batch` equal sequences within the sizes the model was built for.
    void check(std::size_t rows, int batch) const {
        require<ShapeError>(batch >= 1 && batch <= max_batch_, model_, ": batch ", batch, " outside [1, ", max_batch_,
                            "]");
        require<ShapeError>(rows >= 1 && rows % static_cast<std::size_t>(batch) == 0 &&
                                rows <= static_cast<std::size_t>(max_rows_),
                            model_, ": ", rows, " tokens are not ", batch, " equal sequences within the ", max_rows_,
                            " rows the model was sized for");
    }

    /// Validates one call on the host and copies it to the device: `batch` sequences of
    /// S = tokens.size() / batch tokens, sequence b at positions [starts[b], starts[b] + S).
    void set(std::span<const std::int32_t> tokens, int batch, std::span<const std::int32_t> starts,
             cudaStream_t stream) {
        check(tokens.size(), batch);
        const int S = static_cast<int>(tokens.size()) / batch;
        require<ShapeError>(static_cast<int>(starts.size()) == batch, model_, ": ", starts.size(),
                            " start positions for ", batch, " sequences");
        validate_tokens<std::int32_t>(tokens, vocab_);
        for (int b = 0; b < batch; ++b)
            require<InputError>(starts[b] >= 0 && starts[b] + S <= context_, model_, ": sequence ", b,
                                " at positions [", starts[b], ", ", starts[b] + S, ") exceeds the context ", context_);
        CPX_CUDA_CHECK(cudaMemcpyAsync(tokens_.data(), tokens.data(), tokens.size_bytes(), cudaMemcpyHostToDevice, stream));
        CPX_CUDA_CHECK(cudaMemcpyAsync(starts_.data(), starts.data(), starts.size_bytes(), cudaMemcpyHostToDevice, stream));
    }

    std::int32_t* tokens() const { return tokens_.data(); }  ///< [max_rows]
    std::int32_t* starts() const { return starts_.data(); }  ///< [max_batch]
    int max_batch() const { return max_batch_; }
    int max_rows() const { return max_rows_; }
    const char* model() const { return model_; }

private:
    const char* model_;
    int max_batch_, max_rows_, vocab_, context_;
    DeviceBuffer<std::int32_t> tokens_, starts_;
};

/// The calls both GPU models expose on top of their CallInputs (`inputs_`), DeviceStatus
/// (`status_`) and `enqueue`, written once (the models befriend it).
template <class Model>
class ModelCalls {
public:
    /// Copies one call's inputs to the device (CallInputs::set: validated on the host).
    void set_inputs(std::span<const std::int32_t> tokens, int batch, std::span<const std::int32_t> starts,
                    cudaStream_t stream) {
        self().inputs_.set(tokens, batch, starts, stream);
    }

    /// set_inputs + enqueue: `batch` sequences of tokens.size() / batch tokens.
    template <class Blas>
    void forward(Blas& blas, std::span<const std::int32_t> tokens, int batch, std::span<const std::int32_t> starts,
                 float* logits, LogitRows which, cudaStream_t stream) {
        set_inputs(tokens, batch, starts, stream);
        self().enqueue(blas, batch, static_cast<int>(tokens.size()) / batch, logits, which, stream);
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

private:
    Model& self() { return static_cast<Model&>(*this); }
    const Model& cself() const { return static_cast<const Model&>(*this); }
};

}  // namespace cpx::cuda

#pragma once
// Greedy decoding that stays on the device: the next token of each sequence is
// the argmax of its logits row, written straight into the model's device token
// buffer, and every sequence's start position moves one step on. A decode step
// (model enqueue + these two launches) is then a closed loop that a CUDA graph
// replays without the host reading a single logit.
//
// Ties go to the lowest index, as cpx::greedy_token (std::max_element) does on
// the CPU. A row holding a NaN has no meaningful argmax (the model writes NaN
// rows for invalid inputs): its token becomes -1, which the next step's
// embedding records as an id outside the vocabulary, so the error survives to
// the caller's DeviceStatus check instead of being turned into a valid id.

#include <cstdint>

#include "cpx/core/error.hpp"
#include "cpx/cuda/runtime/check.cuh"

namespace cpx::cuda {

namespace kernels {

/// (value, index) pairs ordered for an argmax with ties to the lowest index.
struct ArgmaxPair {
    float value;
    int index;
};

__device__ inline ArgmaxPair better(ArgmaxPair a, ArgmaxPair b) {
    if (b.value > a.value || (b.value == a.value && b.index < a.index)) return b;
    return a;
}

template <int Threads>
__global__ void __launch_bounds__(Threads)
    argmax_rows(const float* __restrict__ logits, long long ld, int vocab, std::int32_t* out) {
    static_assert(Threads % 32 == 0 && Threads <= 1024, "block size must be whole warps");
    const float* row = logits + static_cast<long long>(blockIdx.x) * ld;
    ArgmaxPair best{-INFINITY, vocab};  // index vocab: nothing seen yet
    bool nan = false;
    for (int j = threadIdx.x; j < vocab; j += Threads) {
        const float v = row[j];
        nan |= v != v;
        best = better(best, ArgmaxPair{v, j});
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        const ArgmaxPair other{__shfl_xor_sync(0xffffffffu, best.value, offset),
                               __shfl_xor_sync(0xffffffffu, best.index, offset)};
        best = better(best, other);
    }
    __shared__ ArgmaxPair warp_best[Threads / 32];
    __shared__ int any_nan;
    if (threadIdx.x == 0) any_nan = 0;
    __syncthreads();
    if (nan) atomicOr(&any_nan, 1);
    if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
    __syncthreads();
    if (threadIdx.x == 0) {
        ArgmaxPair b = warp_best[0];
        for (int w = 1; w < Threads / 32; ++w) b = better(b, warp_best[w]);
        // -inf values still win over the initial pair (equal value, lower index), so index == vocab
        // is left only by rows of NaN, which any_nan already catches.
        out[blockIdx.x] = (any_nan || b.index >= vocab) ? -1 : b.index;
    }
}

__global__ void advance_positions(std::int32_t* starts, int batch, int step) {
    const int b = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (b < batch) starts[b] += step;
}

__global__ void record_tokens(const std::int32_t* tokens, const std::int32_t* starts, int batch, std::int32_t* history,
                              long long ld) {
    const int b = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (b >= batch) return;
    const long long p = starts[b];
    if (p >= 0 && p < ld) history[b * ld + p] = tokens[b];
}

}  // namespace kernels

/// tokens[r] = argmax_j logits[r * ld + j] over j < vocab, for r < rows (device
/// pointers). Ties: lowest index; a row with a NaN: -1 (see the header comment).
inline void argmax_rows(const float* logits, int rows, int vocab, long long ld, std::int32_t* tokens,
                        cudaStream_t stream) {
    require<ShapeError>(rows >= 0 && vocab >= 1 && ld >= vocab, "cuda::argmax_rows: ", rows, " rows of ", vocab,
                        " logits with row stride ", ld);
    if (rows == 0) return;
    constexpr int threads = 256;
    kernels::argmax_rows<threads><<<static_cast<unsigned>(rows), threads, 0, stream>>>(logits, ld, vocab, tokens);
    CPX_CUDA_CHECK_LAUNCH();
}

/// starts[b] += step for b < batch (device pointer): the next decode step's positions.
inline void advance_positions(std::int32_t* starts, int batch, int step, cudaStream_t stream) {
    require<ShapeError>(batch >= 0, "cuda::advance_positions: batch ", batch);
    if (batch == 0) return;
    kernels::advance_positions<<<static_cast<unsigned>((batch + 127) / 128), 128, 0, stream>>>(starts, batch, step);
    CPX_CUDA_CHECK_LAUNCH();
}

/// history[b * ld + starts[b]] = tokens[b] for b < batch, where 0 <= starts[b] < ld
/// (device pointers): each sequence's tokens collected by position on the device.
inline void record_tokens(const std::int32_t* tokens, const std::int32_t* starts, int batch, std::int32_t* history,
                          long long ld, cudaStream_t stream) {
    require<ShapeError>(batch >= 0 && ld >= 1, "cuda::record_tokens: batch ", batch, ", row length ", ld);
    if (batch == 0) return;
    kernels::record_tokens<<<static_cast<unsigned>((batch + 127) / 128), 128, 0, stream>>>(tokens, starts, batch,
                                                                                            history, ld);
    CPX_CUDA_CHECK_LAUNCH();
}

/// The bookkeeping of one greedy step after a forward with LogitRows::last over
/// `consumed` tokens per sequence (the prompt length after a prefill, 1 after a
/// decode step): each sequence's next token from its logits row [batch, vocab],
/// its start position moved `consumed` on, and, with a `history` [batch, ld], the
/// token stored at its position there. `tokens` and `starts` are the model's
/// device inputs (device_tokens(), device_starts()).
inline void greedy_feedback(const float* logits, int batch, int vocab, int consumed, std::int32_t* tokens,
                            std::int32_t* starts, cudaStream_t stream, std::int32_t* history = nullptr,
                            long long ld = 0) {
    argmax_rows(logits, batch, vocab, vocab, tokens, stream);
    advance_positions(starts, batch, consumed, stream);
    if (history) record_tokens(tokens, starts, batch, history, ld, stream);
}

}  // namespace cpx::cuda

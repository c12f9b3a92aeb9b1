#pragma once
// Input errors found on the device. Kernels never read outside a table: a
// token id outside the vocabulary or a position outside a table or cache is
// recorded here (and its output row is written as NaN) instead. The caller
// decides where to look: `check()` synchronises the stream and throws an
// InputError, so a forward (or a captured decode graph) never waits on the
// host; the model calls it where it already synchronises.

#include <climits>
#include <string>

#include "cpx/core/error.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/runtime/device_buffer.cuh"

namespace cpx::cuda {

/// Bits of the status word.
enum StatusBit : unsigned {
    status_token_out_of_range = 1u,
    status_position_out_of_range = 2u,
};

/// Device view of the status words: [bits, first bad token row, first bad position row].
struct StatusView {
    int* words = nullptr;  ///< null: errors are not recorded (outputs are still NaN)

    __device__ void token_error(long long row) const {
        if (!words) return;
        atomicOr(reinterpret_cast<unsigned*>(words), status_token_out_of_range);
        atomicMin(words + 1, row < INT_MAX ? static_cast<int>(row) : INT_MAX);
    }
    __device__ void position_error(long long row) const {
        if (!words) return;
        atomicOr(reinterpret_cast<unsigned*>(words), status_position_out_of_range);
        atomicMin(words + 2, row < INT_MAX ? static_cast<int>(row) : INT_MAX);
    }
};

namespace kernels {
__global__ void reset_status(int* words) {
    if (threadIdx.x == 0) {
        words[0] = 0;
        words[1] = INT_MAX;
        words[2] = INT_MAX;
    }
}
}  // namespace kernels

/// RAII owner of one status record.
class DeviceStatus {
public:
    DeviceStatus() : words_(3) { reset(nullptr); }

    StatusView view() const { return StatusView{words_.data()}; }

    /// Clears the record, in stream order (capturable).
    void reset(cudaStream_t stream) {
        kernels::reset_status<<<1, 32, 0, stream>>>(words_.data());
        CPX_CUDA_CHECK_LAUNCH();
    }

    /// Waits for `stream`, then throws InputError if a kernel recorded an error.
    void check(cudaStream_t stream, const char* where) const {
        CPX_CUDA_CHECK(cudaStreamSynchronize(stream));
        const auto w = words_.download();
        if (w[0] == 0) return;
        std::string msg = std::string(where) + ":";
        if (w[0] & status_token_out_of_range)
            msg += " a token id outside the vocabulary at row " + std::to_string(w[1]) + ";";
        if (w[0] & status_position_out_of_range)
            msg += " a position past the table or cache capacity at row " + std::to_string(w[2]) + ";";
        raise<InputError>(msg, " the affected outputs are NaN");
    }

private:
    DeviceBuffer<int> words_;
};

}  // namespace cpx::cuda

#pragma once
// Token embedding gather on the GPU: out[r, :] = table[tokens[r], :]
// (+ positions[pos(r), :] for PRISM's learned absolute positions). Token ids
// are checked on the device: an id outside [0, vocab) never indexes the
// table; its row is written as NaN and the DeviceStatus records it, to be
// thrown as InputError where the caller synchronises (DeviceStatus::check).
// Callers that hold the ids on the host can validate them before upload with
// validate_tokens and never see the device path.

#include <cstdint>
#include <span>
#include <type_traits>

#include "cpx/core/dtype.hpp"
#include "cpx/core/error.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/core/tensor_view.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/runtime/device_status.cuh"
#include "cpx/cuda/kernels/sequence_rows.cuh"

namespace cpx::cuda {

/// Host-side validation of token ids before they are uploaded.
template <class Tok>
void validate_tokens(std::span<const Tok> tokens, index_t vocab) {
    for (std::size_t i = 0; i < tokens.size(); ++i)
        if (tokens[i] < 0 || static_cast<index_t>(tokens[i]) >= vocab)
            raise<InputError>("token id ", static_cast<long long>(tokens[i]), " at index ", i,
                              " is outside the vocabulary [0, ", vocab, ")");
}

namespace kernels {
template <class Tok, class T, class Out>
__global__ void __launch_bounds__(128)
    embedding_rows(const Tok* __restrict__ tokens, const T* __restrict__ table, index_t vocab, int d, Out* out,
                   index_t out_ld, const T* __restrict__ positions, int position_rows, SequenceRows seqs,
                   StatusView status) {
    const long long r = blockIdx.x;
    Out* y = out + r * out_ld;
    const long long t = static_cast<long long>(tokens[r]);
    bool ok = t >= 0 && t < vocab;
    if (!ok && threadIdx.x == 0) status.token_error(r);
    int pos = 0;
    if (positions) {
        const int seq = seqs.sequence_of(static_cast<int>(r));
        pos = seqs.position(static_cast<int>(r), seq);
        if (pos < 0 || pos >= position_rows || seqs.malformed(seq)) {
            if (threadIdx.x == 0) status.position_error(r);
            ok = false;
        }
    }
    if (!ok) {
        for (int i = threadIdx.x; i < d; i += blockDim.x) y[i] = from_float<Out>(NAN);
        return;
    }
    const T* e = table + t * d;
    const T* p = positions ? positions + static_cast<index_t>(pos) * d : nullptr;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        const float v = to_float(e[i]);
        y[i] = from_float<Out>(p ? v + to_float(p[i]) : v);
    }
}
}  // namespace kernels

/// out[r, :] = table[tokens[r], :] for r < out.rows, with tokens on the device.
/// With `positions` ([P, d], device), adds positions[position of row r, :], the
/// positions given by `seqs`. Invalid ids or positions: NaN rows and a status record.
template <class Tok, class T, class Out>
void embedding(const Tok* tokens, Matrix<const T> table, StridedMatrix<Out> out, StatusView status,
               cudaStream_t stream = nullptr, const T* positions = nullptr, int position_rows = 0,
               const SequenceRows& seqs = {}) {
    static_assert(std::is_integral_v<Tok>, "token ids are integers");
    out.validate("cuda::embedding output");
    require<ShapeError>(out.cols == table.extent(1), "cuda::embedding: output width ", out.cols,
                        " differs from the table width ", table.extent(1));
    if (positions) seqs.validate(out.rows, "cuda::embedding (positional rows)");
    require<ShapeError>(out.rows <= 0x7fffffff, "cuda::embedding: too many rows");
    if (out.rows == 0 || out.cols == 0) return;
    kernels::embedding_rows<<<static_cast<unsigned>(out.rows), 128, 0, stream>>>(
        tokens, table.data(), table.extent(0), static_cast<int>(table.extent(1)), out.data, out.ld, positions,
        position_rows, seqs, status);
    CPX_CUDA_CHECK_LAUNCH();
}

}  // namespace cpx::cuda

#pragma once
// Where the token rows of one GPU call sit (the device twin of
// cpu/layers/sequence_rows.hpp): sequence b of the call holds rows
// [first_row(b), first_row(b + 1)) at positions start[b], start[b] + 1, ...,
// and its keys and values live in cache slot slot(b). Two layouts:
//   equal lengths:    no offsets, sequence b is rows [b * longest, (b + 1) * longest)
//                     (decode steps, and every call of sequences of one length);
//   packed lengths:   offsets[b] is the first row of sequence b, offsets[batch]
//                     the row count; a sequence may be empty (chunked prefill of
//                     sequences of different lengths leaves finished ones empty).
// Slots default to the sequence index; with `slots`, sequence b uses cache slot
// slots[b] (a cache handle keeps its slot whatever its place in a call).
// Every pointer is device memory read by the kernels when they run, so a
// captured graph replays with whatever a later call wrote there. `longest` and
// `batch` are host values: they size the grids.

#include <cstdint>

#include "cpx/core/error.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/runtime/check.cuh"

namespace cpx::cuda {

struct SequenceRows {
    const std::int32_t* start = nullptr;    ///< [batch]: position of each sequence's first row
    const std::int32_t* offsets = nullptr;  ///< [batch + 1] (packed) or null (equal lengths)
    const std::int32_t* slots = nullptr;    ///< [batch]: cache slot of each sequence, or null (slot b)
    int batch = 0;
    int longest = 0;  ///< rows of the longest sequence (equal lengths: of every sequence)

    static SequenceRows equal(const std::int32_t* start, int batch, int tokens_per_sequence) {
        return {start, nullptr, nullptr, batch, tokens_per_sequence};
    }

    /// Rows of the call: exact for equal lengths, an upper bound when packed.
    index_t max_rows() const { return static_cast<index_t>(batch) * longest; }

    /// Host-side checks against the rows of the matrices a kernel is given.
    void validate(index_t rows, const char* what) const {
        require<ShapeError>(start != nullptr && batch >= 1 && longest >= 1, what, ": ", batch,
                            " sequences of up to ", longest, " rows with ", start ? "" : "no ", "start positions");
        if (offsets)
            require<ShapeError>(rows <= max_rows() && rows <= 0x7fffffff, what, ": ", rows, " rows exceed ", batch,
                                " sequences of up to ", longest);
        else
            require<ShapeError>(rows == max_rows(), what, ": ", rows, " rows are not ", batch, " sequences of ",
                                longest);
    }

    __device__ int first_row(int b) const { return offsets ? offsets[b] : b * longest; }
    __device__ int length(int b) const { return offsets ? offsets[b + 1] - offsets[b] : longest; }
    __device__ int slot(int b) const { return slots ? slots[b] : b; }
    /// The sequence holding `row` (packed: the last b with offsets[b] <= row, so empty
    /// sequences are skipped).
    __device__ int sequence_of(int row) const {
        if (!offsets) return row / longest;
        int lo = 0, hi = batch - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (offsets[mid] <= row) lo = mid;
            else hi = mid - 1;
        }
        return lo;
    }
    /// Absolute position of `row`, a row of sequence b.
    __device__ int position(int row, int b) const { return start[b] + (row - first_row(b)); }
    /// A packed layout a kernel must not follow (offsets out of order or beyond `longest`).
    __device__ bool malformed(int b) const {
        const int n = length(b);
        return n < 0 || n > longest || first_row(b) < 0;
    }
};

namespace kernels {
/// out[b] = rows[last row of sequence b]; an empty or malformed sequence gives a NaN row.
template <class T>
__global__ void __launch_bounds__(128) last_rows(const T* rows, index_t ld, int cols, SequenceRows seqs, T* out,
                                                 index_t out_ld) {
    const int b = static_cast<int>(blockIdx.x);
    const bool ok = !seqs.malformed(b) && seqs.length(b) > 0;
    const T* x = rows + (ok ? static_cast<index_t>(seqs.first_row(b) + seqs.length(b) - 1) * ld : 0);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[b * out_ld + c] = ok ? x[c] : T(NAN);
}
}  // namespace kernels

/// The last row of every sequence of `seqs` in `rows` ([rows of the call, cols]) into `out` [batch, cols].
inline void last_rows(StridedMatrix<const float> rows, const SequenceRows& seqs, StridedMatrix<float> out,
                      cudaStream_t stream) {
    rows.validate("last_rows input");
    out.validate("last_rows output");
    seqs.validate(rows.rows, "last_rows");
    require<ShapeError>(out.rows == seqs.batch && out.cols == rows.cols, "last_rows: output [", out.rows, ", ",
                        out.cols, "] for ", seqs.batch, " sequences of width ", rows.cols);
    kernels::last_rows<float><<<static_cast<unsigned>(seqs.batch), 128, 0, stream>>>(
        rows.data, rows.ld, static_cast<int>(rows.cols), seqs, out.data, out.ld);
    CPX_CUDA_CHECK_LAUNCH();
}

}  // namespace cpx::cuda

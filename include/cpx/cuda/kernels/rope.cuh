#pragma once
// Rotary position embedding on the GPU, optionally preceded by a per-head
// RMSNorm (COMPLEXITY-DEEP's QK-norm, which comes before RoPE: docs/MODELS.md
// §6.2). One warp per (token, head). Heads [0, split) use the first parameter
// set and heads [split, heads) the second, so one launch covers
//   - COMPLEXITY-DEEP: the Q heads and K heads of a fused QKV row, with the
//     q_norm and k_norm weights and one rotate-half table;
//   - PRISM: the signal and noise heads of u = x U^T, with the tables of
//     bases theta*m and theta/m, interleaved pairs, no norm, out of place.
// The angles come from a host-built table (RopeTable) computed with the same
// rope_angle as the CPU path, so both paths rotate by identical fp32 cos/sin.
// Position of token row r: from the call's SequenceRows (cuda/kernels/sequence_rows.cuh)
// (per-sequence starts live on the device, so a decode graph reads them at replay).

#include <cmath>
#include <cstdint>
#include <vector>

#include "cpx/config/rope.hpp"
#include "cpx/core/dtype.hpp"
#include "cpx/core/strided_matrix.hpp"
#include "cpx/cuda/runtime/check.cuh"
#include "cpx/cuda/runtime/device_buffer.cuh"
#include "cpx/cuda/runtime/device_status.cuh"
#include "cpx/cuda/kernels/reduce.cuh"
#include "cpx/cuda/kernels/sequence_rows.cuh"
#include "cpx/math/norm.hpp"
#include "cpx/math/rope.hpp"

namespace cpx::cuda {

/// cos/sin of every (position, frequency) pair for one RoPE base, on the device:
/// entry [p][i] holds {cos, sin} of rope_angle(params, p, i, head_dim).
class RopeTable {
public:
    RopeTable(const RopeParams& params, int head_dim, int positions)
        : params_(params), head_dim_(head_dim), positions_(positions) {
        require<ShapeError>(head_dim > 0 && head_dim % 2 == 0, "RopeTable: head_dim must be even and positive, got ",
                            head_dim);
        require<ShapeError>(positions > 0, "RopeTable: positions must be positive, got ", positions);
        const int half = head_dim / 2;
        std::vector<float> host(static_cast<std::size_t>(positions) * half * 2);
        for (int p = 0; p < positions; ++p)
            for (int i = 0; i < half; ++i) {
                const float angle = rope_angle(params, p, i, head_dim);
                // cos/sin of the fp32 angle evaluated in double, then rounded: as cpu::RopeTable does.
                host[(static_cast<std::size_t>(p) * half + i) * 2] = static_cast<float>(std::cos(static_cast<double>(angle)));
                host[(static_cast<std::size_t>(p) * half + i) * 2 + 1] = static_cast<float>(std::sin(static_cast<double>(angle)));
            }
        table_ = DeviceBuffer<float>(host);
    }
    const float* data() const { return table_.data(); }
    int head_dim() const { return head_dim_; }
    int positions() const { return positions_; }
    RopeConvention convention() const { return params_.convention; }
    const RopeParams& params() const { return params_; }

private:
    RopeParams params_;
    int head_dim_, positions_;
    DeviceBuffer<float> table_;
};

/// One parameter set of rope_heads: the table and, for QK-norm, the weight.
template <class W = float>
struct RopeHeadSet {
    const RopeTable* table = nullptr;
    const W* norm_weight = nullptr;  ///< [head_dim] device, or null for no norm
};

namespace kernels {
template <class T, class W>
struct RopeHeadsArgs {
    const T* in;
    index_t in_ld;
    T* out;
    index_t out_ld;
    int rows, heads, head_dim, split;
    const float* table[2];
    const W* weight[2];
    int table_positions;
    bool rotate_half;
    float eps;
    SequenceRows seqs;
    StatusView status;
};

// in and out may be the same memory: every element is read and written by one
// lane, and with the norm a warp-wide reduction separates all reads from all writes.
template <class T, class W>
__global__ void __launch_bounds__(128) rope_heads(RopeHeadsArgs<T, W> a) {
    const long long item = static_cast<long long>(blockIdx.x) * 4 + threadIdx.x / 32;
    if (item >= static_cast<long long>(a.rows) * a.heads) return;  // whole warps leave together
    const int lane = threadIdx.x % 32;
    const int row = static_cast<int>(item / a.heads), head = static_cast<int>(item % a.heads);
    const int set = head < a.split ? 0 : 1;
    const T* x = a.in + row * a.in_ld + static_cast<index_t>(head) * a.head_dim;
    T* y = a.out + row * a.out_ld + static_cast<index_t>(head) * a.head_dim;
    const int half = a.head_dim / 2;

    const int seq = a.seqs.sequence_of(row);
    const int pos = a.seqs.position(row, seq);
    if (pos < 0 || pos >= a.table_positions || a.seqs.malformed(seq)) {
        for (int j = lane; j < a.head_dim; j += 32) y[j] = from_float<T>(NAN);
        if (lane == 0) a.status.position_error(row);
        return;
    }

    float inv = 1.0f;
    const W* w = a.weight[set];
    if (w) {
        float sum_sq = 0.0f;
        for (int j = lane; j < a.head_dim; j += 32) {
            const float v = to_float(x[j]);
            sum_sq += v * v;
        }
        inv = rms_inverse(kernels::warp_sum(sum_sq), a.head_dim, a.eps);
    }
    const float* cs = a.table[set] + static_cast<index_t>(pos) * half * 2;
    const RopeConvention conv = a.rotate_half ? RopeConvention::rotate_half : RopeConvention::interleaved_pairs;
    for (int i = lane; i < half; i += 32) {
        const RopePair p = rope_pair(conv, i, a.head_dim);
        float u = to_float(x[p.first]), v = to_float(x[p.second]);
        if (w) {
            u = to_float(w[p.first]) * (u * inv);
            v = to_float(w[p.second]) * (v * inv);
        }
        rope_rotate(u, v, cs[2 * i], cs[2 * i + 1]);
        y[p.first] = from_float<T>(u);
        y[p.second] = from_float<T>(v);
    }
}
}  // namespace kernels

/// Rotates (and with a norm weight, first RMS-normalises) every head of every
/// row of `in` into `out` (which may be `in`). Rows are tokens holding `heads`
/// consecutive heads of `head_dim` values; heads [0, split) use `first`, the
/// rest `second`. `seqs` gives each row's position; positions outside the
/// tables give NaN heads and a status record, never an out-of-bounds read.
template <class T, class W = float>
void rope_heads(StridedMatrix<const T> in, StridedMatrix<T> out, int heads, int head_dim, int split,
                RopeHeadSet<W> first, RopeHeadSet<W> second, const SequenceRows& seqs, float eps, StatusView status = {}, cudaStream_t stream = nullptr) {
    in.validate("cuda::rope_heads input");
    out.validate("cuda::rope_heads output");
    require<ShapeError>(heads > 0 && head_dim > 0 && head_dim % 2 == 0, "cuda::rope_heads: ", heads, " heads of dim ",
                        head_dim, " (head_dim must be even)");
    require<ShapeError>(in.cols == static_cast<index_t>(heads) * head_dim && out.cols == in.cols && out.rows == in.rows,
                        "cuda::rope_heads: input [", in.rows, ", ", in.cols, "] and output [", out.rows, ", ", out.cols,
                        "] must both hold ", heads, " heads of ", head_dim);
    require<ShapeError>(split >= 0 && split <= heads, "cuda::rope_heads: split ", split, " outside [0, ", heads, "]");
    seqs.validate(in.rows, "cuda::rope_heads");
    const RopeHeadSet<W> sets[2] = {first, second};
    for (int s = 0; s < 2; ++s) {
        const bool used = s == 0 ? split > 0 : split < heads;
        if (!used) continue;
        require<ShapeError>(sets[s].table != nullptr, "cuda::rope_heads: parameter set ", s, " has no table");
        require<ShapeError>(sets[s].table->head_dim() == head_dim, "cuda::rope_heads: table built for head_dim ",
                            sets[s].table->head_dim(), ", heads have ", head_dim);
    }
    const RopeTable* t0 = split > 0 ? first.table : second.table;
    const RopeTable* t1 = split < heads ? second.table : first.table;
    require<ShapeError>(t0->convention() == t1->convention() && t0->positions() == t1->positions(),
                        "cuda::rope_heads: both tables must share the pairing convention and position count");
    require<ShapeError>(in.rows <= 0x7fffffff, "cuda::rope_heads: too many rows");
    if (in.rows == 0) return;
    kernels::RopeHeadsArgs<T, W> a{in.data, in.ld, out.data, out.ld, static_cast<int>(in.rows), heads, head_dim, split,
                                   {t0->data(), t1->data()}, {first.norm_weight, second.norm_weight},
                                   t0->positions(), t0->convention() == RopeConvention::rotate_half, eps, seqs, status};
    const long long items = in.rows * static_cast<long long>(heads);
    kernels::rope_heads<T, W><<<static_cast<unsigned>((items + 3) / 4), 128, 0, stream>>>(a);
    CPX_CUDA_CHECK_LAUNCH();
}

}  // namespace cpx::cuda

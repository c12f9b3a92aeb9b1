#pragma once
// Rotary position embedding on the CPU: precomputed fp32 cos/sin tables (as
// the reference builds them: fp32 angle = fp32 position * fp32 inv_freq, then
// cos/sin) applied in place to a block of heads at absolute positions, in
// either pairing convention. The arithmetic is cpx/math/rope.hpp.

#include <cmath>
#include <span>
#include <vector>

#include "cpx/config/rope.hpp"
#include "cpx/core/error.hpp"
#include "cpx/cpu/runtime/parallel.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/math/rope.hpp"

namespace cpx::cpu {

/// cos/sin of every (position, frequency) for positions [0, positions).
/// rotary_dim/2 frequencies per position; the rotate-half reference's
/// cat([phi, phi]) tables hold each value twice, so half the width suffices.
class RopeTable {
public:
    RopeTable() = default;
    RopeTable(const RopeParams& params, int rotary_dim, index_t positions)
        : params_(params), rotary_dim_(rotary_dim), positions_(positions) {
        require<ShapeError>(rotary_dim > 0 && rotary_dim % 2 == 0, "RoPE: rotary dimension ", rotary_dim,
                            " must be positive and even");
        require<ShapeError>(positions > 0, "RoPE: the table needs at least one position, got ", positions);
        const int half = rotary_dim / 2;
        cos_.resize(static_cast<std::size_t>(positions * half));
        sin_.resize(cos_.size());
        for (index_t p = 0; p < positions; ++p)
            for (int i = 0; i < half; ++i) {
                const double angle = rope_angle(params, p, i, rotary_dim);  // fp32 angle, exact in double
                cos_[static_cast<std::size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
                sin_[static_cast<std::size_t>(p * half + i)] = static_cast<float>(std::sin(angle));
            }
    }

    const RopeParams& params() const { return params_; }
    int rotary_dim() const { return rotary_dim_; }
    index_t positions() const { return positions_; }
    const float* cos_at(index_t position) const { return cos_.data() + position * (rotary_dim_ / 2); }
    const float* sin_at(index_t position) const { return sin_.data() + position * (rotary_dim_ / 2); }

private:
    RopeParams params_{};
    int rotary_dim_ = 0;
    index_t positions_ = 0;
    std::vector<float> cos_, sin_;
};

namespace detail {
inline void rope_row_heads(const RopeTable& table, float* row, int heads, index_t head_stride, index_t position) {
    const int dim = table.rotary_dim(), half = dim / 2;
    const float* c = table.cos_at(position);
    const float* s = table.sin_at(position);
    for (int h = 0; h < heads; ++h) {
        float* x = row + h * head_stride;
        if (table.params().convention == RopeConvention::rotate_half) {
            // Contiguous halves: this loop vectorises.
            float* x1 = x;
            float* x2 = x + half;
            for (int i = 0; i < half; ++i) rope_rotate(x1[i], x2[i], c[i], s[i]);
        } else {
            for (int i = 0; i < half; ++i) {
                const RopePair p = rope_pair(RopeConvention::interleaved_pairs, i, dim);
                rope_rotate(x[p.first], x[p.second], c[i], s[i]);
            }
        }
    }
}
inline void check_rope_block(const RopeTable& table, const HeadRows<float>& x) {
    require<ShapeError>(x.head_dim == table.rotary_dim(), "RoPE: heads of dimension ", x.head_dim,
                        " but the table rotates ", table.rotary_dim());
}
}  // namespace detail

/// Rotates every head of every row in place; row r is at absolute position
/// first_position + r.
inline void apply_rope(const RopeTable& table, const HeadRows<float>& x, index_t first_position) {
    detail::check_rope_block(table, x);
    if (x.rows == 0) return;
    require<InputError>(first_position >= 0 && first_position + x.rows <= table.positions(), "RoPE: positions [",
                        first_position, ", ", first_position + x.rows, ") exceed the table's ", table.positions());
    parallel_for(x.rows, x.rows * x.heads * x.head_dim > 32768, [&](index_t r) {
        detail::rope_row_heads(table, x.data + r * x.row_stride, x.heads, x.head_stride, first_position + r);
    });
}

/// Rotates every head of row r at absolute position positions[r].
inline void apply_rope(const RopeTable& table, const HeadRows<float>& x, std::span<const index_t> positions) {
    detail::check_rope_block(table, x);
    require<ShapeError>(static_cast<index_t>(positions.size()) == x.rows, "RoPE: ", positions.size(),
                        " positions for ", x.rows, " rows");
    for (index_t p : positions)
        require<InputError>(p >= 0 && p < table.positions(), "RoPE: position ", p, " outside the table's [0, ",
                            table.positions(), ")");
    parallel_for(x.rows, x.rows * x.heads * x.head_dim > 32768, [&](index_t r) {
        detail::rope_row_heads(table, x.data + r * x.row_stride, x.heads, x.head_stride,
                               positions[static_cast<std::size_t>(r)]);
    });
}

}  // namespace cpx::cpu

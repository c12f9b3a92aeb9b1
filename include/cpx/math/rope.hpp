#pragma once
// Rotary position embedding arithmetic, one definition for both code paths
// and both pairing conventions. Frequencies are computed in double and stored
// as fp32 tables, as the reference code does (fp32 tables from fp32 inv_freq);
// see docs/MODELS.md §6.3 and §17.

#include <cmath>

#include "cpx/config/rope.hpp"
#include "cpx/core/host_device.hpp"

namespace cpx {

/// inv_freq[i] = theta^(-2i/rotary_dim), i < rotary_dim/2, rounded to fp32
/// like the reference's fp32 buffer.
CPX_HD_INLINE float rope_inv_freq(double theta, int i, int rotary_dim) {
    return static_cast<float>(1.0 / pow(theta, (2.0 * i) / static_cast<double>(rotary_dim)));
}

/// The angle of frequency i at a position, as the reference forms it: an fp32
/// product of the (scaled) position and the fp32 inverse frequency.
CPX_HD_INLINE float rope_angle(const RopeParams& p, long long position, int i, int rotary_dim) {
    const float pos = static_cast<float>(static_cast<double>(position) / p.scaling);
    return pos * rope_inv_freq(p.theta, i, rotary_dim);
}

/// Index pairs rotated together by frequency i in a head of `dim` values.
struct RopePair { int first, second; };
CPX_HD_INLINE RopePair rope_pair(RopeConvention c, int i, int dim) {
    return c == RopeConvention::rotate_half ? RopePair{i, i + dim / 2} : RopePair{2 * i, 2 * i + 1};
}

/// Rotates one pair by an angle with the given cos/sin:
/// (a, b) -> (a cos - b sin, b cos + a sin), the same formula in both conventions.
CPX_HD_INLINE void rope_rotate(float& a, float& b, float cos_v, float sin_v) {
    const float a0 = a, b0 = b;
    a = a0 * cos_v - b0 * sin_v;
    b = b0 * cos_v + a0 * sin_v;
}

}  // namespace cpx

#pragma once
// Rotary position embedding parameters shared by both architectures.

namespace cpx {

/// How rotary dimensions are paired.
enum class RopeConvention {
    rotate_half,       ///< NeoX / HF-Llama: x[j] pairs with x[j + hd/2] (COMPLEXITY-DEEP)
    interleaved_pairs  ///< GPT-J: x[2i] pairs with x[2i+1] (PRISM reference)
};

/// RoPE frequency parameters. `scaling` is linear position interpolation:
/// the angle at position p is (p / scaling) * inv_freq; 1 means none.
struct RopeParams {
    double theta = 10000.0;
    double scaling = 1.0;
    RopeConvention convention = RopeConvention::rotate_half;
};

}  // namespace cpx

#pragma once
// The compile-time shape of one PRISM attention layer, independent of the
// model around it: the GPT-2-style PRISM model and a COMPLEXITY-DEEP-style
// decoder with `attention = AttentionKind::prism` both map their configuration
// onto it, so the one layer template serves both stacks.

#include <type_traits>

#include "cpx/config/complexity_config.hpp"
#include "cpx/config/prism_config.hpp"
#include "cpx/config/rope.hpp"

namespace cpx {

/// What a PRISM attention layer needs to know at compile time.
struct PrismAttentionDims {
    int hidden = 0;           ///< d
    int heads = 0;            ///< H signal heads (and as many noise heads)
    int expansion_ratio = 2;  ///< R: head dim D = (d / H) * R
    double freq_multiplier = 3.1415926535;  ///< m: signal base theta * m, noise base theta / m
    double rope_theta = 10000.0;
    double rope_scaling = 1.0;  ///< linear position interpolation; 1 = none (the reference)
    RopeConvention rope_convention = RopeConvention::interleaved_pairs;
};

template <PrismAttentionDims A>
struct PrismAttentionShape {
    static constexpr PrismAttentionDims dims = A;

    static_assert(A.hidden > 0 && A.heads > 0, "PRISM attention: hidden size and heads must be positive");
    static_assert(A.hidden % A.heads == 0, "PRISM attention: heads must divide the hidden size");
    static_assert(A.expansion_ratio >= 1, "PRISM attention: the expansion ratio must be at least 1 (U is tall)");
    static_assert(((A.hidden / A.heads) * A.expansion_ratio) % 2 == 0,
                  "PRISM attention: the head dim (hidden / heads * expansion ratio) must be even for RoPE");
    static_assert(A.freq_multiplier > 0.0 && A.rope_theta > 0.0 && A.rope_scaling > 0.0,
                  "PRISM attention: RoPE theta, scaling and multiplier must be positive");

    static constexpr int hidden = A.hidden;
    static constexpr int heads = A.heads;                   ///< H per group
    static constexpr int physical_heads = 2 * A.heads;      ///< signal heads first, then noise heads
    static constexpr int expansion = A.expansion_ratio;
    static constexpr int head_dim = (A.hidden / A.heads) * A.expansion_ratio;  ///< D
    static constexpr int u_rows = physical_heads * head_dim;                   ///< 2HD
    /// out = (y U) / sqrt(2 H R): the reference's iso-energy scale, squared here
    /// (take the square root at run time; std::sqrt is not constexpr in C++20).
    static constexpr double output_scale_squared_inverse = 2.0 * A.heads * A.expansion_ratio;
    static constexpr RopeParams signal_rope{A.rope_theta * A.freq_multiplier, A.rope_scaling, A.rope_convention};
    static constexpr RopeParams noise_rope{A.rope_theta / A.freq_multiplier, A.rope_scaling, A.rope_convention};
};

template <class T> struct is_prism_attention_shape : std::false_type {};
template <PrismAttentionDims A> struct is_prism_attention_shape<PrismAttentionShape<A>> : std::true_type {};

template <class S>
concept PrismAttentionShapeType = is_prism_attention_shape<S>::value;

namespace detail {
template <class C> struct prism_attention_of;

template <PrismDims D>
struct prism_attention_of<PrismConfig<D>> {
    using type = PrismAttentionShape<PrismAttentionDims{D.n_embd, D.n_head, D.prism_expansion_ratio,
                                                        D.prism_freq_multiplier, D.rope_theta, 1.0,
                                                        D.rope_convention}>;
};

/// A COMPLEXITY-DEEP decoder with PRISM attention: its heads, width, RoPE theta
/// and scaling, with PRISM's own interleaved-pairs convention. Its KV-head
/// count is unused (PRISM shares Q = K = V per head).
template <ComplexityDims D>
    requires(D.attention == AttentionKind::prism)
struct prism_attention_of<ComplexityConfig<D>> {
    using type = PrismAttentionShape<PrismAttentionDims{D.hidden_size, D.num_attention_heads,
                                                        D.prism_expansion_ratio, D.prism_freq_multiplier,
                                                        D.rope_theta, D.rope_scaling,
                                                        RopeConvention::interleaved_pairs}>;
};
}  // namespace detail

/// The PRISM attention shape of a model configuration.
template <class C>
using PrismAttentionOf = typename detail::prism_attention_of<C>::type;

}  // namespace cpx

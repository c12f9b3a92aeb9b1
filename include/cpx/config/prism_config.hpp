#pragma once
// Compile-time configuration of the GPT-2-style PRISM model of the reference
// code (nanoGPT keys). `PrismConfig<PrismDims{...}>` checks every rule.

#include <type_traits>

#include "cpx/config/rope.hpp"

namespace cpx {

/// The dimensions of a PRISM model, in the reference's `GPTConfig` names.
struct PrismDims {
    int n_layer = 0;
    int n_head = 0;       ///< H: signal heads (and as many noise heads)
    int n_embd = 0;       ///< d
    int vocab_size = 0;
    int block_size = 0;   ///< context length (learned absolute positions)
    int prism_expansion_ratio = 2;           ///< R: PRISM head dim D = (d / H) * R
    double prism_freq_multiplier = 3.1415926535;  ///< m: signal base theta*m, noise base theta/m
    double rope_theta = 10000.0;
    RopeConvention rope_convention = RopeConvention::interleaved_pairs;
    bool bias = true;     ///< LayerNorm and Linear biases
    double layer_norm_eps = 1e-5;
};

template <PrismDims D>
struct PrismConfig {
    static constexpr PrismDims dims = D;

    static_assert(D.n_layer > 0, "n_layer must be positive");
    static_assert(D.n_head > 0, "n_head must be positive");
    static_assert(D.n_embd > 0, "n_embd must be positive");
    static_assert(D.vocab_size > 0, "vocab_size must be positive");
    static_assert(D.block_size > 0, "block_size must be positive");
    static_assert(D.n_embd % D.n_head == 0, "n_head must divide n_embd");
    static_assert(D.prism_expansion_ratio >= 1,
                  "prism_expansion_ratio must be at least 1 (U must be tall: 2*H*D >= d)");
    static_assert(((D.n_embd / D.n_head) * D.prism_expansion_ratio) % 2 == 0,
                  "the PRISM head dim (n_embd / n_head * expansion ratio) must be even for RoPE");
    static_assert(D.prism_freq_multiplier > 0.0, "prism_freq_multiplier must be positive");
    static_assert(D.rope_theta > 0.0, "rope_theta must be positive");
    static_assert(D.layer_norm_eps > 0.0, "layer_norm_eps must be positive");

    static constexpr int layers = D.n_layer;
    static constexpr int heads = D.n_head;
    static constexpr int hidden = D.n_embd;
    static constexpr int vocab = D.vocab_size;
    static constexpr int max_positions = D.block_size;
    static constexpr int expansion = D.prism_expansion_ratio;
    static constexpr int head_dim = (D.n_embd / D.n_head) * D.prism_expansion_ratio;  ///< D
    static constexpr int u_rows = 2 * D.n_head * head_dim;                           ///< 2*H*D
    static constexpr int mlp_width = 4 * D.n_embd;
    static constexpr bool bias = D.bias;
    static constexpr float ln_eps = static_cast<float>(D.layer_norm_eps);
    static constexpr RopeParams signal_rope{D.rope_theta * D.prism_freq_multiplier, 1.0, D.rope_convention};
    static constexpr RopeParams noise_rope{D.rope_theta / D.prism_freq_multiplier, 1.0, D.rope_convention};
};

template <class T> struct is_prism_config : std::false_type {};
template <PrismDims D> struct is_prism_config<PrismConfig<D>> : std::true_type {};

template <class C>
concept PrismConfigType = is_prism_config<C>::value;

}  // namespace cpx

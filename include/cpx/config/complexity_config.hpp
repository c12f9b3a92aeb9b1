#pragma once
// Compile-time configuration of a COMPLEXITY-DEEP decoder. A configuration is
// the type `ComplexityConfig<ComplexityDims{...}>`: the dimensions are named
// fields (the authors' config.json keys where one exists) and every impossible
// combination fails to compile with a message that says which rule it breaks.

#include <type_traits>

#include "cpx/config/rope.hpp"

namespace cpx {

/// Which MLP each decoder layer carries.
enum class MlpKind {
    dense_swiglu,    ///< one SwiGLU of width `intermediate_size` (the dense baselines)
    token_routed,    ///< top_k experts per token chosen by token id from tables, plus the shared expert
    learned_router,  ///< the ablation's top-1 softmax router (Mixtral-style), plus the shared expert
};

/// Which attention each decoder layer carries.
enum class AttentionKind {
    mu_gqa,  ///< grouped-query attention with QK-norm, rotate-half RoPE and optional mu terms
    prism,   ///< PRISM's pi-RoPE differential attention (signal and noise heads from one U)
};

/// The dimensions of a COMPLEXITY-DEEP model, as a structural literal type so it
/// can be a template argument. Zero in a width field means "derive it".
struct ComplexityDims {
    int hidden_size = 0;
    int num_hidden_layers = 0;
    int num_attention_heads = 0;
    int num_key_value_heads = 0;
    int intermediate_size = 0;
    int vocab_size = 0;
    int max_position_embeddings = 0;
    MlpKind mlp = MlpKind::token_routed;
    int num_experts = 1;
    int expert_intermediate_size = 0;  ///< 0: intermediate_size / num_experts (the authors' rule)
    bool shared_expert = true;         ///< used by token_routed and learned_router only
    int shared_intermediate_size = 0;  ///< 0: the expert width (the authors' default)
    bool use_mu_guidance = true;
    // ---- the authors' later token-routed models (docs/MODELS.md §8.5); the defaults are the paper's MLP
    int top_k = 1;                        ///< routes per token (token_routed only)
    double top_k_primary_weight = -1.0;   ///< weight of route 0; < 0: unset (0.95 when top_k > 1)
    double routed_output_scale = 1.0;     ///< routed * this (without learned gates)
    double shared_output_scale = 1.0;     ///< shared * this (without learned gates)
    bool use_shared_routed_gates = false; ///< learned scalars shared_output_gate / routed_output_gate instead
    double shared_gate_init = 1.0;        ///< their initial values (random weights only)
    double routed_gate_init = 1.0;
    double rope_theta = 10000.0;
    double rope_scaling = 1.0;         ///< linear position interpolation factor; 1 = none
    double norm_eps = 1e-6;
    AttentionKind attention = AttentionKind::mu_gqa;
    int prism_expansion_ratio = 2;               ///< only for AttentionKind::prism
    double prism_freq_multiplier = 3.1415926535; ///< only for AttentionKind::prism
};

/// Whether `d` sets any knob of the authors' later token-routed MLP (docs/MODELS.md §8.5);
/// with none set it is the paper's MLP.
constexpr bool uses_later_mlp_knobs(const ComplexityDims& d) {
    return d.top_k != 1 || d.top_k_primary_weight >= 0.0 || d.routed_output_scale != 1.0 ||
           d.shared_output_scale != 1.0 || d.use_shared_routed_gates;
}

/// The compile-time configuration type. Everything a layer needs is a
/// `static constexpr` member; instantiating it checks every rule.
template <ComplexityDims D>
struct ComplexityConfig {
    static constexpr ComplexityDims dims = D;

    static_assert(D.hidden_size > 0, "hidden_size must be positive");
    static_assert(D.num_hidden_layers > 0, "num_hidden_layers must be positive");
    static_assert(D.num_attention_heads > 0, "num_attention_heads must be positive");
    static_assert(D.num_key_value_heads > 0, "num_key_value_heads must be positive");
    static_assert(D.vocab_size > 0, "vocab_size must be positive");
    static_assert(D.max_position_embeddings > 0, "max_position_embeddings must be positive");
    static_assert(D.hidden_size % D.num_attention_heads == 0,
                  "num_attention_heads must divide hidden_size (head_dim = hidden_size / num_attention_heads)");
    static_assert(D.num_attention_heads % D.num_key_value_heads == 0,
                  "num_key_value_heads must divide num_attention_heads (GQA groups must be whole)");
    static_assert((D.hidden_size / D.num_attention_heads) % 2 == 0,
                  "head_dim must be even: RoPE rotates pairs of dimensions");
    static_assert(D.num_experts >= 1, "num_experts must be at least 1 (zero experts cannot route any token)");
    static_assert(D.num_experts <= 256, "num_experts above 256 is not supported by the routing kernels");
    static_assert(D.mlp != MlpKind::dense_swiglu || D.num_experts == 1,
                  "a dense_swiglu MLP has exactly one expert: set num_experts = 1");
    static_assert(D.intermediate_size > 0, "intermediate_size must be positive");
    static_assert(D.mlp == MlpKind::dense_swiglu || D.intermediate_size % D.num_experts == 0,
                  "num_experts must divide intermediate_size (expert width = intermediate_size / num_experts)");
    static_assert(D.expert_intermediate_size == 0 || D.mlp == MlpKind::dense_swiglu ||
                      D.expert_intermediate_size == D.intermediate_size / D.num_experts,
                  "expert_intermediate_size must equal intermediate_size / num_experts");
    static_assert(D.shared_intermediate_size >= 0, "shared_intermediate_size must be >= 0 (0 = expert width)");
    static_assert(D.top_k >= 1, "top_k must be at least 1 (each token takes at least one route)");
    static_assert(D.top_k <= D.num_experts, "top_k must not exceed num_experts (a token's routes are distinct experts)");
    static_assert(D.top_k_primary_weight < 0.0 || D.top_k_primary_weight <= 1.0,
                  "top_k_primary_weight must be in [0, 1] (or negative for unset: 0.95 when top_k > 1)");
    static_assert(D.mlp == MlpKind::token_routed || !uses_later_mlp_knobs(D),
                  "top_k, route weights, output scales and gates belong to the token_routed MLP");
    static_assert(!D.use_shared_routed_gates || D.shared_expert,
                  "use_shared_routed_gates needs the shared expert (the authors create the gates only with it)");
    static_assert(D.rope_theta > 0.0, "rope_theta must be positive");
    static_assert(D.rope_scaling > 0.0, "rope_scaling must be positive (1 = no scaling)");
    static_assert(D.norm_eps > 0.0, "norm_eps must be positive");
    static_assert(D.attention != AttentionKind::prism || D.prism_expansion_ratio >= 1,
                  "prism_expansion_ratio must be at least 1");
    static_assert(D.attention != AttentionKind::prism ||
                      ((D.hidden_size / D.num_attention_heads) * D.prism_expansion_ratio) % 2 == 0,
                  "the PRISM head dim (head_dim * expansion ratio) must be even for RoPE");
    static_assert(D.attention != AttentionKind::prism || D.prism_freq_multiplier > 0.0,
                  "prism_freq_multiplier must be positive");
    static_assert(D.attention != AttentionKind::prism || !D.use_mu_guidance,
                  "PRISM attention has no mu inputs (Q = K = V = x U^T): set use_mu_guidance = false");

    static constexpr int hidden = D.hidden_size;
    static constexpr int layers = D.num_hidden_layers;
    static constexpr int heads = D.num_attention_heads;
    static constexpr int kv_heads = D.num_key_value_heads;
    static constexpr int head_dim = D.hidden_size / D.num_attention_heads;
    static constexpr int groups = heads / kv_heads;  ///< query heads per KV head
    static constexpr int q_width = heads * head_dim;
    static constexpr int kv_width = kv_heads * head_dim;
    static constexpr int vocab = D.vocab_size;
    static constexpr int max_positions = D.max_position_embeddings;
    static constexpr MlpKind mlp = D.mlp;
    static constexpr AttentionKind attention = D.attention;
    static constexpr bool routed = D.mlp != MlpKind::dense_swiglu;
    static constexpr int experts = D.num_experts;
    static constexpr int intermediate = D.intermediate_size;
    static constexpr int expert_width = routed ? D.intermediate_size / D.num_experts : D.intermediate_size;
    static constexpr bool has_shared_expert = routed && D.shared_expert;
    static constexpr int shared_width =
        has_shared_expert ? (D.shared_intermediate_size ? D.shared_intermediate_size : expert_width) : 0;
    static constexpr int top_k = D.top_k;
    /// Weight of route 0: 1 for top_k = 1, else top_k_primary_weight (0.95 when unset).
    static constexpr double primary_weight = D.top_k == 1 ? 1.0 : (D.top_k_primary_weight < 0.0 ? 0.95 : D.top_k_primary_weight);
    /// Weight of each other route: (1 - primary) / (top_k - 1).
    static constexpr double secondary_weight = D.top_k == 1 ? 0.0 : (1.0 - primary_weight) / (D.top_k - 1);
    /// The learned scalar gates replace the output scales (only with a shared expert).
    static constexpr bool learned_gates = D.mlp == MlpKind::token_routed && D.use_shared_routed_gates;
    static constexpr bool use_mu = D.use_mu_guidance;
    static constexpr RopeParams rope{D.rope_theta, D.rope_scaling, RopeConvention::rotate_half};
    static constexpr float norm_eps = static_cast<float>(D.norm_eps);
    static constexpr float qk_norm_eps = 1e-6f;  ///< fixed in the authors' code, not read from config
    static constexpr float mu_param_min = 0.0f, mu_param_max = 2.0f;  ///< clamp of mu_guidance.mu
    static constexpr float mu_clamp = 2.0f;  ///< |mu| passed between layers is clamped to this
    static constexpr int prism_head_dim = head_dim * D.prism_expansion_ratio;
};

template <class T> struct is_complexity_config : std::false_type {};
template <ComplexityDims D> struct is_complexity_config<ComplexityConfig<D>> : std::true_type {};

/// A COMPLEXITY-DEEP configuration type.
template <class C>
concept ComplexityConfigType = is_complexity_config<C>::value;

}  // namespace cpx

#pragma once
// Derived figures of a configuration, computed at compile time: parameter
// counts (as the authors' modules instantiate them) and forward FLOPs.

#include <cstdint>

#include "cpx/config/complexity_config.hpp"
#include "cpx/config/prism_attention_shape.hpp"
#include "cpx/config/prism_config.hpp"

namespace cpx {

using count_t = std::int64_t;

namespace detail {
template <ComplexityConfigType C>
constexpr count_t attention_params() {
    const count_t d = C::hidden;
    if constexpr (C::attention == AttentionKind::prism) {
        return count_t{2} * C::heads * C::prism_head_dim * d;  // U only
    } else {
        const count_t qkv = d * (C::q_width + 2 * C::kv_width);
        // The authors' attention always instantiates mu_to_{q,k,v}, even when mu is off.
        return qkv + count_t{C::q_width} * d + qkv + 2 * count_t{C::head_dim};
    }
}
template <ComplexityConfigType C>
constexpr count_t shared_expert_params() { return count_t{3} * C::shared_width * C::hidden; }
template <ComplexityConfigType C>
constexpr count_t one_expert_params() { return count_t{3} * C::expert_width * C::hidden; }
template <ComplexityConfigType C>
constexpr count_t mlp_params() {
    if constexpr (C::mlp == MlpKind::dense_swiglu) return one_expert_params<C>();
    count_t p = count_t{C::experts} * one_expert_params<C>() + shared_expert_params<C>();
    if constexpr (C::mlp == MlpKind::learned_router) p += count_t{C::experts} * C::hidden;
    if constexpr (C::learned_gates) p += 2;  // shared_output_gate, routed_output_gate
    return p;
}
/// The mu_to_{q,k,v} weights a model without mu guidance holds but never uses.
template <ComplexityConfigType C>
constexpr count_t dead_mu_params() {
    if constexpr (!C::use_mu && C::attention == AttentionKind::mu_gqa)
        return count_t{C::hidden} * (C::q_width + 2 * C::kv_width);
    else
        return 0;
}
template <ComplexityConfigType C>
constexpr count_t mu_guidance_params() { return C::use_mu ? count_t{C::hidden} * C::hidden + C::hidden : 0; }
}  // namespace detail

/// Trainable parameters, counted as the authors' modules hold them (unused
/// mu_to_* included; buffers such as token_to_expert and inv_freq excluded).
template <ComplexityConfigType C>
constexpr count_t parameter_count() {
    const count_t d = C::hidden;
    const count_t per_layer = 2 * d + detail::attention_params<C>() + detail::mlp_params<C>() +
                              detail::mu_guidance_params<C>();
    return count_t{C::vocab} * d + d /*final norm*/ + (C::use_mu ? d : 0) /*mu_init*/ + C::layers * per_layer;
}

/// Parameters without the dead mu_to_* of models without mu guidance: the
/// count the authors publish for their later models (vllm-i64's modules
/// create mu_to_* only with mu guidance), e.g. 306.5M for tr-moe-306.
template <ComplexityConfigType C>
constexpr count_t live_parameter_count() {
    return parameter_count<C>() - count_t{C::layers} * detail::dead_mu_params<C>();
}

/// Parameters a token touches: all but the experts it is not routed to (it
/// takes top_k of the E). The dead mu_to_* weights are excluded too.
template <ComplexityConfigType C>
constexpr count_t active_parameters(bool include_embeddings = true) {
    count_t p = live_parameter_count<C>();
    if constexpr (C::routed) p -= count_t{C::layers} * (C::experts - C::top_k) * detail::one_expert_params<C>();
    if (!include_embeddings) p -= count_t{C::vocab} * C::hidden;
    return p;
}

/// Multiply-adds of one token's forward pass, doubled (FLOPs), for a token that
/// attends to `context` keys: every GEMM it runs (tied head included, the
/// embedding lookup and elementwise work excluded) plus the two attention products.
template <ComplexityConfigType C>
constexpr count_t flops_per_token(count_t context) {
    const count_t d = C::hidden;
    count_t macs_per_layer = 0;
    if constexpr (C::attention == AttentionKind::prism) {
        const count_t u = count_t{2} * C::heads * C::prism_head_dim;
        macs_per_layer += 2 * u * d + 2 * count_t{2} * C::heads * C::prism_head_dim * context;
    } else {
        const count_t qkv = d * (C::q_width + 2 * C::kv_width);
        macs_per_layer += qkv * (C::use_mu ? 2 : 1) + count_t{C::q_width} * d;
        macs_per_layer += 2 * count_t{C::heads} * C::head_dim * context;
    }
    macs_per_layer += C::top_k * detail::one_expert_params<C>() + detail::shared_expert_params<C>();
    if constexpr (C::mlp == MlpKind::learned_router) macs_per_layer += count_t{C::experts} * d;
    count_t macs = C::layers * macs_per_layer + count_t{C::vocab} * d;
    if constexpr (C::use_mu) macs += count_t{C::layers - 1} * d * d;  // the last layer's mu is unused
    return 2 * macs;
}

/// PRISM: parameters as the reference's GPT module holds them (lm_head tied, mask buffers excluded).
template <PrismConfigType C>
constexpr count_t parameter_count() {
    const count_t d = C::hidden, b = C::bias ? 1 : 0;
    const count_t ln = d + b * d;
    const count_t per_layer = 2 * ln + count_t{C::u_rows} * d + count_t{C::mlp_width} * d + b * C::mlp_width +
                              count_t{C::mlp_width} * d + b * d;
    return count_t{C::vocab} * d + count_t{C::max_positions} * d + ln + C::layers * per_layer;
}

template <PrismConfigType C>
constexpr count_t active_parameters(bool include_embeddings = true) {
    count_t p = parameter_count<C>();
    if (!include_embeddings) p -= (count_t{C::vocab} + C::max_positions) * C::hidden;
    return p;
}

template <PrismConfigType C>
constexpr count_t flops_per_token(count_t context) {
    const count_t d = C::hidden;
    const count_t per_layer = 2 * count_t{C::u_rows} * d + 2 * count_t{C::u_rows} * context +
                              2 * count_t{C::mlp_width} * d;
    return 2 * (C::layers * per_layer + count_t{C::vocab} * d);
}

// ---- the same FLOPs, layer by layer (what a benchmark of one layer counts).
// For every configuration: flops_per_token(ctx) = layers * (attention(ctx) + mlp)
// + (layers - 1) * mu_guidance + head (COMPLEXITY-DEEP), and
// layers * (attention(ctx) + mlp) + head (PRISM).

/// One COMPLEXITY-DEEP attention layer for a token attending to `context` keys:
/// the q/k/v projections (doubled by the mu terms), o_proj and the two products.
template <ComplexityConfigType C>
constexpr count_t attention_flops_per_token(count_t context) {
    if constexpr (C::attention == AttentionKind::prism) {
        const count_t u = count_t{2} * C::heads * C::prism_head_dim;
        return 2 * (2 * u * C::hidden + 2 * u * context);
    } else {
        const count_t qkv = count_t{C::hidden} * (C::q_width + 2 * C::kv_width);
        return 2 * (qkv * (C::use_mu ? 2 : 1) + count_t{C::q_width} * C::hidden +
                    2 * count_t{C::heads} * C::head_dim * context);
    }
}

/// One PRISM attention layer: h = x U^T, out = y U, and the products of 2H heads of dimension D.
template <PrismAttentionShapeType S>
constexpr count_t attention_flops_per_token(count_t context) {
    return 2 * (2 * count_t{S::u_rows} * S::hidden + 2 * count_t{S::u_rows} * context);
}

/// One COMPLEXITY-DEEP MLP: the expert a token runs (the dense MLP's one), the
/// shared expert and the learned router's logits.
template <ComplexityConfigType C>
constexpr count_t mlp_flops_per_token() {
    count_t macs = C::top_k * detail::one_expert_params<C>() + detail::shared_expert_params<C>();
    if constexpr (C::mlp == MlpKind::learned_router) macs += count_t{C::experts} * C::hidden;
    return 2 * macs;
}

/// One PRISM (GPT-2) MLP: c_fc and c_proj.
template <PrismConfigType C>
constexpr count_t mlp_flops_per_token() { return 2 * 2 * count_t{C::mlp_width} * C::hidden; }

/// What the last layer does not need for a row it does not finish: a prefill that returns
/// the last position's logits (or none) needs the other rows of the last layer only for
/// their keys and values (cpu/layers/sequence_rows.hpp, QueryRows). Not needed: the row's
/// query projection (COMPLEXITY-DEEP's mu-guided attention; the CPU layer skips it on
/// packed weights whose q block ends on a panel, the default fp32 arithmetic still runs it
/// inside the stacked q/k/v product), attention products, output projection and MLP.
/// PRISM's h = x U^T holds q, k and v in every head's rows, so it runs whole.
template <ComplexityConfigType C>
constexpr count_t unfinished_row_flops(count_t context) {
    if constexpr (C::attention == AttentionKind::prism) {
        const count_t u = count_t{2} * C::heads * C::prism_head_dim;
        return 2 * (u * C::hidden + 2 * u * context) + mlp_flops_per_token<C>();
    } else {
        const count_t query = count_t{C::q_width} * C::hidden * (C::use_mu ? 2 : 1);
        return 2 * (query + count_t{C::q_width} * C::hidden + 2 * count_t{C::heads} * C::head_dim * context) +
               mlp_flops_per_token<C>();
    }
}

template <PrismConfigType C>
constexpr count_t unfinished_row_flops(count_t context) {
    return 2 * (count_t{C::u_rows} * C::hidden + 2 * count_t{C::u_rows} * context) + mlp_flops_per_token<C>();
}

/// One mu-guidance projection (0 without mu guidance).
template <ComplexityConfigType C>
constexpr count_t mu_guidance_flops_per_token() { return C::use_mu ? 2 * count_t{C::hidden} * C::hidden : 0; }

/// The tied output head.
template <ComplexityConfigType C>
constexpr count_t head_flops_per_token() { return 2 * count_t{C::vocab} * C::hidden; }
template <PrismConfigType C>
constexpr count_t head_flops_per_token() { return 2 * count_t{C::vocab} * C::hidden; }

// ---- bytes a decode step must read (the bandwidth bound of small-batch decoding).

/// Bytes of one decode step of `sequences` sequences each attending to
/// `context` cached positions: every matrix the step multiplies (the routed
/// experts of `distinct_experts` different experts among the batch's tokens;
/// the dense MLP otherwise; the tied head; the mu projections but the last
/// layer's, which is never consumed), read with `weight_bytes` per value,
/// the fp32 norm and mu vectors, and the K and V caches read, stored with
/// `cache_bytes` per value (the stored weights' type; bf16 arithmetic reads bf16
/// packs of fp32 weights beside an fp32 cache). With fp32 weights and no cache it
/// is 4 bytes per active parameter but the last layer's unused mu projection.
template <ComplexityConfigType C>
constexpr double decode_step_bytes(int distinct_experts, count_t sequences, count_t context, int weight_bytes,
                                   int cache_bytes) {
    static_assert(C::mlp == MlpKind::token_routed || C::mlp == MlpKind::dense_swiglu,
                  "decode bytes are counted for token-routed and dense models");
    static_assert(C::attention == AttentionKind::mu_gqa, "decode bytes are counted for mu-guided GQA attention");
    const double d = C::hidden, L = C::layers, input_width = C::use_mu ? 2.0 * C::hidden : d;
    double matrices = L * (double(C::q_width + 2 * C::kv_width) * input_width + d * C::q_width) + double(C::vocab) * d;
    if constexpr (C::mlp == MlpKind::token_routed)
        matrices += L * (3.0 * C::expert_width * d * distinct_experts + 3.0 * C::shared_width * d);
    else
        matrices += L * 3.0 * C::expert_width * d;
    if constexpr (C::use_mu) matrices += (L - 1) * d * d;
    // Norm weights (2 per layer, q/k norms, the final one) and the mu vectors (per layer, mu_init).
    const double vectors = (L * (2 * d + 2.0 * C::head_dim + (C::use_mu ? d : 0)) + d + (C::use_mu ? d : 0)) * 4;
    const double kv = double(sequences) * L * 2 * C::kv_width * double(context) * cache_bytes;
    return matrices * weight_bytes + vectors + kv;
}

/// The same with the cache stored like the weights.
template <ComplexityConfigType C>
constexpr double decode_step_bytes(int distinct_experts, count_t sequences, count_t context, int weight_bytes) {
    return decode_step_bytes<C>(distinct_experts, sequences, context, weight_bytes, weight_bytes);
}

}  // namespace cpx

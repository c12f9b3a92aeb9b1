#pragma once
// Named configurations: the models the papers train, and tiny ones for tests.
// Figures and sources: docs/MODELS.md §3 (COMPLEXITY-DEEP) and §15 (PRISM).

#include "cpx/config/complexity_config.hpp"
#include "cpx/config/prism_config.hpp"

namespace cpx::presets {

/// COMPLEXITY-DEEP run2 "Full" (187,412,736 parameters): token-routed, mu-guided.
using ComplexityDeep187M = ComplexityConfig<ComplexityDims{
    .hidden_size = 768, .num_hidden_layers = 18, .num_attention_heads = 12, .num_key_value_heads = 4,
    .intermediate_size = 2048, .vocab_size = 32000, .max_position_embeddings = 2048,
    .mlp = MlpKind::token_routed, .num_experts = 4, .shared_expert = true, .use_mu_guidance = true}>;

/// run1 dense baseline (170,809,344 parameters incl. the unused mu_to_* weights).
using ComplexityDense171M = ComplexityConfig<ComplexityDims{
    .hidden_size = 768, .num_hidden_layers = 18, .num_attention_heads = 12, .num_key_value_heads = 4,
    .intermediate_size = 2416, .vocab_size = 32000, .max_position_embeddings = 2048,
    .mlp = MlpKind::dense_swiglu, .num_experts = 1, .shared_expert = true, .use_mu_guidance = false}>;

/// run3 ablation: token-routed without mu guidance (176,781,312 parameters).
using ComplexityNoMu177M = ComplexityConfig<ComplexityDims{
    .hidden_size = 768, .num_hidden_layers = 18, .num_attention_heads = 12, .num_key_value_heads = 4,
    .intermediate_size = 2048, .vocab_size = 32000, .max_position_embeddings = 2048,
    .mlp = MlpKind::token_routed, .num_experts = 4, .shared_expert = true, .use_mu_guidance = false}>;

/// run4 ablation: learned top-1 router, as coded (mu and shared expert on; 187,468,032 parameters).
using ComplexityLearnedRouter187M = ComplexityConfig<ComplexityDims{
    .hidden_size = 768, .num_hidden_layers = 18, .num_attention_heads = 12, .num_key_value_heads = 4,
    .intermediate_size = 2048, .vocab_size = 32000, .max_position_embeddings = 2048,
    .mlp = MlpKind::learned_router, .num_experts = 4, .shared_expert = true, .use_mu_guidance = true}>;

/// 384M token-routed model of Table 3 (383,451,648 parameters).
using ComplexityDeep384M = ComplexityConfig<ComplexityDims{
    .hidden_size = 1024, .num_hidden_layers = 20, .num_attention_heads = 16, .num_key_value_heads = 4,
    .intermediate_size = 3200, .vocab_size = 32000, .max_position_embeddings = 4096,
    .mlp = MlpKind::token_routed, .num_experts = 4, .shared_expert = true, .use_mu_guidance = true}>;

/// 384M dense baseline (384,454,144 parameters incl. the unused mu_to_* weights).
using ComplexityDense384M = ComplexityConfig<ComplexityDims{
    .hidden_size = 1024, .num_hidden_layers = 20, .num_attention_heads = 16, .num_key_value_heads = 4,
    .intermediate_size = 4358, .vocab_size = 32000, .max_position_embeddings = 4096,
    .mlp = MlpKind::dense_swiglu, .num_experts = 1, .shared_expert = false, .use_mu_guidance = false}>;

/// The 1.5B pilot's dimensions (pilot paper Table 3: L 24, d 2048, 16/4 heads, I 8192, 4 experts,
/// context 4096). The pilot's INL dynamics are not part of this library; the preset keeps its shapes
/// with the final paper's token-routed MLP, without mu guidance or shared expert: 1.525B live
/// parameters, 1.676B counted as the final code's modules hold them (dead mu_to_* included).
using ComplexityPilot1_5B = ComplexityConfig<ComplexityDims{
    .hidden_size = 2048, .num_hidden_layers = 24, .num_attention_heads = 16, .num_key_value_heads = 4,
    .intermediate_size = 8192, .vocab_size = 32000, .max_position_embeddings = 4096,
    .mlp = MlpKind::token_routed, .num_experts = 4, .shared_expert = false, .use_mu_guidance = false}>;

/// The authors' later token-routed model "tr-moe-306" (306,486,564 parameters; they publish 306.5M):
/// a shared SwiGLU of width 3840 plus 4 experts of width 64, two routes per token weighted 0.5 / 0.5,
/// learned shared/routed gates (initialised 0.5 / 0.5), no mu guidance. Dimensions from the paper
/// "Token Identity as a Routing Signal for Residual MLP Experts" (Table of the matched 300M models);
/// rope_theta and the norm epsilon are not stated there: the authors' code defaults (docs/MODELS.md §3.3).
using TrMoe306 = ComplexityConfig<ComplexityDims{
    .hidden_size = 1024, .num_hidden_layers = 18, .num_attention_heads = 16, .num_key_value_heads = 4,
    .intermediate_size = 256, .vocab_size = 32000, .max_position_embeddings = 2048,
    .mlp = MlpKind::token_routed, .num_experts = 4, .shared_expert = true, .shared_intermediate_size = 3840,
    .use_mu_guidance = false, .top_k = 2, .top_k_primary_weight = 0.5, .use_shared_routed_gates = true,
    .shared_gate_init = 0.5, .routed_gate_init = 0.5}>;

/// Its matched dense baseline "dense-306" (306,486,528 parameters; published 306.5M): one SwiGLU of
/// width 4096, the same backbone.
using Dense306 = ComplexityConfig<ComplexityDims{
    .hidden_size = 1024, .num_hidden_layers = 18, .num_attention_heads = 16, .num_key_value_heads = 4,
    .intermediate_size = 4096, .vocab_size = 32000, .max_position_embeddings = 2048,
    .mlp = MlpKind::dense_swiglu, .num_experts = 1, .shared_expert = false, .use_mu_guidance = false}>;

/// The built-in demo model (docs/DEMO_MODEL.md): trained on the King James Bible by
/// scripts/train_kjv.py, weights in data/kjv/deep. Token-routed with mu guidance and the shared
/// expert, 4,096-token byte-level BPE, routing table from our build-time router (9,312,000 parameters).
using KjvDeep = ComplexityConfig<ComplexityDims{
    .hidden_size = 256, .num_hidden_layers = 6, .num_attention_heads = 4, .num_key_value_heads = 2,
    .intermediate_size = 1024, .vocab_size = 4096, .max_position_embeddings = 256,
    .mlp = MlpKind::token_routed, .num_experts = 4, .shared_expert = true, .use_mu_guidance = true}>;

/// Its dense baseline with the same parameter count (9,310,208): one SwiGLU of width 1536, no mu
/// guidance, trained by the same script for the same time (data/kjv/dense).
using KjvDense = ComplexityConfig<ComplexityDims{
    .hidden_size = 256, .num_hidden_layers = 6, .num_attention_heads = 4, .num_key_value_heads = 2,
    .intermediate_size = 1536, .vocab_size = 4096, .max_position_embeddings = 256,
    .mlp = MlpKind::dense_swiglu, .num_experts = 1, .shared_expert = false, .use_mu_guidance = false}>;

/// PRISM-mini of the reference code (TinyStories; ~51M parameters).
using PrismMini = PrismConfig<PrismDims{
    .n_layer = 8, .n_head = 8, .n_embd = 512, .vocab_size = 50304, .block_size = 512,
    .prism_expansion_ratio = 2, .prism_freq_multiplier = 3.1415926535}>;

// ---- tiny configurations for tests and examples: fast to run, every feature on ----

/// Tiny token-routed, mu-guided model: groups = 2, 4 experts, odd vocabulary.
using TinyComplexity = ComplexityConfig<ComplexityDims{
    .hidden_size = 64, .num_hidden_layers = 3, .num_attention_heads = 4, .num_key_value_heads = 2,
    .intermediate_size = 128, .vocab_size = 257, .max_position_embeddings = 64,
    .mlp = MlpKind::token_routed, .num_experts = 4, .shared_expert = true, .use_mu_guidance = true}>;

/// Tiny model of the authors' later MLP: top-2 routing with weights 0.7 / 0.3, learned
/// shared/routed gates, mu guidance on (every knob of docs/MODELS.md §8.5 at once).
using TinyTopK = ComplexityConfig<ComplexityDims{
    .hidden_size = 64, .num_hidden_layers = 3, .num_attention_heads = 4, .num_key_value_heads = 2,
    .intermediate_size = 128, .vocab_size = 257, .max_position_embeddings = 64,
    .mlp = MlpKind::token_routed, .num_experts = 4, .shared_expert = true, .use_mu_guidance = true,
    .top_k = 2, .top_k_primary_weight = 0.7, .use_shared_routed_gates = true, .shared_gate_init = 0.5,
    .routed_gate_init = 0.5}>;

/// Tiny dense baseline with the same attention shape.
using TinyDense = ComplexityConfig<ComplexityDims{
    .hidden_size = 64, .num_hidden_layers = 3, .num_attention_heads = 4, .num_key_value_heads = 2,
    .intermediate_size = 96, .vocab_size = 257, .max_position_embeddings = 64,
    .mlp = MlpKind::dense_swiglu, .num_experts = 1, .shared_expert = false, .use_mu_guidance = false}>;

/// Tiny learned-router baseline.
using TinyLearnedRouter = ComplexityConfig<ComplexityDims{
    .hidden_size = 64, .num_hidden_layers = 2, .num_attention_heads = 4, .num_key_value_heads = 1,
    .intermediate_size = 128, .vocab_size = 257, .max_position_embeddings = 64,
    .mlp = MlpKind::learned_router, .num_experts = 4, .shared_expert = true, .use_mu_guidance = true}>;

/// Tiny COMPLEXITY-DEEP-style decoder (RMSNorm, token-routed MLP with shared
/// expert) whose attention is PRISM's (H = 4 signal + 4 noise heads, R = 2,
/// multiplier pi): the two architectures composed by template arguments alone.
using TinyComplexityPrism = ComplexityConfig<ComplexityDims{
    .hidden_size = 64, .num_hidden_layers = 2, .num_attention_heads = 4, .num_key_value_heads = 4,
    .intermediate_size = 128, .vocab_size = 257, .max_position_embeddings = 64,
    .mlp = MlpKind::token_routed, .num_experts = 4, .shared_expert = true, .use_mu_guidance = false,
    .attention = AttentionKind::prism, .prism_expansion_ratio = 2, .prism_freq_multiplier = 3.1415926535}>;

/// Tiny PRISM model.
using TinyPrism = PrismConfig<PrismDims{
    .n_layer = 2, .n_head = 2, .n_embd = 32, .vocab_size = 101, .block_size = 48,
    .prism_expansion_ratio = 2, .prism_freq_multiplier = 3.1415926535}>;

}  // namespace cpx::presets

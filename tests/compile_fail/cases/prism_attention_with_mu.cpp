// A COMPLEXITY-DEEP decoder with PRISM attention cannot take mu guidance:
// PRISM's attention has no mu inputs, so the mu stream would have no consumer.
// expect: PRISM attention has no mu inputs
#include <cpx/config/complexity_config.hpp>

#ifdef CPX_COMPILE_FAIL_CONTROL
constexpr bool mu = false;
#else
constexpr bool mu = true;
#endif
using Config = cpx::ComplexityConfig<cpx::ComplexityDims{
    .hidden_size = 32, .num_hidden_layers = 1, .num_attention_heads = 2, .num_key_value_heads = 2,
    .intermediate_size = 64, .vocab_size = 10, .max_position_embeddings = 8, .num_experts = 2,
    .use_mu_guidance = mu, .attention = cpx::AttentionKind::prism}>;
int main() { return Config::prism_head_dim; }

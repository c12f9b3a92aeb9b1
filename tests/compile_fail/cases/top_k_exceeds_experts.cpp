// A configuration that breaks one rule must not compile.
// expect: top_k must not exceed num_experts
#include <cpx/config/complexity_config.hpp>

#ifdef CPX_COMPILE_FAIL_CONTROL
using Config = cpx::ComplexityConfig<cpx::ComplexityDims{.hidden_size = 64, .num_hidden_layers = 2, .num_attention_heads = 4, .num_key_value_heads = 2, .intermediate_size = 128, .vocab_size = 100, .max_position_embeddings = 16, .num_experts = 4, .top_k = 4}>;
#else
using Config = cpx::ComplexityConfig<cpx::ComplexityDims{.hidden_size = 64, .num_hidden_layers = 2, .num_attention_heads = 4, .num_key_value_heads = 2, .intermediate_size = 128, .vocab_size = 100, .max_position_embeddings = 16, .num_experts = 4, .top_k = 5}>;
#endif
int main() { return Config::head_dim; }

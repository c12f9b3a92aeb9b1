// A PRISM configuration whose rotated head dim is odd must not compile.
// expect: PRISM head dim .* must be even
#include <cpx/config/prism_config.hpp>

#ifdef CPX_COMPILE_FAIL_CONTROL
using Config = cpx::PrismConfig<cpx::PrismDims{.n_layer = 1, .n_head = 2, .n_embd = 6, .vocab_size = 10,
                                               .block_size = 8, .prism_expansion_ratio = 2}>;
#else
using Config = cpx::PrismConfig<cpx::PrismDims{.n_layer = 1, .n_head = 2, .n_embd = 6, .vocab_size = 10,
                                               .block_size = 8, .prism_expansion_ratio = 1}>;
#endif
int main() { return Config::head_dim; }

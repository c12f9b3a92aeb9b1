// Prints a compiled preset and its derived figures. Built once per preset
// (CPX_PRESET names the type in cpx::presets), as downstream binaries are.
#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>

#include <cstdio>
#include <initializer_list>

#ifndef CPX_PRESET
#error "define CPX_PRESET to a type name in cpx::presets"
#endif
#define CPX_STR2(x) #x
#define CPX_STR(x) CPX_STR2(x)

using Config = cpx::presets::CPX_PRESET;

namespace {
[[maybe_unused]] const char* mlp_name(cpx::MlpKind k) {
    switch (k) {
        case cpx::MlpKind::dense_swiglu: return "swiglu";
        case cpx::MlpKind::token_routed: return "token_routed";
        case cpx::MlpKind::learned_router: return "learned_router";
    }
    return "?";
}

template <class C>
void print(cpx::ComplexityConfig<C::dims>*) {
    std::printf("preset %s (COMPLEXITY-DEEP)\n", CPX_STR(CPX_PRESET));
    std::printf("  hidden_size %d, layers %d, heads %d (kv %d, head_dim %d, groups %d)\n", C::hidden, C::layers,
                C::heads, C::kv_heads, C::head_dim, C::groups);
    std::printf("  mlp %s, experts %d, expert width %d, shared width %d, mu guidance %s\n", mlp_name(C::mlp),
                C::experts, C::expert_width, C::shared_width, C::use_mu ? "on" : "off");
    std::printf("  vocab %d, context %d, rope theta %.1f (scaling %.2f)\n", C::vocab, C::max_positions,
                C::rope.theta, C::rope.scaling);
    if constexpr (C::attention == cpx::AttentionKind::prism)
        std::printf("  attention PRISM: %d signal + %d noise heads of dim %d (R %d), RoPE multiplier %.10g\n",
                    C::heads, C::heads, C::prism_head_dim, C::dims.prism_expansion_ratio,
                    C::dims.prism_freq_multiplier);
}

template <class C>
void print(cpx::PrismConfig<C::dims>*) {
    std::printf("preset %s (PRISM)\n", CPX_STR(CPX_PRESET));
    std::printf("  n_embd %d, n_layer %d, n_head %d (x2 signal/noise), head dim D %d, expansion %d\n", C::hidden,
                C::layers, C::heads, C::head_dim, C::expansion);
    std::printf("  vocab %d, block_size %d, RoPE bases %.2f (signal) / %.2f (noise)\n", C::vocab,
                C::max_positions, C::signal_rope.theta, C::noise_rope.theta);
}
}  // namespace

int main() {
    print<Config>(static_cast<Config*>(nullptr));
    std::printf("  parameters            %lld\n", static_cast<long long>(cpx::parameter_count<Config>()));
    std::printf("  active per token      %lld (%lld without embeddings)\n",
                static_cast<long long>(cpx::active_parameters<Config>(true)),
                static_cast<long long>(cpx::active_parameters<Config>(false)));
    for (long long ctx : {1LL, 512LL, static_cast<long long>(Config::max_positions)})
        std::printf("  forward FLOPs/token   %.3f GFLOP at context %lld\n",
                    static_cast<double>(cpx::flops_per_token<Config>(ctx)) * 1e-9, ctx);
    return 0;
}

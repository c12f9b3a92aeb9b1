// A downstream program: compiles a preset, checks a derived figure, runs a
// layer, and routes with a table computed at build time (cpx_add_routing_table).
#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/cpu/layers/rmsnorm.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "text_routing.hpp"

int main() {
    using Config = cpx::presets::ComplexityDeep187M;
    static_assert(cpx::parameter_count<Config>() == 187'412'736);
    std::vector<float> x(Config::hidden, 2.0f), w(Config::hidden, 0.5f), y(Config::hidden, -1.0f);
    cpx::cpu::rmsnorm(cpx::Matrix<const float>(x.data(), 1, Config::hidden),
                      cpx::Vector<const float>(w.data(), Config::hidden),
                      cpx::Matrix<float>(y.data(), 1, Config::hidden), Config::norm_eps);
    // rms(x) = 2, so every output is 0.5 * 2 / 2 = 0.5 (to within eps).
    for (float v : y)
        if (v < 0.4999f || v > 0.5001f) { std::printf("consumer: wrong RMSNorm output %f\n", v); return 1; }
    static_assert(consumer::text_routing::vocab == static_cast<std::size_t>(Config::vocab) &&
                  consumer::text_routing::experts == Config::experts);
    const cpx::TokenRouting routing = consumer::text_routing::routing();
    std::vector<int> ids_per_expert(Config::experts, 0);
    for (std::size_t t = 0; t < routing.vocab(); ++t)
        ++ids_per_expert[static_cast<std::size_t>(routing.expert_of(static_cast<std::int64_t>(t)))];
    for (int n : ids_per_expert)  // balanced routing: floor/ceil(V/n) = 8000 ids each
        if (n != 8000) { std::printf("consumer: %d ids on one expert, expected 8000\n", n); return 1; }
    std::printf("consumer: cpx %s works (%lld parameters in run2)\n", CPX_CONSUMER_MODE,
                static_cast<long long>(cpx::parameter_count<Config>()));
    return 0;
}

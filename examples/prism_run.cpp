// Runs a PRISM model compiled for one preset (CPX_PRESET: PrismMini,
// TinyPrism): from a checkpoint directory (model.safetensors with the
// reference's nanoGPT names + config.json in its GPTConfig keys) or from the
// reference's seeded random initialisation; prints the generated token ids and
// the prefill and decode rates, optionally the prompt's logits (.npy) and each
// layer's mean attention distance of the signal and noise heads.
//
//   prism_run_<Preset> [--checkpoint DIR] [--seed S] [--tokens 1,2,3] [--generate N]
//                      [--temperature T] [--top-k K] [--top-p P] [--dtype f32|bf16] [--compute fp32|fp32_packed|bf16]
//                      [--threads N] [--dump-logits FILE.npy] [--attention-distance] [--print-config]
//                      [--device cpu|cuda]
#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/io/prism_config_json.hpp>
#include <cpx/models/prism/checkpoint.hpp>
#include <cpx/models/prism/model.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <utility>

#include "run_common.hpp"

#ifndef CPX_PRESET
#error "define CPX_PRESET to a PRISM type name in cpx::presets"
#endif
#define CPX_STR2(x) #x
#define CPX_STR(x) CPX_STR2(x)

using Config = cpx::presets::CPX_PRESET;
static_assert(cpx::PrismConfigType<Config>, "prism_run needs a PRISM preset");

namespace {

using cpx_example::Options;

template <class W>
cpx::PrismWeights<Config, W> make_weights(const Options& o) {
    if (!o.checkpoint.empty()) {
        std::vector<std::string> keys_not_interpreted;
        auto w = cpx::load_prism_checkpoint<Config, W>(o.checkpoint, &keys_not_interpreted);
        cpx_example::warn_config_keys_not_interpreted(keys_not_interpreted);
        std::printf("checkpoint %s: lambda_q per layer", o.checkpoint.c_str());
        for (const auto& l : w.layers) std::printf(" %.4g", static_cast<double>(l.lambda));
        std::printf("\n");
        return w;
    }
    std::printf("random initialisation, seed %llu\n", static_cast<unsigned long long>(o.seed));
    return cpx::PrismWeights<Config, W>::random(o.seed);
}

template <class W>
int run(const Options& o) {
    auto weights = make_weights<W>(o);
    if (!o.save_checkpoint.empty()) {
        cpx::save_prism_checkpoint(weights, o.save_checkpoint);
        std::printf("checkpoint written to %s\n", o.save_checkpoint.c_str());
    }
    if (o.device == "cuda") return cpx_example::run_on_cuda<Config>(weights, o, CPX_STR(CPX_PRESET));
    cpx::PrismModel<Config, W> model(std::move(weights));
    cpx_example::apply_compute(model, o);
    return cpx_example::run_model(model, o);
}

}  // namespace

int main(int argc, char** argv) {
    return cpx_example::main_of(
        "prism_run_" CPX_STR(CPX_PRESET), argc, argv, [] { return cpx::io::prism_config_json<Config>(); },
        [](const Options& o) {
            std::printf("preset %s: %lld parameters, %s weights, RoPE bases %.2f (signal) / %.2f (noise)\n",
                        CPX_STR(CPX_PRESET), static_cast<long long>(cpx::parameter_count<Config>()),
                        o.bf16 ? "bf16" : "fp32", Config::signal_rope.theta, Config::noise_rope.theta);
            return o.bf16 ? run<cpx::bf16>(o) : run<float>(o);
        });
}

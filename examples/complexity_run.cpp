// Runs a COMPLEXITY-DEEP model compiled for one preset (CPX_PRESET): from a
// checkpoint directory (model.safetensors + config.json) or from the seeded
// random initialisation; prints the generated token ids and the
// prefill and decode rates, and optionally writes the prompt's logits.
//
//   complexity_run_<Preset> [--checkpoint DIR] [--seed S] [--tokens 1,2,3] [--generate N]
//                           [--temperature T] [--top-k K] [--top-p P] [--dtype f32|bf16] [--compute fp32|fp32_packed|bf16]
//                           [--threads N] [--dump-logits FILE.npy] [--attention-distance] [--print-config]
//                           [--device cpu|cuda]
//                           [--prompt TEXT | --prompt-file FILE] [--eval FILE]   (with DIR/tokenizer.json)
// The same binary serves a decoder with PRISM attention (TinyComplexityPrism),
// whose --attention-distance reports signal against noise heads.
#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/io/complexity_config_json.hpp>
#include <cpx/io/npy.hpp>
#include <cpx/models/complexity/checkpoint.hpp>
#include <cpx/models/complexity/model.hpp>
#include <cpx/models/generation.hpp>

#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <utility>

#include "run_common.hpp"

#ifdef CPX_BUILD_ROUTING_HEADER
#include CPX_BUILD_ROUTING_HEADER
#endif

#ifndef CPX_PRESET
#error "define CPX_PRESET to a COMPLEXITY-DEEP type name in cpx::presets"
#endif
#define CPX_STR2(x) #x
#define CPX_STR(x) CPX_STR2(x)

using Config = cpx::presets::CPX_PRESET;
#ifdef CPX_BUILD_ROUTING_HEADER
static_assert(CPX_BUILD_ROUTING::vocab == Config::vocab && CPX_BUILD_ROUTING::experts == Config::experts &&
                  CPX_BUILD_ROUTING::top_k == Config::top_k,
              "the build-time routing table must match the preset's vocabulary, experts and top_k");
#endif

namespace {

using cpx_example::Options;

template <class W>
cpx::ComplexityWeights<Config, W> make_weights(const Options& o) {
    std::span<const std::int32_t> routing;
    std::string routing_source;
#ifdef CPX_BUILD_ROUTING_HEADER
    routing = CPX_BUILD_ROUTING::token_to_expert;
    routing_source = std::string(cpx::router::name_of(CPX_BUILD_ROUTING::algorithm)) + ", " +
                     std::string(CPX_BUILD_ROUTING::source);
#endif
    if (!o.checkpoint.empty()) {
        cpx::CheckpointReport report;
        auto w = cpx::load_complexity_checkpoint<Config, W>(o.checkpoint, &report, routing);
        // Whether training routed as this build does: the primary table of every layer against the
        // build-time one (same frequency table and algorithm give the same table).
        std::string agreement;
        if constexpr (Config::mlp == cpx::MlpKind::token_routed) {
            if (report.routing_from_checkpoint && !routing.empty()) {
                std::size_t differ = 0;
                for (int l = 0; l < Config::layers; ++l) {
                    const auto p = w.primary_routes(l);
                    for (std::size_t t = 0; t < p.size(); ++t) differ += p[t] != routing[t];
                }
                agreement = differ == 0 ? " (equal to the build-time table in every layer)"
                                        : " (differs from the build-time table in " + std::to_string(differ) +
                                              " layer-token entries)";
            }
        }
        std::printf("checkpoint %s: %s routing%s%s%s\n", o.checkpoint.c_str(),
                    report.routing_from_checkpoint ? "the checkpoint's" : "the build-time",
                    report.routing_per_layer ? " (a table per layer)" : "", agreement.c_str(),
                    report.prefix.empty() ? "" : ", keys prefixed 'model.'");
        for (const std::string& note : report.notes) std::printf("note: %s\n", note.c_str());
        cpx_example::warn_config_keys_not_interpreted(report.config_keys_not_interpreted);
        return w;
    }
    auto w = cpx::ComplexityWeights<Config, W>::random(o.seed);
    std::printf("weights: random, the papers' initialisation with seed %llu (--checkpoint DIR loads real weights; "
                "the tokens generated from random weights are arbitrary)\n",
                static_cast<unsigned long long>(o.seed));
    if constexpr (Config::mlp == cpx::MlpKind::token_routed) {
        if (!routing.empty()) {
            w.set_routing(routing);
            std::printf("routing: token id -> expert by the table computed at build time (%s)%s\n",
                        routing_source.c_str(),
                        Config::top_k > 1 ? ", routes 1.. by the cyclic rule (primary + r) mod E" : "");
        } else {
            std::printf("routing: token id t -> expert t mod %d\n", Config::experts);
        }
    }
    return w;
}

template <class W>
int run(const Options& o) {
    auto weights = make_weights<W>(o);
    if (!o.save_checkpoint.empty()) {
        cpx::save_complexity_checkpoint(weights, o.save_checkpoint);
        std::printf("checkpoint written to %s\n", o.save_checkpoint.c_str());
    }
    if (o.device == "cuda") return cpx_example::run_on_cuda<Config>(weights, o, CPX_STR(CPX_PRESET));
    cpx::ComplexityModel<Config, W> model(std::move(weights));
    cpx_example::apply_compute(model, o);
    return cpx_example::run_model(model, o);
}

}  // namespace

int main(int argc, char** argv) {
    return cpx_example::main_of(
        "complexity_run_" CPX_STR(CPX_PRESET), argc, argv, [] { return cpx::io::complexity_config_json<Config>(); },
        [](Options o) {
#ifdef CPX_DEFAULT_CHECKPOINT
            // The preset's trained weights ship with the sources (data/kjv): they are the default.
            if (o.checkpoint.empty()) o.checkpoint = CPX_DEFAULT_CHECKPOINT;
#endif
            std::printf("preset %s: %lld parameters, %s weights\n", CPX_STR(CPX_PRESET),
                        static_cast<long long>(cpx::parameter_count<Config>()), o.bf16 ? "bf16" : "fp32");
            return o.bf16 ? run<cpx::bf16>(o) : run<float>(o);
        });
}

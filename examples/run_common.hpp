// What the example programs share (complexity_run, prism_run): the command
// line, the prompt pass with its optional logits dump, and generation with
// its timings, written once for any model with the library's call API
// (forward / extend / decode over a KVCache).
#pragma once

#include <cpx/cpu/attention_distance.hpp>
#include <cpx/io/npy.hpp>
#include <cpx/models/generation.hpp>
#include <cpx/models/sequence_batch.hpp>

#include "run_options.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace cpx_example {

/// Warns (stderr) about config.json keys the library read but did not check.
inline void warn_config_keys_not_interpreted(const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    std::string list;
    for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
    std::fprintf(stderr, "warning: config.json keys not interpreted (the model is run without them): %s\n",
                 list.c_str());
}

/// A program's main: the command line, --print-config, then `run(options)`.
/// Exit status 0 on success, 1 for an error of the library, 2 for a usage error.
template <class PrintConfig, class Run>
int main_of(const std::string& program, int argc, char** argv, PrintConfig print_config, Run run) {
    try {
        const Options o = parse(argc, argv, program);
        if (o.print_config) {
            std::fputs(print_config().c_str(), stdout);
            return 0;
        }
        return run(o);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "%s: %s\nRun with --help for the options.\n", program.c_str(), e.what());
        return 2;
    } catch (const cpx::Error& e) {
        std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: unexpected error: %s\n", program.c_str(), e.what());
        return 1;
    }
}

/// Each layer's mean attention distance over the prompt, signal heads
/// (0..H-1) against noise heads (H..2H-1): the paper's claim is signal > noise.
template <class Model>
void report_attention_distance(Model& model, const Options& o) {
    constexpr int layers = Model::Config::layers, heads = Model::Config::heads;
    cpx::cpu::AttentionDistance distance(layers, 2 * heads);
    model.attach(distance);
    model.forward(o.tokens, cpx::LogitsAt::last);
    model.detach_observers();
    std::printf("mean attention distance over the prompt (positions back):\n");
    for (int l = 0; l < layers; ++l)
        std::printf("  layer %d: signal heads %.3f, noise heads %.3f\n", l, distance.group_mean(l, 0, heads),
                    distance.group_mean(l, heads, heads));
}

/// The prompt's logits (optionally dumped), then a warm-up and a timed
/// generation through the KV cache, printed.
template <class Model>
int run_model(Model& model, const Options& o) {
    using Config = typename Model::Config;
    if (o.attention_distance) {
        if constexpr (requires(cpx::cpu::AttentionDistance& d) { model.attach(d); })
            report_attention_distance(model, o);
        else
            throw UsageError("--attention-distance: this model has no PRISM attention");
    }
    if (!o.dump_logits.empty()) {
        const auto logits = model.forward(o.tokens, cpx::LogitsAt::all);
        cpx::io::write_npy<float>(o.dump_logits, logits,
                                  {static_cast<std::int64_t>(o.tokens.size()), static_cast<std::int64_t>(Config::vocab)});
        std::printf("logits [%zu, %d] written to %s\n", o.tokens.size(), Config::vocab, o.dump_logits.c_str());
    }
    // The last generated token is never fed back, so it needs no cache position.
    const auto capacity = static_cast<cpx::index_t>(o.tokens.size()) + std::max(o.generate - 1, 0);
    cpx::require<cpx::InputError>(capacity <= Config::max_positions, static_cast<long long>(o.tokens.size()),
                                  " prompt tokens + ", o.generate, " generated exceed the context of ",
                                  Config::max_positions);
    typename Model::Cache cache(capacity);
    cpx::GenerationStats stats;
    // warm_up: the timed prefill excludes one-time costs (starting the thread
    // pool, sizing the workspaces).
    const auto out = cpx::generate(model, cache, o.tokens,
                                   {.max_new_tokens = o.generate, .sampling = o.sampling, .warm_up = true,
                                    .stats = &stats});
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    std::printf("prompt: %zu token ids:", o.tokens.size());
    for (std::size_t i = 0; i < o.tokens.size(); ++i)
        std::printf("%s%lld", i ? "," : " ", static_cast<long long>(o.tokens[i]));
    std::printf(" (--tokens to change)\n");
    if (o.sampling.temperature > 0.0f)
        std::printf("decoding: sampling at temperature %g, top-k %d, top-p %g, seed %llu; %d CPU threads\n",
                    static_cast<double>(o.sampling.temperature), o.sampling.top_k, static_cast<double>(o.sampling.top_p),
                    static_cast<unsigned long long>(o.sampling.seed), threads);
    else
        std::printf("decoding: greedy (the most likely token each step); %d CPU threads (--threads to change)\n",
                    threads);
    std::printf("generated:");
    for (std::size_t i = 0; i < out.size(); ++i) std::printf("%s%lld", i ? "," : " ", static_cast<long long>(out[i]));
    std::printf(" (token ids)\n");
    std::printf("prefill: %lld tokens in %.3f ms (%.1f tokens/s): the prompt in one pass, after an untimed warm-up "
                "pass; the first generated token comes from it\n",
                static_cast<long long>(stats.prompt_tokens), stats.prefill_seconds * 1e3,
                stats.prefill_tokens_per_second());
    std::printf("decode:  %lld tokens in %.3f ms (%.1f tokens/s): one token per step through the KV cache\n",
                static_cast<long long>(std::max<std::int64_t>(0, stats.generated_tokens - 1)),
                stats.decode_seconds * 1e3, stats.decode_tokens_per_second());
    return 0;
}

}  // namespace cpx_example

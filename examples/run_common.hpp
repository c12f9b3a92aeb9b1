// What the example programs share (complexity_run, prism_run): the command
// line, the prompt pass with its optional logits dump, and generation with
// its timings, written once for any model with the library's call API
// (forward / extend / decode over a KVCache).
#pragma once

#include <cpx/cpu/attention_distance.hpp>
#include <cpx/io/npy.hpp>
#include <cpx/models/generation.hpp>
#include <cpx/models/sequence_batch.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace cpx_example {

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Options {
    std::string checkpoint;
    std::uint64_t seed = 0;
    std::vector<std::int64_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
    int generate = 16;
    cpx::SamplingParams sampling;
    bool bf16 = false;
    int threads = 0;
    std::string dump_logits;
    std::string save_checkpoint;
    bool print_config = false;
    bool attention_distance = false;
};

/// Warns (stderr) about config.json keys the library read but did not check.
inline void warn_config_keys_not_interpreted(const std::vector<std::string>& keys) {
    if (keys.empty()) return;
    std::string list;
    for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
    std::fprintf(stderr, "warning: config.json keys not interpreted (the model is run without them): %s\n",
                 list.c_str());
}

inline std::string usage(std::string_view program) {
    return "usage: " + std::string(program) +
           " [options]\n"
           "  --checkpoint DIR     load DIR/model.safetensors (or its shard index) and DIR/config.json\n"
           "                       (default: random weights, the papers' initialisation, docs/MODELS.md)\n"
           "  --seed S             seed of the random initialisation and of sampling (default 0)\n"
           "  --tokens 1,2,3       prompt token ids (default 1,2,3,4,5,6,7,8)\n"
           "  --generate N         tokens to generate (default 16; 0 runs the prompt only)\n"
           "  --temperature T      sampling temperature (default 0: greedy)\n"
           "  --top-k K            sample among the K most likely tokens (default 0: all)\n"
           "  --top-p P            sample from the smallest set reaching probability P (default 1)\n"
           "  --dtype f32|bf16     storage of the weight matrices (default f32; arithmetic is fp32)\n"
           "  --threads N          OpenMP threads (default: OpenMP's default)\n"
           "  --dump-logits FILE   write the prompt's logits, float32 [T, vocab], as .npy\n"
           "  --save-checkpoint DIR  write the weights in use (model.safetensors + config.json) to DIR\n"
           "  --attention-distance print each layer's mean attention distance of the signal and noise\n"
           "                       heads over the prompt (models with PRISM attention)\n"
           "  --print-config       print the compiled configuration as config.json and exit\n";
}

template <class T>
T parse_number(std::string_view flag, std::string_view text) {
    T value{};
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || ptr != end || text.empty())
        throw UsageError(std::string(flag) + ": '" + std::string(text) + "' is not a valid number");
    return value;
}

inline std::vector<std::int64_t> parse_tokens(std::string_view text) {
    std::vector<std::int64_t> out;
    while (true) {
        const auto comma = text.find(',');
        out.push_back(parse_number<std::int64_t>("--tokens", text.substr(0, comma)));
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
    }
    return out;
}

/// Parses the command line; --help prints `usage_text` and exits.
inline Options parse(int argc, char** argv, const std::string& usage_text) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            std::fputs(usage_text.c_str(), stdout);
            std::exit(0);
        }
        if (flag == "--print-config") {
            o.print_config = true;
            continue;
        }
        if (flag == "--attention-distance") {
            o.attention_distance = true;
            continue;
        }
        static constexpr std::string_view with_value[] = {"--checkpoint", "--seed",  "--tokens",  "--generate",
                                                          "--temperature", "--top-k", "--top-p",   "--threads",
                                                          "--dump-logits", "--dtype", "--save-checkpoint"};
        if (std::find(std::begin(with_value), std::end(with_value), flag) == std::end(with_value))
            throw UsageError("unknown option '" + std::string(flag) + "'");
        if (i + 1 >= argc) throw UsageError(std::string(flag) + " needs a value");
        const std::string_view value = argv[++i];
        if (value.empty() && (flag == "--checkpoint" || flag == "--save-checkpoint" || flag == "--dump-logits"))
            throw UsageError(std::string(flag) + " needs a path, got an empty one");
        if (flag == "--checkpoint") o.checkpoint = value;
        else if (flag == "--seed") o.seed = parse_number<std::uint64_t>(flag, value);
        else if (flag == "--tokens") o.tokens = parse_tokens(value);
        else if (flag == "--generate") o.generate = parse_number<int>(flag, value);
        else if (flag == "--temperature") o.sampling.temperature = parse_number<float>(flag, value);
        else if (flag == "--top-k") o.sampling.top_k = parse_number<int>(flag, value);
        else if (flag == "--top-p") o.sampling.top_p = parse_number<float>(flag, value);
        else if (flag == "--threads") o.threads = parse_number<int>(flag, value);
        else if (flag == "--dump-logits") o.dump_logits = value;
        else if (flag == "--save-checkpoint") o.save_checkpoint = value;
        else if (flag == "--dtype") {
            if (value != "f32" && value != "bf16")
                throw UsageError("--dtype must be f32 or bf16, got '" + std::string(value) + "'");
            o.bf16 = value == "bf16";
        }
    }
    if (o.generate < 0) throw UsageError("--generate must be >= 0");
    if (o.threads < 0) throw UsageError("--threads must be >= 0");
    if (o.tokens.empty()) throw UsageError("--tokens: no token ids");
    o.sampling.seed = o.seed;
#ifdef _OPENMP
    if (o.threads > 0) omp_set_num_threads(o.threads);
#endif
    return o;
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

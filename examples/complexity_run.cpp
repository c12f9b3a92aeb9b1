// Runs a COMPLEXITY-DEEP model compiled for one preset (CPX_PRESET): from a
// checkpoint directory (model.safetensors + config.json) or from the spec's
// seeded random initialisation; prints the generated token ids and the
// prefill and decode rates, and optionally writes the prompt's logits.
//
//   complexity_run_<Preset> [--checkpoint DIR] [--seed S] [--tokens 1,2,3] [--generate N]
//                           [--temperature T] [--top-k K] [--top-p P] [--dtype f32|bf16]
//                           [--threads N] [--dump-logits FILE.npy] [--print-config]
#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/io/complexity_config_json.hpp>
#include <cpx/io/npy.hpp>
#include <cpx/models/complexity_checkpoint.hpp>
#include <cpx/models/complexity_model.hpp>
#include <cpx/models/generation.hpp>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef CPX_BUILD_ROUTING_HEADER
#include CPX_BUILD_ROUTING_HEADER
#endif

#ifndef CPX_PRESET
#error "define CPX_PRESET to a COMPLEXITY-DEEP type name in cpx::presets"
#endif
#define CPX_STR2(x) #x
#define CPX_STR(x) CPX_STR2(x)

using Config = cpx::presets::CPX_PRESET;

namespace {

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
    bool print_config = false;
};

const char* usage_text =
    "usage: complexity_run_" CPX_STR(CPX_PRESET) " [options]\n"
    "  --checkpoint DIR     load DIR/model.safetensors (or its shard index) and DIR/config.json\n"
    "                       (default: the spec's random initialisation)\n"
    "  --seed S             seed of the random initialisation and of sampling (default 0)\n"
    "  --tokens 1,2,3       prompt token ids (default 1,2,3,4,5,6,7,8)\n"
    "  --generate N         tokens to generate (default 16; 0 runs the prompt only)\n"
    "  --temperature T      sampling temperature (default 0: greedy)\n"
    "  --top-k K            sample among the K most likely tokens (default 0: all)\n"
    "  --top-p P            sample from the smallest set reaching probability P (default 1)\n"
    "  --dtype f32|bf16     storage of the weight matrices (default f32; arithmetic is fp32)\n"
    "  --threads N          OpenMP threads (default: OpenMP's default)\n"
    "  --dump-logits FILE   write the prompt's logits, float32 [T, vocab], as .npy\n"
    "  --print-config       print the compiled configuration as config.json and exit\n";

template <class T>
T parse_number(std::string_view flag, std::string_view text) {
    T value{};
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || ptr != end || text.empty())
        throw UsageError(std::string(flag) + ": '" + std::string(text) + "' is not a valid number");
    return value;
}

std::vector<std::int64_t> parse_tokens(std::string_view text) {
    std::vector<std::int64_t> out;
    while (true) {
        const auto comma = text.find(',');
        out.push_back(parse_number<std::int64_t>("--tokens", text.substr(0, comma)));
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
    }
    return out;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            std::fputs(usage_text, stdout);
            std::exit(0);
        }
        if (flag == "--print-config") {
            o.print_config = true;
            continue;
        }
        static constexpr std::string_view with_value[] = {"--checkpoint", "--seed",  "--tokens",  "--generate",
                                                          "--temperature", "--top-k", "--top-p",   "--threads",
                                                          "--dump-logits", "--dtype"};
        if (std::find(std::begin(with_value), std::end(with_value), flag) == std::end(with_value))
            throw UsageError("unknown option '" + std::string(flag) + "'");
        if (i + 1 >= argc) throw UsageError(std::string(flag) + " needs a value");
        const std::string_view value = argv[++i];
        if (flag == "--checkpoint") o.checkpoint = value;
        else if (flag == "--seed") o.seed = parse_number<std::uint64_t>(flag, value);
        else if (flag == "--tokens") o.tokens = parse_tokens(value);
        else if (flag == "--generate") o.generate = parse_number<int>(flag, value);
        else if (flag == "--temperature") o.sampling.temperature = parse_number<float>(flag, value);
        else if (flag == "--top-k") o.sampling.top_k = parse_number<int>(flag, value);
        else if (flag == "--top-p") o.sampling.top_p = parse_number<float>(flag, value);
        else if (flag == "--threads") o.threads = parse_number<int>(flag, value);
        else if (flag == "--dump-logits") o.dump_logits = value;
        else if (flag == "--dtype") {
            if (value != "f32" && value != "bf16") throw UsageError("--dtype must be f32 or bf16, got '" + std::string(value) + "'");
            o.bf16 = value == "bf16";
        }
    }
    if (o.generate < 0) throw UsageError("--generate must be >= 0");
    if (o.threads < 0) throw UsageError("--threads must be >= 0");
    if (o.tokens.empty()) throw UsageError("--tokens: no token ids");
    o.sampling.seed = o.seed;
    return o;
}

template <class W>
cpx::ComplexityWeights<Config, W> make_weights(const Options& o) {
    std::span<const std::int32_t> routing;
#ifdef CPX_BUILD_ROUTING_HEADER
    routing = CPX_BUILD_ROUTING::token_to_expert;
#endif
    if (!o.checkpoint.empty()) {
        cpx::CheckpointReport report;
        auto w = cpx::load_complexity_checkpoint<Config, W>(o.checkpoint, &report, routing);
        std::printf("checkpoint %s: %s routing%s\n", o.checkpoint.c_str(),
                    report.routing_from_checkpoint ? "the checkpoint's" : "the build-time",
                    report.prefix.empty() ? "" : ", keys prefixed 'model.'");
        return w;
    }
    auto w = cpx::ComplexityWeights<Config, W>::random(o.seed);
    if constexpr (Config::mlp == cpx::MlpKind::token_routed)
        if (!routing.empty()) w.token_to_expert.assign(routing.begin(), routing.end());
    std::printf("random initialisation, seed %llu\n", static_cast<unsigned long long>(o.seed));
    return w;
}

template <class W>
int run(const Options& o) {
    cpx::ComplexityModel<Config, W> model(make_weights<W>(o));
    if (!o.dump_logits.empty()) {
        const auto logits = model.forward(o.tokens, cpx::LogitsAt::all);
        cpx::io::write_npy<float>(o.dump_logits, logits,
                                  {static_cast<std::int64_t>(o.tokens.size()), static_cast<std::int64_t>(Config::vocab)});
        std::printf("logits [%zu, %d] written to %s\n", o.tokens.size(), Config::vocab, o.dump_logits.c_str());
    }
    const auto capacity = static_cast<cpx::index_t>(o.tokens.size()) + std::max(o.generate, 1);
    cpx::require<cpx::InputError>(capacity <= Config::max_positions, static_cast<long long>(o.tokens.size()),
                                  " prompt tokens + ", o.generate, " generated exceed the context of ",
                                  Config::max_positions);
    typename cpx::ComplexityModel<Config, W>::Cache cache(capacity);
    // A warm-up pass over the prompt, so that the timings below exclude one-time
    // costs (starting the thread pool, sizing the workspaces).
    model.extend(cache, o.tokens, cpx::LogitsAt::none, cpx::cpu::RowBlock<float>{nullptr, 0, Config::vocab, Config::vocab});
    cache.clear();
    cpx::GenerationStats stats;
    const auto out = cpx::generate(model, cache, o.tokens, o.generate, o.sampling, std::nullopt, &stats);
    std::printf("generated:");
    for (std::size_t i = 0; i < out.size(); ++i) std::printf("%s%lld", i ? "," : " ", static_cast<long long>(out[i]));
    std::printf("\nprefill: %lld tokens in %.3f ms (%.1f tokens/s)\n", static_cast<long long>(stats.prompt_tokens),
                stats.prefill_seconds * 1e3, stats.prefill_tokens_per_second());
    std::printf("decode:  %lld tokens in %.3f ms (%.1f tokens/s)\n",
                static_cast<long long>(std::max<std::int64_t>(0, stats.generated_tokens - 1)),
                stats.decode_seconds * 1e3, stats.decode_tokens_per_second());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    try {
        o = parse(argc, argv);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "complexity_run: %s\n%s", e.what(), usage_text);
        return 2;
    }
    if (o.print_config) {
        std::fputs(cpx::io::complexity_config_json<Config>().c_str(), stdout);
        return 0;
    }
#ifdef _OPENMP
    if (o.threads > 0) omp_set_num_threads(o.threads);
#endif
    try {
        std::printf("preset %s: %lld parameters, %s weights\n", CPX_STR(CPX_PRESET),
                    static_cast<long long>(cpx::parameter_count<Config>()), o.bf16 ? "bf16" : "fp32");
        return o.bf16 ? run<cpx::bf16>(o) : run<float>(o);
    } catch (const cpx::Error& e) {
        std::fprintf(stderr, "complexity_run: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "complexity_run: unexpected error: %s\n", e.what());
        return 1;
    }
}

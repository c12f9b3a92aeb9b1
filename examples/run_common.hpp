// What the example programs share (complexity_run, prism_run): the command
// line, the prompt pass with its optional logits dump, and generation with
// its timings, written once for any model with the library's call API
// (forward / extend / decode over a KVCache).
#pragma once

#include <cpx/cpu/kernels/attention_distance.hpp>
#include <cpx/cpu/kernels/gemm_bf16.hpp>
#include <cpx/cpu/runtime/vector_isa.hpp>
#include <cpx/io/npy.hpp>
#include <cpx/models/generation.hpp>
#include <cpx/models/sequence_batch.hpp>
#include <cpx/models/step_times.hpp>
#include <cpx/text/tokenizer.hpp>

#include "device_calls.hpp"
#include "run_options.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
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

/// The prompt when none is given and the checkpoint has a tokenizer.
inline constexpr std::string_view default_prompt = "In the beginning";

/// DIR/tokenizer.json of the checkpoint, when there is one.
inline std::optional<cpx::text::Tokenizer> load_tokenizer(const std::string& checkpoint) {
    if (checkpoint.empty()) return std::nullopt;
    const auto path = std::filesystem::path(checkpoint) / "tokenizer.json";
    if (!std::filesystem::exists(path)) return std::nullopt;
    return cpx::text::Tokenizer::from_file(path);
}

/// Token ids of `text` for a model of `vocab` ids: a tokenizer with more ids than the model is an error.
inline std::vector<std::int64_t> tokenize(const cpx::text::Tokenizer& tok, std::string_view text, int vocab) {
    const auto ids = tok.encode(text, false);
    std::vector<std::int64_t> out(ids.begin(), ids.end());
    for (const auto id : out)
        cpx::require<cpx::InputError>(id < vocab, tok.source(), " gives token id ", id,
                                      ", outside the model's vocabulary of ", vocab);
    return out;
}

/// --eval: mean cross-entropy (nats per token) and perplexity of the text of `file`, in
/// non-overlapping windows of the context length, each scoring its tokens 2..n from the
/// tokens before them in the window (the protocol of scripts/train_kjv.py).
template <class Model>
int evaluate_file(Model& model, const cpx::text::Tokenizer& tok, const std::string& file) {
    using Config = typename Model::Config;
    std::ifstream in(file, std::ios::binary);
    if (!in) throw cpx::InputError("--eval: cannot open " + file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tokenize(tok, text, Config::vocab);
    const std::size_t window = Config::max_positions;
    const std::size_t windows = (ids.size() + window - 1) / window;
    double total = 0.0;
    std::int64_t scored = 0;
    for (std::size_t w = 0; w < windows; ++w) {
        const std::size_t begin = w * window, n = std::min(window, ids.size() - begin);
        if (n < 2) continue;
        const std::span<const std::int64_t> input(ids.data() + begin, n - 1);
        const auto logits = model.forward(input, cpx::LogitsAt::all);
        for (std::size_t t = 0; t + 1 < n; ++t) {
            const float* row = logits.data() + t * Config::vocab;
            const float top = *std::max_element(row, row + Config::vocab);
            double sum = 0.0;
            for (int v = 0; v < Config::vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - top);
            total += std::log(sum) + top - row[ids[begin + t + 1]];
            ++scored;
        }
        if (windows > 1) std::fprintf(stderr, "\reval: window %zu / %zu", w + 1, windows);
    }
    if (windows > 1) std::fprintf(stderr, "\n");
    cpx::require<cpx::InputError>(scored > 0, "--eval: ", file, " has fewer than two tokens");
    const double ce = total / static_cast<double>(scored);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("eval: %s: %zu tokens, %lld scored in windows of %zu; cross-entropy %.5f nats/token, perplexity %.3f "
                "(%.1f s)\n", file.c_str(), ids.size(), static_cast<long long>(scored), window, ce, std::exp(ce), seconds);
    return 0;
}

/// This process's resident memory and its peak, MB (Linux: /proc/self/status; elsewhere none).
inline std::optional<std::pair<double, double>> process_memory_mb() {
    std::ifstream status("/proc/self/status");
    double rss = -1, peak = -1;
    for (std::string line; std::getline(status, line);) {
        const auto kb = [&](const char* key) {
            return std::strtod(line.c_str() + std::strlen(key), nullptr) * 1024 / 1e6;
        };
        if (line.rfind("VmRSS:", 0) == 0) rss = kb("VmRSS:");
        if (line.rfind("VmHWM:", 0) == 0) peak = kb("VmHWM:");
    }
    if (rss < 0 || peak < 0) return std::nullopt;
    return std::pair{rss, peak};
}

/// The packed fp32 product's micro-kernel on this machine.
inline const char* vector_kernel_name() {
    return cpx::cpu::vector_isa() == cpx::cpu::VectorIsa::avx512 ? "AVX-512" : "AVX2";
}

/// Applies --compute and says which arithmetic runs. Under packed arithmetic the stored
/// matrices are released as they are packed: the program never changes its arithmetic.
template <class Model>
void apply_compute(Model& model, const Options& o) {
    using cpx::cpu::Compute;
    const Compute compute = cpx::cpu::parse_compute(o.compute);
    model.set_compute(compute, cpx::cpu::runnable_compute(compute) == Compute::fp32 ? cpx::StoredMatrices::keep
                                                                                   : cpx::StoredMatrices::release);
    if (model.compute() == Compute::fp32) return;
    const auto& cpu = cpx::cpu::cpu_features();
    const std::string chosen(cpx::cpu::compute_name(model.compute()));
    if (model.compute_runs() == Compute::fp32)
        std::printf("arithmetic: %s requested, but this CPU (%s: %s) lacks its instructions: fp32\n", chosen.c_str(),
                    cpu.model.c_str(), cpu.summary().c_str());
    else if (model.compute_runs() == Compute::bf16 && model.bf16_level() == cpx::cpu::Bf16Level::widened)
        std::printf("arithmetic: bf16 products with fp32 sums, prefill and decode (this CPU has no bf16 instructions: "
                    "the bf16 operands widened exactly into fp32 FMAs, %s kernel; packed weights %.1f MB)\n",
                    vector_kernel_name(), model.packed_bytes() / 1e6);
    else if (model.compute_runs() == Compute::bf16)
        std::printf("arithmetic: bf16 products with fp32 sums, prefill and decode (%s kernels; packed weights "
                    "%.1f MB)\n",
                    std::string(cpx::cpu::bf16_level_name(model.bf16_level())).c_str(), model.packed_bytes() / 1e6);
    else
        std::printf("arithmetic: fp32 products on packed weights, prefill and decode (%s kernel; %.1f MB)\n",
                    vector_kernel_name(), model.packed_bytes() / 1e6);
    if (model.stored_matrices_released())
        std::printf("stored matrices: released as they were packed (the packs hold them%s)\n",
                    model.release_keeps().prism_u ? "; PRISM attention's U stays, read as stored by batch-1 decode"
                                                  : "");
}

/// --profile: the same generation again (a warmed-up model: one prefill, then the decode
/// steps) with a StepTimes observer, printed as each part's share of the observed time and
/// per layer.
template <class Model>
void report_profile(Model& model, const Options& o, cpx::index_t capacity) {
    using Config = typename Model::Config;
    cpx::StepTimes<Config::layers> times;
    typename Model::Cache cache(capacity);
    model.attach(times);
    const auto start = std::chrono::steady_clock::now();
    cpx::generate(model, cache, o.tokens, {.max_new_tokens = o.generate, .sampling = o.sampling});
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    model.detach_observers();
    const double attention = times.attention_total(), mlp = times.mlp_total(), mu = times.mu_total();
    const double total = times.total();
    const auto share = [&](double t) { return total > 0 ? 100.0 * t / total : 0.0; };
    std::printf("profile: the generation again, %lld model calls in %.3f ms, %.3f ms of them in the parts: "
                "attention %.3f ms (%.0f%%), MLP %.3f ms (%.0f%%), mu-guidance %.3f ms (%.0f%%), embedding %.3f ms "
                "(%.0f%%), final norm and head %.3f ms (%.0f%%)\n",
                static_cast<long long>(times.calls), wall * 1e3, total * 1e3, attention * 1e3, share(attention),
                mlp * 1e3, share(mlp), mu * 1e3, share(mu), times.embed * 1e3, share(times.embed), times.head * 1e3,
                share(times.head));
    for (int l = 0; l < Config::layers; ++l)
        std::printf("  layer %d: attention %.3f ms, MLP %.3f ms, mu-guidance %.3f ms\n", l, times.attention[l] * 1e3,
                    times.mlp[l] * 1e3, times.mu[l] * 1e3);
}

/// The prompt's logits (optionally dumped), then a warm-up and a timed
/// generation through the KV cache, printed; with a tokenizer, text in and out.
template <class Model>
int run_model(Model& model, const Options& options) {
    using Config = typename Model::Config;
    Options o = options;
    const auto tokenizer = load_tokenizer(o.checkpoint);
    if ((o.prompt_given || !o.eval_file.empty()) && !tokenizer)
        throw UsageError(std::string(o.prompt_given ? "--prompt" : "--eval") + " needs a tokenizer: " +
                         (o.checkpoint.empty() ? "give --checkpoint DIR with DIR/tokenizer.json"
                                               : o.checkpoint + "/tokenizer.json does not exist"));
    if (!o.eval_file.empty()) return evaluate_file(model, *tokenizer, o.eval_file);
    const bool text_mode = tokenizer && !o.tokens_given;
    if (text_mode) {
        if (!o.prompt_given) o.prompt = std::string(default_prompt);
        o.tokens = tokenize(*tokenizer, o.prompt, Config::vocab);
        cpx::require<cpx::InputError>(!o.tokens.empty(), "the prompt gives no tokens");
    }
    if (o.attention_distance) {
        if constexpr (requires(cpx::cpu::AttentionDistance& d) { model.attach(d); })
            report_attention_distance(model, o);
        else
            throw UsageError("--attention-distance: this model has no PRISM attention");
    }
    constexpr bool profiled = requires(cpx::StepTimes<Config::layers>& t) { model.attach(t); };
    if (o.profile && !profiled) throw UsageError("--profile: the part timings are the CPU models' (not --device cuda)");
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
    std::optional<cpx::text::Tokenizer::StreamDecoder> stream;
    if (text_mode) {
        stream.emplace(*tokenizer);
        std::printf("prompt: \"%s\" (%zu tokens)\n", cpx::printable(o.prompt).c_str(), o.tokens.size());
        std::printf("text:\n%s", cpx::repair_utf8(o.prompt).c_str());
        std::fflush(stdout);
    }
    const auto out = cpx::generate(model, cache, o.tokens,
                                   {.max_new_tokens = o.generate, .sampling = o.sampling, .warm_up = true,
                                    .stats = &stats, .on_token = [&](std::int64_t id) {
                                        if (!stream) return;
                                        std::fputs(stream->push(static_cast<std::int32_t>(id)).c_str(), stdout);
                                        std::fflush(stdout);
                                    }});
    if (stream) std::printf("%s\n", stream->finish().c_str());
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    std::printf("prompt: %zu token ids:", o.tokens.size());
    for (std::size_t i = 0; i < o.tokens.size(); ++i)
        std::printf("%s%lld", i ? "," : " ", static_cast<long long>(o.tokens[i]));
    std::printf(text_mode ? " (--prompt to change)\n" : " (--tokens to change)\n");
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
    if (const auto memory = process_memory_mb())
        std::printf("memory: %.1f MB resident, %.1f MB at the peak (this process, host side)\n", memory->first,
                    memory->second);
    if constexpr (profiled) {
        if (o.profile) report_profile(model, o, capacity);
    }
    return 0;
}

/// --device cuda: the weights on the first GPU behind the CPU call contract (device_calls.hpp),
/// then the same run as on the CPU. A program built without its CUDA part says so.
template <class Config, class Weights>
int run_on_cuda(const Weights& weights, const Options& o, const char* preset) {
#ifdef CPX_EXAMPLE_CUDA
    (void)preset;
    DeviceModel<Config> model(make_cuda_model(weights, o.gpu_kernels));
    std::printf("device: %s (CUDA): %s weights and activations, fp32 residual stream and accumulation%s\n",
                model.device().c_str(), o.bf16 ? "bf16" : "fp32",
                o.compute == "fp32" ? "" : " (--compute chooses the CPU arithmetic; ignored here)");
    return run_model(model, o);
#else
    (void)weights, (void)o;
    throw UsageError(std::string("--device cuda: this program was built without its CUDA part (it needs nvcc at "
                                 "configure time and ") + preset + " in CPX_RUN_CUDA_PRESETS)");
#endif
}

}  // namespace cpx_example

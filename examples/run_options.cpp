// The example programs' command line, parsed with CLI11.
#include "run_options.hpp"

#include <CLI/CLI.hpp>

#include <charconv>
#include <fstream>
#include <iterator>
#include <cstdlib>
#include <string_view>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace cpx_example {
namespace {

/// "1,2,3" as token ids; every item must be a whole integer (CLI11 would skip empty ones).
std::vector<std::int64_t> parse_tokens(std::string_view text) {
    std::vector<std::int64_t> out;
    while (true) {
        const std::string_view item = text.substr(0, text.find(','));
        std::int64_t id = 0;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
        if (item.empty() || ec != std::errc() || end != item.data() + item.size())
            throw UsageError("--tokens: '" + std::string(item) + "' is not a token id");
        out.push_back(id);
        if (item.size() == text.size()) return out;
        text.remove_prefix(item.size() + 1);
    }
}

}  // namespace

Options parse(int argc, char** argv, const std::string& program) {
    Options o;
    CLI::App app("Runs the compiled preset: the prompt in one pass, then generation through the KV cache.",
                 program);
    app.get_formatter()->column_width(30);
    const CLI::Validator path([](std::string& v) { return v.empty() ? "needs a path, got an empty one" : std::string(); },
                              "");
    // CLI11's NonNegativeNumber would print its range up to DBL_MAX.
    const CLI::Validator non_negative(
        [](std::string& v) { return v.starts_with('-') ? "must be >= 0, got " + v : std::string(); }, ">=0");
    std::string dtype = "f32";
    app.add_option("--checkpoint", o.checkpoint,
                   "load DIR/model.safetensors (or its shard index) and DIR/config.json (default: random weights, "
                   "the papers' initialisation, docs/MODELS.md)")
        ->type_name("DIR")->check(path);
    app.add_option("--seed", o.seed, "seed of the random initialisation and of sampling")
        ->check(non_negative)->capture_default_str();
    std::string tokens = "1,2,3,4,5,6,7,8";
    auto* tokens_opt =
        app.add_option("--tokens", tokens, "prompt token ids, comma-separated")->type_name("IDS")->capture_default_str();
    auto* prompt_opt = app.add_option("--prompt", o.prompt,
                                      "prompt text, tokenized with DIR/tokenizer.json; the generated text is printed "
                                      "as it is produced")->type_name("TEXT");
    std::string prompt_file;
    auto* prompt_file_opt = app.add_option("--prompt-file", prompt_file, "read the prompt text from FILE")
                                ->type_name("FILE")->check(path);
    app.add_option("--eval", o.eval_file,
                   "report the model's cross-entropy and perplexity on the text of FILE (needs DIR/tokenizer.json; "
                   "non-overlapping windows of the context length)")->type_name("FILE")->check(path);
    prompt_opt->excludes(tokens_opt)->excludes(prompt_file_opt);
    prompt_file_opt->excludes(tokens_opt);
    app.add_option("--generate", o.generate, "tokens to generate (0 runs the prompt only)")
        ->check(non_negative)->capture_default_str();
    app.add_option("--temperature", o.sampling.temperature, "sampling temperature (0: greedy)")
        ->check(non_negative)->capture_default_str();
    app.add_option("--top-k", o.sampling.top_k, "sample among the K most likely tokens (0: all)")
        ->check(non_negative)->capture_default_str();
    app.add_option("--top-p", o.sampling.top_p, "sample from the smallest set reaching probability P")
        ->check(CLI::Range(0.0f, 1.0f))->capture_default_str();
    app.add_option("--device", o.device,
                   "where the model runs: cpu, or cuda (programs built with CUDA; one GPU, the same weights, "
                   "checkpoint and output)")
        ->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
    app.add_option("--gpu-kernels", o.gpu_kernels,
                   "with --device cuda, the attention and expert kernels: default (tensor cores where the storage "
                   "type, head dim and GPU take them), simt, or tensor-cores (bf16 weights, head dim 64 or 128; "
                   "docs/CUDA.md)")
        ->check(CLI::IsMember({"default", "simt", "tensor-cores"}))->capture_default_str();
    app.add_option("--dtype", dtype, "storage of the weight matrices")
        ->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
    app.add_option("--compute", o.compute,
                   "arithmetic of the matrix products, with either --dtype: fp32 (stored weights); "
                   "fp32_packed (fp32 on weights packed once for our AVX-512 or AVX2 kernel, +4 bytes per weight); bf16 "
                   "(bf16 inputs, fp32 sums, needs AVX512_BF16, +2 bytes per weight). Missing instructions: fp32 "
                   "runs (docs/BF16.md)")
        ->check(CLI::IsMember({"fp32", "fp32_packed", "bf16"}))->capture_default_str();
    app.add_option("--threads", o.threads, "OpenMP threads (0: OpenMP's default)")
        ->check(non_negative)->capture_default_str();
    app.add_option("--dump-logits", o.dump_logits, "write the prompt's logits, float32 [T, vocab], as .npy")
        ->type_name("FILE")->check(path);
    app.add_option("--save-checkpoint", o.save_checkpoint,
                   "write the weights in use (model.safetensors + config.json) to DIR")
        ->type_name("DIR")->check(path);
    app.add_flag("--attention-distance", o.attention_distance,
                 "print each layer's mean attention distance of the signal and noise heads over the prompt "
                 "(models with PRISM attention)");
    app.add_flag("--profile", o.profile,
                 "run the generation a second time with a StepTimes observer and print where it went: "
                 "attention, MLP and mu-guidance of each layer, the embedding and the head (CPU)");
    app.add_flag("--print-config", o.print_config, "print the compiled configuration as config.json and exit");
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        std::exit(app.exit(e));
    } catch (const CLI::ParseError& e) {
        throw UsageError(e.what());
    }
    if (o.gpu_kernels != "default" && o.device != "cuda")
        throw UsageError("--gpu-kernels " + o.gpu_kernels + ": applies to --device cuda, not --device " + o.device);
    o.tokens = parse_tokens(tokens);
    o.tokens_given = tokens_opt->count() > 0;
    o.prompt_given = prompt_opt->count() > 0 || prompt_file_opt->count() > 0;
    if (prompt_file_opt->count() > 0) {
        std::ifstream in(prompt_file, std::ios::binary);
        if (!in) throw UsageError("--prompt-file: cannot open " + prompt_file);
        o.prompt.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (o.prompt_given && o.prompt.empty()) throw UsageError("the prompt text is empty");
    o.bf16 = dtype == "bf16";
    o.sampling.seed = o.seed;
#ifdef _OPENMP
    if (o.threads > 0) omp_set_num_threads(o.threads);
#endif
    return o;
}

}  // namespace cpx_example

// The example programs' command line: their options and its parser
// (run_options.cpp, compiled once for every preset's program since the
// options do not depend on the preset).
#pragma once

#include <cpx/models/generation.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace cpx_example {

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Options {
    std::string checkpoint;
    std::uint64_t seed = 0;
    std::vector<std::int64_t> tokens;
    bool tokens_given = false;      ///< --tokens on the command line (else a tokenizer's default prompt may apply)
    std::string prompt;             ///< --prompt / --prompt-file text (needs DIR/tokenizer.json)
    bool prompt_given = false;
    std::string eval_file;          ///< --eval FILE: cross-entropy and perplexity of a text file
    int generate = 16;
    cpx::SamplingParams sampling;
    bool bf16 = false;
    std::string compute = "fp32";  ///< --compute: arithmetic of the matrix products
    std::string device = "cpu";    ///< --device cpu|cuda
    std::string gpu_kernels = "default";  ///< --gpu-kernels default|simt|tensor-cores (--device cuda)
    int threads = 0;
    std::string dump_logits;
    std::string save_checkpoint;
    bool print_config = false;
    bool attention_distance = false;
    bool profile = false;  ///< --profile: the generation timed again by part (CPU models)
};

/// Parses the command line (CLI11). --help prints the options and exits 0;
/// a malformed command line throws UsageError. Sets the OpenMP thread count.
Options parse(int argc, char** argv, const std::string& program);

}  // namespace cpx_example

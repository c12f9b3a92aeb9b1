#pragma once
// Text generation on top of a model and its KV cache: greedy decoding and
// seeded sampling with temperature, top-k and top-p (nucleus). The sampler
// keeps its scratch, so a generation loop allocates nothing per token beyond
// the returned token list.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/cpu/runtime/strided.hpp"
#include "cpx/models/seeded_normal.hpp"
#include "cpx/models/sequence_batch.hpp"

namespace cpx {

struct SamplingParams {
    float temperature = 0.0f;  ///< 0 (or below): greedy
    int top_k = 0;             ///< keep the k most likely tokens; 0: all
    float top_p = 1.0f;        ///< keep the smallest set of most likely tokens whose mass reaches p; 1: all
    std::uint64_t seed = 0;    ///< the sampler's seed: equal seeds give equal samples
};

/// The most likely token (the first one on ties).
inline std::int64_t greedy_token(std::span<const float> logits) {
    require<InputError>(!logits.empty(), "greedy_token: no logits");
    return std::max_element(logits.begin(), logits.end()) - logits.begin();
}

/// Draws tokens from rows of logits according to SamplingParams.
class TokenSampler {
public:
    TokenSampler(const SamplingParams& params, int vocab)
        : params_(params), rng_(params.seed, "token sampler"), order_(static_cast<std::size_t>(vocab)),
          weights_(static_cast<std::size_t>(vocab)) {
        require<InputError>(vocab > 0, "sampler: vocabulary size ", vocab);
        require<InputError>(params.top_k >= 0, "sampler: top_k must be >= 0, got ", params.top_k);
        require<InputError>(params.top_p > 0.0f && params.top_p <= 1.0f, "sampler: top_p must be in (0, 1], got ",
                            params.top_p);
        require<InputError>(std::isfinite(params.temperature), "sampler: temperature must be finite");
    }

    const SamplingParams& params() const { return params_; }

    std::int64_t operator()(std::span<const float> logits) {
        require<InputError>(logits.size() == order_.size(), "sampler: ", logits.size(), " logits for a vocabulary of ",
                            order_.size());
        if (params_.temperature <= 0.0f || params_.top_k == 1) return greedy_token(logits);
        const std::size_t vocab = logits.size();
        for (std::size_t i = 0; i < vocab; ++i) order_[i] = static_cast<std::int32_t>(i);
        // Candidates in decreasing logit order (ties: lower id first) when a cut needs an order.
        const auto before = [&](std::int32_t a, std::int32_t b) {
            return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
        };
        std::size_t n = vocab;
        if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < vocab) {
            n = static_cast<std::size_t>(params_.top_k);
            std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(n), order_.end(), before);
        } else if (params_.top_p < 1.0f) {
            std::sort(order_.begin(), order_.end(), before);
        }
        const float top = logits[static_cast<std::size_t>(*std::max_element(
            order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(n),
            [&](std::int32_t a, std::int32_t b) { return logits[a] < logits[b]; }))];
        double total = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            const double w = std::exp(static_cast<double>(logits[order_[i]] - top) / params_.temperature);
            weights_[i] = w;
            total += w;
        }
        if (params_.top_p < 1.0f) {  // the smallest prefix whose probability reaches top_p
            double mass = 0.0;
            std::size_t keep = 0;
            while (keep < n) {
                mass += weights_[keep++];
                if (mass >= params_.top_p * total) break;
            }
            n = keep, total = mass;
        }
        double u = rng_.uniform() * total;
        for (std::size_t i = 0; i < n; ++i) {
            u -= weights_[i];
            if (u < 0.0) return order_[i];
        }
        return order_[n - 1];  // rounding left u at the very end
    }

private:
    SamplingParams params_;
    SeededRandom rng_;
    std::vector<std::int32_t> order_;
    std::vector<double> weights_;
};

/// Timings of one generate() call.
struct GenerationStats {
    std::int64_t prompt_tokens = 0, generated_tokens = 0;
    /// The prompt's pass through the model. Without GenerateOptions::warm_up it
    /// includes one-time costs of a model's first call of that size (sizing
    /// its workspaces, starting the thread pool).
    double prefill_seconds = 0.0;
    double decode_seconds = 0.0;
    double prefill_tokens_per_second() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0.0; }
    /// Decode steps per second (the first generated token comes from the prefill).
    double decode_tokens_per_second() const {
        return decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds : 0.0;
    }
};

/// What generate() does besides the prompt, by name:
///   generate(model, cache, prompt, {.max_new_tokens = 64, .sampling = {.temperature = 0.8f}, .stop_token = eos});
struct GenerateOptions {
    int max_new_tokens = 16;
    SamplingParams sampling{};                     ///< default: greedy
    std::optional<std::int64_t> stop_token{};      ///< stop after generating it (it is included)
    /// Run the prompt through the model once first, untimed, then forget it
    /// from the cache, so that stats->prefill_seconds measures a warm call.
    bool warm_up = false;
    GenerationStats* stats = nullptr;              ///< filled when given
    /// Called with each new token as soon as it is chosen (e.g. to print text as it is produced).
    std::function<void(std::int64_t)> on_token{};
};

/// Appends `prompt` to `cache` and generates up to options.max_new_tokens
/// tokens. Returns the new tokens. The cache must have room for the prompt and
/// all but the last generated token (which is never fed back).
template <class Model>
std::vector<std::int64_t> generate(Model& model, typename Model::Cache& cache, std::span<const std::int64_t> prompt,
                                   const GenerateOptions& options) {
    constexpr int vocab = Model::Config::vocab;
    const int max_new_tokens = options.max_new_tokens;
    require<InputError>(!prompt.empty(), "generate: the prompt is empty");
    require<InputError>(max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ", max_new_tokens);
    const std::int64_t needed = cache.length() + static_cast<std::int64_t>(prompt.size()) + std::max(0, max_new_tokens - 1);
    require<InputError>(needed <= cache.capacity(), "generate: ", cache.length(), " cached + ", prompt.size(),
                        " prompt + ", max_new_tokens, " new tokens need ", needed, " positions; the cache holds ",
                        cache.capacity());
    TokenSampler sample(options.sampling, vocab);
    std::vector<float> logits(vocab);
    std::vector<std::int64_t> out;
    out.reserve(static_cast<std::size_t>(max_new_tokens));
    if (options.warm_up) {
        const auto length = cache.length();
        model.extend(cache, prompt, LogitsAt::last, cpu::rows_of(logits.data(), 1, vocab));
        cache.truncate(length);
    }
    GenerationStats s;
    s.prompt_tokens = static_cast<std::int64_t>(prompt.size());
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    model.extend(cache, prompt, LogitsAt::last, cpu::rows_of(logits.data(), 1, vocab));
    const auto t1 = clock::now();
    s.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
    typename Model::Cache* caches[] = {&cache};
    for (int i = 0; i < max_new_tokens; ++i) {
        const std::int64_t token = sample(logits);
        out.push_back(token);
        if (options.on_token) options.on_token(token);
        if ((options.stop_token && token == *options.stop_token) || i + 1 == max_new_tokens) break;
        model.decode(caches, std::span<const std::int64_t>(&out.back(), 1), cpu::rows_of(logits.data(), 1, vocab));
    }
    s.generated_tokens = static_cast<std::int64_t>(out.size());
    s.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
    if (options.stats) *options.stats = s;
    return out;
}

/// The short form: up to `max_new_tokens` tokens drawn with `sampling` (greedy by default).
template <class Model>
std::vector<std::int64_t> generate(Model& model, typename Model::Cache& cache, std::span<const std::int64_t> prompt,
                                   int max_new_tokens, const SamplingParams& sampling = {}) {
    return generate(model, cache, prompt, GenerateOptions{.max_new_tokens = max_new_tokens, .sampling = sampling});
}

}  // namespace cpx

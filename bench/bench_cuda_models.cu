// Whole COMPLEXITY-DEEP models on the GPU (bf16 weights, activations and KV
// cache; fp32 residual stream, logits and accumulation), against the device's
// own ceilings measured in the same binary:
//   gpu/machine/gemm: cuBLAS bf16 GEMM, 8192^3 (the "bf16 GEMM rate" that
//     prefill is judged against: frac_of_gemm);
//   gpu/machine/copy: device-to-device copy of 1 GiB, counted as bytes read +
//     bytes written (the bandwidth that decode is judged against);
//   prefill: B sequences of T tokens into empty caches, logits of the last
//     position; FLOPs as in the CPU suite (flops_per_token summed over the
//     causal positions, the head once per sequence);
//   decode: one token of one sequence at a given context, a captured step
//     replayed; bytes from decode_step_bytes (weights the step reads, the
//     routed experts its token reaches, the KV cache); bound_ratio = our time per
//     token / (bytes / copy rate);
//   prefill, decode, generate choose the SIMT kernels explicitly (a bf16
//     model's default is tensor cores); prefill_tc, generate_tc the
//     tensor-core ones (attention of prefill-sized launches, the experts'
//     grouped GEMMs);
//   decode_rows, prefill_tc with row_kernel_max: the experts' row-kernel
//     threshold swept (batched decode steps of 16-100 sequences, prefills of
//     256-2,048 (token, route) rows), each against the tiled kernel;
//   generate: the paper's serving test (100 sequences, 128 prompt tokens,
//     1,900 generated tokens each; 8,078 tok/s with vLLM on an RTX PRO 6000),
//     here as one batch: the prefill, then greedy decoding closed on the
//     device (argmax into the model's inputs) by graph replays; tokens/s =
//     generated tokens / (prefill + decode time).
// Weights are N(0, 0.02) values tiled from one block of normals (vectors at
// their initial values: norm weights and mu 1, mu_init 0): timing does not
// depend on the values. The routing table is modulo (expert = id mod E),
// balanced for the uniformly drawn prompts (route r of a top-k model: (id + r) mod E). Without a CUDA device the binary says so and exits 77.
#include "bench_counters.hpp"

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/cuda/runtime/blas.cuh>
#include <cpx/models/complexity/model.cuh>
#include <cpx/cuda/runtime/device_query.cuh>
#include <cpx/cuda/runtime/graph.cuh>
#include <cpx/cuda/kernels/greedy_decode.cuh>
#include <cpx/models/complexity/weights.hpp>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace cpx;
namespace gpu = cpx::cuda;  // CUB brings a global ::cuda namespace (libcu++)
using bench::Work;

/// Elapsed device time between two events recorded on a stream.
class EventTimer {
public:
    EventTimer() {
        CPX_CUDA_CHECK(cudaEventCreate(&start_));
        CPX_CUDA_CHECK(cudaEventCreate(&stop_));
    }
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;
    ~EventTimer() {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    void start(cudaStream_t s) { CPX_CUDA_CHECK(cudaEventRecord(start_, s)); }
    /// Records the stop event, waits for it, returns the seconds since start().
    double stop(cudaStream_t s) {
        CPX_CUDA_CHECK(cudaEventRecord(stop_, s));
        CPX_CUDA_CHECK(cudaEventSynchronize(stop_));
        float ms = 0;
        CPX_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        return ms * 1e-3;
    }

private:
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

/// Best time of `repeats` runs of `enqueue` on `stream`, after one warm-up run.
template <class Fn>
double best_device_seconds(cudaStream_t stream, int repeats, Fn&& enqueue) {
    EventTimer timer;
    enqueue();
    double best = 1e300;
    for (int r = 0; r < repeats; ++r) {
        timer.start(stream);
        enqueue();
        best = std::min(best, timer.stop(stream));
    }
    return best;
}

/// Runs the timing loop with device time per iteration (events around `enqueue`).
template <class Fn>
void run_timed(benchmark::State& state, const Work& w, cudaStream_t stream, Fn&& enqueue) {
    EventTimer timer;
    double total = 0;
    for (auto _ : state) {
        timer.start(stream);
        enqueue();
        const double s = timer.stop(stream);
        state.SetIterationTime(s);
        total += s;
    }
    bench::set_counters(state, w, total);
}

std::vector<float> normals(std::size_t n, float stddev, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> dist(0.0f, stddev);
    std::vector<float> v(n);
    for (float& x : v) x = dist(gen);
    return v;
}

/// Host weights of synthetic values (see the header comment), through the model's
/// tensor description: matrices tiled from one block of normals, vectors at their
/// initial values; routing modulo (ComplexityWeights' default).
template <ComplexityConfigType C>
ComplexityWeights<C, bf16> synthetic_weights() {
    static const std::vector<float> block = normals(std::size_t{1} << 20, 0.02f, 7);
    ComplexityWeights<C, bf16> w;
    std::vector<float> values;
    for (const auto& s : w.slots()) {
        values.resize(static_cast<std::size_t>(s.elements()));
        if (s.init_std > 0.0) {
            const std::size_t offset = std::hash<std::string>{}(s.name) % block.size();
            for (std::size_t i = 0; i < values.size(); ++i) values[i] = block[(offset + i) % block.size()];
        } else {
            std::fill(values.begin(), values.end(), s.init_value);
        }
        s.assign(values);
    }
    return w;
}

std::vector<std::int32_t> random_tokens(std::size_t n, int vocab, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<std::int32_t> dist(0, vocab - 1);
    std::vector<std::int32_t> v(n);
    for (auto& t : v) t = dist(gen);
    return v;
}

// ---------------------------------------------------------------- the device's ceilings

/// cuBLAS bf16 GEMM rate (GFLOP/s) of y[n, n] = x[n, n] W[n, n]^T, fp32 accumulation.
double gemm_bf16_gflops(int n) {
    static std::map<int, double> cache;
    if (auto it = cache.find(n); it != cache.end()) return it->second;
    const auto values = normals(std::size_t(n) * n, 1.0f, 3);
    std::vector<bf16> host(values.size());
    std::transform(values.begin(), values.end(), host.begin(), [](float v) { return from_float<bf16>(v); });
    gpu::DeviceBuffer<bf16> x(host), w(host), y(host.size());
    gpu::Blas blas;
    gpu::Stream stream;
    const double s = best_device_seconds(stream, 10, [&] {
        gpu::linear<bf16, bf16>(blas, StridedMatrix<const bf16>(x.data(), n, n, n),
                                StridedMatrix<const bf16>(w.data(), n, n, n), gpu::WeightLayout::out_in,
                                StridedMatrix<bf16>(y.data(), n, n, n), 1.0f, 0.0f, stream);
    });
    return cache[n] = 2.0 * n * double(n) * n / s * 1e-9;
}

constexpr std::size_t copy_bytes = std::size_t{1} << 30;

/// Device copy rate (GB/s, bytes read + bytes written) over 1 GiB.
double copy_gbps() {
    static double rate = 0;
    if (rate > 0) return rate;
    gpu::DeviceBuffer<std::byte> a(copy_bytes), b(copy_bytes);
    a.fill_bytes(1);
    gpu::Stream stream;
    const double s = best_device_seconds(stream, 10, [&] {
        CPX_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), copy_bytes, cudaMemcpyDeviceToDevice, stream));
    });
    return rate = 2.0 * double(copy_bytes) / s * 1e-9;
}

constexpr int gemm_n = 8192;

void register_machine() {
    benchmark::RegisterBenchmark("gpu/machine/gemm/bf16/m:8192/n:8192/k:8192", [](benchmark::State& state) {
        const double rate = gemm_bf16_gflops(gemm_n);  // best of 10 after a warm-up
        for (auto _ : state) state.SetIterationTime(2.0 * gemm_n * double(gemm_n) * gemm_n / (rate * 1e9));
        state.counters["GFLOP_per_s"] = rate;
    })->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("gpu/machine/copy/bytes:1073741824", [](benchmark::State& state) {
        const double rate = copy_gbps();  // best of 10 after a warm-up
        for (auto _ : state) state.SetIterationTime(2.0 * double(copy_bytes) / (rate * 1e9));
        state.counters["GB_per_s"] = rate;
    })->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
}

// ---------------------------------------------------------------- models

/// The largest calls any case makes: the generation test's batch, prefill rows.
constexpr int max_batch = 100, max_rows = 8 * 2048;

/// A model (one alive at a time: the KV cache of 100 sequences is several GB).
template <ComplexityConfigType C>
struct Loaded {
    gpu::ComplexityModel<C, bf16> model;
    Loaded() : model(synthetic_weights<C>(), max_batch, std::min(max_rows, max_batch * C::max_positions)) {}
};

template <ComplexityConfigType C>
gpu::ComplexityModel<C, bf16>& model_of(const std::string& key) {
    return bench::one_model_alive<Loaded<C>>(key, [] { return std::make_unique<Loaded<C>>(); }).model;
}

std::string case_name(const std::string& preset, const std::string& rest) {
    return "gpu/model/complexity/" + preset + "/bf16/" + rest;
}

struct Context {
    gpu::Blas blas;
    gpu::Stream stream;
};

Context& context() {
    static Context c;
    return c;
}

/// "prefill" or "prefill_tc" and the like: the case's kernels in its name.
/// "_tiled": the experts' tiled kernels at every row count (the row kernel off), the baseline of
/// the row kernel in the same run; "_unsplit": the row kernel without its cluster split of K, the
/// baseline of the split; "_splitN": the split forced to N ways (the sweep behind the automatic one).
std::string with_kernels(const std::string& what, const gpu::KernelChoice& k) {
    const std::string tc = k.attention == gpu::AttentionKernel::tensor_cores ? what + "_tc" : what;
    if (k.expert_row_kernel_max == 0) return tc + "_tiled";
    if (k.expert_row_kernel_split == 1) return tc + "_unsplit";
    return k.expert_row_kernel_split > 1 ? tc + "_split" + std::to_string(k.expert_row_kernel_split) : tc;
}

gpu::KernelChoice rows_off(gpu::KernelChoice k = {}) {
    k.expert_row_kernel_max = 0;
    return k;
}

gpu::KernelChoice unsplit(gpu::KernelChoice k = {}) {
    k.expert_row_kernel_split = 1;
    return k;
}

template <ComplexityConfigType C>
void prefill(const std::string& preset, int batch, int tokens, gpu::KernelChoice kernels = {}) {
    const bool rows_swept = kernels.expert_row_kernel_max != 0 && kernels.expert_row_kernel_max != gpu::default_expert_row_kernel_max;
    const std::string name = case_name(preset, with_kernels("prefill", kernels) + "/batch:" + std::to_string(batch) +
                                                   "/tokens:" + std::to_string(tokens) +
                                                   (rows_swept ? "/row_kernel_max:" + std::to_string(kernels.expert_row_kernel_max) : ""));
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
        auto& blas = context().blas;
        auto& stream = context().stream;
        auto& m = model_of<C>(preset);
        m.use_kernels(kernels);
        const auto prompt = random_tokens(std::size_t(batch) * tokens, C::vocab, 11);
        const std::vector<std::int32_t> starts(batch, 0);
        gpu::DeviceBuffer<float> logits(std::size_t(batch) * C::vocab);
        auto step = [&] { m.forward(blas, prompt, batch, starts, logits.data(), gpu::LogitRows::last, stream); };
        step();
        m.check(stream);
        Work work;
        work.tokens = double(batch) * tokens;
        work.flops = bench::prefill_flops<C>(batch, tokens, false);
        work.gemm_ceiling = gemm_bf16_gflops(gemm_n);
        run_timed(state, work, stream, step);
        m.check(stream);
    })->UseManualTime()->Unit(benchmark::kMillisecond);
}

/// A decode step of `batch` sequences at the same context, captured and replayed: the cache is
/// filled to context - 1 positions, each step writes position context - 1 and reads all of them.
/// Bytes count the distinct experts the batch's routes reach (batch x top_k, at most E).
template <ComplexityConfigType C>
void decode_step(const std::string& name, const std::string& preset, int batch, int context_length,
                 gpu::KernelChoice kernels) {
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
        auto& blas = context().blas;
        auto& stream = context().stream;
        auto& m = model_of<C>(preset);
        m.use_kernels(kernels);
        gpu::DeviceBuffer<float> logits(std::size_t(batch) * C::vocab);
        // The cache filled in chunks of positions, each call within the model's max_rows.
        const int chunk = std::max(1, max_rows / batch);
        for (int p = 0; p < context_length - 1; p += chunk) {
            const int n = std::min(chunk, context_length - 1 - p);
            m.forward(blas, random_tokens(std::size_t(batch) * n, C::vocab, 14 + p), batch,
                      std::vector<std::int32_t>(batch, p), logits.data(), gpu::LogitRows::last, stream);
        }
        const auto next = random_tokens(std::size_t(batch), C::vocab, 15);
        m.forward(blas, next, batch, std::vector<std::int32_t>(batch, context_length - 1), logits.data(),
                  gpu::LogitRows::last, stream);
        m.check(stream);
        gpu::Graph step = gpu::Graph::capture(
            stream, [&] { m.enqueue(blas, batch, 1, logits.data(), gpu::LogitRows::last, stream); });
        Work work;
        work.tokens = batch;
        work.flops = double(batch) * flops_per_token<C>(context_length);
        work.bytes = decode_step_bytes<C>(std::min(batch * C::top_k, C::experts), batch, context_length, sizeof(bf16));
        work.read_ceiling = copy_gbps();
        run_timed(state, work, stream, [&] { step.launch(stream); });
        m.check(stream);
        state.counters["bound_ratio"] = 1.0 / state.counters["frac_of_bandwidth"];
    })->UseManualTime()->Unit(benchmark::kMicrosecond);
}

/// One sequence's decode step.
template <ComplexityConfigType C>
void decode(const std::string& preset, int context_length, gpu::KernelChoice kernels = {}) {
    decode_step<C>(case_name(preset, with_kernels("decode", kernels) + "/batch:1/context:" + std::to_string(context_length)),
                   preset, 1, context_length, kernels);
}

/// A step of `batch` sequences with the experts' row kernel taking calls of at most `rows_max`
/// (token, route) rows: the sweep behind the default threshold (default_expert_row_kernel_max).
/// At batch B a top-k model's expert calls total B * k rows.
template <ComplexityConfigType C>
void decode_batch(const std::string& preset, int batch, int context_length, int rows_max, gpu::KernelChoice kernels = {}) {
    kernels.expert_row_kernel_max = rows_max;
    decode_step<C>(case_name(preset, with_kernels("decode_rows", kernels) + "/batch:" + std::to_string(batch) +
                                         "/context:" + std::to_string(context_length) +
                                         "/row_kernel_max:" + std::to_string(rows_max)),
                   preset, batch, context_length, kernels);
}

/// The serving test: `batch` prompts of `prompt_len` tokens, `generated` new tokens each.
template <ComplexityConfigType C>
void generate(const std::string& preset, int batch, int prompt_len, int generated, gpu::KernelChoice kernels = {}) {
    const std::string name =
        case_name(preset, with_kernels("generate", kernels) + "/batch:" + std::to_string(batch) + "/prompt:" +
                              std::to_string(prompt_len) + "/new:" + std::to_string(generated));
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
        auto& blas = context().blas;
        auto& stream = context().stream;
        auto& m = model_of<C>(preset);
        m.use_kernels(kernels);
        const auto prompts = random_tokens(std::size_t(batch) * prompt_len, C::vocab, 13);
        const std::vector<std::int32_t> zeros(batch, 0);
        gpu::DeviceBuffer<float> logits(std::size_t(batch) * C::vocab);
        gpu::DeviceBuffer<std::int32_t> history(std::size_t(batch) * C::max_positions);
        auto prefill = [&] {
            m.forward(blas, prompts, batch, zeros, logits.data(), gpu::LogitRows::last, stream);
            gpu::greedy_feedback(logits.data(), batch, C::vocab, prompt_len, m.device_tokens(), m.device_starts(),
                                 stream, history.data(), C::max_positions);
        };
        auto decode_step = [&] {
            m.enqueue(blas, batch, 1, logits.data(), gpu::LogitRows::last, stream);
            gpu::greedy_feedback(logits.data(), batch, C::vocab, 1, m.device_tokens(), m.device_starts(), stream,
                                 history.data(), C::max_positions);
        };
        prefill();
        decode_step();  // eager once before capturing
        gpu::Graph step = gpu::Graph::capture(stream, decode_step);
        m.check(stream);

        EventTimer timer;
        double total = 0, prefill_s = 0;
        for (auto _ : state) {
            timer.start(stream);
            prefill();
            const double p = timer.stop(stream);
            timer.start(stream);
            for (int s = 1; s < generated; ++s) step.launch(stream);
            const double d = timer.stop(stream);
            state.SetIterationTime(p + d);
            prefill_s += p;
            total += p + d;
        }
        m.check(stream);  // every step's ids and positions were valid
        Work work;
        work.tokens = double(batch) * generated;
        bench::set_counters(state, work, total);
        const double iters = double(state.iterations());
        state.counters["prefill_ms"] = prefill_s / iters * 1e3;
        state.counters["step_ms"] = (total - prefill_s) / iters / (generated - 1) * 1e3;
    })->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
}

void register_all() {
    using namespace presets;
    register_machine();
    // The issue's prefill case and its dense baseline, then the 187M model.
    constexpr auto tc = gpu::KernelChoice::tensor_cores();
    prefill<ComplexityDeep384M>("384M", 8, 2048);
    prefill<ComplexityDeep384M>("384M", 8, 2048, tc);
    prefill<ComplexityDeep384M>("384M", 1, 2048);
    for (int ctx : {128, 512, 2048}) decode<ComplexityDeep384M>("384M", ctx);
    decode<ComplexityDeep384M>("384M", 512, rows_off());
    decode<ComplexityDeep384M>("384M", 512, unsplit());
    prefill<ComplexityDense384M>("384M_dense", 8, 2048);
    prefill<ComplexityDense384M>("384M_dense", 8, 2048, tc);
    decode<ComplexityDense384M>("384M_dense", 512);
    prefill<ComplexityDeep187M>("187M", 8, 2048);
    for (int ctx : {128, 512, 2048}) decode<ComplexityDeep187M>("187M", ctx);
    decode<ComplexityDeep187M>("187M", 512, unsplit());
    // The row kernel's K split: automatic, off, and forced to 2, 4 and 8 ways, at 1, 4 and 16 sequences.
    for (int batch : {1, 4, 16})
        for (int split : {gpu::expert_row_split_auto, 1, 2, 4, 8}) {
            gpu::KernelChoice k = tc;
            k.expert_row_kernel_split = split;
            decode_batch<ComplexityDeep187M>("187M", batch, 512, gpu::default_expert_row_kernel_max, k);
        }
    // The row kernel's threshold: batches of 16 and 100 one-route tokens, each way.
    for (int batch : {16, 100})
        for (int rows_max : {0, 32, 128, 4096}) decode_batch<ComplexityDeep187M>("187M", batch, 512, rows_max, tc);
    for (int tokens : {32, 64, 128})
        for (int rows_max : {0, 1 << 20}) {
            gpu::KernelChoice k = tc;
            k.expert_row_kernel_max = rows_max;
            prefill<ComplexityDeep187M>("187M", 8, tokens, k);
        }
    generate<ComplexityDeep187M>("187M", 100, 128, 1900);
    generate<ComplexityDeep187M>("187M", 100, 128, 1900, tc);
    generate<ComplexityDeep187M>("187M", 100, 128, 1900, rows_off(tc));
    // The authors' later top-2 model (two routes per token, learned gates, per-call routing).
    prefill<TrMoe306>("tr-moe-306", 8, 2048);
    prefill<TrMoe306>("tr-moe-306", 8, 2048, tc);
    decode<TrMoe306>("tr-moe-306", 512);
    decode<TrMoe306>("tr-moe-306", 512, rows_off());
    decode<TrMoe306>("tr-moe-306", 512, unsplit());
    // Two routes per token: 200 rows at batch 100, above the default threshold.
    for (int rows_max : {0, 128, 256, 4096}) decode_batch<TrMoe306>("tr-moe-306", 100, 512, rows_max, tc);
    // Larger calls: 8 prompts of 16-128 tokens, 256-2048 (token, route) rows, row kernel on or off.
    for (int tokens : {16, 32, 64, 128})
        for (int rows_max : {0, 1 << 20}) {
            gpu::KernelChoice k = tc;
            k.expert_row_kernel_max = rows_max;
            prefill<TrMoe306>("tr-moe-306", 8, tokens, k);
        }
}

}  // namespace

int main(int argc, char** argv) {
    if (const auto why = gpu::no_device_reason(); !why.empty()) {
        std::printf("SKIPPED: no CUDA device available (%s); nothing to measure\n", why.c_str());
        return 77;
    }
    cudaDeviceProp prop{};
    CPX_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    benchmark::AddCustomContext("cpx_device", prop.name);
    benchmark::AddCustomContext("cpx_cuda_runtime", std::to_string(CUDART_VERSION));
    register_all();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}

// The GPU PRISM model against the CPU PRISM model (cpx::PrismModel) on the same
// random weights: whole sequences, chunked prefill and decode over the KV
// cache, bf16 storage, and a decode step captured in a CUDA graph.
#include <doctest/doctest.h>

#include <optional>

#include <cpx/cuda/runtime/graph.cuh>
#include <cpx/models/prism/model.cuh>

#include "cuda_test_support.cuh"
#include "graph_decode.cuh"
#include "packed_calls.cuh"
#include "prism_cpu_reference.hpp"
#include "test_support.hpp"

using namespace cpx;

namespace {

std::vector<std::int32_t> random_tokens(std::size_t n, int vocab, std::uint64_t seed) {
    const auto v = testing::random_ints(n, 0, vocab - 1, seed);
    return std::vector<std::int32_t>(v.begin(), v.end());
}

// Row r of a [rows, width] buffer.
std::vector<float> row(const std::vector<float>& v, std::size_t r, std::size_t width) {
    return std::vector<float>(v.begin() + r * width, v.begin() + (r + 1) * width);
}

template <class T>
testing::NamedTensors rounded_tensors(const testing::NamedTensors& w) {
    testing::NamedTensors out;
    for (const auto& [name, v] : w) out.emplace(name, testing::rounded<T>(v));
    return out;
}

// The GPU model's logits of `batch` whole sequences from position 0, every row.
template <class C, class T>
std::vector<float> gpu_logits(const testing::NamedTensors& w, const std::vector<std::int32_t>& tokens, int batch,
                              std::optional<cuda::KernelChoice> kernels = std::nullopt) {  // nullopt: the model's own
    cuda::Blas blas;
    cuda::PrismModel<C, T> model(testing::weights_from<PrismWeights<C>>(w), batch, static_cast<int>(tokens.size()));
    if (kernels) model.use_kernels(*kernels);
    auto logits = testing::poisoned_device<float>(tokens.size() * C::vocab);
    const std::vector<std::int32_t> starts(batch, 0);
    model.forward(blas, tokens, batch, starts, logits.data(), cuda::LogitRows::all, nullptr);
    model.check(nullptr);
    return logits.download();
}

template <class C>
void check_whole_sequences(std::uint64_t seed) {
    const auto w = testing::prism_weights<C>(seed);
    const int batch = 2, T = 20;
    const auto tokens = random_tokens(batch * T, C::vocab, seed + 1);
    // Both paths are fp32 and each is within ~1e-6 of a double reference (the CPU test's observation).
    CHECK(testing::relative_error(gpu_logits<C, float>(w, tokens, batch),
                                  testing::prism_cpu_logits<C>(w, tokens, batch)) < 1e-5);
}

}  // namespace

TEST_CASE("whole sequences: GPU logits equal the CPU model's (fp32 within 1e-5), head dims 32 and 64") {
    check_whole_sequences<testing::PrismTiny>(1);
    check_whole_sequences<testing::PrismWide>(2);
}

TEST_CASE("chunked prefill then decode over the KV cache reproduce each position's logits") {
    using C = testing::PrismTiny;
    const auto w = testing::prism_weights<C>(3);
    const int batch = 2, total = 30, V = C::vocab;
    const auto tokens = random_tokens(batch * total, V, 4);  // sequence b is tokens[b * total, (b + 1) * total)
    const auto want = testing::prism_cpu_logits<C>(w, tokens, batch);

    cuda::Blas blas;
    cuda::PrismModel<C, float> model(testing::weights_from<PrismWeights<C>>(w), batch, batch * 12);
    model.cache().poison();  // positions the model should not have written read as NaN
    auto logits = cuda::DeviceBuffer<float>(static_cast<std::size_t>(batch) * 12 * V);
    int pos = 0;
    for (int len : {12, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}) {  // two chunks, then ten decode steps
        std::vector<std::int32_t> chunk;
        for (int b = 0; b < batch; ++b)
            chunk.insert(chunk.end(), tokens.begin() + b * total + pos, tokens.begin() + b * total + pos + len);
        const std::vector<std::int32_t> starts(batch, pos);
        logits.fill_bytes(0xff);
        const auto which = len > 1 ? cuda::LogitRows::all : cuda::LogitRows::last;
        model.forward(blas, chunk, batch, starts, logits.data(), which, nullptr);
        model.check(nullptr);
        const auto got = logits.download();
        for (int b = 0; b < batch; ++b)
            for (int i = 0; i < len; ++i) {
                const int out_row = which == cuda::LogitRows::all ? b * len + i : b;
                CHECK_MESSAGE(testing::relative_error(row(got, out_row, V), row(want, b * total + pos + i, V)) < 1e-5,
                              "sequence ", b, " position ", pos + i);
            }
        pos += len;
    }
}

TEST_CASE("the last-row logits of a prefill are the last rows of the all-rows logits") {
    using C = testing::PrismWide;
    const auto w = testing::prism_weights<C>(5);
    const int batch = 3, T = 9;
    const auto tokens = random_tokens(batch * T, C::vocab, 6);
    const auto want = testing::prism_cpu_logits<C>(w, tokens, batch);
    cuda::Blas blas;
    cuda::PrismModel<C, float> model(testing::weights_from<PrismWeights<C>>(w), batch, batch * T);
    auto logits = testing::poisoned_device<float>(batch * C::vocab);
    model.forward(blas, tokens, batch, std::vector<std::int32_t>(batch, 0), logits.data(), cuda::LogitRows::last, nullptr);
    model.check(nullptr);
    const auto got = logits.download();
    for (int b = 0; b < batch; ++b)
        CHECK(testing::relative_error(row(got, b, C::vocab), row(want, b * T + T - 1, C::vocab)) < 1e-5);
}

// bf16 weights on both sides (the CPU model gets the same rounded values); the GPU additionally
// stores every activation except the residual stream in bf16: a few roundings of 2^-9 per layer.
TEST_CASE("bf16 storage stays within 2e-2 of the CPU model on the same rounded weights") {
    using C = testing::PrismTiny;
    const auto w = rounded_tensors<bf16>(testing::prism_weights<C>(7));
    const int batch = 2, T = 16;
    const auto tokens = random_tokens(batch * T, C::vocab, 8);
    CHECK(testing::relative_error(gpu_logits<C, bf16>(w, tokens, batch), testing::prism_cpu_logits<C>(w, tokens, batch)) <
          2e-2);
}

// Head dim 64: bf16 storage starts on the tensor-core attention (compute capability 8.0+).
TEST_CASE("bf16 at head dim 64: the default kernels and the SIMT ones stay within 2e-2 of the CPU model") {
    using C = testing::PrismWide;
    const auto w = rounded_tensors<bf16>(testing::prism_weights<C>(9));
    const int batch = 2, T = 24;
    const auto tokens = random_tokens(batch * T, C::vocab, 10);
    const auto want = testing::prism_cpu_logits<C>(w, tokens, batch);
    {
        const auto wt = testing::weights_from<PrismWeights<C>>(w);
        const cuda::PrismModel<C, bf16> model(wt, 1, 8);
        CHECK(model.kernels().attention ==
              (cuda::current_device().major >= 8 ? cuda::AttentionKernel::tensor_cores : cuda::AttentionKernel::simt));
    }
    CHECK(testing::relative_error(gpu_logits<C, bf16>(w, tokens, batch), want) < 2e-2);
    CHECK(testing::relative_error(gpu_logits<C, bf16>(w, tokens, batch, cuda::KernelChoice{}), want) < 2e-2);
}

TEST_CASE("a decode step captured in a CUDA graph replays correctly at every position") {
    using C = testing::PrismTiny;
    const auto w = testing::prism_weights<C>(9);
    const int batch = 2, prompt = 10, steps = 6, total = prompt + steps, V = C::vocab;
    const auto tokens = random_tokens(batch * total, V, 10);
    const auto want = testing::prism_cpu_logits<C>(w, tokens, batch);

    cuda::Blas blas;
    cuda::Stream stream;
    cuda::PrismModel<C, float> model(testing::weights_from<PrismWeights<C>>(w), batch, batch * prompt);
    cuda::DeviceBuffer<float> logits(static_cast<std::size_t>(batch) * prompt * V);
    logits.fill_bytes(0xff, stream);  // NaN: rows past the batch are downloaded but never written
    testing::check_graph_decode_steps(model, blas, stream, logits, tokens, want, batch, prompt, total);
}

TEST_CASE("invalid token ids and positions past the context are rejected on the host") {
    using C = testing::PrismTiny;
    const auto w = testing::prism_weights<C>(11);
    cuda::Blas blas;
    cuda::PrismModel<C, float> model(testing::weights_from<PrismWeights<C>>(w), 1, 8);
    cuda::DeviceBuffer<float> logits(8 * C::vocab);
    const std::vector<std::int32_t> bad = {1, C::vocab, 2};
    CHECK_THROWS_AS(model.forward(blas, bad, 1, std::vector<std::int32_t>{0}, logits.data(), cuda::LogitRows::all, nullptr),
                    InputError);
    const std::vector<std::int32_t> ok = {1, 2, 3};
    CHECK_THROWS_AS(model.forward(blas, ok, 1, std::vector<std::int32_t>{C::max_positions - 2}, logits.data(),
                                  cuda::LogitRows::all, nullptr),
                    InputError);
    CHECK_THROWS_AS(model.forward(blas, std::vector<std::int32_t>(9, 1), 1, std::vector<std::int32_t>{0}, logits.data(),
                                  cuda::LogitRows::all, nullptr),
                    ShapeError);
}

TEST_CASE("sequences of different lengths in one call, in named cache slots, give each sequence's logits") {
    using C = testing::PrismTiny;
    testing::check_packed_calls<cuda::PrismModel<C, float>>(testing::weights_from<PrismWeights<C>>(testing::prism_weights<C>(30)),
                                                            31);
}

#pragma once
// One check for both GPU model families: a prefill, one eager decode step, then
// decode steps replayed from a single captured CUDA graph (new tokens and
// positions set before each replay), each position's logits against the
// expected rows.

#include <doctest/doctest.h>

#include <cpx/cuda/runtime/blas.cuh>
#include <cpx/cuda/runtime/device_buffer.cuh>
#include <cpx/cuda/runtime/graph.cuh>
#include <cpx/models/logit_rows.cuh>

#include <cstdint>
#include <vector>

#include "test_support.hpp"

namespace cpx::testing {

/// Model: cuda::ComplexityModel<C, float> or cuda::PrismModel<C, float>, sized for `batch`
/// sequences; `tokens` holds sequence b at [b * total, (b + 1) * total) and `want` every
/// position's fp32 logits in the same order ([batch * total, vocab]); fp32 within 1e-5.
/// `logits` holds at least batch rows.
template <class Model>
void check_graph_decode_steps(Model& model, cuda::Blas& blas, cuda::Stream& stream, cuda::DeviceBuffer<float>& logits,
                              const std::vector<std::int32_t>& tokens, const std::vector<float>& want, int batch,
                              int prompt, int total) {
    const std::size_t V = Model::Config::vocab;
    auto tokens_at = [&](int pos, int len) {
        std::vector<std::int32_t> t;
        for (int b = 0; b < batch; ++b)
            t.insert(t.end(), tokens.begin() + b * total + pos, tokens.begin() + b * total + pos + len);
        return t;
    };
    auto row = [V](const std::vector<float>& v, std::size_t r) {
        return std::vector<float>(v.begin() + r * V, v.begin() + (r + 1) * V);
    };
    // The first decode step runs eagerly: it initialises everything the graph will use.
    model.forward(blas, tokens_at(0, prompt), batch, std::vector<std::int32_t>(batch, 0), logits.data(),
                  cuda::LogitRows::last, stream);
    model.forward(blas, tokens_at(prompt, 1), batch, std::vector<std::int32_t>(batch, prompt), logits.data(),
                  cuda::LogitRows::last, stream);
    model.check(stream);
    auto got = logits.download();
    for (int b = 0; b < batch; ++b) CHECK(relative_error(row(got, b), row(want, b * total + prompt)) < 1e-5);

    cuda::Graph step = cuda::Graph::capture(
        stream, [&] { model.enqueue(blas, batch, 1, logits.data(), cuda::LogitRows::last, stream); });
    for (int pos = prompt + 1; pos < total; ++pos) {
        logits.fill_bytes(0xff, stream);  // NaN: a replay that writes nothing shows
        model.set_inputs(tokens_at(pos, 1), batch, std::vector<std::int32_t>(batch, pos), stream);
        step.launch(stream);
        model.check(stream);
        got = logits.download();
        for (int b = 0; b < batch; ++b)
            CHECK_MESSAGE(relative_error(row(got, b), row(want, b * total + pos)) < 1e-5, "position ", pos);
    }
}

}  // namespace cpx::testing

#pragma once
// One check for both GPU model families: sequences of different lengths in one
// device call (packed rows, one of them empty in the second call), each in the
// cache slot it names, give the logits of each sequence run alone.

#include <doctest/doctest.h>

#include <cpx/cuda/runtime/blas.cuh>
#include <cpx/models/logit_rows.cuh>

#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda_test_support.cuh"
#include "test_support.hpp"

namespace cpx::testing {

/// Model: cuda::ComplexityModel<C, float> or cuda::PrismModel<C, float>; fp32 within 1e-5.
template <class Model, class Weights>
void check_packed_calls(const Weights& weights, std::uint64_t seed) {
    using C = typename Model::Config;
    const std::vector<std::int32_t> first = {7, 1, 12}, then = {3, 0, 2}, slots = {4, 0, 2};
    const int batch = 3;
    std::vector<std::vector<std::int32_t>> seq;
    for (int b = 0; b < batch; ++b) {
        const auto ids = random_ints(static_cast<std::size_t>(first[b] + then[b]), 0, C::vocab - 1, seed + b);
        seq.emplace_back(ids.begin(), ids.end());
    }
    cuda::Blas blas;
    std::vector<std::vector<float>> alone;  // each sequence by itself, every row
    for (const auto& s : seq) {
        Model m(weights, 1, static_cast<int>(s.size()));
        cuda::DeviceBuffer<float> logits(s.size() * C::vocab);
        m.forward(blas, s, 1, std::vector<std::int32_t>{0}, logits.data(), cuda::LogitRows::all, nullptr);
        m.check(nullptr);
        alone.push_back(logits.download());
    }
    auto alone_rows = [&](int b, int from, int n) {
        const auto& a = alone[static_cast<std::size_t>(b)];
        return std::vector<float>(a.begin() + static_cast<std::ptrdiff_t>(from) * C::vocab,
                                  a.begin() + static_cast<std::ptrdiff_t>(from + n) * C::vocab);
    };

    Model model(weights, batch, 32, 5);  // five cache slots: the call names 4, 0 and 2
    model.cache().poison();
    std::vector<std::int32_t> tokens;
    for (int b = 0; b < batch; ++b) tokens.insert(tokens.end(), seq[b].begin(), seq[b].begin() + first[b]);
    auto logits = poisoned_device<float>(tokens.size() * C::vocab);
    model.forward(blas, tokens, first, std::vector<std::int32_t>(batch, 0), slots, logits.data(),
                  cuda::LogitRows::all, nullptr);
    model.check(nullptr);
    const auto got = logits.download();
    int row = 0;
    for (int b = 0; b < batch; ++b) {
        const std::vector<float> part(got.begin() + static_cast<std::ptrdiff_t>(row) * C::vocab,
                                      got.begin() + static_cast<std::ptrdiff_t>(row + first[b]) * C::vocab);
        CHECK_MESSAGE(relative_error(part, alone_rows(b, 0, first[b])) < 1e-5, "sequence ", b);
        row += first[b];
    }

    // Each sequence goes on from its own cache slot; sequence 1 has no tokens this time (a NaN row).
    tokens.clear();
    for (int b = 0; b < batch; ++b)
        tokens.insert(tokens.end(), seq[b].begin() + first[b], seq[b].begin() + first[b] + then[b]);
    auto last = poisoned_device<float>(static_cast<std::size_t>(batch) * C::vocab);
    model.forward(blas, tokens, then, first, slots, last.data(), cuda::LogitRows::last, nullptr);
    model.check(nullptr);
    const auto got_last = last.download();
    for (int b = 0; b < batch; ++b) {
        const std::vector<float> r(got_last.begin() + static_cast<std::ptrdiff_t>(b) * C::vocab,
                                   got_last.begin() + static_cast<std::ptrdiff_t>(b + 1) * C::vocab);
        if (then[b] == 0) {
            CHECK(std::isnan(r[0]));
            continue;
        }
        CHECK_MESSAGE(relative_error(r, alone_rows(b, first[b] + then[b] - 1, 1)) < 1e-5, "sequence ", b);
    }

    // Refused on the host: two sequences in one slot, a slot the model does not have, lengths that miss tokens.
    CHECK_THROWS_AS(model.forward(blas, tokens, then, first, std::vector<std::int32_t>{4, 4, 2}, last.data(),
                                  cuda::LogitRows::last, nullptr),
                    InputError);
    CHECK_THROWS_AS(model.forward(blas, tokens, then, first, std::vector<std::int32_t>{4, 5, 2}, last.data(),
                                  cuda::LogitRows::last, nullptr),
                    InputError);
    CHECK_THROWS_AS(model.forward(blas, tokens, std::vector<std::int32_t>{3, 1, 2}, first, slots, last.data(),
                                  cuda::LogitRows::last, nullptr),
                    ShapeError);
}

}  // namespace cpx::testing

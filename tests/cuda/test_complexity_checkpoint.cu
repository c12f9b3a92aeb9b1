// Checkpoints onto the GPU through the one loader of each model family: every expert layout the CPU
// model accepts (split, fused, per-expert nn.Linear with a "model." prefix),
// sharded files, bf16 files kept bf16 on the device, and the same mismatch
// report as the CPU loader. The reference is the GPU model built from the
// same weights in memory: loading must not change one logit.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/checkpoint.cuh>
#include <cpx/models/prism/checkpoint.cuh>
#include <cpx/models/complexity/checkpoint.hpp>
#include <cpx/models/prism/checkpoint.hpp>
#include <cpx/models/seeded_normal.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint_rewrite.hpp"
#include "cuda_test_support.cuh"
#include "error_message.hpp"
#include "temp_dir.hpp"
#include "test_support.hpp"

using namespace cpx;
namespace gpu = cpx::cuda;  // CUB brings a global ::cuda namespace (libcu++)

namespace {

using Routed = presets::TinyComplexity;
using Learned = presets::TinyLearnedRouter;
using Dense = presets::TinyDense;

template <class C>
std::vector<std::int32_t> probe_tokens() {
    std::vector<std::int32_t> t;
    for (int i = 0; i < 2 * 9; ++i) t.push_back((i * 37 + 11) % C::vocab);
    return t;
}

/// Logits of two sequences of 9 tokens, every row, from either GPU model.
template <class Model>
std::vector<float> logits_of(Model& model) {
    using C = typename Model::Config;
    const auto tokens = probe_tokens<C>();
    gpu::Blas blas;
    model.cache().poison();
    auto logits = testing::poisoned_device<float>(tokens.size() * C::vocab);
    model.forward(blas, tokens, 2, std::vector<std::int32_t>{0, 0}, logits.data(), gpu::LogitRows::all, nullptr);
    model.check(nullptr);
    return logits.download();
}

template <class C, class W, class T>
std::vector<float> in_memory_logits(const ComplexityWeights<C, W>& w) {
    gpu::ComplexityModel<C, T> model(w, 2, 18);
    return logits_of(model);
}

template <class C, class T>
std::vector<float> loaded_logits(const std::filesystem::path& dir, CheckpointReport* report = nullptr) {
    auto model = gpu::load_complexity_model<C, T>(dir, 2, 18, report);
    return logits_of(model);
}

}  // namespace

TEST_CASE_TEMPLATE("a saved checkpoint loads onto the GPU to the logits of the same weights in memory", C, Routed,
                   Learned, Dense) {
    const auto w = ComplexityWeights<C>::random(31);
    testing::TempDir dir;
    save_complexity_checkpoint(w, dir.path());
    CheckpointReport report;
    CHECK(loaded_logits<C, float>(dir.path(), &report) == in_memory_logits<C, float, float>(w));
    CHECK(report.config_checked);
}

TEST_CASE("the fused and per-expert nn.Linear layouts, a model. prefix and shards load onto the GPU") {
    using C = Routed;
    const auto w = ComplexityWeights<C>::random(32);
    const auto want = in_memory_logits<C, float, float>(w);
    testing::TempDir base, fused, linear, sharded;
    save_complexity_checkpoint(w, base.path());
    const std::int64_t E = C::experts, d = C::hidden, I = C::expert_width;
    testing::rewrite(base.path(), fused.path(), testing::fuse_experts(E, d, I));
    const auto experts = testing::per_expert_linear(E, d, I, "model.");
    testing::rewrite(base.path(), linear.path(), [&](testing::Tensor& t, std::vector<testing::Tensor>& extra) {
        experts(t, extra);
        if (!t.name.empty()) t.name = "model." + t.name;
    });
    save_complexity_checkpoint(w, sharded.path(), /*max_shard_bytes=*/20000);

    CheckpointReport report;
    CHECK(loaded_logits<C, float>(fused.path(), &report) == want);
    CHECK(report.expert_layout == ExpertLayout::fused_input_major);
    CHECK(loaded_logits<C, float>(linear.path(), &report) == want);
    CHECK(report.expert_layout == ExpertLayout::per_expert_linear);
    CHECK(report.prefix == "model.");
    CHECK(loaded_logits<C, float>(sharded.path()) == want);
}

TEST_CASE("a bf16 checkpoint stays bf16 on the device: the same logits as the bf16 weights in memory") {
    using C = Routed;
    const auto w = convert_weights<bf16>(ComplexityWeights<C>::random(33));
    testing::TempDir dir;
    save_complexity_checkpoint(w, dir.path());
    CHECK(loaded_logits<C, bf16>(dir.path()) == in_memory_logits<C, bf16, bf16>(w));
}

TEST_CASE("a mismatched checkpoint fails on the GPU with the CPU loader's report") {
    testing::TempDir dir;
    save_complexity_checkpoint(ComplexityWeights<Dense>::random(34), dir.path());
    const std::string cpu = testing::message_of([&] { (void)load_complexity_checkpoint<Routed>(dir.path()); });
    const std::string gpu = testing::message_of([&] { (void)gpu::load_complexity_model<Routed, float>(dir.path(), 1, 8); });
    CHECK(cpu.find("config.json") != std::string::npos);
    CHECK(gpu == cpu);
}

TEST_CASE("a PRISM checkpoint (fp32 and bf16) loads onto the GPU to the logits of the same weights in memory") {
    using C = presets::TinyPrism;
    // Seeded normals in every tensor (U need not be orthogonal to test loading; its
    // orthogonal initialisation needs Eigen, which this GPU test does not parse).
    PrismWeights<C> w;
    std::vector<float> values;
    for (const auto& s : w.slots()) {
        SeededRandom rng(35, s.name);
        values.resize(static_cast<std::size_t>(s.elements()));
        for (float& v : values) v = s.init_value + 0.1f * static_cast<float>(rng.normal());
        s.assign(values);
    }
    testing::TempDir dir, dir16;
    save_prism_checkpoint(w, dir.path());
    gpu::PrismModel<C, float> in_memory(w, 2, 18);
    auto loaded = gpu::load_prism_model<C, float>(dir.path(), 2, 18);
    CHECK(logits_of(loaded) == logits_of(in_memory));

    const auto w16 = convert_weights<bf16>(w);
    save_prism_checkpoint(w16, dir16.path());
    gpu::PrismModel<C, bf16> in_memory16(w16, 2, 18);
    auto loaded16 = gpu::load_prism_model<C, bf16>(dir16.path(), 2, 18);
    CHECK(logits_of(loaded16) == logits_of(in_memory16));
}

// Saving and loading COMPLEXITY-DEEP checkpoints: round trips, every accepted
// layout, and every kind of bad checkpoint.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/io/safetensors_writer.hpp>
#include <cpx/models/complexity/checkpoint.hpp>
#include <cpx/models/complexity/model.hpp>
#include <cpx/models/layer_params_io.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "checkpoint_rewrite.hpp"
#include "complexity_test_weights.hpp"
#include "error_message.hpp"
#include "temp_dir.hpp"

using namespace cpx;
using cpx::testing::ends_with;
using cpx::testing::message_of;
using cpx::testing::rewrite;
using cpx::testing::Tensor;
using cpx::testing::TempDir;
namespace fs = std::filesystem;
using Routed = presets::TinyComplexity;
using Dense = presets::TinyDense;
using Learned = presets::TinyLearnedRouter;

namespace {
const std::vector<std::int64_t> probe = {5, 17, 200, 3, 3, 99, 256, 0, 42, 120, 7, 64};

template <class C, class W>
std::vector<float> logits_of(ComplexityWeights<C, W> w) {
    return ComplexityModel<C, W>(std::move(w)).forward(probe);
}
}  // namespace

TEST_CASE_TEMPLATE("a saved model reloads to identical weights and logits", C, Routed, Dense, Learned) {
    TempDir dir;
    auto w = cpx::testing::test_weights<C>(1);
    const auto want = logits_of(w);
    save_complexity_checkpoint(w, dir.path());
    CHECK(fs::exists(dir.path() / "config.json"));
    CheckpointReport report;
    auto loaded = load_complexity_checkpoint<C>(dir.path(), &report);
    CHECK(report.config_checked);
    CHECK(report.config_keys_not_interpreted.empty());
    for (int l = 0; l < C::layers; ++l) CHECK(loaded.layers[l].routes == w.layers[l].routes);
    CHECK(logits_of(std::move(loaded)) == want);
}

TEST_CASE("one checkpoint in every accepted layout, with and without the model. prefix, sharded or not: identical logits") {
    TempDir base, sharded;
    auto w = cpx::testing::test_weights<Routed>(21);
    const auto want = logits_of(w);
    save_complexity_checkpoint(w, base.path());
    save_complexity_checkpoint(w, sharded.path(), /*max_shard_bytes=*/60000);
    CHECK(fs::exists(sharded.path() / "model.safetensors.index.json"));
    CHECK(logits_of(load_complexity_checkpoint<Routed>(sharded.path())) == want);

    const std::int64_t E = Routed::experts, d = Routed::hidden, I = Routed::expert_width;
    struct Layout {
        const char* name;
        ExpertLayout expected;
        std::function<cpx::testing::TensorEdit(const std::string&)> edit;  // given the prefix
    };
    const Layout layouts[] = {
        {"split", ExpertLayout::split_input_major, [](const std::string&) { return cpx::testing::TensorEdit(); }},
        {"fused", ExpertLayout::fused_input_major, [&](const std::string&) { return cpx::testing::fuse_experts(E, d, I); }},
        {"per-expert", ExpertLayout::per_expert_linear,
         [&](const std::string& prefix) { return cpx::testing::per_expert_linear(E, d, I, prefix); }},
    };
    for (const Layout& layout : layouts)
        for (const std::string prefix : {"", "model."}) {
            CAPTURE(layout.name);
            CAPTURE(prefix);
            TempDir dir;
            const cpx::testing::TensorEdit edit = layout.edit(prefix);
            rewrite(base.path(), dir.path(), [&](Tensor& t, std::vector<Tensor>& extra) {
                const std::size_t before = extra.size();
                if (edit) edit(t, extra);
                if (!t.name.empty()) t.name = prefix + t.name;
                for (std::size_t i = before; i < extra.size(); ++i)
                    if (!extra[i].name.starts_with(prefix)) extra[i].name = prefix + extra[i].name;
            });
            CheckpointReport report;
            auto loaded = load_complexity_checkpoint<Routed>(dir.path(), &report);
            CHECK(report.expert_layout == layout.expected);
            CHECK(report.prefix == prefix);
            CHECK(logits_of(std::move(loaded)) == want);
        }
}

TEST_CASE("config.json keys the library does not know are reported, not silently dropped") {
    TempDir dir;
    save_complexity_checkpoint(cpx::testing::test_weights<Routed>(1), dir.path());
    std::string text;
    {
        std::ifstream in(dir.path() / "config.json");
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    text.insert(text.find('{') + 1, "\"lsh_routing\": true, \"router_jitter\": 0.1,");
    std::ofstream(dir.path() / "config.json") << text;
    CheckpointReport report;
    load_complexity_checkpoint<Routed>(dir.path(), &report);
    CHECK(report.config_keys_not_interpreted == std::vector<std::string>{"lsh_routing", "router_jitter"});
}

TEST_CASE("bf16 weights are saved as BF16 and reload exactly; a sharded save reloads too") {
    TempDir dir, sharded;
    auto w = convert_weights<bf16>(cpx::testing::test_weights<Routed>(2));
    const auto want = logits_of(w);
    save_complexity_checkpoint(w, dir.path());
    CHECK(io::Checkpoint::open(dir.path()).get("layers.0.mlp.gate_proj_w").dtype == DType::bf16);
    CHECK(logits_of(load_complexity_checkpoint<Routed, bf16>(dir.path())) == want);
    save_complexity_checkpoint(w, sharded.path(), 64 * 1024);
    CHECK(fs::exists(sharded.path() / "model.safetensors.index.json"));
    CHECK(logits_of(load_complexity_checkpoint<Routed, bf16>(sharded.path())) == want);
    // The same checkpoint into fp32 storage: the bf16 values widen exactly.
    const auto widened = logits_of(load_complexity_checkpoint<Routed, float>(dir.path()));
    CHECK(cpx::testing::relative_error(widened, want) < 1e-6);
}

TEST_CASE("a model initialised by the library saves and reloads to identical logits") {
    TempDir dir;
    auto w = ComplexityWeights<Routed>::random(1234);
    const auto want = logits_of(w);
    save_complexity_checkpoint(w, dir.path());
    CHECK(logits_of(load_complexity_checkpoint<Routed>(dir.path())) == want);
}

TEST_CASE("the fused gate_up_proj expert layout loads to the same logits") {
    TempDir dir, fused;
    auto w = cpx::testing::test_weights<Routed>(3);
    const auto want = logits_of(w);
    save_complexity_checkpoint(w, dir.path());
    const std::int64_t E = Routed::experts, d = Routed::hidden, I = Routed::expert_width;
    rewrite(dir.path(), fused.path(), cpx::testing::fuse_experts(E, d, I));
    CheckpointReport report;
    auto loaded = load_complexity_checkpoint<Routed>(fused.path(), &report);
    CHECK(report.expert_layout == ExpertLayout::fused_input_major);
    CHECK(logits_of(std::move(loaded)) == want);
    // One layer alone, through the same layout conversion.
    const auto layer = load_layer<TokenRoutedMlpParams<Routed>>(fused.path(), 2);
    CHECK(layer.gate_up == w.layers[2].mlp.gate_up);
    CHECK(layer.down == w.layers[2].mlp.down);
}

TEST_CASE("per-expert nn.Linear experts, a model. prefix, inv_freq and a tied lm_head load to the same logits") {
    TempDir dir, linear;
    auto w = cpx::testing::test_weights<Routed>(4);
    const auto want = logits_of(w);
    save_complexity_checkpoint(w, dir.path());
    const std::int64_t E = Routed::experts, d = Routed::hidden, I = Routed::expert_width;
    const auto experts = cpx::testing::per_expert_linear(E, d, I, "model.");
    rewrite(dir.path(), linear.path(), [&](Tensor& t, std::vector<Tensor>& extra) {
        experts(t, extra);
        if (t.name.empty()) return;
        if (t.name == "embed_tokens.weight") extra.push_back({"model.lm_head.weight", t.shape, t.f, {}});
        if (ends_with(t.name, "input_layernorm.weight")) {
            const std::string p = t.name.substr(0, t.name.size() - 22);
            extra.push_back({"model." + p + "self_attn.rotary_emb.inv_freq", {Routed::head_dim / 2},
                             std::vector<float>(Routed::head_dim / 2, 0.5f), {}});
        }
        t.name = "model." + t.name;
    });
    CheckpointReport report;
    auto loaded = load_complexity_checkpoint<Routed>(linear.path(), &report);
    CHECK(report.prefix == "model.");
    CHECK(report.expert_layout == ExpertLayout::per_expert_linear);
    CHECK(report.ignored.size() == Routed::layers + 1);
    CHECK(logits_of(std::move(loaded)) == want);
    // One layer alone, prefixed keys and per-expert tensors included.
    const auto layer = load_layer<TokenRoutedMlpParams<Routed>>(linear.path(), 1);
    CHECK(layer.gate_up == w.layers[1].mlp.gate_up);
    CHECK(layer.down == w.layers[1].mlp.down);
    CHECK(layer.shared_gate_up == w.layers[1].mlp.shared_gate_up);
    CHECK(load_layer<MuGqaAttentionParams<Routed>>(linear.path(), 0).qkv == w.layers[0].attention.qkv);
    CHECK(load_layer_routing<Routed>(linear.path(), 1) == w.layers[1].routes);
}

TEST_CASE("a dense checkpoint with the authors' unused mu_to_* tensors loads, ignoring them") {
    TempDir dir, with_mu;
    auto w = cpx::testing::test_weights<Dense>(5);
    const auto want = logits_of(w);
    save_complexity_checkpoint(w, dir.path());
    rewrite(dir.path(), with_mu.path(), [&](Tensor& t, std::vector<Tensor>& extra) {
        if (ends_with(t.name, "self_attn.q_proj.weight")) {
            const std::string p = t.name.substr(0, t.name.size() - 13);
            extra.push_back({p + "mu_to_q.weight", {Dense::q_width, Dense::hidden}, t.f, {}});
            extra.push_back({p + "mu_to_k.weight", {Dense::kv_width, Dense::hidden},
                             std::vector<float>(Dense::kv_width * Dense::hidden, 9.0f), {}});
            extra.push_back({p + "mu_to_v.weight", {Dense::kv_width, Dense::hidden},
                             std::vector<float>(Dense::kv_width * Dense::hidden, 9.0f), {}});
        }
    });
    CheckpointReport report;
    auto loaded = load_complexity_checkpoint<Dense>(with_mu.path(), &report);
    CHECK(report.ignored.size() == 3 * Dense::layers);
    CHECK(logits_of(std::move(loaded)) == want);
}

TEST_CASE("the learned-router checkpoint also loads from the split gate_proj_w layout") {
    TempDir dir, split;
    auto w = cpx::testing::test_weights<Learned>(6);
    const auto want = logits_of(w);
    save_complexity_checkpoint(w, dir.path());
    CHECK(io::Checkpoint::open(dir.path()).contains("layers.0.mlp.gate_up_proj"));
    const std::int64_t E = Learned::experts, d = Learned::hidden, I = Learned::expert_width;
    rewrite(dir.path(), split.path(), [&](Tensor& t, std::vector<Tensor>& extra) {
        if (ends_with(t.name, "mlp.gate_up_proj")) {
            const std::string p = t.name.substr(0, t.name.size() - 12);
            Tensor g{p + "gate_proj_w", {E, d, I}, std::vector<float>(E * d * I), {}}, u = g;
            u.name = p + "up_proj_w";
            for (std::int64_t r = 0; r < E * d; ++r)
                for (std::int64_t j = 0; j < I; ++j) {
                    g.f[r * I + j] = t.f[r * 2 * I + j];
                    u.f[r * I + j] = t.f[r * 2 * I + I + j];
                }
            extra.push_back(std::move(g));
            extra.push_back(std::move(u));
            t.name.clear();
        } else if (ends_with(t.name, "mlp.down_proj")) {
            t.name += "_w";
        }
    });
    CHECK(logits_of(load_complexity_checkpoint<Learned>(split.path())) == want);
}

TEST_CASE("routing tables: each layer keeps its own, values must be experts, int32 is accepted, absent uses the given table") {
    TempDir dir, differ, range, i32, none;
    auto w = cpx::testing::test_weights<Routed>(7);
    save_complexity_checkpoint(w, dir.path());
    CheckpointReport shared_report;
    (void)load_complexity_checkpoint<Routed>(dir.path(), &shared_report);
    CHECK(shared_report.routing_from_checkpoint);
    CHECK_FALSE(shared_report.routing_per_layer);
    // Layer-specific tables (the authors' later models) are loaded layer by layer.
    rewrite(dir.path(), differ.path(), [](Tensor& t, std::vector<Tensor>&) {
        if (t.name == "layers.2.mlp.token_to_expert") t.i[100] = (t.i[100] + 1) % Routed::experts;
    });
    CheckpointReport differ_report;
    const auto per_layer = load_complexity_checkpoint<Routed>(differ.path(), &differ_report);
    CHECK(differ_report.routing_per_layer);
    CHECK(per_layer.layers[2].routes[100] == (w.layers[2].routes[100] + 1) % Routed::experts);
    CHECK(per_layer.layers[1].routes == w.layers[1].routes);

    rewrite(dir.path(), range.path(), [](Tensor& t, std::vector<Tensor>&) {
        if (ends_with(t.name, "token_to_expert")) t.i[3] = Routed::experts;
    });
    const auto msg = message_of([&] { load_complexity_checkpoint<Routed>(range.path()); });
    CHECK(msg.find("token_to_expert' routes token 3 to expert 4, outside [0, 4)") != std::string::npos);
    CHECK_THROWS_AS(load_complexity_checkpoint<Routed>(range.path()), FormatError);

    {  // int32 tables
        const auto ckpt = io::Checkpoint::open(dir.path());
        io::SafetensorsWriter wr;
        for (const auto& name : ckpt.names()) {
            if (ends_with(name, "token_to_expert")) {
                const auto v = ckpt.read_vector<std::int32_t>(name);
                wr.add(name, {Routed::vocab}, v);
            } else {
                wr.add(name, ckpt.get(name).shape, ckpt.read_vector<float>(name));
            }
        }
        wr.write(i32.path() / "model.safetensors");
        fs::copy_file(dir.path() / "config.json", i32.path() / "config.json");
        CHECK(load_complexity_checkpoint<Routed>(i32.path()).layers[1].routes == w.layers[1].routes);
    }

    rewrite(dir.path(), none.path(), [](Tensor& t, std::vector<Tensor>&) {
        if (ends_with(t.name, "token_to_expert")) t.name.clear();
    });
    CheckpointReport report;
    const auto modulo = load_complexity_checkpoint<Routed>(none.path(), &report);
    CHECK_FALSE(report.routing_from_checkpoint);
    for (int t = 0; t < Routed::vocab; ++t) CHECK(modulo.layers[2].routes[t] == t % Routed::experts);
    std::vector<std::int32_t> given(Routed::vocab, 2);
    CHECK(load_complexity_checkpoint<Routed>(none.path(), nullptr, given).layers[0].routes == given);
}

TEST_CASE("a checkpoint with missing tensors and wrong shapes is reported in one error naming each") {
    TempDir dir, broken;
    save_complexity_checkpoint(cpx::testing::test_weights<Routed>(8), dir.path());
    rewrite(dir.path(), broken.path(), [](Tensor& t, std::vector<Tensor>& extra) {
        if (t.name == "layers.1.self_attn.k_norm.weight") t.name.clear();
        if (t.name == "norm.weight") {
            t.shape = {Routed::hidden - 1};
            t.f.pop_back();
        }
        if (t.name == "mu_init") extra.push_back({"layers.0.mystery", {2}, {1.0f, 2.0f}, {}});
    });
    const auto msg = message_of([&] { load_complexity_checkpoint<Routed>(broken.path()); });
    CHECK(msg.find("missing tensor 'layers.1.self_attn.k_norm.weight'") != std::string::npos);
    CHECK(msg.find("tensor 'norm.weight': expected shape [64], found [63]") != std::string::npos);
    CHECK(msg.find("unexpected tensor 'layers.0.mystery'") != std::string::npos);
    CHECK_THROWS_AS(load_complexity_checkpoint<Routed>(broken.path()), ShapeError);

    // A layer without its routed experts in any of the layouts read is named with the layouts.
    TempDir no_experts;
    rewrite(dir.path(), no_experts.path(), [](Tensor& t, std::vector<Tensor>&) {
        if (t.name.rfind("layers.1.mlp.", 0) == 0 && t.name.find("_proj_w") != std::string::npos) t.name.clear();
    });
    const auto missing = message_of([&] { load_complexity_checkpoint<Routed>(no_experts.path()); });
    CAPTURE(missing);
    CHECK(missing.find("layer 1: missing routed experts (expected layers.1.mlp.gate_proj_w/up_proj_w/down_proj_w") !=
          std::string::npos);
    CHECK_THROWS_AS(load_complexity_checkpoint<Routed>(no_experts.path()), ShapeError);
}

TEST_CASE("a weight stored as an integer dtype is rejected by name") {
    TempDir dir, bad;
    save_complexity_checkpoint(cpx::testing::test_weights<Routed>(9), dir.path());
    rewrite(dir.path(), bad.path(), [](Tensor& t, std::vector<Tensor>&) {
        if (t.name == "layers.0.mu_guidance.mu") t.i.assign(t.f.size(), 1), t.f.clear();
    });
    const auto msg = message_of([&] { load_complexity_checkpoint<Routed>(bad.path()); });
    CHECK(msg.find("layers.0.mu_guidance.mu") != std::string::npos);
    CHECK(msg.find("I64") != std::string::npos);
    CHECK_THROWS_AS(load_complexity_checkpoint<Routed>(bad.path()), Error);
}

TEST_CASE("a checkpoint of another configuration fails on config.json, listing the mismatches") {
    TempDir dir;
    save_complexity_checkpoint(cpx::testing::test_weights<Routed>(10), dir.path());
    const auto msg = message_of([&] { load_complexity_checkpoint<Dense>(dir.path()); });
    CHECK(msg.find("intermediate_size") != std::string::npos);
    CHECK(msg.find("mlp_type") != std::string::npos);
    CHECK_THROWS_AS(load_complexity_checkpoint<Dense>(dir.path()), ShapeError);
}

TEST_CASE("a checkpoint directory without config.json is an error unless allowed") {
    TempDir dir;
    auto w = cpx::testing::test_weights<Routed>(11);
    save_complexity_checkpoint(w, dir.path());
    fs::remove(dir.path() / "config.json");
    CHECK_THROWS_AS(load_complexity_checkpoint<Routed>(dir.path()), FormatError);
    CHECK(logits_of(load_complexity_checkpoint<Routed>(dir.path(), nullptr, {}, LoadOptions{.require_config = false})) ==
          logits_of(w));
}

TEST_CASE("a truncated or lying safetensors file is a FormatError") {
    TempDir dir;
    save_complexity_checkpoint(cpx::testing::test_weights<Routed>(12), dir.path());
    const fs::path file = dir.path() / "model.safetensors";
    std::string bytes;
    {
        std::ifstream in(file, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    {
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 100));
    }
    CHECK_THROWS_AS(load_complexity_checkpoint<Routed>(dir.path()), FormatError);
    {  // the header claims a tensor ends past the data: shift the first "data_offsets":[a,b] end
        std::string lying = bytes;
        const auto at = lying.find("\"data_offsets\":[0,");
        REQUIRE(at != std::string::npos);
        lying.replace(at + 18, 1, "9");
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out.write(lying.data(), static_cast<std::streamsize>(lying.size()));
    }
    CHECK_THROWS_AS(load_complexity_checkpoint<Routed>(dir.path()), FormatError);
}

TEST_CASE("an lm_head.weight that differs from the embedding is an error") {
    TempDir dir, bad;
    save_complexity_checkpoint(cpx::testing::test_weights<Routed>(13), dir.path());
    rewrite(dir.path(), bad.path(), [](Tensor& t, std::vector<Tensor>& extra) {
        if (t.name == "embed_tokens.weight") {
            Tensor head{"lm_head.weight", t.shape, t.f, {}};
            head.f[77] += 1.0f;
            extra.push_back(std::move(head));
        }
    });
    const auto msg = message_of([&] { load_complexity_checkpoint<Routed>(bad.path()); });
    CHECK(msg.find("lm_head.weight") != std::string::npos);
    CHECK(msg.find("element 77") != std::string::npos);
    CHECK_THROWS_AS(load_complexity_checkpoint<Routed>(bad.path()), Error);
}

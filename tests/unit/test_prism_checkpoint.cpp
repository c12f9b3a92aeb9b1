// PRISM checkpoints: nanoGPT names in safetensors plus a GPTConfig config.json;
// round trips and every defect a user can meet.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/io/prism_config_json.hpp>
#include <cpx/models/prism/checkpoint.hpp>
#include <cpx/models/prism/model.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "temp_dir.hpp"
#include "test_support.hpp"

using namespace cpx;
using cpx::testing::TempDir;

namespace {

using Tiny = presets::TinyPrism;

const std::vector<std::int64_t> probe_tokens{5, 17, 99, 0, 42, 42, 8, 100, 3, 61, 7, 2};

PrismWeights<Tiny> tiny_weights(std::uint64_t seed) {
    auto w = PrismWeights<Tiny>::random(seed);
    float lambda = 0.02f;
    for (auto& l : w.layers) l.lambda = (lambda *= 3.0f);
    for (auto& v : w.ln_f_bias) v = 0.01f;
    return w;
}

std::vector<float> logits_of(const PrismWeights<Tiny>& w, const std::vector<std::int64_t>& tokens) {
    PrismModel<Tiny> model(w);
    return model.forward(tokens);
}

/// A checkpoint tensor as the tests build files from: name, shape, fp32 values.
struct Named {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> values;
};

/// Writes a checkpoint directory from the slots of `w`, letting `each` decide
/// what each tensor becomes (dropped, reshaped, renamed) and `extra` add more.
void write_custom(const TempDir& dir, const PrismWeights<Tiny>& w,
                  const std::function<void(const Named&, io::SafetensorsWriter&)>& each,
                  const std::function<void(io::SafetensorsWriter&)>& extra = {}) {
    io::SafetensorsWriter writer;
    for (const auto& s : w.slots()) {
        Named t{s.name, s.shape, std::vector<float>(static_cast<std::size_t>(s.elements()))};
        s.extract(t.values);
        each(t, writer);
    }
    if (extra) extra(writer);
    writer.write(dir / "model.safetensors");
    dir.write("config.json", io::prism_config_json<Tiny>());
}

void add_as_is(const Named& t, io::SafetensorsWriter& writer) { writer.add<float>(t.name, t.shape, t.values); }

std::string load_error(const TempDir& dir) {
    try {
        load_prism_checkpoint<Tiny>(dir.path());
    } catch (const Error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("save then load gives identical weights and identical logits") {
    TempDir dir;
    const auto w = tiny_weights(1);
    save_prism_checkpoint(w, dir.path());
    CHECK(std::filesystem::exists(dir / "config.json"));
    const auto back = load_prism_checkpoint<Tiny>(dir.path());
    CHECK(back.wte == w.wte);
    CHECK(back.layers[1].u == w.layers[1].u);
    CHECK(back.layers[1].lambda == w.layers[1].lambda);
    CHECK(back.layers[0].c_proj_bias == w.layers[0].c_proj_bias);
    CHECK(logits_of(back, probe_tokens) == logits_of(w, probe_tokens));
}

TEST_CASE("config.json keys the library does not know are reported to the caller") {
    TempDir dir;
    save_prism_checkpoint(tiny_weights(3), dir.path());
    std::string text;
    {
        std::ifstream in(dir / "config.json");
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    text.insert(text.find('{') + 1, "\"flash\": true,");
    std::ofstream(dir / "config.json") << text;
    std::vector<std::string> keys;
    load_prism_checkpoint<Tiny>(dir.path(), &keys);
    CHECK(keys == std::vector<std::string>{"flash"});
}

TEST_CASE("config.json holds the GPTConfig keys of the compiled configuration") {
    TempDir dir;
    save_prism_checkpoint(tiny_weights(2), dir.path());
    const auto c = io::read_prism_config(dir / "config.json");
    CHECK(c.n_layer == 2);
    CHECK(c.n_head == 2);
    CHECK(c.n_embd == 32);
    CHECK(c.vocab_size == 101);
    CHECK(c.block_size == 48);
    CHECK(c.bias == true);
    CHECK(c.prism_expansion_ratio == 2);
    CHECK(*c.prism_freq_multiplier == doctest::Approx(3.1415926535));
}

TEST_CASE("bf16 weights save their matrices as BF16 and load back exactly, into bf16 or fp32 storage") {
    TempDir dir;
    const auto w = tiny_weights(3);
    const auto w16 = convert_weights<bf16>(w);
    save_prism_checkpoint(w16, dir.path());
    const auto ckpt = io::Checkpoint::open(dir.path());
    CHECK(ckpt.get("transformer.h.0.mlp.c_fc.weight").dtype == DType::bf16);
    CHECK(ckpt.get("transformer.h.0.mlp.c_fc.bias").dtype == DType::f32);
    CHECK(ckpt.get("transformer.h.1.attn.lambda_q").dtype == DType::f32);
    const auto as16 = load_prism_checkpoint<Tiny, bf16>(dir.path());
    const auto as32 = load_prism_checkpoint<Tiny>(dir.path());
    for (std::size_t i = 0; i < w.layers[0].c_fc_weight.size(); i += 97) {
        CHECK(as16.layers[0].c_fc_weight[i].bits == w16.layers[0].c_fc_weight[i].bits);
        CHECK(as32.layers[0].c_fc_weight[i] == bf16::from_float(w.layers[0].c_fc_weight[i]).to_float());
    }
    CHECK(as32.layers[1].lambda == w.layers[1].lambda);
    // The bf16 model computes in fp32 from the rounded values: the fp32 model of
    // the same values, up to the summation order of its widened-panel products.
    PrismModel<Tiny, bf16> m16(as16);
    CHECK(testing::relative_error(m16.forward(probe_tokens), logits_of(as32, probe_tokens)) < 1e-5);
}

TEST_CASE("convert_weights rounds every tensor's matrix values to bf16 and converts back exactly") {
    const auto w = tiny_weights(5);
    const auto back = convert_weights<float>(convert_weights<bf16>(w));
    const auto src = w.slots();
    const auto dst = back.slots();
    REQUIRE(src.size() == dst.size());
    for (std::size_t i = 0; i < src.size(); ++i) {
        CAPTURE(src[i].name);
        REQUIRE(dst[i].name == src[i].name);
        std::vector<float> a(static_cast<std::size_t>(src[i].elements())), b(a.size());
        src[i].extract(a);
        dst[i].extract(b);
        // Matrices are stored as W (rounded to bf16), vectors and lambda stay fp32.
        for (float& v : a)
            if (src[i].w) v = bf16::from_float(v).to_float();
        CHECK(a == b);
    }
}

TEST_CASE("copy_slots refuses lists of other tensors before copying any") {
    const auto w = tiny_weights(6);
    PrismWeights<Tiny, bf16> to;
    const auto src = w.slots();
    auto dst = to.slots();
    CHECK_THROWS_WITH_AS(copy_slots(src, std::vector(dst.begin() + 1, dst.end())), doctest::Contains("tensors into"),
                         ShapeError);
    std::swap(dst[1], dst[2]);
    CHECK_THROWS_WITH_AS(copy_slots(src, dst), doctest::Contains("another name or shape"), ShapeError);
    CHECK(std::all_of(to.wpe.begin(), to.wpe.end(), [](bf16 v) { return v.to_float() == 0.0f; }));
}

TEST_CASE("lm_head.weight is optional, may stand in for wte, and must equal wte when both exist") {
    const auto w = tiny_weights(4);
    const auto want = logits_of(w, probe_tokens);
    {
        TempDir dir;  // both names, same values (a tied nanoGPT state dict)
        save_prism_checkpoint(w, dir.path(), 0, /*write_lm_head=*/true);
        CHECK(io::Checkpoint::open(dir.path()).contains("lm_head.weight"));
        CHECK(logits_of(load_prism_checkpoint<Tiny>(dir.path()), probe_tokens) == want);
    }
    {
        TempDir dir;  // only lm_head.weight: an exporter that kept one name of the shared tensor
        write_custom(dir, w, [](const Named& t, io::SafetensorsWriter& wr) {
            if (t.name == "transformer.wte.weight") wr.add<float>("lm_head.weight", t.shape, t.values);
            else add_as_is(t, wr);
        });
        CHECK(logits_of(load_prism_checkpoint<Tiny>(dir.path()), probe_tokens) == want);
    }
    {
        TempDir dir;  // an untied head cannot be represented
        auto head = w.wte;
        head[7] += 1.0f;
        write_custom(dir, w, add_as_is, [&](io::SafetensorsWriter& wr) {
            wr.add<float>("lm_head.weight", {Tiny::vocab, Tiny::hidden}, std::vector<float>(head.begin(), head.end()));
        });
        const auto msg = load_error(dir);
        CHECK(msg.find("lm_head.weight differs from transformer.wte.weight in 1 of 3232 elements (first at 7)") !=
              std::string::npos);
    }
}

TEST_CASE("the causal mask buffers attn.bias are ignored") {
    TempDir dir;
    const auto w = tiny_weights(5);
    write_custom(dir, w, add_as_is, [](io::SafetensorsWriter& wr) {
        const int b = Tiny::max_positions;
        std::vector<float> mask(std::size_t(b) * b);
        for (int i = 0; i < b; ++i)
            for (int j = 0; j <= i; ++j) mask[i * b + j] = 1.0f;
        for (int l = 0; l < Tiny::layers; ++l)
            wr.add<float>("transformer.h." + std::to_string(l) + ".attn.bias", {1, 1, b, b}, mask);
    });
    CHECK(logits_of(load_prism_checkpoint<Tiny>(dir.path()), probe_tokens) == logits_of(w, probe_tokens));
}

TEST_CASE("missing, misshapen and unknown tensors are all named in one error") {
    TempDir dir;
    write_custom(
        dir, tiny_weights(6),
        [](const Named& t, io::SafetensorsWriter& wr) {
            if (t.name == "transformer.h.1.mlp.c_fc.bias") return;  // missing
            if (t.name == "transformer.h.0.attn.u_proj.weight") {   // transposed
                wr.add<float>(t.name, {t.shape[1], t.shape[0]}, t.values);
                return;
            }
            add_as_is(t, wr);
        },
        [](io::SafetensorsWriter& wr) { wr.add<float>("transformer.h.2.ln_1.weight", {32}, std::vector<float>(32)); });
    const auto msg = load_error(dir);
    CHECK(msg.find("3 problems") != std::string::npos);
    CHECK(msg.find("missing tensor 'transformer.h.1.mlp.c_fc.bias'") != std::string::npos);
    CHECK(msg.find("tensor 'transformer.h.0.attn.u_proj.weight': expected shape [128, 32], found [32, 128]") !=
          std::string::npos);
    CHECK(msg.find("unexpected tensor 'transformer.h.2.ln_1.weight'") != std::string::npos);
    CHECK_THROWS_AS(load_prism_checkpoint<Tiny>(dir.path()), ShapeError);
}

TEST_CASE("lambda_q must be a finite scalar") {
    TempDir dir;
    write_custom(dir, tiny_weights(7), [](const Named& t, io::SafetensorsWriter& wr) {
        if (t.name == "transformer.h.1.attn.lambda_q") wr.add<float>(t.name, {}, std::vector<float>{NAN});
        else add_as_is(t, wr);
    });
    CHECK(load_error(dir).find("transformer.h.1.attn.lambda_q is not finite") != std::string::npos);
    TempDir dir2;
    write_custom(dir2, tiny_weights(7), [](const Named& t, io::SafetensorsWriter& wr) {
        if (t.name == "transformer.h.0.attn.lambda_q") wr.add<float>(t.name, {2}, std::vector<float>{0.1f, 0.2f});
        else add_as_is(t, wr);
    });
    CHECK(load_error(dir2).find("tensor 'transformer.h.0.attn.lambda_q': expected shape [], found [2]") !=
          std::string::npos);
}

TEST_CASE("config.json must exist and every mismatch with the compiled configuration is named") {
    TempDir dir;
    save_prism_checkpoint(tiny_weights(8), dir.path());
    std::filesystem::remove(dir / "config.json");
    CHECK(load_error(dir).find("has no config.json") != std::string::npos);
    CHECK_THROWS_AS(load_prism_checkpoint<Tiny>(dir.path()), FormatError);

    dir.write("config.json", R"({"n_layer": 2, "n_head": 4, "n_embd": 32, "vocab_size": 101, "block_size": 64,
                                 "bias": true, "prism_expansion_ratio": 2, "prism_freq_multiplier": 2.0,
                                 "dropout": 0.1, "prism_lambda_start": 0.01, "prism_lambda_end": 0.1})");
    const auto msg = load_error(dir);
    CHECK(msg.find("3 problems") != std::string::npos);
    CHECK(msg.find("n_head: checkpoint 4, compiled 2") != std::string::npos);
    CHECK(msg.find("block_size: checkpoint 64, compiled 48") != std::string::npos);
    CHECK(msg.find("prism_freq_multiplier: checkpoint 2") != std::string::npos);
    CHECK_THROWS_AS(load_prism_checkpoint<Tiny>(dir.path()), ShapeError);
}

TEST_CASE("a checkpoint of another PRISM size fails on its shapes even with a matching config") {
    using Other = PrismConfig<PrismDims{.n_layer = 2, .n_head = 2, .n_embd = 16, .vocab_size = 101, .block_size = 48}>;
    TempDir dir;
    save_prism_checkpoint(PrismWeights<Other>::random(9), dir.path());
    dir.write("config.json", io::prism_config_json<Tiny>());
    const auto msg = load_error(dir);
    CHECK(msg.find("tensor 'transformer.wte.weight': expected shape [101, 32], found [101, 16]") != std::string::npos);
}

TEST_CASE("a directory without model files is a clear error") {
    TempDir dir;
    dir.write("config.json", io::prism_config_json<Tiny>());
    CHECK(load_error(dir).find("holds neither model.safetensors nor model.safetensors.index.json") !=
          std::string::npos);
}

TEST_CASE("a sharded checkpoint loads like a single file") {
    TempDir dir;
    const auto w = tiny_weights(10);
    save_prism_checkpoint(w, dir.path(), /*max_shard_bytes=*/20000);
    CHECK(std::filesystem::exists(dir / "model.safetensors.index.json"));
    CHECK(logits_of(load_prism_checkpoint<Tiny>(dir.path()), probe_tokens) == logits_of(w, probe_tokens));
}

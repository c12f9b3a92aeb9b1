// Copies and moves of every type that owns buffers: a copy owns its own
// storage and holds no view into its source, so it keeps working after the
// source is destroyed (AddressSanitizer in the sanitizer build would report a
// use after free otherwise); types that must not be copied do not compile as
// copies; moves keep working.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/cpu/kernels/attention_distance.hpp>
#include <cpx/io/checkpoint.hpp>
#include <cpx/io/mapped_file.hpp>
#include <cpx/io/safetensors_file.hpp>
#include <cpx/models/complexity/checkpoint.hpp>
#include <cpx/models/complexity/model.hpp>
#include <cpx/models/complexity/observers.hpp>
#include <cpx/models/generation.hpp>
#include <cpx/models/layer_params_io.hpp>
#include <cpx/models/prism/model.hpp>
#include <cpx/models/prism/weights.hpp>

#include <filesystem>
#include <memory>
#include <type_traits>
#include <unistd.h>

#include "complexity_test_weights.hpp"
#include "test_support.hpp"

using namespace cpx;
namespace fs = std::filesystem;

namespace {
const std::vector<std::int64_t> prompt = {5, 17, 100, 3, 3, 99, 42, 0, 7};

/// A model copied (and copy-assigned, and moved) from one that is then
/// destroyed still computes the source's logits.
template <class Model>
void check_model_copies(typename Model::Weights weights) {
    auto source = std::make_unique<Model>(std::move(weights));
    const std::vector<float> want = source->forward(prompt);  // the source has run: its workspaces are sized
    Model copy(*source);
    auto other = std::make_unique<Model>(*source);
    Model assigned(*other);
    assigned = *source;
    source.reset();
    other.reset();
    CHECK(copy.forward(prompt) == want);
    CHECK(assigned.forward(prompt) == want);
    Model moved(std::move(copy));
    CHECK(moved.forward(prompt) == want);
    Model move_assigned(moved);
    move_assigned = std::move(moved);
    CHECK(move_assigned.forward(prompt) == want);
}
}  // namespace

TEST_CASE_TEMPLATE("a model copied from one that is then destroyed computes the same logits", Model,
                   ComplexityModel<presets::TinyComplexity>, ComplexityModel<presets::TinyComplexity, bf16, bf16>,
                   ComplexityModel<presets::TinyDense>, ComplexityModel<presets::TinyLearnedRouter>,
                   ComplexityModel<presets::TinyComplexityPrism>, PrismModel<presets::TinyPrism>,
                   PrismModel<presets::TinyPrism, bf16, bf16>) {
    check_model_copies<Model>(Model::Weights::random(3));
}

TEST_CASE("a routed model's copy routes by its own table (the source's is freed)") {
    using C = presets::TinyComplexity;
    auto w = cpx::testing::test_weights<C>(4);  // a random routing table, not t mod E
    auto source = std::make_unique<ComplexityModel<C>>(w);
    const auto want = source->forward(prompt);
    ComplexityModel<C> copy = *source;
    source.reset();
    CHECK(copy.forward(prompt) == want);
    for (int l = 0; l < C::layers; ++l) CHECK(copy.weights().layers[l].routes == w.layers[l].routes);
}

TEST_CASE("a copy starts with no observers; a move keeps them") {
    using C = presets::TinyComplexity;
    ComplexityModel<C> source(ComplexityWeights<C>::random(5));
    ExpertLoad<C> load;
    source.attach(load);
    ComplexityModel<C> copy(source);
    (void)copy.forward(prompt);
    index_t seen = 0;
    for (const auto& layer : load.tokens)
        for (index_t n : layer) seen += n;
    CHECK(seen == 0);
    ComplexityModel<C> moved(std::move(source));
    (void)moved.forward(prompt);
    for (const auto& layer : load.tokens)
        for (index_t n : layer) seen += n;
    CHECK(seen == static_cast<index_t>(prompt.size()) * C::layers);
}

TEST_CASE("a KV cache copied mid-generation continues like the original after the original is gone") {
    using C = presets::TinyComplexity;
    ComplexityModel<C> model(ComplexityWeights<C>::random(6));
    auto cache = std::make_unique<KVCache<C>>(32);
    std::vector<float> logits(C::vocab);
    model.extend(*cache, prompt, LogitsAt::last, cpu::rows_of(logits.data(), 1, C::vocab));
    KVCache<C> copy = *cache;
    KVCache<C> reference = *cache;
    cache.reset();
    const std::int64_t next[] = {11};
    std::vector<float> a(C::vocab), b(C::vocab);
    KVCache<C>* ca[] = {&copy};
    KVCache<C>* cb[] = {&reference};
    model.decode(ca, next, cpu::rows_of(a.data(), 1, C::vocab));
    model.decode(cb, next, cpu::rows_of(b.data(), 1, C::vocab));
    CHECK(a == b);
    CHECK(copy.length() == static_cast<index_t>(prompt.size()) + 1);
    KVCache<C> moved(std::move(copy));
    CHECK(moved.length() == static_cast<index_t>(prompt.size()) + 1);
}

TEST_CASE("weights and layer parameters copy deeply") {
    using C = presets::TinyComplexity;
    auto source = std::make_unique<ComplexityWeights<C>>(ComplexityWeights<C>::random(7));
    const ComplexityWeights<C> copy = *source;
    const auto want = ComplexityModel<C>(*source).forward(prompt);
    source.reset();
    CHECK(ComplexityModel<C>(copy).forward(prompt) == want);

    auto params = std::make_unique<TokenRoutedMlpParams<C>>(random_layer<TokenRoutedMlpParams<C>>(7, 1));
    const TokenRoutedMlpParams<C> params_copy = *params;
    const auto view = cpu_view(params_copy);
    CHECK(view.experts.gate_up == params_copy.gate_up.data());
    CHECK(view.experts.gate_up != params->gate_up.data());
    params.reset();
    CHECK(params_copy.down == random_layer<TokenRoutedMlpParams<C>>(7, 1).down);

    auto prism = std::make_unique<PrismWeights<presets::TinyPrism>>(PrismWeights<presets::TinyPrism>::random(8));
    const auto prism_copy = *prism;
    const auto prism_want = PrismModel<presets::TinyPrism>(*prism).forward(prompt);
    prism.reset();
    CHECK(PrismModel<presets::TinyPrism>(prism_copy).forward(prompt) == prism_want);
}

TEST_CASE("a layer object copied after use keeps its own workspaces") {
    using C = presets::TinyComplexity;
    const auto params = random_layer<TokenRoutedMlpParams<C>>(9, 0);
    const auto table = modulo_routing<C>();
    const TokenRouting routing(table, C::experts);
    const int N = 21;
    const auto x = cpx::testing::random_normal(N * C::hidden, 10);
    const auto tokens = cpx::testing::random_tokens(N, C::vocab, 11);
    std::vector<float> want(N * C::hidden, 0.0f), got(N * C::hidden, 0.0f);
    auto source = std::make_unique<cpu::TokenRoutedMlp<C, float>>();
    source->forward(cpu_view(params), cpu::rows_of<const float>(x.data(), N, C::hidden), tokens, routing,
                    cpu::rows_of(want.data(), N, C::hidden));
    cpu::TokenRoutedMlp<C, float> copy = *source;
    source.reset();
    copy.forward(cpu_view(params), cpu::rows_of<const float>(x.data(), N, C::hidden), tokens, routing,
                 cpu::rows_of(got.data(), N, C::hidden));
    CHECK(got == want);
}

// Types that hold a mapping, or that observers point into, are not copyable.
static_assert(!std::is_copy_constructible_v<io::MappedFile> && std::is_nothrow_move_constructible_v<io::MappedFile>);
static_assert(!std::is_copy_constructible_v<io::SafetensorsFile> && std::is_move_constructible_v<io::SafetensorsFile>);
static_assert(!std::is_copy_constructible_v<io::Checkpoint> && std::is_move_constructible_v<io::Checkpoint>);
static_assert(!std::is_copy_constructible_v<cpu::AttentionDistance>);

TEST_CASE("a checkpoint moved out of a destroyed holder still reads its tensors") {
    const fs::path dir = fs::temp_directory_path() / ("cpx_values_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    using C = presets::TinyComplexity;
    const auto w = ComplexityWeights<C>::random(12);
    save_complexity_checkpoint(w, dir);
    auto holder = std::make_unique<io::Checkpoint>(io::Checkpoint::open(dir));
    io::Checkpoint moved(std::move(*holder));
    holder.reset();
    std::vector<float> embed(static_cast<std::size_t>(C::vocab) * C::hidden);
    moved.read("embed_tokens.weight", std::span<float>(embed));
    CHECK(embed[123] == w.embed_tokens[123]);
    fs::remove_all(dir);
}

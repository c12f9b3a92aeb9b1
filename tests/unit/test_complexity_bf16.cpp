// COMPLEXITY-DEEP models with packed arithmetic against the double-precision
// reference, for every MLP kind, top-k routing and PRISM attention: bf16
// arithmetic (Compute::bf16) with fp32 and bf16 stored weights, and fp32 on
// packed weights (Compute::fp32_packed).
//
// Bound: each product rounds its inputs and weights to bf16 (relative error up
// to 2^-8 each, random in sign, so a dot product of n terms errs by about
// 2^-8 / sqrt(n) of its magnitude, 2^-7 at worst); the tiny models chain ~10
// products and norms that do not amplify. Measured: ~4e-3 relative to the
// largest logit. The check allows 3e-2, the bound the bf16-stored-weights test
// of test_complexity_model.cpp uses for the same rounding of the weights alone.
#include <doctest/doctest.h>

#include <cpx/config/model_counts.hpp>
#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/model.hpp>

#include "complexity_reference.hpp"
#include "complexity_test_weights.hpp"
#include "last_rows_check.hpp"
#include "test_support.hpp"

using namespace cpx;
using cpx::testing::random_tokens;
using cpx::testing::reference_logits;
using cpx::testing::reference_weights;
using cpx::testing::relative_error;
using cpx::testing::test_weights;

namespace {
bool have_bf16_level() {
    if (cpu::best_bf16_level() != cpu::Bf16Level::none) return true;
    MESSAGE("skipped: this machine has no bf16 level (neither bf16 instructions nor AVX2 and FMA: ", cpu::cpu_features().summary(),
            "); Compute::bf16 runs fp32 there");
    return false;
}
bool have_packed_fp32() {
    if (cpu::gemm_f32_packed_available()) return true;
    MESSAGE("skipped: this machine has neither AVX-512 nor AVX2 and FMA (", cpu::cpu_features().summary(),
            "); Compute::fp32_packed runs fp32 there");
    return false;
}
}  // namespace

TEST_CASE_TEMPLATE("bf16 arithmetic: logits within the bf16 bound of the double reference", C,
                   presets::TinyComplexity, presets::TinyTopK, presets::TinyDense, presets::TinyLearnedRouter,
                   presets::TinyComplexityPrism) {
    if (!have_bf16_level()) return;
    auto weights = test_weights<C>(7);
    const auto ref = reference_weights(weights);
    ComplexityModel<C> fp32(weights);
    ComplexityModel<C> model(std::move(weights), cpu::Compute::bf16);
    CHECK(model.compute() == cpu::Compute::bf16);
    CHECK(model.bf16_level() == cpu::best_bf16_level());
    CHECK(model.packed_bytes() > 0);
    const auto tokens = random_tokens(40, C::vocab, 8);
    const auto want = reference_logits<C>(ref, tokens);
    const auto got = model.forward(tokens);
    const double err = relative_error(got, want);
    MESSAGE("bf16 arithmetic, relative error ", err);
    CHECK(err < 3e-2);
    // The products did run in bf16: fp32 arithmetic is ~1e-6 from the reference.
    CHECK(relative_error(fp32.forward(tokens), want) < 1e-4);
    CHECK(err > 1e-4);
}

TEST_CASE("bf16 arithmetic with bf16-stored weights: the packs are the stored values") {
    using C = presets::TinyComplexity;
    if (!have_bf16_level()) return;
    auto weights = convert_weights<bf16>(test_weights<C>(9));
    const auto ref = reference_weights(weights);
    ComplexityModel<C, bf16> model(std::move(weights), cpu::Compute::bf16);
    const auto tokens = random_tokens(33, C::vocab, 10);
    CHECK(relative_error(model.forward(tokens), reference_logits<C>(ref, tokens)) < 3e-2);
}

TEST_CASE("packed arithmetic covers few-row calls (decode) too, and can be switched off") {
    using C = presets::TinyComplexity;
    const auto weights = test_weights<C>(11);
    const auto ref = reference_weights(weights);
    ComplexityModel<C> fp32(weights);
    for (const auto& [compute, bound] : {std::pair{cpu::Compute::bf16, 3e-2}, std::pair{cpu::Compute::fp32_packed, 1e-4}}) {
        const std::string_view arithmetic = cpu::compute_name(compute);  // CAPTURE's lambda cannot take a binding (clang < 16)
        CAPTURE(arithmetic);
        if (compute == cpu::Compute::bf16 ? !have_bf16_level() : !have_packed_fp32()) continue;
        ComplexityModel<C> model(weights, compute);
        for (const std::size_t rows : {1, 2, 8}) {
            CAPTURE(rows);
            const auto few = random_tokens(rows, C::vocab, 12 + rows);
            const auto got = model.forward(few);
            CHECK(got != fp32.forward(few));  // the packed kernel ran
            CHECK(relative_error(got, reference_logits<C>(ref, few)) < bound);
        }
        const auto many = random_tokens(30, C::vocab, 13);
        CHECK(model.forward(many) != fp32.forward(many));
        model.set_compute(cpu::Compute::fp32);
        CHECK(model.packed_bytes() == 0);
        CHECK(model.bf16_level() == cpu::Bf16Level::none);
        CHECK(model.forward(many) == fp32.forward(many));
    }
}

// On packed weights whose query block ends on a panel (q_width 64 here), a call finishing a
// few rows projects the keys and values alone for every row and the queries for those rows
// alone; the caches must still be those of a call finishing every row, bit for bit.
TEST_CASE_TEMPLATE("packed arithmetic: a prefill returning the last logits or none fills the caches as one returning every row",
                   C, presets::TinyComplexity, presets::TinyTopK, presets::TinyLearnedRouter) {
    static_assert(C::q_width % cpu::packed_panel_cols == 0, "the case needs the split query projection");
    for (const cpu::Compute compute : {cpu::Compute::bf16, cpu::Compute::fp32_packed}) {
        CAPTURE(cpu::compute_name(compute));
        if (compute == cpu::Compute::bf16 ? !have_bf16_level() : !have_packed_fp32()) continue;
        ComplexityModel<C> model(test_weights<C>(18), compute);
        cpx::testing::check_last_rows_prefill<KVCache<C>>(model, C::vocab, C::layers, 19,
                                                          compute == cpu::Compute::bf16 ? 3e-2 : 1e-5);
    }
}

TEST_CASE("bf16 arithmetic through the KV cache: a bf16 prefill, then decode steps, match the reference") {
    using C = presets::TinyComplexity;
    if (!have_bf16_level()) return;
    auto weights = test_weights<C>(16);
    const auto ref = reference_weights(weights);
    ComplexityModel<C> model(std::move(weights), cpu::Compute::bf16);
    const auto tokens = random_tokens(36, C::vocab, 17);
    const auto want = reference_logits<C>(ref, tokens);
    KVCache<C> cache(64);
    std::vector<float> got(tokens.size() * C::vocab);
    const std::size_t prompt = 30;  // one bf16 prefill, then 6 decode steps, in bf16 too
    model.extend(cache, std::span(tokens).first(prompt), LogitsAt::all, cpu::rows_of(got.data(), prompt, C::vocab));
    for (std::size_t i = prompt; i < tokens.size(); ++i)
        model.extend(cache, std::span(tokens).subspan(i, 1), LogitsAt::all,
                     cpu::rows_of(got.data() + i * C::vocab, 1, C::vocab));
    CHECK(relative_error(got, want) < 3e-2);
}

TEST_CASE("bf16 arithmetic: a copied model owns its packs") {
    using C = presets::TinyDense;
    if (!have_bf16_level()) return;
    std::vector<float> want;
    const auto tokens = random_tokens(25, C::vocab, 14);
    ComplexityModel<C> copy(test_weights<C>(1));
    {
        ComplexityModel<C> model(test_weights<C>(15), cpu::Compute::bf16);
        want = model.forward(tokens);
        copy = model;
    }
    CHECK(copy.packed_bytes() > 0);
    CHECK(copy.forward(tokens) == want);
}

// fp32 on packed weights computes the same sums as Eigen's fp32 products in
// another order: both are ~1e-6 from the double reference (the fp32 tolerance
// of test_complexity_model.cpp is 1e-4), and they differ from each other by
// rounding alone.
TEST_CASE_TEMPLATE("fp32_packed arithmetic: logits within the fp32 tolerance of the double reference", C,
                   presets::TinyComplexity, presets::TinyTopK, presets::TinyDense, presets::TinyLearnedRouter,
                   presets::TinyComplexityPrism) {
    if (!have_packed_fp32()) return;
    auto weights = test_weights<C>(27);
    const auto ref = reference_weights(weights);
    ComplexityModel<C> fp32(weights);
    ComplexityModel<C> model(std::move(weights), cpu::Compute::fp32_packed);
    CHECK(model.compute_runs() == cpu::Compute::fp32_packed);
    CHECK(model.bf16_level() == cpu::Bf16Level::none);
    CHECK(model.packed_bytes() > 0);
    const auto tokens = random_tokens(40, C::vocab, 28);
    const auto want = reference_logits<C>(ref, tokens);
    const auto got = model.forward(tokens);
    const double err = relative_error(got, want);
    MESSAGE("fp32_packed arithmetic, relative error ", err);
    CHECK(err < 1e-4);
    const auto eigen = fp32.forward(tokens);
    CHECK(relative_error(got, eigen) < 1e-5);
    CHECK(got != eigen);  // the packed kernel ran: another summation order
}

TEST_CASE("fp32_packed arithmetic through the KV cache, with bf16-stored weights, and switched back") {
    using C = presets::TinyComplexity;
    if (!have_packed_fp32()) return;
    auto weights = convert_weights<bf16>(test_weights<C>(29));
    const auto ref = reference_weights(weights);
    ComplexityModel<C, bf16> model(weights, cpu::Compute::fp32_packed);
    // bf16 weights keep bf16 panels (widened by the kernel): half the bytes of an fp32 model's packs.
    CHECK(2 * model.packed_bytes() == ComplexityModel<C>(test_weights<C>(29), cpu::Compute::fp32_packed).packed_bytes());
    const auto tokens = random_tokens(36, C::vocab, 30);
    const auto want = reference_logits<C>(ref, tokens);
    KVCache<C> cache(64);
    std::vector<float> got(tokens.size() * C::vocab);
    const std::size_t prompt = 30;
    model.extend(cache, std::span(tokens).first(prompt), LogitsAt::all, cpu::rows_of(got.data(), prompt, C::vocab));
    for (std::size_t i = prompt; i < tokens.size(); ++i)
        model.extend(cache, std::span(tokens).subspan(i, 1), LogitsAt::all,
                     cpu::rows_of(got.data() + i * C::vocab, 1, C::vocab));
    CHECK(relative_error(got, want) < 1e-4);
    ComplexityModel<C, bf16> plain(std::move(weights));
    model.set_compute(cpu::Compute::fp32);
    CHECK(model.packed_bytes() == 0);
    CHECK(model.forward(tokens) == plain.forward(tokens));
}

TEST_CASE("arithmetic names: fp32, fp32_packed and bf16 parse, others are errors naming the choices") {
    CHECK(cpu::parse_compute("fp32") == cpu::Compute::fp32);
    CHECK(cpu::parse_compute("fp32_packed") == cpu::Compute::fp32_packed);
    CHECK(cpu::compute_name(cpu::Compute::fp32_packed) == "fp32_packed");
    CHECK(cpu::parse_compute("bf16") == cpu::Compute::bf16);
    CHECK_THROWS_WITH_AS(cpu::parse_compute("fp16"), "unknown arithmetic 'fp16': expected fp32, fp32_packed or bf16",
                         InputError);
}

namespace {
/// Logits of a 30-token prefill through the KV cache and 6 decode steps after it.
template <class Model>
std::vector<float> prefill_then_decode(Model& model, std::span<const std::int64_t> tokens) {
    using C = typename Model::Config;
    KVCache<C> cache(64);
    std::vector<float> got(tokens.size() * C::vocab);
    const std::size_t prompt = 30;
    model.extend(cache, tokens.first(prompt), LogitsAt::all, cpu::rows_of(got.data(), prompt, C::vocab));
    for (std::size_t i = prompt; i < tokens.size(); ++i)
        model.extend(cache, tokens.subspan(i, 1), LogitsAt::all, cpu::rows_of(got.data() + i * C::vocab, 1, C::vocab));
    return got;
}
}  // namespace

// Under packed arithmetic every product reads the packs, so the stored matrices can go: the
// released model must compute bit for bit what it computed before (a read of a freed matrix
// would fault, or be caught by the sanitizer build, which gives every weight its own allocation).
TEST_CASE_TEMPLATE("released stored matrices: the packs alone give the same logits, prefill and decode", C,
                   presets::TinyComplexity, presets::TinyTopK, presets::TinyDense, presets::TinyLearnedRouter,
                   presets::TinyComplexityPrism) {
    for (const cpu::Compute compute : {cpu::Compute::bf16, cpu::Compute::fp32_packed}) {
        CAPTURE(cpu::compute_name(compute));
        if (compute == cpu::Compute::bf16 ? !have_bf16_level() : !have_packed_fp32()) continue;
        ComplexityModel<C> model(test_weights<C>(31), compute);
        const auto tokens = random_tokens(36, C::vocab, 32);
        const auto forward = model.forward(tokens);
        const auto decoded = prefill_then_decode(model, tokens);
        const std::size_t packs = model.packed_bytes();
        CHECK_FALSE(model.stored_matrices_released());
        const std::size_t freed = model.release_stored_matrices();
        CHECK(model.stored_matrices_released());
        // Every matrix but the embedding (and the learned router's [E, d]) was freed.
        const std::size_t embedding = sizeof(float) * C::vocab * C::hidden;
        std::size_t matrices = sizeof(float) * static_cast<std::size_t>(live_parameter_count<C>()) - embedding;
        if constexpr (C::mlp == MlpKind::learned_router) matrices -= sizeof(float) * C::layers * C::experts * C::hidden;
        if constexpr (C::attention == AttentionKind::prism) {
            using Attention = cpu::PrismAttention<PrismAttentionOf<C>>;
            if (Attention::decode_reads_stored_u(compute))  // batch-1 decode rows read U as stored (AVX-512)
                matrices -= sizeof(float) * C::layers * Attention::width * C::hidden;
        }
        CHECK(freed <= matrices);
        CHECK(freed > matrices * 9 / 10);  // the rest: norms, mu_init, gates (not matrices)
        CHECK(model.packed_bytes() == packs);
        CHECK(model.forward(tokens) == forward);
        CHECK(prefill_then_decode(model, tokens) == decoded);
        CHECK(model.release_stored_matrices() == 0);  // once is all
        // Released layer by layer while packing, from the start: the same packs and logits.
        ComplexityModel<C> direct(test_weights<C>(31));
        direct.set_compute(compute, StoredMatrices::release);
        CHECK(direct.stored_matrices_released());
        CHECK(direct.packed_bytes() == packs);
        CHECK(direct.forward(tokens) == forward);
        CHECK(prefill_then_decode(direct, tokens) == decoded);
        // And once packed already: the packs stay, the stored matrices go.
        ComplexityModel<C> later(test_weights<C>(31), compute);
        later.set_compute(compute, StoredMatrices::release);
        CHECK(later.stored_matrices_released());
        CHECK(later.forward(tokens) == forward);
        // A copy holds the packs alone as well.
        const ComplexityModel<C> copy = model;
        CHECK(copy.stored_matrices_released());
        CHECK(ComplexityModel<C>(copy).forward(tokens) == forward);
    }
}

TEST_CASE("released stored matrices with bf16-stored weights: the same logits from the bf16 packs") {
    using C = presets::TinyComplexity;
    if (!have_bf16_level()) return;
    ComplexityModel<C, bf16> model(convert_weights<bf16>(test_weights<C>(33)), cpu::Compute::bf16);
    const auto tokens = random_tokens(36, C::vocab, 34);
    const auto decoded = prefill_then_decode(model, tokens);
    CHECK(model.release_stored_matrices() > 0);
    CHECK(prefill_then_decode(model, tokens) == decoded);
}

TEST_CASE("released stored matrices: what needs them is an InputError, what does not still works") {
    using C = presets::TinyComplexity;
    ComplexityModel<C> plain(test_weights<C>(35));
    CHECK_THROWS_WITH_AS(plain.release_stored_matrices(),
                         doctest::Contains("the products run in fp32 on the stored matrices"), InputError);
    CHECK_THROWS_WITH_AS(plain.set_compute(cpu::Compute::fp32, StoredMatrices::release),
                         doctest::Contains("the products run in fp32 on the stored matrices"), InputError);
    CHECK_FALSE(plain.stored_matrices_released());
    CHECK(plain.weights().slots().size() > 0);
    if (!have_bf16_level()) return;
    ComplexityModel<C> model(test_weights<C>(35), cpu::Compute::bf16);
    const auto tokens = random_tokens(20, C::vocab, 36);
    const auto want = model.forward(tokens);
    (void)model.release_stored_matrices();
    // Another kind of arithmetic would need new packs, made from the stored matrices.
    CHECK_THROWS_WITH_AS(model.set_compute(cpu::Compute::fp32), doctest::Contains("released its stored matrices"),
                         InputError);
    CHECK_THROWS_AS(model.set_compute(cpu::Compute::fp32_packed), InputError);
    CHECK(model.compute() == cpu::Compute::bf16);
    model.set_compute(cpu::Compute::bf16);  // the same packs: kept
    CHECK(model.forward(tokens) == want);
    // Reading, saving, converting or uploading the weights needs their matrices.
    CHECK_THROWS_WITH_AS(model.weights().slots(), doctest::Contains("were released"), InputError);
    CHECK_THROWS_AS(convert_weights<bf16>(model.weights()), InputError);
    // The routing tables and vectors are still there.
    CHECK(model.weights().routing(0).experts() == C::experts);
    CHECK(model.weights().norm.size() == static_cast<std::size_t>(C::hidden));
}

// Decoding through a KV cache allocates nothing per token: every global
// operator new in this program is counted.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/model.hpp>

#include <atomic>
#include <cstdlib>
#include <new>

#include "complexity_test_weights.hpp"
#include "counted_new.hpp"

using cpx::testing::allocations;

using namespace cpx;

template <class C, class W, class KV>
void check_decode_allocates_nothing() {
    ComplexityModel<C, W, KV> model(cpx::testing::test_weights<C, W>(1));
    KVCache<C, KV> a(C::max_positions), b(C::max_positions);
    const auto prompt = cpx::testing::random_tokens(12, C::vocab, 2);
    std::vector<float> logits(2 * C::vocab);
    KVCache<C, KV>* caches[] = {&a, &b};
    const std::span<const std::int64_t> prompts[] = {prompt, std::span(prompt).first(7)};
    model.extend(caches, prompts, LogitsAt::last, cpu::rows_of(logits.data(), 2, C::vocab));
    std::int64_t next[] = {5, 9};
    model.decode(caches, next, cpu::rows_of(logits.data(), 2, C::vocab));  // first step may size buffers
    const long before = allocations.load();
    for (int step = 0; step < 20; ++step) {
        next[0] = (next[0] * 31 + step) % C::vocab;
        next[1] = (next[1] * 17 + step) % C::vocab;
        model.decode(caches, next, cpu::rows_of(logits.data(), 2, C::vocab));
        KVCache<C, KV>* one[] = {&a};
        model.decode(one, std::span<const std::int64_t>(next, 1), cpu::rows_of(logits.data(), 1, C::vocab));
    }
    CHECK(allocations.load() == before);
    CHECK(a.length() == 12 + 1 + 40);
}

TEST_CASE_TEMPLATE("decode steps allocate nothing once the model has run a step", C, presets::TinyComplexity,
                   presets::TinyDense, presets::TinyLearnedRouter) {
    check_decode_allocates_nothing<C, float, float>();
}

TEST_CASE("decode with bf16 weights and a bf16 cache allocates nothing either") {
    check_decode_allocates_nothing<presets::TinyComplexity, bf16, bf16>();
}

TEST_CASE("the counter sees allocations") {
    const long before = allocations.load();
    static std::vector<int>* volatile escaped = nullptr;  // the compiler may not elide this pair
    escaped = new std::vector<int>(100);
    delete escaped;
    CHECK(allocations.load() >= before + 2);
}

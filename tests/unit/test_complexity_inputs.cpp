// Bad input to the COMPLEXITY-DEEP model gets an exception that names the
// problem, and leaves the caches as they were.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/model.hpp>

#include <string>

#include "complexity_test_weights.hpp"
#include "error_message.hpp"

using namespace cpx;
using C = presets::TinyComplexity;
using cpx::testing::message_of;

TEST_CASE("token ids outside the vocabulary are an error naming the id and its position") {
    ComplexityModel<C> model(cpx::testing::test_weights<C>(1));
    const std::vector<std::int64_t> high = {1, 2, C::vocab}, negative = {-1};
    CHECK_THROWS_AS(model.forward(high), InputError);
    const auto msg = message_of([&] { model.forward(high); });
    CHECK(msg.find("257") != std::string::npos);
    CHECK(msg.find("position 2") != std::string::npos);
    CHECK_THROWS_AS(model.forward(negative), InputError);
}

TEST_CASE("a sequence longer than the context is an error") {
    ComplexityModel<C> model(cpx::testing::test_weights<C>(2));
    const auto tokens = cpx::testing::random_tokens(C::max_positions + 1, C::vocab, 3);
    CHECK_THROWS_AS(model.forward(tokens), InputError);
    CHECK(message_of([&] { model.forward(tokens); }).find("context") != std::string::npos);
}

TEST_CASE("a KV cache that is too small is an error and is left unchanged") {
    ComplexityModel<C> model(cpx::testing::test_weights<C>(3));
    KVCache<C> cache(8);
    const auto first = cpx::testing::random_tokens(6, C::vocab, 4), more = cpx::testing::random_tokens(3, C::vocab, 5);
    std::vector<float> logits(6 * C::vocab);
    model.extend(cache, first, LogitsAt::all, cpu::rows_of(logits.data(), 6, C::vocab));
    CHECK_THROWS_AS(model.extend(cache, more, LogitsAt::all, cpu::rows_of(logits.data(), 3, C::vocab)), InputError);
    CHECK(cache.length() == 6);
    CHECK_THROWS_AS(KVCache<C>(C::max_positions + 1), InputError);
    CHECK_THROWS_AS(KVCache<C>(0), InputError);
}

TEST_CASE("a failed call leaves the cache usable: the next call matches an untouched cache") {
    ComplexityModel<C> model(cpx::testing::test_weights<C>(4));
    KVCache<C> used(16), fresh(16);
    const auto prompt = cpx::testing::random_tokens(5, C::vocab, 6);
    std::vector<float> a(5 * C::vocab), b(5 * C::vocab);
    const std::vector<std::int64_t> bad = {3, C::vocab + 5};
    CHECK_THROWS_AS(model.extend(used, bad, LogitsAt::all, cpu::rows_of(a.data(), 2, C::vocab)), InputError);
    model.extend(used, prompt, LogitsAt::all, cpu::rows_of(a.data(), 5, C::vocab));
    model.extend(fresh, prompt, LogitsAt::all, cpu::rows_of(b.data(), 5, C::vocab));
    CHECK(a == b);
}

TEST_CASE("a logits buffer of the wrong shape is an error") {
    ComplexityModel<C> model(cpx::testing::test_weights<C>(5));
    const auto tokens = cpx::testing::random_tokens(4, C::vocab, 7);
    const std::span<const std::int64_t> batch[] = {tokens};
    std::vector<float> logits(4 * C::vocab);
    CHECK_THROWS_AS(model.forward(batch, LogitsAt::all, cpu::rows_of(logits.data(), 3, C::vocab)), ShapeError);
    CHECK_THROWS_AS(model.forward(batch, LogitsAt::last, cpu::rows_of(logits.data(), 4, C::vocab)), ShapeError);
}

TEST_CASE("batch calls reject mismatched caches and empty sequences asked for a last position") {
    ComplexityModel<C> model(cpx::testing::test_weights<C>(6));
    KVCache<C> cache(16);
    const auto tokens = cpx::testing::random_tokens(2, C::vocab, 8);
    const std::span<const std::int64_t> two[] = {tokens, tokens};
    KVCache<C>* one[] = {&cache};
    KVCache<C>* same[] = {&cache, &cache};
    std::vector<float> logits(4 * C::vocab);
    CHECK_THROWS_AS(model.extend(one, two, LogitsAt::all, cpu::rows_of(logits.data(), 4, C::vocab)), InputError);
    CHECK_THROWS_AS(model.extend(same, two, LogitsAt::all, cpu::rows_of(logits.data(), 4, C::vocab)), InputError);
    const std::span<const std::int64_t> empty[] = {std::span<const std::int64_t>{}};
    CHECK_THROWS_AS(model.forward(empty, LogitsAt::last, cpu::rows_of(logits.data(), 1, C::vocab)), InputError);
    CHECK(cache.length() == 0);
}

// Running out of memory while a model is made, converted, packed or run is an exception the
// caller can catch (std::bad_alloc), never an abort, even where the work runs on OpenMP threads
// (an exception leaving a parallel region would end the process), and leaves nothing half done
// behind: each allocation in turn is made to fail (counted_new.hpp) until the work succeeds,
// whose results must then equal those made without failures. The sanitizer build checks that
// the failed attempts leak nothing.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/model.hpp>
#include <cpx/models/prism/model.hpp>

#include <new>
#include <vector>

#include "complexity_test_weights.hpp"
#include "counted_new.hpp"
#include "error_message.hpp"

using namespace cpx;

namespace {

/// Runs work() with its k-th allocation failing, for k = 1, 2, ... until it completes; every
/// attempt that fails must fail with std::bad_alloc. Returns the attempts that failed.
template <class Work>
long with_each_allocation_failing(Work&& work) {
    for (long k = 1;; ++k) {
        testing::fail_allocation(k);
        try {
            work();
            testing::fail_no_allocation();
            return k - 1;
        } catch (const std::bad_alloc&) {
            testing::fail_no_allocation();
        } catch (const std::exception& e) {
            testing::fail_no_allocation();
            FAIL("allocation ", k, " failing gave another exception: ", e.what());
        }
    }
}

const std::vector<std::int64_t> oom_prompt{3, 17, 42, 5, 99, 7};

/// The model made by make(): the logits of the prompt in one pass, then those of the prompt
/// prefilled into a cache and of one token decoded after it.
template <class Make>
std::vector<float> run_and_decode(Make&& make) {
    auto model = make();
    using Model = decltype(model);
    constexpr index_t vocab = Model::Config::vocab;
    std::vector<float> logits = model.forward(oom_prompt);
    typename Model::Cache cache(16);
    std::vector<float> step(2 * vocab);
    model.extend(cache, oom_prompt, LogitsAt::last, cpu::rows_of(step.data(), 1, vocab));
    const std::int64_t next = 11;
    typename Model::Cache* caches[] = {&cache};
    model.decode(caches, std::span(&next, 1), cpu::rows_of(step.data() + vocab, 1, vocab));
    logits.insert(logits.end(), step.begin(), step.end());
    return logits;
}

/// make()'s run_and_decode with each of its allocations failing in turn (std::bad_alloc each
/// time), then once more to the end, which must give the logits it gives without failures.
template <class Make>
void check_fails_cleanly(Make&& make) {
    const std::vector<float> want = run_and_decode(make);
    std::vector<float> got;
    const long failures = with_each_allocation_failing([&] { got = run_and_decode(make); });
    CHECK(failures > 10);
    CHECK(got == want);
}

}  // namespace

TEST_CASE("an allocation failing while a COMPLEXITY-DEEP model is converted, packed, run or decoded: std::bad_alloc") {
    using C = presets::TinyComplexity;
    const ComplexityWeights<C, float> weights = testing::test_weights<C, float>(3);
    for (const cpu::Compute compute : {cpu::Compute::fp32, cpu::Compute::fp32_packed, cpu::Compute::bf16}) {
        CAPTURE(cpu::compute_name(compute));
        // Conversion copies the tensors on the threads; the model packs its layers on them.
        check_fails_cleanly([&] { return ComplexityModel<C, bf16, bf16>(convert_weights<bf16>(weights), compute); });
    }
}

TEST_CASE("an allocation failing while a PRISM model is initialised, packed, run or decoded: std::bad_alloc") {
    using C = presets::TinyPrism;
    for (const cpu::Compute compute : {cpu::Compute::fp32, cpu::Compute::bf16}) {
        CAPTURE(cpu::compute_name(compute));
        // Random weights are drawn on the threads (orthogonal U through Eigen's QR).
        check_fails_cleanly([&] { return PrismModel<C>(PrismWeights<C>::random(5), compute); });
    }
}

TEST_CASE("a release whose packing runs out of memory leaves a model that says to load the weights again") {
    using C = presets::TinyComplexity;
    if (cpu::runnable_compute(cpu::Compute::bf16) == cpu::Compute::fp32) {
        MESSAGE("skipped: no bf16 arithmetic on this machine (", cpu::cpu_features().summary(), ")");
        return;
    }
    const ComplexityWeights<C, bf16> weights = testing::test_weights<C, bf16>(4);
    const std::vector<float> want = [&] {
        ComplexityModel<C, bf16, bf16> model{ComplexityWeights<C, bf16>(weights)};
        model.set_compute(cpu::Compute::bf16, StoredMatrices::release);
        return model.forward(oom_prompt);
    }();
    long broken = 0;
    for (long k = 1;; ++k) {
        ComplexityModel<C, bf16, bf16> model{ComplexityWeights<C, bf16>(weights)};
        testing::fail_allocation(k);
        try {
            model.set_compute(cpu::Compute::bf16, StoredMatrices::release);
        } catch (const std::bad_alloc&) {
            testing::fail_no_allocation();
            ++broken;
            // Some layers' stored matrices may be freed, and no packs hold them.
            CHECK(model.stored_matrices_released());
            const std::string load_again = "packing failed while it released its stored matrices";
            CHECK(testing::message_of([&] { (void)model.forward(oom_prompt); }).find(load_again) != std::string::npos);
            CHECK(testing::message_of([&] { model.set_compute(cpu::Compute::fp32); }).find(load_again) !=
                  std::string::npos);
            CHECK(testing::message_of([&] { (void)model.release_stored_matrices(); }).find(load_again) !=
                  std::string::npos);
            continue;
        }
        testing::fail_no_allocation();
        CHECK(model.forward(oom_prompt) == want);
        break;
    }
    CHECK(broken > 5);
}

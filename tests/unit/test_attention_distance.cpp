// The mean-attention-distance observer on hand-made probability rows.
#include <doctest/doctest.h>

#include <cpx/cpu/kernels/attention_distance.hpp>

#include <thread>
#include <vector>

using namespace cpx;

TEST_CASE("a one-hot row at distance k contributes k; a uniform row over 0..i contributes i/2") {
    cpu::AttentionDistance stats(2, 3);
    auto obs = stats.layer(1);
    std::vector<float> onehot(10, 0.0f);
    onehot[6] = 1.0f;
    obs(0, 9, onehot.data(), 10);  // position 9 attends to 6: distance 3
    std::vector<float> uniform(9, 1.0f / 9);
    obs(2, 8, uniform.data(), 9);  // mean of 8..0 = 4
    obs(2, 0, uniform.data(), 1);  // position 0 can only look at itself: 0
    CHECK(stats.mean(1, 0) == doctest::Approx(3.0));
    CHECK(stats.mean(1, 2) == doctest::Approx(2.0));
    CHECK(stats.queries(1, 2) == 2);
    CHECK(stats.queries(0, 0) == 0);
    CHECK(stats.mean(0, 0) == 0.0);
    // Group means weight every query equally: (3 + 4 + 0) / 3.
    CHECK(stats.group_mean(1, 0, 3) == doctest::Approx(7.0 / 3.0));
    stats.reset();
    CHECK(stats.queries(1, 0) == 0);
}

TEST_CASE("concurrent observer calls lose no updates") {
    cpu::AttentionDistance stats(1, 2);
    const std::vector<float> row{0.0f, 1.0f, 0.0f};  // position 2 attends to 1
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t)
        pool.emplace_back([&, t] {
            auto obs = stats.layer(0);
            for (int i = 0; i < 1000; ++i) obs(t % 2, 2, row.data(), 3);
        });
    for (auto& th : pool) th.join();
    CHECK(stats.queries(0, 0) == 2000);
    CHECK(stats.queries(0, 1) == 2000);
    CHECK(stats.mean(0, 1) == doctest::Approx(1.0));
}

TEST_CASE("layer and head indices outside the table are errors") {
    cpu::AttentionDistance stats(2, 4);
    CHECK_THROWS_AS(stats.layer(2), InputError);
    CHECK_THROWS_AS(stats.mean(0, 4), InputError);
    CHECK_THROWS_AS(cpu::AttentionDistance(0, 4), ShapeError);
}

// How the CPU layers start threads (cpu/runtime/parallel.hpp): every index once under each
// schedule, small work and nested calls on the calling thread, a team's phases kept apart by
// team_barrier, and the claims behind Schedule::ranges_then_rest.
#include <doctest/doctest.h>

#include <cpx/cpu/runtime/parallel.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace cpx;
using cpu::RangeClaims;
using cpu::Schedule;

namespace {

bool each_once(const std::vector<std::atomic<int>>& counts) {
    return std::all_of(counts.begin(), counts.end(), [](const std::atomic<int>& c) { return c.load() == 1; });
}

}  // namespace

TEST_CASE("range claims: each thread takes its own range in order, then the others' from their ends") {
    RangeClaims claims(10, 3);  // ranges [0, 4), [4, 7), [7, 10)
    CHECK(claims.serves(3));
    CHECK_FALSE(claims.serves(2));
    CHECK(claims.next(1) == 4);
    CHECK(claims.next(1) == 5);
    CHECK(claims.next(1) == 6);
    CHECK(claims.next(1) == 9);  // its own range done: the last of thread 2's
    CHECK(claims.next(2) == 7);
    CHECK(claims.next(1) == 8);
    CHECK(claims.next(2) == 3);  // thread 2's range is gone too: thread 0's last
    for (std::int64_t i : {0, 1, 2}) CHECK(claims.next(0) == i);
    for (int t : {0, 1, 2}) CHECK(claims.next(t) == -1);
    CHECK_FALSE(RangeClaims(10, RangeClaims::max_team + 1).serves(RangeClaims::max_team + 1));
    CHECK_FALSE(RangeClaims(RangeClaims::max_count, 2).serves(2));
    RangeClaims few(2, 4);  // more threads than indices: two empty ranges
    std::vector<std::int64_t> got;
    for (int t = 3; t >= 0; --t)
        for (std::int64_t i; (i = few.next(t)) >= 0;) got.push_back(i);
    std::sort(got.begin(), got.end());
    CHECK(got == std::vector<std::int64_t>{0, 1});
}

TEST_CASE("range claims: threads racing for indices get each exactly once") {
    constexpr std::int64_t n = 5000;
    for (int team : {2, 3, 4}) {
        CAPTURE(team);
        std::vector<std::atomic<int>> taken(n);
        RangeClaims claims(n, team);
        std::atomic<int> got{0};
#pragma omp parallel num_threads(team)
        {
            got = cpu::team_size();
            if (cpu::team_size() == team)
                for (std::int64_t i; (i = claims.next(cpu::thread_index())) >= 0;)
                    taken[static_cast<std::size_t>(i)].fetch_add(1);
        }
        if (got != team) continue;  // a build without OpenMP: nothing raced
        CHECK(each_once(taken));
    }
}

TEST_CASE("parallel_for: every index once under each schedule, slots within the team") {
    for (Schedule schedule : {Schedule::equal_ranges, Schedule::one_by_one, Schedule::ranges_then_rest})
        for (int n : {0, 1, 2, 3, 17, 1000}) {
            CAPTURE(static_cast<int>(schedule));
            CAPTURE(n);
            std::vector<std::atomic<int>> counts(static_cast<std::size_t>(n));
            std::atomic<int> bad_slot{0};
            cpu::parallel_for(
                n, true,
                [&](int i, int slot) {
                    counts[static_cast<std::size_t>(i)].fetch_add(1);
                    if (slot < 0 || slot >= std::max(1, cpu::max_threads())) bad_slot.fetch_add(1);
                },
                schedule);
            CHECK(each_once(counts));
            CHECK(bad_slot == 0);
        }
}

TEST_CASE("parallel_for: a body's exception reaches the caller after the region, under each schedule") {
    // An exception leaving an OpenMP region would end the process (std::terminate).
    for (Schedule schedule : {Schedule::equal_ranges, Schedule::one_by_one, Schedule::ranges_then_rest})
        for (int thrower : {0, 7, 999}) {
            CAPTURE(static_cast<int>(schedule));
            CAPTURE(thrower);
            std::atomic<int> ran{0};
            const auto body = [&](int i) {
                ran.fetch_add(1);
                if (i == thrower) throw std::length_error("index " + std::to_string(i));
            };
            const std::string message = "index " + std::to_string(thrower);
            CHECK_THROWS_WITH_AS(cpu::parallel_for(1000, true, body, schedule), message.c_str(), std::length_error);
            CHECK(ran.load() >= 1);
            CHECK(ran.load() <= 1000);
        }
    // Two bodies throwing: one exception arrives, the first one thrown.
    CHECK_THROWS_AS(cpu::parallel_for(64, true, [](int) { throw std::bad_alloc(); }), std::bad_alloc);
    cpu::FirstError error;
    error.run([] {});
    CHECK_FALSE(error.failed());
    CHECK_NOTHROW(error.rethrow());
    error.run([] { throw std::runtime_error("first"); });
    error.run([] { throw std::runtime_error("second"); });  // skipped: a body already failed
    CHECK(error.failed());
    CHECK_THROWS_WITH_AS(error.rethrow(), "first", std::runtime_error);
}

TEST_CASE("parallel_for: work not worth threads, and calls inside a region, run on the caller") {
    const auto caller = std::this_thread::get_id();
    std::vector<int> slots;
    bool elsewhere = false;
    cpu::parallel_for(100, false, [&](int, int slot) {
        slots.push_back(slot);
        elsewhere = elsewhere || std::this_thread::get_id() != caller;
    });
    CHECK(slots == std::vector<int>(100, 0));
    CHECK_FALSE(elsewhere);

    // Each thread of an outer region runs the whole inner loop itself, in order.
    std::vector<std::vector<int>> seen(8);
    std::atomic<int> team{1};
#pragma omp parallel num_threads(2)
    {
        team = cpu::team_size();
        auto& mine = seen[static_cast<std::size_t>(cpu::thread_index())];
        cpu::parallel_for(5, true, [&](int i) { mine.push_back(i); }, Schedule::one_by_one);
        cpu::parallel_team(2, [&](int t, int size) { mine.push_back(100 + t + 10 * size); });
    }
    for (int t = 0; t < team; ++t) CHECK(seen[static_cast<std::size_t>(t)] == std::vector<int>{0, 1, 2, 3, 4, 110});
}

TEST_CASE("parallel_team: for_share splits a loop, team_barrier separates its phases") {
    for (int threads : {1, 2, 3}) {
        CAPTURE(threads);
        constexpr int n = 1001;
        std::vector<int> first(n, 0), second(n, -1);
        std::atomic<int> calls{0};
        cpu::parallel_team(threads, [&](int t, int team) {
            calls.fetch_add(1);
            cpu::for_share(n, t, team, [&](int i) { first[static_cast<std::size_t>(i)] = i + 1; });
            cpu::team_barrier(team);
            // Every thread reads values the others wrote before the barrier.
            cpu::for_share(n, t, team, [&](int i) { second[static_cast<std::size_t>(i)] = first[static_cast<std::size_t>(n - 1 - i)]; });
        });
        CHECK(calls >= 1);
        CHECK(calls <= threads);
        for (int i = 0; i < n; ++i) REQUIRE(second[static_cast<std::size_t>(i)] == n - i);
    }
}

TEST_CASE("parallel_team: a body's exception reaches the caller, no thread left at a barrier") {
    // Bodies of three phases (two barriers); one thread, or every thread, throws in one phase.
    // The others leave at their next barrier, or finish where the throw came in the last phase;
    // a thread left waiting would hang the test.
    for (int threads : {1, 2, 3, 4})
        for (int phase : {0, 1, 2})
            for (int thrower : {0, 1, -1}) {  // -1: every thread throws
                CAPTURE(threads);
                CAPTURE(phase);
                CAPTURE(thrower);
                std::atomic<int> started{0}, passed_last_barrier{0}, team_seen{1};
                const auto body = [&](int t, int team) {
                    team_seen = team;
                    started.fetch_add(1);
                    for (int p = 0; p < 3; ++p) {
                        if (p > 0) cpu::team_barrier(team);
                        if (p == 2) passed_last_barrier.fetch_add(1);
                        if (p == phase && (thrower == -1 || t == thrower % team))
                            throw std::runtime_error("thread " + std::to_string(t) + " phase " + std::to_string(p));
                    }
                };
                CHECK_THROWS_AS(cpu::parallel_team(threads, body), std::runtime_error);
                const int team = team_seen.load();
                CHECK(started.load() == team);
                // No thread went on past the barrier after the phase that threw.
                CHECK(passed_last_barrier.load() == (phase < 2 ? 0 : team));
            }
    // The exception that arrives is the one thrown, with its type (two threads throwing: one of theirs).
    CHECK_THROWS_WITH_AS(cpu::parallel_team(2, [](int t, int team) {
                             if (t == team - 1) throw std::length_error("too long");
                         }),
                         "too long", std::length_error);
    CHECK_THROWS_AS(cpu::parallel_team(2, [](int, int team) {
                        cpu::team_barrier(team);
                        throw std::bad_alloc();
                    }),
                    std::bad_alloc);
    // A team that failed leaves nothing behind: the next region runs whole.
    std::atomic<int> ran{0};
    cpu::parallel_team(2, [&](int, int team) {
        cpu::team_barrier(team);
        ran.fetch_add(1);
    });
    CHECK(ran.load() >= 1);
}

TEST_CASE("parallel_team: threads failing at random points of random phases never hang the team") {
    // Racing threads: each throws with a chance at a point of its own, many times over.
    std::uint32_t seed = 12345;
    const auto next = [&seed] { return seed = seed * 1664525u + 1013904223u; };
    for (int round = 0; round < 300; ++round) {
        const int threads = 2 + static_cast<int>(next() % 3);
        std::vector<int> throw_at(static_cast<std::size_t>(threads));
        bool any = false;
        for (int& a : throw_at) {
            a = next() % 2 == 0 ? static_cast<int>(next() % 5) : -1;  // phase 0-4, or never
            any = any || a >= 0;
        }
        std::atomic<int> returned{0};
        const auto body = [&](int t, int team) {
            volatile int spin = 0;
            for (int p = 0; p < 5; ++p) {
                if (p > 0) cpu::team_barrier(team);
                for (int i = 0; i < static_cast<int>(next() % 2000); ++i) spin = spin + 1;
                if (t < static_cast<int>(throw_at.size()) && throw_at[static_cast<std::size_t>(t)] == p)
                    throw std::runtime_error("failed");
            }
            returned.fetch_add(1);
        };
        bool threw = false;
        try {
            cpu::parallel_team(threads, body);
        } catch (const std::runtime_error&) {
            threw = true;
        }
        CAPTURE(round);
        // A team of one thread (OMP_THREAD_LIMIT) runs only body 0.
        if (!threw) REQUIRE(returned.load() >= 1);
        if (threw) REQUIRE(any);
    }
}

TEST_CASE("for_share: contiguous ranges that tile [0, n), as schedule(static) splits them") {
    for (int team : {1, 2, 3, 7})
        for (int n : {0, 1, 5, 6, 100}) {
            std::vector<int> owner(static_cast<std::size_t>(n), -1);
            for (int t = 0; t < team; ++t)
                cpu::for_share(n, t, team, [&](int i) {
                    REQUIRE(owner[static_cast<std::size_t>(i)] == -1);
                    owner[static_cast<std::size_t>(i)] = t;
                });
            CHECK(std::is_sorted(owner.begin(), owner.end()));
            CHECK(std::count(owner.begin(), owner.end(), -1) == 0);
            for (int t = 0; t < team; ++t) {  // sizes differ by at most one
                const auto size = std::count(owner.begin(), owner.end(), t);
                CHECK(size >= n / team);
                CHECK(size <= n / team + 1);
            }
        }
}

TEST_CASE("for_claims: every index once in a parallel_team, for_share's split for another team") {
    for (int threads : {1, 2, 3})
        for (int n : {0, 1, 2, 7, 1000}) {
            CAPTURE(threads);
            CAPTURE(n);
            std::vector<std::atomic<int>> counts(static_cast<std::size_t>(n));
            cpu::RangeClaims claims(n, threads);
            cpu::parallel_team(threads, [&](int t, int team) {
                cpu::for_claims(claims, n, t, team, [&](int i) { counts[static_cast<std::size_t>(i)].fetch_add(1); });
            });
            CHECK(each_once(counts));
        }
    // Claims made for a team of three, run by "threads" of a team of two: each takes its
    // for_share share (the claims stay untouched), so every index comes once.
    constexpr int n = 11;
    cpu::RangeClaims for_three(n, 3);
    std::vector<int> owner(n, -1);
    for (int t = 0; t < 2; ++t)
        cpu::for_claims(for_three, n, t, 2, [&](int i) {
            REQUIRE(owner[static_cast<std::size_t>(i)] == -1);
            owner[static_cast<std::size_t>(i)] = t;
        });
    CHECK(owner == std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1});
    CHECK(for_three.next(0) == 0);  // untouched
}

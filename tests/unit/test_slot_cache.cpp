// The GPU models' cache handles (models/slot_cache.hpp), host-only: a SlotCache
// holds one slot of its model's pool from its first call until it goes away,
// whichever of the pool's owner and the cache is destroyed first.
#include <doctest/doctest.h>

#include <cpx/models/slot_cache.hpp>

#include <memory>
#include <type_traits>
#include <utility>

using namespace cpx;

static_assert(!std::is_copy_constructible_v<SlotCache> && std::is_nothrow_move_constructible_v<SlotCache>,
              "a copy would hold one device slot twice");

TEST_CASE("SlotPool gives out each slot once and takes it back only from its holder") {
    SlotPool pool(4, 2);  // slots 4 and 5 of a model's cache
    CHECK(pool.acquire(11) == 4);
    CHECK(pool.acquire(12) == 5);
    CHECK(pool.acquire(13) == -1);
    CHECK(pool.held() == 2);
    pool.release(4, 99);  // not the holder: nothing happens
    CHECK(pool.held() == 2);
    pool.release(4, 11);
    CHECK(pool.acquire(13) == 4);
    pool.release(7, 13);  // not a slot of this pool
    CHECK(pool.held() == 2);
    CHECK_THROWS_AS(SlotPool(0, 0), ShapeError);
}

TEST_CASE("a SlotCache gives its slot back when destroyed or overwritten, and a move carries it") {
    auto pool = std::make_shared<SlotPool>(0, 2);
    {
        SlotCache a(16);
        CHECK(a.slot() == -1);
        CHECK(a.pool() == nullptr);
        a.hold(pool, pool->acquire(a.id()));
        CHECK(a.slot() == 0);
        CHECK(a.pool() == pool.get());
        SlotCache b(std::move(a));  // the slot moves with the handle
        CHECK(b.slot() == 0);
        CHECK(a.slot() == -1);
        CHECK(pool->held() == 1);
        b.advance(5);
        b.clear();  // clear keeps the slot
        CHECK(b.slot() == 0);
        CHECK(pool->held() == 1);
        b = SlotCache(8);  // overwritten: the old slot is given back
        CHECK(pool->held() == 0);
        CHECK(b.slot() == -1);
        CHECK(b.capacity() == 8);
    }
    SlotCache c(4);
    c.hold(pool, pool->acquire(c.id()));
    pool.reset();  // the model goes first: the cache keeps the pool alive and releases into it
    CHECK(c.pool() != nullptr);
    CHECK(c.pool()->held() == 1);
}

TEST_CASE("a SlotCache needs a positive capacity") { CHECK_THROWS_AS(SlotCache(0), InputError); }

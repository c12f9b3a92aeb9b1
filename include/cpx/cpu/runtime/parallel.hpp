#pragma once
// The few OpenMP queries the CPU layers need, and the two ways they start parallel
// work, usable without OpenMP too (then everything runs on one thread).
//
// Work too small for threads runs in a plain loop rather than in a region with
// an if(false) clause: such a region still sets up a team of one (~0.27 us with
// GCC's libgomp on Zen 5, against ~0.45 us for a region of two threads), and a
// one-token decode step of the 187M model met ~260 of them, 2% of its time.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace cpx::cpu {

/// Threads a parallel region started here would use.
inline int max_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/// Threads of the team the caller belongs to (1 outside a parallel region).
inline int team_size() {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/// Index of the calling thread inside a parallel region (0 outside one).
inline int thread_index() {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/// Whether the caller runs inside a region of more than one thread (where a new region would get one).
inline bool in_parallel() {
#ifdef _OPENMP
    return omp_in_parallel() != 0;
#else
    return false;
#endif
}

/// How parallel_for hands out its indices.
enum class Schedule : std::uint8_t {
    equal_ranges,     ///< one contiguous range per thread (uniform work per index)
    one_by_one,       ///< each thread takes the next index when done (uneven work)
    ranges_then_rest, ///< one contiguous range per thread, then the ends of the others' (streams)
};

/// Part `part` of `parts` contiguous ranges of [0, n) whose sizes differ by at most one, the
/// longer first: schedule(static)'s split.
struct Share {
    std::int64_t begin, end;
};
inline Share equal_share(std::int64_t n, int parts, int part) {
    const std::int64_t per = n / parts, extra = n % parts;
    const std::int64_t begin = part * per + std::min<std::int64_t>(part, extra);
    return {begin, begin + per + (part < extra ? 1 : 0)};
}

/// Who takes which index of [0, n) (Schedule::ranges_then_rest): each thread starts on its own
/// contiguous range, schedule(static)'s, and once done takes indices from the end of another's.
/// Made before the parallel region, for the team it starts.
///
/// Decode's products are streams of their weights, and two threads' streams do not run at one
/// speed: with fixed halves the first to finish waited 8-18% of a one-row product over packed
/// panels (timed per thread, Zen 5). Panels dealt one at a time balanced them but cut each
/// thread's stream into pieces and ran 6-20% slower; taking the other's last panels keeps both
/// streams whole until the end. Two threads on a [768 -> 2048] bf16 pack, in minutes reading
/// ~80 GB/s: 104k -> 91-96k cycles per call, the wait 13-14k -> 4-5k.
class RangeClaims {
public:
    static constexpr int max_team = 32;
    static constexpr std::int64_t max_count = std::int64_t{1} << 32;  // a range packs into one word

    RangeClaims(std::int64_t n, int team) : n_(n), team_(team) {
        if (team_ > max_team || n_ >= max_count) return;
        for (int t = 0; t < team_; ++t) {
            const Share own = equal_share(n, team_, t);
            ranges_[t].value.store(pack(own.begin, own.end), std::memory_order_relaxed);
        }
    }
    /// Whether `team` threads can claim from these ranges.
    bool serves(int team) const { return team == team_ && team_ <= max_team && n_ < max_count; }
    /// Thread t's next index: its own range's first, else the last of another's; -1 when none is left.
    std::int64_t next(int t) {
        if (std::int64_t p = take(t, false); p >= 0) return p;
        for (int i = 1; i < team_; ++i)
            if (std::int64_t p = take((t + i) % team_, true); p >= 0) return p;
        return -1;
    }

private:
    static std::uint64_t pack(std::int64_t b, std::int64_t e) {
        return static_cast<std::uint64_t>(b) | static_cast<std::uint64_t>(e) << 32;
    }
    std::int64_t take(int owner, bool from_end) {
        auto& v = ranges_[owner].value;
        std::uint64_t cur = v.load(std::memory_order_relaxed);
        for (;;) {
            const std::int64_t b = static_cast<std::int64_t>(cur & 0xffffffffu), e = static_cast<std::int64_t>(cur >> 32);
            if (b >= e) return -1;
            const std::uint64_t want = from_end ? pack(b, e - 1) : pack(b + 1, e);
            if (v.compare_exchange_weak(cur, want, std::memory_order_relaxed)) return from_end ? e - 1 : b;
        }
    }
    struct alignas(64) Range {
        std::atomic<std::uint64_t> value{0};
    };
    std::int64_t n_;
    int team_;
    Range ranges_[max_team];
};

/// The first exception thrown by the bodies of a parallel region, carried out of it: an exception
/// must not leave an OpenMP region (the runtime calls std::terminate), and the load-time loops
/// (packing, converting, initialising weights) allocate, as do first calls growing a thread's
/// scratch, so a model that does not fit in memory must end in std::bad_alloc for the caller,
/// not in an abort. parallel_for carries its bodies' exceptions so.
///
///   FirstError error;
///   #pragma omp parallel for
///   for (int i = 0; i < n; ++i) error.run([&] { work(i); });
///   error.rethrow();  // on the caller, after the region
///
/// Once a body has thrown, the bodies that start after it are skipped (a running one finishes).
class FirstError {
public:
    template <class Body>
    void run(Body&& body) noexcept {
        if (failed_.load(std::memory_order_acquire)) return;
        try {
            body();
        } catch (...) {
            keep(std::current_exception());
        }
    }
    /// Keeps `error` unless an exception was kept already.
    void keep(std::exception_ptr error) noexcept {
        if (!failed_.exchange(true, std::memory_order_acq_rel)) first_ = std::move(error);
    }
    /// Throws the first exception a body threw, if any (call after the region has ended).
    void rethrow() const {
        if (first_) std::rethrow_exception(first_);
    }
    bool failed() const { return failed_.load(std::memory_order_acquire); }

private:
    std::atomic<bool> failed_{false};
    std::exception_ptr first_;
};

/// body(i) for thread t's contiguous share of [0, n) among `team` (schedule(static)'s split).
template <class Index, class Body>
void for_share(Index n, int t, int team, Body&& body) {
    const Share own = equal_share(static_cast<std::int64_t>(n), team, t);
    for (auto i = static_cast<Index>(own.begin); i < static_cast<Index>(own.end); ++i) body(i);
}

/// body(i) for the indices of [0, n) thread t of a team (a parallel_team body's, a region's) claims from
/// `claims` (made for n indices and that team before the region: its own range, then the
/// ends of the others'), or for its for_share share where the region got another team.
template <class Index, class Body>
void for_claims(RangeClaims& claims, Index n, int t, int team, Body&& body) {
    if (team > 1 && claims.serves(team)) {
        for (std::int64_t i; (i = claims.next(t)) >= 0;) body(static_cast<Index>(i));
        return;
    }
    for_share(n, t, team, body);
}

/// body(i) for every i in [0, n): on a new parallel region's threads when `worth` says the work
/// pays for them (and the caller is not already inside a region), else in a plain loop. A body
/// taking (i, slot) also gets the index of the thread running it (for per-thread scratch): in
/// the plain loop 0, or inside another region the caller's index in that region's team, so
/// that threads of an outer region calling it at once keep to their own scratch.
template <class Index, class Body>
void parallel_for(Index n, bool worth, Body&& body, [[maybe_unused]] Schedule schedule = Schedule::equal_ranges) {
    const auto call = [&body](Index i, int slot) {
        if constexpr (std::is_invocable_v<Body&, Index, int>) body(i, slot);
        else body(i);
    };
    if (!worth || n < 2 || max_threads() < 2 || in_parallel()) {
        const int slot = in_parallel() ? thread_index() : 0;
        for (Index i = 0; i < n; ++i) call(i, slot);
        return;
    }
#ifdef _OPENMP
    // A body's exception (std::bad_alloc where a first call grows a thread's scratch) leaves
    // with the region, on the caller.
    // The loops are written out (schedule(dynamic, 1) as a shared counter, schedule(static) as
    // for_share) so that each thread's whole loop runs in one FirstError::run.
    FirstError error;
    if (schedule == Schedule::one_by_one) {
        std::atomic<std::int64_t> next{0};
        const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel
        {
            const int t = thread_index();
            error.run([&] {
                for (std::int64_t i; !error.failed() && (i = next.fetch_add(1, std::memory_order_relaxed)) < count;)
                    call(static_cast<Index>(i), t);
            });
        }
    } else if (schedule == Schedule::ranges_then_rest && max_threads() <= RangeClaims::max_team) {
        RangeClaims claims(static_cast<std::int64_t>(n), max_threads());
#pragma omp parallel
        {
            const int t = thread_index();
            error.run([&] { for_claims(claims, n, t, team_size(), [&](Index i) { call(i, t); }); });
        }
    } else {
#pragma omp parallel
        {
            const int t = thread_index();
            error.run([&] { for_share(n, t, team_size(), [&](Index i) { call(i, t); }); });
        }
    }
    error.rethrow();
#endif
}

namespace detail {

/// Thrown by team_barrier in the threads of a team one of whose bodies threw: it unwinds theirs,
/// and parallel_team drops it (the first body's own exception is the one the caller gets).
struct TeamAborted {};

/// How the threads of one parallel_team region leave it when a body throws, none of them left
/// waiting at a barrier. Every thread of a team meets the same barriers in the same order (a
/// body that does not is wrong already). A thread whose body threw after its b-th barrier waits
/// until every thread still running has returned or arrived at barrier b + 1: then either all of
/// them returned (it leaves too) or all are at that barrier, and it sets `aborted` and meets them
/// there, after which each sees the flag and leaves by TeamAborted. The flag is set only once
/// every running thread has made its check after barrier b, so all see it at the same barrier.
class TeamExit {
public:
    explicit TeamExit(int threads)
        : extra_(threads > inline_slots ? std::make_unique<Slot[]>(static_cast<std::size_t>(threads)) : nullptr) {
        // The team's slots only (the region's start pays for no more than it uses).
        for (int t = 0; t < std::min(threads, inline_slots); ++t) slots_[t] = Slot{};
    }

    /// Thread t is about to wait at a barrier.
    void arrive(int t) { std::atomic_ref(slot(t).arrivals).fetch_add(1, std::memory_order_release); }
    bool aborted() const { return aborted_.load(std::memory_order_acquire); }
    /// Thread t's body returned (or left by TeamAborted).
    void finish(int t) { std::atomic_ref(slot(t).state).store(finished, std::memory_order_release); }
    /// Thread t's body threw `error`: keeps the first, then waits as above; true when this
    /// thread must meet the others at their barrier (team_barrier's wait).
    bool fail(int t, int team, std::exception_ptr error) {
        error_.keep(std::move(error));
        Slot& own = slot(t);
        const int next = std::atomic_ref(own.arrivals).load(std::memory_order_relaxed) + 1;
        std::atomic_ref(own.state).store(failed, std::memory_order_release);
        for (;;) {
            bool settled = true, waiting = false;
            for (int u = 0; u < team; ++u) {
                if (u == t) continue;
                Slot& other = slot(u);
                if (std::atomic_ref(other.state).load(std::memory_order_acquire) != running) continue;
                if (std::atomic_ref(other.arrivals).load(std::memory_order_acquire) == next) waiting = true;
                else settled = false;
            }
            if (settled) {
                if (waiting) aborted_.store(true, std::memory_order_release);
                return waiting;
            }
            std::this_thread::yield();
        }
    }
    void rethrow() const { error_.rethrow(); }

private:
    enum : int { running, finished, failed };
    // Plain ints read and written through std::atomic_ref, so that the slots a team does not
    // use are left uninitialised. One cache line per thread: each writes only its own.
    struct alignas(64) Slot {
        int arrivals = 0, state = running;
    };
    static constexpr int inline_slots = 64;  // 4 KiB of stack; larger teams allocate per region
    Slot& slot(int t) { return t < inline_slots ? slots_[t] : extra_[static_cast<std::size_t>(t)]; }

    union {  // no constructor: the constructor sets the team's slots
        Slot slots_[inline_slots];
    };
    std::unique_ptr<Slot[]> extra_;  // for larger teams (slots from inline_slots on)
    std::atomic<bool> aborted_{false};
    FirstError error_;
};

/// The team exit of the parallel_team region the calling thread runs a body of (null outside).
inline thread_local TeamExit* current_team_exit = nullptr;

/// The one barrier construct of team_barrier, which a failed thread meets too.
inline void team_wait() {
#ifdef _OPENMP
#pragma omp barrier
#endif
}

}  // namespace detail

/// body(thread, team) on each thread of a new region of `threads` threads; on the caller alone
/// (body(0, 1)) when threads < 2 or inside a region already. body shares its loops with
/// for_share and waits with team_barrier, never with `omp for` or `omp barrier`: run on the
/// caller inside another region, those would bind to that region's team. A body's exception
/// (std::bad_alloc growing a buffer) reaches the caller after the region: the other threads
/// leave at their next barrier (detail::TeamExit), or finish where none is left.
template <class Body>
void parallel_team(int threads, Body&& body) {
    if (threads < 2 || in_parallel()) {
        body(0, 1);
        return;
    }
#ifdef _OPENMP
    detail::TeamExit exit(threads);
#pragma omp parallel num_threads(threads)
    {
        const int t = thread_index(), team = team_size();
        detail::TeamExit* const outer = std::exchange(detail::current_team_exit, &exit);
        bool meet = false;
        try {
            body(t, team);
            exit.finish(t);
        } catch (const detail::TeamAborted&) {
            exit.finish(t);
        } catch (...) {
            meet = exit.fail(t, team, std::current_exception());
        }
        if (meet) detail::team_wait();
        detail::current_team_exit = outer;
    }
    exit.rethrow();
#else
    body(0, 1);
#endif
}

/// Waits for every thread of a parallel_team body's team (nothing for a team of one). Throws
/// detail::TeamAborted (which parallel_team catches) when another thread's body threw.
inline void team_barrier([[maybe_unused]] int team) {
#ifdef _OPENMP
    if (team > 1) {
        detail::TeamExit* const exit = detail::current_team_exit;
        if (exit) exit->arrive(thread_index());
        detail::team_wait();
        if (exit && exit->aborted()) throw detail::TeamAborted{};
    }
#endif
}

}  // namespace cpx::cpu

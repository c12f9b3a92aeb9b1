#pragma once
// The few OpenMP queries the CPU layers need, and the two ways they start parallel
// work, usable without OpenMP too (then everything runs on one thread).
//
// Work too small for threads runs in a plain loop rather than in a region with
// an if(false) clause: such a region still sets up a team of one (~0.27 us with
// GCC's libgomp on Zen 5, against ~0.45 us for a region of two threads), and a
// one-token decode step of the 187M model met ~260 of them, 2% of its time.

#include <algorithm>
#include <cstdint>
#include <type_traits>

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
    equal_ranges,  ///< one contiguous range per thread (uniform work per index)
    one_by_one,    ///< each thread takes the next index when done (uneven work)
};

/// body(i) for every i in [0, n): on a new parallel region's threads when `worth` says the work
/// pays for them (and the caller is not already inside a region), else in a plain loop. A body
/// taking (i, slot) also gets the index of the thread running it, 0 in the plain loop (for
/// per-thread scratch).
template <class Index, class Body>
void parallel_for(Index n, bool worth, Body&& body, Schedule schedule = Schedule::equal_ranges) {
    const auto call = [&body](Index i, int slot) {
        if constexpr (std::is_invocable_v<Body&, Index, int>) body(i, slot);
        else body(i);
    };
    if (!worth || n < 2 || max_threads() < 2 || in_parallel()) {
        for (Index i = 0; i < n; ++i) call(i, 0);
        return;
    }
#ifdef _OPENMP
    if (schedule == Schedule::one_by_one) {
#pragma omp parallel for schedule(dynamic, 1)
        for (Index i = 0; i < n; ++i) call(i, thread_index());
    } else {
#pragma omp parallel for schedule(static)
        for (Index i = 0; i < n; ++i) call(i, thread_index());
    }
#endif
}

/// body(thread, team) on each thread of a new region of `threads` threads; on the caller alone
/// (body(0, 1)) when threads < 2 or inside a region already. body shares its loops with
/// for_share and waits with team_barrier, never with `omp for` or `omp barrier`: run on the
/// caller inside another region, those would bind to that region's team.
template <class Body>
void parallel_team(int threads, Body&& body) {
    if (threads < 2 || in_parallel()) {
        body(0, 1);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    body(thread_index(), team_size());
#endif
}

/// body(i) for thread t's contiguous share of [0, n) among `team` (schedule(static)'s split).
template <class Index, class Body>
void for_share(Index n, int t, int team, Body&& body) {
    const Index per = n / team, extra = n % team;
    const Index begin = t * per + std::min<Index>(t, extra), end = begin + per + (t < extra ? 1 : 0);
    for (Index i = begin; i < end; ++i) body(i);
}

/// Waits for every thread of a parallel_team body's team (nothing for a team of one).
inline void team_barrier([[maybe_unused]] int team) {
#ifdef _OPENMP
    if (team > 1) {
#pragma omp barrier
    }
#endif
}

}  // namespace cpx::cpu

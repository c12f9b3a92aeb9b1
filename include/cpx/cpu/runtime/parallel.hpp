#pragma once
// The few OpenMP queries the CPU layers need, usable without OpenMP too
// (then everything runs on one thread).

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

}  // namespace cpx::cpu

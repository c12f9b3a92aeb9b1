#pragma once
// Helpers shared by the tests: seeded random data, poison values, and error
// measures against double-precision references.

#include <cmath>
#include <cstdint>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace cpx::testing {

/// Seeded normal samples, so every run of a test sees the same inputs.
inline std::vector<float> random_normal(std::size_t n, std::uint64_t seed, float stddev = 1.0f, float mean = 0.0f) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> dist(mean, stddev);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(gen);
    return v;
}

inline std::vector<int> random_ints(std::size_t n, int lo, int hi, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int> dist(lo, hi);
    std::vector<int> v(n);
    for (auto& x : v) x = dist(gen);
    return v;
}

/// Seeded token ids in [0, vocab).
inline std::vector<std::int64_t> random_tokens(std::size_t n, int vocab, std::uint64_t seed) {
    const auto v = random_ints(n, 0, vocab - 1, seed);
    return {v.begin(), v.end()};
}

/// A pointer as a number, for checks of alignment and placement.
inline std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

/// Runs fn() with OpenMP set to `threads` threads (more than the machine has cores is
/// fine: the split is what is tested), restoring the thread count after.
template <class Fn>
auto on_threads(int threads, Fn&& fn) {
#ifdef _OPENMP
    struct Restore {
        int threads = omp_get_max_threads();
        ~Restore() { omp_set_num_threads(threads); }
    } restore;
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    return fn();
}

/// Runs fn() on one thread, so a test can compare a multi-threaded result with a
/// single-threaded one.
template <class Fn>
auto on_one_thread(Fn&& fn) {
    return on_threads(1, std::forward<Fn>(fn));
}

/// Outputs are filled with NaN before a kernel runs, so an element the kernel
/// forgot to write shows up as NaN in the comparison.
template <class T>
std::vector<T> poisoned(std::size_t n) { return std::vector<T>(n, std::numeric_limits<T>::quiet_NaN()); }

/// max_i |got_i - want_i| / max_i |want_i|: the relative error used throughout
/// (robust where individual reference values are near zero). NaN anywhere gives inf.
template <class Got, class Want>
double relative_error(const Got& got, const Want& want) {
    if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
    double max_diff = 0.0, max_ref = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
        if (!std::isfinite(g) || !std::isfinite(w)) return std::numeric_limits<double>::infinity();
        max_diff = std::max(max_diff, std::abs(g - w));
        max_ref = std::max(max_ref, std::abs(w));
    }
    return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}

}  // namespace cpx::testing

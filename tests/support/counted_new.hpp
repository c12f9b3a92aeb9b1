#pragma once
// Replaces the global operator new/delete of the test program that includes it
// (include it in one source file of that program) so a test can count its
// allocations, see the largest one, and make one of them fail (fail_allocation).

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace cpx::testing {
inline std::atomic<long> allocations{0};               ///< every operator new since the start
inline std::atomic<std::size_t> largest_allocation{0};  ///< the largest request since the last reset

/// The allocation (a value of `allocations`, counting from 1) that fails, or -1 for none.
inline std::atomic<long> failing_allocation{-1};

/// Makes the k-th operator new from now on (k >= 1) fail: std::bad_alloc, or null from the nothrow forms.
inline void fail_allocation(long k) { failing_allocation.store(allocations.load() + k); }
inline void fail_no_allocation() { failing_allocation.store(-1); }

/// Counts an allocation of n bytes; false when it is the one to fail.
inline bool note_allocation(std::size_t n) {
    const long index = allocations.fetch_add(1, std::memory_order_relaxed) + 1;
    std::size_t seen = largest_allocation.load(std::memory_order_relaxed);
    while (n > seen && !largest_allocation.compare_exchange_weak(seen, n)) {}
    return index != failing_allocation.load(std::memory_order_relaxed);
}
}  // namespace cpx::testing

// These replacements pair malloc with free by design; GCC cannot tell that
// the calls it sees are the replaced operators themselves.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t n) {
    if (!cpx::testing::note_allocation(n)) throw std::bad_alloc();
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
    if (!cpx::testing::note_allocation(n)) throw std::bad_alloc();
    const std::size_t align = static_cast<std::size_t>(a);
    if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
    throw std::bad_alloc();
}
// The nothrow forms too (std::stable_sort's buffer uses them): left to the
// sanitizer runtime, they would pair its allocation with our free.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    if (!cpx::testing::note_allocation(n)) return nullptr;
    return std::malloc(n ? n : 1);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    if (!cpx::testing::note_allocation(n)) return nullptr;
    const std::size_t align = static_cast<std::size_t>(a);
    return std::aligned_alloc(align, (n + align - 1) / align * align);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

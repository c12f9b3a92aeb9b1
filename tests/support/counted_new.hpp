#pragma once
// Replaces the global operator new/delete of the test program that includes it
// (include it in one source file of that program) so a test can count its
// allocations and see the largest one.

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace cpx::testing {
inline std::atomic<long> allocations{0};               ///< every operator new since the start
inline std::atomic<std::size_t> largest_allocation{0};  ///< the largest request since the last reset

inline void note_allocation(std::size_t n) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    std::size_t seen = largest_allocation.load(std::memory_order_relaxed);
    while (n > seen && !largest_allocation.compare_exchange_weak(seen, n)) {}
}
}  // namespace cpx::testing

// These replacements pair malloc with free by design; GCC cannot tell that
// the calls it sees are the replaced operators themselves.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t n) {
    cpx::testing::note_allocation(n);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
    cpx::testing::note_allocation(n);
    const std::size_t align = static_cast<std::size_t>(a);
    if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
    throw std::bad_alloc();
}
// The nothrow forms too (std::stable_sort's buffer uses them): left to the
// sanitizer runtime, they would pair its allocation with our free.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    cpx::testing::note_allocation(n);
    return std::malloc(n ? n : 1);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    cpx::testing::note_allocation(n);
    const std::size_t align = static_cast<std::size_t>(a);
    return std::aligned_alloc(align, (n + align - 1) / align * align);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

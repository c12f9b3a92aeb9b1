#pragma once
// 64-byte aligned storage for workspaces. Alignment is part of determinism:
// Eigen's vectorised reductions peel an unaligned head, so the same data at a
// different alignment can sum in a different order. Workspaces that always
// start on a cache line give bit-identical results whichever thread or call
// uses them.

#include <cstddef>
#include <new>
#include <vector>

namespace cpx::cpu {

inline constexpr std::size_t cache_line = 64;

template <class T>
struct CacheAlignedAllocator {
    using value_type = T;
    CacheAlignedAllocator() = default;
    template <class U>
    CacheAlignedAllocator(const CacheAlignedAllocator<U>&) {}
    T* allocate(std::size_t n) {
        return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{cache_line}));
    }
    void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{cache_line}); }
    template <class U>
    bool operator==(const CacheAlignedAllocator<U>&) const { return true; }
};

/// A std::vector whose data starts on a cache line.
template <class T>
using AlignedVector = std::vector<T, CacheAlignedAllocator<T>>;

/// n rounded up to whole cache lines of T, so sub-buffers carved one after
/// another all start aligned.
template <class T>
constexpr std::size_t pad_to_cache_line(std::size_t n) {
    constexpr std::size_t per_line = cache_line / sizeof(T);
    return (n + per_line - 1) / per_line * per_line;
}

}  // namespace cpx::cpu

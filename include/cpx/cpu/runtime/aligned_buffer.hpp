#pragma once
// 64-byte aligned storage for weights, caches and workspaces. Alignment is part
// of determinism: Eigen's vectorised reductions peel an unaligned head, so the
// same data at a different alignment can sum in a different order. Workspaces
// that always start on a cache line give bit-identical results whichever thread
// or call uses them.
//
// Buffers of 2 MiB and more start on a 2 MiB boundary and ask Linux for
// transparent huge pages over their whole 2 MiB chunks (madvise: what the
// common THP mode "madvise" waits for). A decode step streams every weight once;
// with 4 KiB pages that is a TLB miss every 4 KiB (a page walk the prefetches
// wait for). 187M decode steps, alternated binaries, Zen 5: fp32 weights 3-10%
// less time (batch 1 and 16), bf16 weights level to 7% less; prefill level
// (187M bf16 arithmetic, 512 tokens, two threads: 135-164 ms against 151-162
// over two alternated runs; 187M and 384M, one and two threads, bf16 and
// fp32_packed: within 6% either way). A buffer is
// rounded up to whole huge pages only where that costs at most an eighth of it
// (storage_bytes): the 187M model with fp32 weights and its caches took 12 MiB
// more resident memory, 384M 52 MiB (~3%).
// Define CPX_NO_HUGE_PAGES to keep 4 KiB pages. A model's weights, many of them
// under 2 MiB, share huge-page slabs instead (weight_arena.hpp).

#include <cstddef>
#include <new>
#include <vector>

#if defined(__linux__) && !defined(CPX_NO_HUGE_PAGES)
#include <sys/mman.h>
#if defined(MADV_HUGEPAGE)
#define CPX_HUGE_PAGES 1
#endif
#endif

namespace cpx::cpu {

inline constexpr std::size_t cache_line = 64;
/// The x86-64 and AArch64 (4 KiB granule) huge page: buffers from this size start on it.
inline constexpr std::size_t huge_page = std::size_t{2} << 20;

/// Where `bytes` of storage start: on a huge page from its size up, else on a cache line.
constexpr std::size_t storage_alignment(std::size_t bytes) { return bytes >= huge_page ? huge_page : cache_line; }

/// Bytes reserved for a buffer of `bytes`: rounded up to whole huge pages where that adds at
/// most an eighth (so its last huge page is its own too), else as asked (its tail past the last
/// whole huge page keeps 4 KiB pages).
constexpr std::size_t storage_bytes(std::size_t bytes) {
    if (bytes < huge_page) return bytes;
    const std::size_t whole = (bytes + huge_page - 1) / huge_page * huge_page;
    return whole - bytes <= bytes / 8 ? whole : bytes;
}

/// Asks for huge pages over the whole huge pages of [p, p + bytes) (p on a huge page). Advice
/// only: where the kernel has THP off, or cannot find a free huge page, 4 KiB pages serve.
inline void advise_huge_pages([[maybe_unused]] void* p, [[maybe_unused]] std::size_t bytes) {
#ifdef CPX_HUGE_PAGES
    if (const std::size_t whole = bytes / huge_page * huge_page; whole > 0) ::madvise(p, whole, MADV_HUGEPAGE);
#endif
}

template <class T>
struct CacheAlignedAllocator {
    using value_type = T;
    CacheAlignedAllocator() = default;
    template <class U>
    CacheAlignedAllocator(const CacheAlignedAllocator<U>&) {}
    T* allocate(std::size_t n) {
        const std::size_t bytes = storage_bytes(n * sizeof(T)), align = storage_alignment(bytes);
        void* p = ::operator new(bytes, std::align_val_t{align});
        if (align == huge_page) advise_huge_pages(p, bytes);
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t n) { ::operator delete(p, std::align_val_t{storage_alignment(n * sizeof(T))}); }
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

#pragma once
// Storage for a model's weights: side by side in large slabs on huge pages.
//
// A decode step streams every weight once, one matrix after the other. Weights
// of less than a huge page each had their own allocation (aligned_buffer.hpp)
// and so 4 KiB pages, which one core reads ~30% slower (19-20 against 28-29
// GB/s in a plain read; a TLB miss every 4 KiB). On the 187M model with bf16
// weights those are o_proj, mu_proj and the shared expert: 4.7 of each layer's
// 18 MB, and of the 11 MB a batch-1 decode step reads of it (one expert).
// Placing the weights in common slabs puts all of them on huge pages. The bf16
// matrices of a 187M decode step (the 73 nn.Linear products, 184 MB) read
// through the one-row kernel at 25 GB/s on one thread and 47 on two as separate
// allocations, at 31 and 57-58 from one buffer, where one stream of the same
// bytes reads at 31 and 61-63 (AMD Zen 4).
//
// A slab is slab_bytes (64 MiB), 2 MiB aligned, advised for huge pages; pieces
// are carved in order on cache lines, and a piece of more than half a slab gets
// a slab of its own, rounded up to whole huge pages. Untouched address space
// costs no memory, so the unused end of a slab is only address space. A slab
// counts its live pieces and goes back to the system when the last is freed:
// space freed inside a slab is not reused before that, which suits weights
// (allocated at load, freed with the model) and nothing that is resized over
// and over. Under AddressSanitizer every piece has its own allocation, so that
// reads past a weight's end are still caught.

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "cpx/cpu/runtime/aligned_buffer.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define CPX_WEIGHT_PIECES_APART 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CPX_WEIGHT_PIECES_APART 1
#endif
#endif

namespace cpx::cpu {

/// Slabs of weights (see the file's comment). Thread-safe; one process-wide instance serves
/// WeightAllocator, others can be made (tests).
class WeightArena {
public:
    static constexpr std::size_t slab_bytes = std::size_t{64} << 20;

    WeightArena() = default;
    WeightArena(const WeightArena&) = delete;
    WeightArena& operator=(const WeightArena&) = delete;
    ~WeightArena() {
        for (auto& [base, slab] : slabs_) release(slab);
    }

    /// The process's arena. Never destroyed: models held by static objects may free their
    /// weights after every function-local static is gone.
    static WeightArena& instance() {
        static WeightArena* const arena = new WeightArena;
        return *arena;
    }

    /// `bytes` (> 0) on a cache line, in the current slab or a new one.
    void* allocate(std::size_t bytes) {
        const std::size_t size = round_up(bytes, cache_line);
        const std::lock_guard lock(mutex_);
        if (size > slab_bytes / 2) return carve(new_slab(round_up(size, huge_page)), size);
        if (current_ == nullptr || current_->size - current_->used < size) current_ = &new_slab(slab_bytes);
        return carve(*current_, size);
    }

    /// Frees a piece of `bytes` from allocate(); its slab goes back when it holds no other live
    /// piece. Until then the pages wholly inside the piece go back to the system: the slab never
    /// hands that space out again, and a model that frees some weights and keeps others
    /// (release_stored_matrices) would otherwise keep them resident.
    void deallocate(void* p, std::size_t bytes) noexcept {
        const std::lock_guard lock(mutex_);
        auto it = slabs_.upper_bound(address(p));
        --it;  // the slab starting at or below p (p came from one)
        Slab& slab = it->second;
        if (--slab.live > 0) {
            return_pages(p, bytes);
            return;
        }
        if (current_ == &slab) current_ = nullptr;
        release(slab);
        slabs_.erase(it);
    }

    /// Slabs held now (tests).
    std::size_t slabs() const {
        const std::lock_guard lock(mutex_);
        return slabs_.size();
    }

private:
    struct Slab {
        char* base = nullptr;
        std::size_t size = 0, used = 0, live = 0;
    };

    static constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
    static std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

    Slab& new_slab(std::size_t size) {
        char* base = static_cast<char*>(::operator new(size, std::align_val_t{huge_page}));
        advise_huge_pages(base, size);
        try {
            return slabs_.emplace(address(base), Slab{base, size, 0, 0}).first->second;
        } catch (...) {
            ::operator delete(base, std::align_val_t{huge_page});
            throw;
        }
    }
    static void* carve(Slab& slab, std::size_t size) {
        void* p = slab.base + slab.used;
        slab.used += size;
        ++slab.live;
        return p;
    }
    static void release(Slab& slab) noexcept { ::operator delete(slab.base, std::align_val_t{huge_page}); }
    /// Drops the whole pages of [p, p + bytes) (they read as zeros if touched again).
    static void return_pages([[maybe_unused]] void* p, [[maybe_unused]] std::size_t bytes) noexcept {
#ifdef CPX_HUGE_PAGES
        constexpr std::uintptr_t page = 4096;
        const std::uintptr_t first = (address(p) + page - 1) / page * page, end = (address(p) + bytes) / page * page;
        if (end > first) ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
#endif
    }

    mutable std::mutex mutex_;
    std::map<std::uintptr_t, Slab> slabs_;  // by base address
    Slab* current_ = nullptr;               // where small pieces go next (map nodes do not move)
};

/// Allocator of the weights' storage: WeightArena::instance() (each piece apart under
/// AddressSanitizer).
template <class T>
struct WeightAllocator {
    using value_type = T;
    WeightAllocator() = default;
    template <class U>
    WeightAllocator(const WeightAllocator<U>&) {}
    T* allocate(std::size_t n) {
#ifdef CPX_WEIGHT_PIECES_APART
        return CacheAlignedAllocator<T>{}.allocate(n);
#else
        if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
        if (n == 0) n = 1;  // every piece distinct, as operator new's
        return static_cast<T*>(WeightArena::instance().allocate(n * sizeof(T)));
#endif
    }
    void deallocate(T* p, [[maybe_unused]] std::size_t n) {
#ifdef CPX_WEIGHT_PIECES_APART
        CacheAlignedAllocator<T>{}.deallocate(p, n);
#else
        WeightArena::instance().deallocate(p, (n == 0 ? 1 : n) * sizeof(T));
#endif
    }
    template <class U>
    bool operator==(const WeightAllocator<U>&) const { return true; }
};

/// A model's weight tensor: a std::vector whose data starts on a cache line in a weight slab.
template <class T>
using WeightVector = std::vector<T, WeightAllocator<T>>;

/// Frees a weight's storage (empty afterwards); returns the bytes it held.
template <class T>
std::size_t free_weight(WeightVector<T>& v) {
    const std::size_t bytes = v.capacity() * sizeof(T);
    WeightVector<T>().swap(v);
    return bytes;
}

/// Weights kept while others around them are freed (free_weight): each piece holds its
/// slab, so each is copied out and freed, and moved back by restore() once the others are
/// gone, into fresh slabs rather than into what is left of the old ones.
template <class T>
class KeptWeights {
public:
    void keep(WeightVector<T>& v) {
        copies_.emplace_back(&v, std::vector<T>(v.begin(), v.end()));
        free_weight(v);
    }
    void restore() {
        for (auto& [v, values] : copies_) v->assign(values.begin(), values.end());
        copies_.clear();
    }

private:
    std::vector<std::pair<WeightVector<T>*, std::vector<T>>> copies_;
};

}  // namespace cpx::cpu

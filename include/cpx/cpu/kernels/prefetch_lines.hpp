#pragma once
// Software prefetches, one instruction per 64-byte line:
// - fetch_lines: a short contiguous stretch at once, into L1 or L2 as a Fetch says: what the
//   decode attention kernels (cpu/kernels/attention_decode_avx2.hpp, and
//   attention_decode_avx512.hpp where stream_fetch_into_l1()) issue into L1 for the cached rows
//   they read next, stretches of a few hundred bytes too short for the hardware prefetchers to
//   pick up before they end, and the decode products' weight streams, into L1 or L2 as
//   stream_fetch_into_l1() chooses by microarchitecture (cpu/kernels/gemv_avx512.hpp);
// - prefetch_for_write: one line a kernel will store to (the fp32 tiles' C,
//   cpu/kernels/gemm_f32_avx512.hpp);
// - LineStream: a range fetched a few lines per iteration of a compute loop, so that the
//   stream spreads over the loop (the packed GEMM tiles' next block, cpu/kernels/avx512_tile.hpp;
//   the AVX2 few-row loop's next weight rows, cpu/kernels/gemv_avx2.hpp).

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86

#include <atomic>

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include "cpx/core/host_device.hpp"  // CPX_FORCE_INLINE
#include "cpx/core/tensor_view.hpp"  // index_t
#include "cpx/cpu/runtime/scoped_setting.hpp"

namespace cpx::cpu {

/// Where a decode kernel's software fetches of its weight stream go. Measured per
/// microarchitecture: on Zen 5 into L1 paid (gemv_avx512.hpp gives the figures), on Zen 4 the
/// same fetches halved some streams' read rate, which fetches into L2 (or none) restored.
enum class Fetch { none, l2, l1 };

/// Whether this CPU is one whose decode streams were measured fastest with fetches into L1:
/// AMD family 0x1A (Zen 5), and Intel's (measured on a Xeon of family 6, model 0xCF, with AMX:
/// 187M's batch-1 decode step on bf16 weights 19-21% less time on one and two threads, two
/// sequences 10%, fp32 weights 2%, docs/BF16.md). Every other CPU (Zen 4 and older AMD) takes
/// the L2 (or no) fetch measured on Zen 4, and the AVX-512 decode attention passes none.
inline bool machine_stream_fetch_into_l1() {
    static const bool l1 = (cpu_features().amd && cpu_features().family == 0x1a) || cpu_features().intel;
    return l1;
}

/// A choice set by choose_stream_fetch: the machine's (above), or either one forced.
enum class StreamFetch : int { machine = -1, not_into_l1 = 0, into_l1 = 1 };

namespace detail {
inline std::atomic<int>& stream_fetch_choice() {
    static std::atomic<int> choice{static_cast<int>(StreamFetch::machine)};
    return choice;
}
}  // namespace detail

/// The choice the kernels make now: the machine's, unless choose_stream_fetch() set one.
inline bool stream_fetch_into_l1() {
    const int choice = detail::stream_fetch_choice().load(std::memory_order_relaxed);
    return choice < 0 ? machine_stream_fetch_into_l1() : choice != 0;
}

/// Sets the choice for the whole process (StreamFetch::machine: the machine's again); returns
/// the previous one. For tests and comparisons, between calls: a machine then runs the kernel
/// variants of the other microarchitectures (their fetches, and for two rows of bf16 weights
/// the blocks of four weight rows instead of gemv_two_rows_nt), which compute the same products.
inline StreamFetch choose_stream_fetch(StreamFetch choice) {
    return static_cast<StreamFetch>(detail::stream_fetch_choice().exchange(static_cast<int>(choice)));
}

/// choose_stream_fetch() for a scope.
using StreamFetchChoice = ScopedSetting<StreamFetch, choose_stream_fetch>;

/// Prefetches the `bytes` from `p` as F says (nothing for Fetch::none). Forced inline: GCC 12
/// deletes a call to a function whose only effect is a prefetch when it reaches the call before
/// inlining it (as inside a CPX_FORCE_INLINE helper), taking it for a call without effects.
template <Fetch F>
CPX_FORCE_INLINE void fetch_lines(const void* p, index_t bytes) {
    if constexpr (F == Fetch::none) return;
    for (index_t b = 0; b < bytes; b += 64) {
        if constexpr (F == Fetch::l1) _mm_prefetch(static_cast<const char*>(p) + b, _MM_HINT_T0);
        else _mm_prefetch(static_cast<const char*>(p) + b, _MM_HINT_T1);
    }
}

/// Requests the line at `p` for writing (PREFETCHW: every AVX-512 CPU has it). Inline assembly,
/// because the intrinsic emits it only under a target that names the feature.
inline void prefetch_for_write(const void* p) { __asm__ volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p))); }

/// Lines [next, end) fetched `per_step` per step(), into L1 (L1 = true) or L2; nothing by default.
template <bool L1>
struct LineStream {
    const char* next = nullptr;
    const char* end = nullptr;
    int per_step = 0;  ///< 0: nothing to fetch

    // Prefetch instructions only (SSE): no target attribute, so AVX2 and AVX-512 kernels inline it.
    void step() {
        for (int i = 0; i < per_step && next < end; ++i, next += 64)
            fetch_lines<L1 ? Fetch::l1 : Fetch::l2>(next, 64);
    }
};

}  // namespace cpx::cpu

#endif

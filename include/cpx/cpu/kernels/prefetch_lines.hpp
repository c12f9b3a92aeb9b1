#pragma once
// A software prefetch of a short contiguous stretch into L1, one instruction per 64-byte line:
// what the decode attention kernels (cpu/kernels/attention_decode_avx512.hpp,
// attention_decode_avx2.hpp) issue for the cached rows they read next, stretches of a few
// hundred bytes too short for the hardware prefetchers to pick up before they end.

#include "cpx/cpu/runtime/cpu_features.hpp"  // CPX_X86

#ifdef CPX_X86

#include "cpx/cpu/runtime/eigen.hpp"  // <immintrin.h>, first included with the warnings GCC 12 misreports off

#include "cpx/core/tensor_view.hpp"  // index_t

namespace cpx::cpu {

/// Prefetches the `bytes` from `row` into L1.
inline void prefetch_lines_l1(const void* row, index_t bytes) {
    for (index_t b = 0; b < bytes; b += 64) _mm_prefetch(static_cast<const char*>(row) + b, _MM_HINT_T0);
}

}  // namespace cpx::cpu

#endif

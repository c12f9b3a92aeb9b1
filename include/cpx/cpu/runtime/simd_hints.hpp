#pragma once
// The portable loops ask for SIMD lanes with `#pragma omp simd`: a request, not a
// requirement. Where a compiler cannot honour one, clang says so (-Wpass-failed:
// "loop not vectorized"), an error in a build with -Werror. It cannot under
// UBSan from -O1 up: the sanitizer's checks (pointer overflow, signed overflow,
// alignment, null) keep every such loop scalar. A user's sanitized build of
// their own code with -Werror must still compile our headers, and the scalar
// loop is correct, only slower (the hot products run the intrinsics kernels),
// so the headers with such loops enclose them in
//
//   CPX_SIMD_HINTS_BEGIN  ... functions with `omp simd` loops ...  CPX_SIMD_HINTS_END
//
// Clang reports the failure at the function that holds the loop, under the
// warning state there: the pair must enclose whole function definitions. Only
// that one warning is off, and only inside the pair. GCC does not warn.

#if defined(__clang__)
#define CPX_SIMD_HINTS_BEGIN \
    _Pragma("clang diagnostic push") _Pragma("clang diagnostic ignored \"-Wpass-failed\"")
#define CPX_SIMD_HINTS_END _Pragma("clang diagnostic pop")
#else
#define CPX_SIMD_HINTS_BEGIN
#define CPX_SIMD_HINTS_END
#endif

#pragma once
// Eigen and the x86 intrinsics, included for every cpx header that needs them.
//
// GCC 12 reports "'__Y' may be used uninitialized" (and "is used
// uninitialized") inside its own AVX-512 intrinsics (avx512fintrin.h declares
// the undefined vectors of _mm512_undefined_* as self-initialised) wherever
// Eigen's packet code is inlined with -march=native: hundreds of false
// reports in a consumer's -Wall build. GCC decides by the location a report
// points at, so these two are switched off for the lines of the headers
// included between CPX_BEGIN_THIRD_PARTY_INCLUDES and CPX_END_THIRD_PARTY_INCLUDES
// (when that is their first inclusion in the translation unit) and nowhere
// else: the consumer's own code keeps both warnings.

#if defined(__GNUC__) && !defined(__clang__)
#define CPX_BEGIN_THIRD_PARTY_INCLUDES                                       \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") \
        _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define CPX_END_THIRD_PARTY_INCLUDES _Pragma("GCC diagnostic pop")
#else
#define CPX_BEGIN_THIRD_PARTY_INCLUDES
#define CPX_END_THIRD_PARTY_INCLUDES
#endif

CPX_BEGIN_THIRD_PARTY_INCLUDES
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <Eigen/Core>
CPX_END_THIRD_PARTY_INCLUDES

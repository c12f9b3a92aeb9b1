#pragma once
// One definition of pure arithmetic serves both code paths: under nvcc the
// marked functions are compiled for host and device, elsewhere they are
// ordinary inline functions, so CPU-only users never see CUDA.

#if defined(__CUDACC__)
#define CPX_HOST_DEVICE __host__ __device__
#define CPX_FORCE_INLINE __forceinline__
#else
#define CPX_HOST_DEVICE
#define CPX_FORCE_INLINE inline __attribute__((always_inline))
#endif

#define CPX_HD_INLINE CPX_HOST_DEVICE inline

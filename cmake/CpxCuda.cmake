# The CUDA path is enabled when a CUDA compiler exists (CPX_CUDA=AUTO), or
# forced on or off. The library stays header-only: the CUDA headers (.cuh)
# are compiled by the consumer's nvcc; this file only decides whether our own
# CUDA tests and benchmarks are built.
include(CheckLanguage)

set(CPX_HAS_CUDA OFF)
if(CPX_CUDA STREQUAL "ON" OR CPX_CUDA STREQUAL "AUTO")
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        # sm_80 (A100) and sm_90 (H100/H200): the machines the kernels are written for.
        set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
        enable_language(CUDA)
        find_package(CUDAToolkit REQUIRED)
        set(CPX_HAS_CUDA ON)
    elseif(CPX_CUDA STREQUAL "ON")
        message(FATAL_ERROR "CPX_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER or put nvcc on PATH)")
    endif()
endif()
message(STATUS "cpx: CUDA path ${CPX_HAS_CUDA}")

# Opt-in target for CUDA users: our nvcc flags and the toolkit libraries the .cuh
# headers use. It is defined (and installed, cmake/CpxPackage.cmake) whether or not
# this build has a CUDA compiler: it compiles nothing itself, and a consumer's
# find_package(cpx) provides it where the consumer finds the CUDA Toolkit.
add_library(cpx_cuda INTERFACE)
add_library(cpx::cuda ALIAS cpx_cuda)
target_link_libraries(cpx_cuda INTERFACE cpx CUDA::cudart CUDA::cublas CUDA::cublasLt)
# CMake 3.25 does not know the standard levels of nvcc 13, so ask for C++20 directly.
target_compile_options(cpx_cuda INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>)
target_compile_options(cpx_cuda INTERFACE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr --extended-lambda>)
set_target_properties(cpx_cuda PROPERTIES EXPORT_NAME cuda)

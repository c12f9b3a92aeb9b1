#pragma once
// The CPU kernels' fp32 and bf16 instances, compiled here for a whole program.
//
// The library is header-only: by default every source that runs a model compiles the products
// (linear(), matmul() with Eigen's GEMM inside, the packed fp32 and bf16 GEMMs), weight packing,
// attention (batched, and the decode kernels), the expert dispatch and PRISM's orthogonal
// initialisation again: ~40% of a model program's object code and compile time.
// A program of many sources can compile them once instead:
//   1. define CPX_EXTERN_KERNELS for every source of the program (the headers then declare these
//      instances `extern`), and
//   2. include this header in exactly one source, compiled with the same flags as the others.
// The code that runs is the same either way; only where it is compiled changes. cpx's own tests and
// example programs are built this way (CMake option CPX_EXTERN_KERNELS, target cpx_kernel_instances).

#include "cpx/cpu/kernels/attention_decode_avx2.hpp"
#include "cpx/cpu/kernels/attention_decode_avx512.hpp"
#include "cpx/cpu/kernels/gemm_bf16.hpp"
#include "cpx/cpu/kernels/gemm_f32_packed.hpp"
#include "cpx/cpu/kernels/linear.hpp"
#include "cpx/cpu/kernels/packed_panels.hpp"
#include "cpx/cpu/layers/causal_attention.hpp"
#include "cpx/cpu/layers/expert_dispatch.hpp"
#include "cpx/cpu/layers/orthogonal_init.hpp"

CPX_LINEAR_INSTANCES()
CPX_GEMM_F32_PACKED_INSTANCES()
CPX_GEMM_BF16_INSTANCES()
CPX_PACKED_WEIGHT_INSTANCES()
CPX_ATTENTION_DECODE_INSTANCES()
CPX_ATTENTION_DECODE_AVX2_INSTANCES()
CPX_ATTENTION_INSTANCES()
CPX_EXPERT_DISPATCH_INSTANCES()
CPX_ORTHOGONAL_INIT_INSTANCES()

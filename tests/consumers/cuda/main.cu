// A downstream CUDA program: the CUDA COMPLEXITY-DEEP and PRISM models of two
// presets compile from the installed package's headers and flags alone.
#include <cpx/config/presets.hpp>
#include <cpx/models/complexity/model.cuh>
#include <cpx/models/prism/model.cuh>

#include <cstdio>
#include <type_traits>

int main() {
    using Complexity = cpx::cuda::ComplexityModel<cpx::presets::TinyComplexity, cpx::bf16>;
    using Prism = cpx::cuda::PrismModel<cpx::presets::TinyPrism, float>;
    static_assert(!std::is_copy_constructible_v<Complexity> && !std::is_copy_constructible_v<Prism>);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("consumer_cuda: compiled; no CUDA device here\n");
        return 0;
    }
    std::printf("consumer_cuda: compiled; %d CUDA device(s)\n", devices);
    return 0;
}

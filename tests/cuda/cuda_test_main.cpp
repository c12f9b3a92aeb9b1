// Entry point of every GPU test binary: runs the doctest cases where a CUDA
// device exists, and otherwise reports a skip (exit 77, which CTest counts
// as skipped) with the reason, so CI without a GPU stays green and honest.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char** argv) {
    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0) {
        std::printf("SKIPPED: no CUDA device available (%s); GPU tests not run\n",
                    status != cudaSuccess ? cudaGetErrorString(status) : "device count is 0");
        return 77;
    }
    doctest::Context context(argc, argv);
    return context.run();
}

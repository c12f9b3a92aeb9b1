// Entry point of every GPU test binary: runs the doctest cases where a CUDA
// device exists, and otherwise reports a skip (exit 77, which CTest counts
// as skipped) with the reason, so CI without a GPU stays green and honest.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cpx/cuda/runtime/device_query.cuh>

#include <cstdio>

int main(int argc, char** argv) {
    if (const auto why = cpx::cuda::no_device_reason(); !why.empty()) {
        std::printf("SKIPPED: no CUDA device available (%s); GPU tests not run\n", why.c_str());
        return 77;
    }
    doctest::Context context(argc, argv);
    return context.run();
}

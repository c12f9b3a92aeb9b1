#!/usr/bin/env bash
# Builds and runs the whole test suite, as CI does:
#   1. release build (CPU tests; CUDA targets compiled when nvcc exists, GPU tests skip without a GPU),
#   2. every fuzz target of tests/fuzz for 15 s (scripts/fuzz.sh),
#   3. AddressSanitizer + UBSan build of the same tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

# nvcc is often installed outside PATH; let CMake's check_language(CUDA) see it.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
fi
jobs=$(nproc)
if command -v nvcc >/dev/null 2>&1; then
    echo "test: nvcc found: the CUDA targets are compiled too (GPU tests skip without a GPU)"
else
    echo "test: no nvcc: the CPU path only (install the CUDA Toolkit to compile the GPU path)"
fi

echo "== release build and tests"
# The paper-scale presets' run programs (the tiny presets' code with other constants) are left
# out of this build for time; scripts/run.sh and scripts/speed_demo.sh build theirs by name.
cmake --preset release -DCPX_BUILD_LARGE_PRESET_PROGRAMS=OFF
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

echo "== fuzz targets (libFuzzer, clang + ASan/UBSan), 15 s each; scripts/fuzz.sh runs them longer"
bash scripts/fuzz.sh --seconds 15

echo "== sanitizer build (ASan + UBSan) and tests"
cmake --preset asan
cmake --build --preset asan -j "$jobs"
# The consumer projects test packaging and compiler warnings, which the release run covered;
# they build separate projects with their own flags, so the sanitizer run skips them.
ctest --preset asan -j "$jobs" -E '^(consumer_|router_table_build_fails)'

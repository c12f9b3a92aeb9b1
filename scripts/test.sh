#!/usr/bin/env bash
# Builds and runs the whole test suite, as CI does:
#   1. release build, preset `test` (CPU tests; CUDA targets compiled when nvcc exists, GPU tests skip without a GPU;
#      the CPU benchmark suites' sources checked by the compiler's front end, CPX_CHECK_BENCHMARKS),
#   2. every fuzz target of tests/fuzz for 12 s (scripts/fuzz.sh),
#   3. AddressSanitizer + UBSan builds of the same tests (generic x86-64 flags: the AVX-512 and
#      bf16 kernels are chosen at run time, so they run, sanitized, where the CPU has them):
#      clang for all but the two arithmetic tests (preset asan), g++ for those (asan-arithmetic).
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

# Each stage prints its wall time, so the suite's budget (well under 25 minutes on 2 cores) is watched.
stage_start=$SECONDS
stage_end() { echo "-- $1: $((SECONDS - stage_start)) s (total $SECONDS s)"; stage_start=$SECONDS; }

echo "== release build and tests"
# The `test` preset (CMakePresets.json, its own build directory: build/release stays the -O3 build
# of scripts/run.sh and of users) is the release configuration with what only a test run can
# spare:
# - -O2 instead of -O3: the same code checked, ~30% less compile time (the largest test program,
#   tests_shared, 134 -> 96 s on a Zen 3); the kernels are intrinsics, whose code -O3 barely changes,
#   and the benchmarks and the programs users build keep -O3.
# - The paper-scale presets' run programs (the tiny presets' code with other constants) are left
#   out; scripts/run.sh and scripts/speed_demo.sh build theirs by name. The --device cuda part of
#   the run programs (the same code for every preset) is compiled for one preset of each family.
# - CUDA code for sm_90 only (the default builds sm_80 and sm_90): no kernel has code that differs
#   between the two, and each extra architecture costs about a quarter of every nvcc compile.
#   nvcc's -O is the host compiler's level alone (the device code is the same at -O0 and -O3:
#   identical cubins, checked with nvcc 13.0), and g++ optimising the host side was half of a
#   large GPU test's compile (test_complexity_checkpoint.cu: 52 of ~95 s, 27 s at -O0): this build
#   compiles the GPU code to check it, and has no GPU to run it. For the same reason the device
#   code stops at compute_90 PTX (CMAKE_CUDA_ARCHITECTURES 90-virtual): ptxas, which turns PTX into
#   the GPU's machine code, was a third of each nvcc compile (test_complexity_model.cu 71 -> 48 s
#   on a Zen 3). The GPU benchmark suite, which instantiates the kernels at the paper's shapes, is
#   still assembled for sm_90, so ptxas's register and shared-memory checks run in CI; a GPU runs
#   this build's tests from the PTX (the driver compiles it at load).
cmake --preset test
cmake --build --preset test -j "$jobs"
ctest --preset test -j "$jobs"
stage_end "release build and tests"

echo "== fuzz targets (libFuzzer, clang + ASan/UBSan), 12 s each; scripts/fuzz.sh runs them longer"
bash scripts/fuzz.sh --seconds 12
stage_end "fuzz targets"

echo "== sanitizer builds (ASan + UBSan) and tests"
# Two builds (cmake/CpxOptions.cmake, CPX_TEST_SET): clang compiles the sanitized tests at -O0
# 2-2.5x faster than g++ (on a Zen 3: tests_prism 54 s against 136) and its UBSan checks more
# (an offset applied to a null pointer); the two arithmetic tests run at -O1 under the
# sanitizers, where clang took 417 s to compile test_linear and g++ 100 s, so g++ builds those.
# The g++ build is two long sources and its tests two long programs, which leave a core idle if
# run alone: each runs in the background beside the clang build's counterpart, its output kept
# in build/asan-arithmetic/*.log and shown after.
cmake --preset asan >/dev/null
cmake --preset asan-arithmetic >/dev/null
background() {  # background LOG COMMAND...: COMMAND runs in the background, its output in LOG
    background_log=$1
    "${@:2}" >"$background_log" 2>&1 &
    background_pid=$!
    trap 'kill "$background_pid" 2>/dev/null || true' EXIT  # not left running if the script stops
}
background_wait() {  # the background command's log (its end, or 60 lines on failure) and status
    local rc=0
    wait "$background_pid" || rc=$?
    tail -n "$([ "$rc" = 0 ] && echo 4 || echo 60)" "$background_log"
    [ "$rc" = 0 ] || { echo "test: failed, see $background_log" >&2; exit "$rc"; }
}
background build/asan-arithmetic/build.log cmake --build --preset asan-arithmetic -j 1
cmake --build --preset asan -j "$jobs"
background_wait
background build/asan-arithmetic/test.log ctest --preset asan-arithmetic -j 1
# The consumer projects test packaging and compiler warnings, which the release run covered;
# they build separate projects with their own flags, so the sanitizer run skips them. The tests
# of build-time routing tables are not built there either (their checks are constant evaluation;
# the router's run-time code is sanitized through test_router_algorithms and _properties).
ctest --preset asan -j "$jobs" -E '^(consumer_|router_table_build_fails)'
background_wait
stage_end "sanitizer builds and tests"

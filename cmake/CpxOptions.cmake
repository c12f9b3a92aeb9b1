# Build options of the project. The library itself is header-only; these
# options shape how our own tests, examples and benchmarks are compiled, and
# the opt-in interface targets a downstream project may link.
include(GNUInstallDirs)

option(CPX_BUILD_TESTS "Build the test suite" ${PROJECT_IS_TOP_LEVEL})
option(CPX_BUILD_EXAMPLES "Build the example programs" ${PROJECT_IS_TOP_LEVEL})
option(CPX_BUILD_TOOLS "Build the command-line tools" ${PROJECT_IS_TOP_LEVEL})
option(CPX_BUILD_BENCHMARKS "Build the Google Benchmark suites" OFF)
option(CPX_CHECK_BENCHMARKS
       "Without CPX_BUILD_BENCHMARKS: check that the CPU benchmark suites compile (syntax and templates only, \
no code generated; the test preset turns it on)" OFF)
option(CPX_BUILD_FUZZERS "Build the libFuzzer targets of tests/fuzz (clang)" OFF)
option(CPX_SANITIZE "Build our targets with AddressSanitizer and UBSan" OFF)
option(CPX_NATIVE "Compile our targets for the build machine's CPU (-march=native)" OFF)
option(CPX_COVERAGE "Build our targets with GCC's line coverage (--coverage; scripts/coverage.sh reports it)" OFF)
option(CPX_EXTERN_KERNELS
       "Compile the CPU kernels' fp32/bf16 instances once (cpx_kernel_instances) for our tests and example \
programs instead of in each of their sources (include/cpx/cpu/kernel_instances.hpp)" ON)
option(CPX_TEST_BUILD_TIME_ROUTING
       "Build the tests whose routing tables are computed at build time (test_router_compile_time, \
test_router_model_logits)" ON)
# The sanitized suite is two builds (CMakePresets.json, scripts/test.sh): clang compiles the
# sanitized tests 2-2.5x faster than GCC at -O0 and its UBSan checks more (a null pointer plus an
# offset), but took 417 s to compile test_linear at -O1, the level the arithmetic tests need to
# run in reasonable time under the sanitizers; GCC builds those two.
set(CPX_TEST_SET "all" CACHE STRING
    "Which unit tests to build: all, arithmetic (test_linear and test_gemm_bf16 alone) or others (all but those)")
set_property(CACHE CPX_TEST_SET PROPERTY STRINGS all arithmetic others)
if(NOT CPX_TEST_SET MATCHES "^(all|arithmetic|others)$")
    message(FATAL_ERROR "CPX_TEST_SET is '${CPX_TEST_SET}': use all, arithmetic or others")
endif()
set(CPX_CUDA "AUTO" CACHE STRING "CUDA path: AUTO (on when a CUDA compiler is found), ON or OFF")
set_property(CACHE CPX_CUDA PROPERTY STRINGS AUTO ON OFF)

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
    set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

if(PROJECT_IS_TOP_LEVEL)
    if(CPX_SANITIZE)
        add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined>
                            $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>
                            $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                            # -O0: the sanitized build's time is compiling (UBSan's checks make
                            # optimising the models' templates ~1.7x slower), not running; -O0
                            # halves it, and the few tests whose run time is arithmetic raise
                            # their own level (tests/CMakeLists.txt). -g1 (line tables) gives
                            # reports file:line at a fraction of full debug info's compile time.
                            $<$<COMPILE_LANGUAGE:CXX>:-O0> $<$<COMPILE_LANGUAGE:CXX>:-g1>)
        add_link_options(-fsanitize=address,undefined)
    endif()
    if(CPX_NATIVE)
        add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-march=native>)
    endif()
    if(CPX_COVERAGE)
        if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
            message(FATAL_ERROR "CPX_COVERAGE needs g++ (gcov's counters; the compiler is ${CMAKE_CXX_COMPILER_ID})")
        elseif(CPX_SANITIZE)
            message(FATAL_ERROR "CPX_COVERAGE and CPX_SANITIZE are separate builds: turn one off")
        endif()
        # -fprofile-update=atomic: the kernels' OpenMP threads bump the same counters, which
        # plain increments would lose or tear. -O1: line numbers close to the source's (-O2
        # merges and moves lines) at a run time the arithmetic tests can bear.
        add_compile_options($<$<COMPILE_LANGUAGE:CXX>:--coverage> $<$<COMPILE_LANGUAGE:CXX>:-fprofile-update=atomic>
                            $<$<COMPILE_LANGUAGE:CXX>:-O1>)
        add_link_options(--coverage)
    endif()
endif()

# cpx_add_routing_table: a token -> expert routing table computed at build time
# from a frequency table and handed to a target as a compile-time constant.
#
#   cpx_add_routing_table(TARGET <target>
#                         VOCAB <V> EXPERTS <n>
#                         ALGORITHM <greedy|balanced|modulo|contiguous>
#                         [TABLE <file>]          # text or .npy counts; required for greedy and balanced
#                         [NAME <identifier>]     # default: token_routing
#                         [NAMESPACE <ns>]        # default: cpx_routing
#                         [REQUIRE <count_balance|load_bound>...]
#                         [MAX_LOAD_RATIO <x>]
#                         [TOP_K <k>])            # k routes per token (default 1)
#
# At build time a small generator (tools/cpx_routing_table.cpp, compiled once per
# project from cpx's own headers) computes the routing and writes
#   <NAME>.hpp        struct <NAMESPACE>::<NAME> { vocab, experts, algorithm,
#                     token_to_expert (constexpr std::array<int32_t, V>), routing(),
#                     top_k, top_k_routing(), and for TOP_K > 1 routes [k, V]:
#                     route r = (token_to_expert + r) mod n, k distinct experts per token }
#   <NAME>_check.cpp  static_asserts over the finished table, recomputed by the
#                     compiler with the same constexpr balance report: every id
#                     has an expert, the algorithm's guarantees (count balance for
#                     balanced/modulo/contiguous, the Theorem 4.2 load bound for
#                     greedy/balanced), plus REQUIRE and MAX_LOAD_RATIO, for every
#                     route, and that a token's routes are distinct.
# The check is compiled as an object library that <target> depends on, so a
# table that violates a bound fails the build with the static_assert message,
# and only once however many files include the header. <target> gets the
# generated directory and cpx's headers on its include path and C++20:
# `#include "<NAME>.hpp"`.
include_guard(GLOBAL)

# Where the generator sources are: next to this file once installed or copied
# into a build tree, in ../tools in the source tree.
set_property(GLOBAL PROPERTY CPX_ROUTER_MODULE_DIR "${CMAKE_CURRENT_LIST_DIR}")

# The shipped real-text frequency table (V = 32000; data/README.md), for
# consumers' default builds: TABLE ${CPX_TEXT_FREQUENCY_TABLE}.
if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/text_frequency_v32000.txt")
    set(CPX_TEXT_FREQUENCY_TABLE "${CMAKE_CURRENT_LIST_DIR}/text_frequency_v32000.txt" CACHE INTERNAL
        "cpx's real-text token frequency table, V = 32000")
else()
    set(CPX_TEXT_FREQUENCY_TABLE "${CMAKE_CURRENT_LIST_DIR}/../data/text_frequency_v32000.txt" CACHE INTERNAL
        "cpx's real-text token frequency table, V = 32000")
endif()

function(cpx_add_routing_table)
    cmake_parse_arguments(PARSE_ARGV 0 arg ""
        "TARGET;TABLE;VOCAB;EXPERTS;ALGORITHM;NAME;NAMESPACE;MAX_LOAD_RATIO;TOP_K" "REQUIRE")
    set(_fn "cpx_add_routing_table")
    if(arg_UNPARSED_ARGUMENTS)
        message(FATAL_ERROR "${_fn}: unexpected arguments: ${arg_UNPARSED_ARGUMENTS}")
    endif()
    foreach(required TARGET VOCAB EXPERTS ALGORITHM)
        if(NOT DEFINED arg_${required})
            message(FATAL_ERROR "${_fn}: ${required} is required")
        endif()
    endforeach()
    if(NOT TARGET ${arg_TARGET})
        message(FATAL_ERROR "${_fn}: '${arg_TARGET}' is not a target (create it before adding a routing table)")
    endif()
    if(NOT TARGET cpx::cpx)
        message(FATAL_ERROR "${_fn}: the cpx::cpx target is missing (find_package(cpx) or add_subdirectory first)")
    endif()
    foreach(number VOCAB EXPERTS)
        if(NOT arg_${number} MATCHES "^[1-9][0-9]*$")
            message(FATAL_ERROR "${_fn}: ${number} must be a positive integer, got '${arg_${number}}'")
        endif()
    endforeach()
    if(NOT arg_ALGORITHM MATCHES "^(greedy|balanced|modulo|contiguous)$")
        message(FATAL_ERROR "${_fn}: ALGORITHM must be greedy, balanced, modulo or contiguous, got '${arg_ALGORITHM}'")
    endif()
    if(NOT DEFINED arg_NAME)
        set(arg_NAME token_routing)
    endif()
    if(NOT DEFINED arg_NAMESPACE)
        set(arg_NAMESPACE cpx_routing)
    endif()
    if(NOT arg_NAME MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
        message(FATAL_ERROR "${_fn}: NAME '${arg_NAME}' is not a C++ identifier")
    endif()
    if(NOT arg_NAMESPACE MATCHES "^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$")
        message(FATAL_ERROR "${_fn}: NAMESPACE '${arg_NAMESPACE}' is not a C++ namespace name")
    endif()
    foreach(requirement IN LISTS arg_REQUIRE)
        if(NOT requirement MATCHES "^(count_balance|load_bound)$")
            message(FATAL_ERROR "${_fn}: REQUIRE takes count_balance and load_bound, got '${requirement}'")
        endif()
    endforeach()

    set(_gen_args --vocab ${arg_VOCAB} --experts ${arg_EXPERTS} --algorithm ${arg_ALGORITHM}
                  --name ${arg_NAME} --namespace ${arg_NAMESPACE})
    set(_depends)
    if(DEFINED arg_TABLE)
        get_filename_component(_table "${arg_TABLE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
        if(NOT EXISTS "${_table}")
            message(FATAL_ERROR "${_fn}: TABLE '${_table}' does not exist")
        endif()
        list(APPEND _gen_args --table ${_table})
        list(APPEND _depends ${_table})
    elseif(arg_ALGORITHM MATCHES "^(greedy|balanced)$")
        message(FATAL_ERROR "${_fn}: ${arg_ALGORITHM} routing needs a frequency TABLE")
    endif()
    if(arg_REQUIRE)
        string(REPLACE ";" "," _require "${arg_REQUIRE}")
        list(APPEND _gen_args --require ${_require})
    endif()
    if(DEFINED arg_MAX_LOAD_RATIO)
        list(APPEND _gen_args --max-load-ratio ${arg_MAX_LOAD_RATIO})
    endif()
    if(DEFINED arg_TOP_K)
        if(NOT arg_TOP_K MATCHES "^[1-9][0-9]*$" OR arg_TOP_K GREATER arg_EXPERTS)
            message(FATAL_ERROR "${_fn}: TOP_K must be an integer from 1 to EXPERTS (${arg_EXPERTS}), got '${arg_TOP_K}'")
        endif()
        list(APPEND _gen_args --top-k ${arg_TOP_K})
    endif()

    # The generator: one per project, built from the same headers as the library.
    if(NOT TARGET cpx_routing_table_generator)
        get_property(_module_dir GLOBAL PROPERTY CPX_ROUTER_MODULE_DIR)
        if(EXISTS "${_module_dir}/cpx_routing_table.cpp")
            set(_src "${_module_dir}/cpx_routing_table.cpp")
        else()
            set(_src "${_module_dir}/../tools/cpx_routing_table.cpp")
        endif()
        add_executable(cpx_routing_table_generator "${_src}")
        target_link_libraries(cpx_routing_table_generator PRIVATE cpx::cpx)
        target_compile_features(cpx_routing_table_generator PRIVATE cxx_std_20)
        set_target_properties(cpx_routing_table_generator PROPERTIES OUTPUT_NAME cpx-routing-table)
        if(TARGET cpx_warnings)
            target_link_libraries(cpx_routing_table_generator PRIVATE cpx_warnings)
        endif()
    endif()

    set(_dir "${CMAKE_CURRENT_BINARY_DIR}/cpx_routing/${arg_TARGET}")
    set(_header "${_dir}/${arg_NAME}.hpp")
    set(_check "${_dir}/${arg_NAME}_check.cpp")
    add_custom_command(OUTPUT "${_header}" "${_check}"
        COMMAND ${CMAKE_COMMAND} -E make_directory "${_dir}"
        COMMAND cpx_routing_table_generator ${_gen_args} --header "${_header}" --check "${_check}"
        DEPENDS cpx_routing_table_generator ${_depends}
        COMMENT "cpx: ${arg_ALGORITHM} routing table ${arg_NAMESPACE}::${arg_NAME} (V=${arg_VOCAB}, n=${arg_EXPERTS})"
        VERBATIM)

    set(_check_target ${arg_TARGET}_${arg_NAME}_routing_check)
    add_library(${_check_target} OBJECT "${_check}")
    target_link_libraries(${_check_target} PRIVATE cpx::cpx)
    target_compile_features(${_check_target} PRIVATE cxx_std_20)
    target_include_directories(${_check_target} PRIVATE "${_dir}")
    # The checks walk the whole table in a constant expression. g++'s default
    # limit (2^25 operations) covers V = 131072 and clang's (2^20 steps) about
    # V = 50000; raise both in proportion to V so any vocabulary passes.
    math(EXPR _steps "${arg_VOCAB} * 400")
    if(_steps LESS 33554432)
        set(_steps 33554432)
    elseif(_steps GREATER 2147483647)
        set(_steps 2147483647)
    endif()
    target_compile_options(${_check_target} PRIVATE
        $<$<CXX_COMPILER_ID:GNU>:-fconstexpr-ops-limit=${_steps}>
        $<$<CXX_COMPILER_ID:Clang,AppleClang>:-fconstexpr-steps=${_steps}>)
    add_dependencies(${arg_TARGET} ${_check_target})

    # The header includes cpx's router headers: give the target cpx's include
    # directories and C++20 without linking (which could clash with the
    # target_link_libraries signature the caller uses).
    get_target_property(_type ${arg_TARGET} TYPE)
    set(_scope PUBLIC)
    if(_type STREQUAL "INTERFACE_LIBRARY")
        set(_scope INTERFACE)
    endif()
    target_include_directories(${arg_TARGET} ${_scope} "${_dir}"
        $<TARGET_PROPERTY:cpx::cpx,INTERFACE_INCLUDE_DIRECTORIES>)
    target_compile_features(${arg_TARGET} ${_scope} cxx_std_20)
endfunction()

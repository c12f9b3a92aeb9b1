# Configures router_build_fails/ once and builds each target: the violating
# tables must fail with their message, the control target must build, and a
# bad cpx_add_routing_table call must stop the configure step.
# Arguments: SOURCE, BINARY, GENERATOR, CPX_SOURCE_DIR.
function(run_step what expect_failure regex)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE failed OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(expect_failure AND NOT failed)
        message(FATAL_ERROR "${what} succeeded, but it must fail:\n${out}${err}")
    endif()
    if(NOT expect_failure AND failed)
        message(FATAL_ERROR "${what} failed, but it must succeed:\n${out}${err}")
    endif()
    if(NOT "${out}${err}" MATCHES "${regex}")
        message(FATAL_ERROR "${what}: the output lacks '${regex}':\n${out}${err}")
    endif()
    message(STATUS "${what}: as intended")
endfunction()

set(configure ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -G ${GENERATOR} -DCPX_SOURCE_DIR=${CPX_SOURCE_DIR}
              -DCPX_CUDA=OFF -DCMAKE_BUILD_TYPE=Release)
run_step("configure" FALSE "" ${configure} -DCPX_BAD_CALL=OFF)

set(build ${CMAKE_COMMAND} --build ${BINARY} --target)
run_step("violates_load_bound" TRUE
    "routing table cpx_routing::token_routing \\(contiguous, skewed_counts.txt\\): expert loads differ by more than the largest single count \\(Theorem 4.2 bound\\)"
    ${build} violates_load_bound)
run_step("violates_count_balance" TRUE
    "routing table cpx_routing::token_routing \\(greedy, skewed_counts.txt\\): expert token counts are not all floor\\(V/n\\) or ceil\\(V/n\\)"
    ${build} violates_count_balance)
run_step("exceeds_load_ratio" TRUE "max/min expert load ratio exceeds 1.5" ${build} exceeds_load_ratio)
run_step("negative_count" TRUE "negative_count.txt:3: count -4 is negative" ${build} negative_count)
run_step("wrong_vocab" TRUE "skewed_counts.txt:9: more counts than the vocabulary size 7" ${build} wrong_vocab)
run_step("control" FALSE "" ${build} control)
# CMake wraps long messages, so any space may become a line break.
string(REPLACE " " "[ \n]+" bad_call_regex
    "cpx_add_routing_table: ALGORITHM must be greedy, balanced, modulo or contiguous, got 'round_robin'")
run_step("bad call" TRUE "${bad_call_regex}" ${configure} -DCPX_BAD_CALL=ON)

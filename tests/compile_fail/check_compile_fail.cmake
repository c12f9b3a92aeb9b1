# Compiles SOURCE twice: as is (must fail with the `// expect:` message) and
# with CPX_COMPILE_FAIL_CONTROL (must succeed).
file(STRINGS ${SOURCE} expect_lines REGEX "^// expect: ")
if(NOT expect_lines)
    message(FATAL_ERROR "${SOURCE} has no '// expect: REGEX' line")
endif()
list(GET expect_lines 0 expect_line)
string(REGEX REPLACE "^// expect: " "" expected "${expect_line}")

set(include_flags)
foreach(dir IN LISTS INCLUDES)
    list(APPEND include_flags -I${dir})
endforeach()

execute_process(COMMAND ${COMPILER} -std=c++20 -fsyntax-only ${include_flags} ${SOURCE}
                RESULT_VARIABLE failed OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT failed)
    message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()
if(NOT "${out}${err}" MATCHES "${expected}")
    message(FATAL_ERROR "${SOURCE} failed to compile without the expected message '${expected}':\n${err}")
endif()

execute_process(COMMAND ${COMPILER} -std=c++20 -fsyntax-only -DCPX_COMPILE_FAIL_CONTROL ${include_flags} ${SOURCE}
                RESULT_VARIABLE failed OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(failed)
    message(FATAL_ERROR "the control build of ${SOURCE} (CPX_COMPILE_FAIL_CONTROL) must compile:\n${err}")
endif()
message(STATUS "${SOURCE}: fails with '${expected}' as intended; control compiles")

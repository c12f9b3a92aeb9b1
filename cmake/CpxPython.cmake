# Test-only Python lookups: the reference checks (PyTorch parity, the live
# tokenizer comparison) are registered only where an interpreter that imports
# their modules exists; the rest of the suite never needs Python.
#
# cpx_python_with(<var> NAMES <name...> PATHS <dir...> MODULES <module...>)
#   sets <var> to the first interpreter named NAMES in the directories PATHS,
#   tried in order, that imports every module of MODULES; else <var>-NOTFOUND.
function(cpx_python_with var)
    cmake_parse_arguments(ARG "" "" "NAMES;PATHS;MODULES" ${ARGN})
    string(JOIN ", " imports ${ARG_MODULES})
    foreach(dir IN LISTS ARG_PATHS)
        find_program(candidate NAMES ${ARG_NAMES} PATHS ${dir} NO_DEFAULT_PATH NO_CACHE)
        if(candidate)
            execute_process(COMMAND ${candidate} -c "import ${imports}" RESULT_VARIABLE failed
                            OUTPUT_QUIET ERROR_QUIET)
            if(failed EQUAL 0)
                set(${var} ${candidate} PARENT_SCOPE)
                return()
            endif()
        endif()
        unset(candidate)
    endforeach()
    set(${var} ${var}-NOTFOUND PARENT_SCOPE)
endfunction()

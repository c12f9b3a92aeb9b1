# Every checkpoint tensor name is written once under include/: the models'
# tensor descriptions (models/complexity/layer_params.hpp, complexity_weights.hpp,
# prism_weights.hpp) name them, and everything else (CPU views, loaders,
# validators, writers, the GPU upload) walks those descriptions. This fails
# when a tensor-name literal appears twice, or at all in a CUDA header.
#   cmake -DSOURCE_DIR=<repository> -P check_tensor_names.cmake
if(NOT SOURCE_DIR)
    message(FATAL_ERROR "pass -DSOURCE_DIR=<repository root>")
endif()

# A tensor name (a literal with a dot, or mu_init) ends with a weight, bias,
# projection, routing table, gate scalar, PRISM's lambda or the RoPE buffer.
set(_leaf "(weight|bias|_proj|_proj_w|_to_expert|output_gate|lambda_q|inv_freq|mu_init)$")

file(GLOB_RECURSE _headers "${SOURCE_DIR}/include/cpx/*.hpp" "${SOURCE_DIR}/include/cpx/*.cuh")
set(_names "")
set(_problems "")
foreach(_h IN LISTS _headers)
    file(READ "${_h}" _text)
    string(REGEX REPLACE "//[^\n]*" "" _text "${_text}")  # comments may quote names
    string(REGEX MATCHALL "\"[A-Za-z0-9_.]+\"" _literals "${_text}")
    file(RELATIVE_PATH _rel "${SOURCE_DIR}" "${_h}")
    foreach(_quoted IN LISTS _literals)
        string(REPLACE "\"" "" _name "${_quoted}")
        # Config keys end alike ("bias", "top_k_primary_weight"); tensor names have a dot.
        if(NOT _name MATCHES "${_leaf}" OR NOT (_name MATCHES "\\." OR _name STREQUAL "mu_init"))
            continue()
        endif()
        if(_rel MATCHES "\\.cuh$")
            string(APPEND _problems "  ${_rel}: \"${_name}\" (the GPU models take the tensor descriptions' buffers)\n")
        endif()
        string(MAKE_C_IDENTIFIER "${_name}" _id)
        if(DEFINED _where_${_id})
            string(APPEND _problems "  \"${_name}\" in ${_where_${_id}} and ${_rel}\n")
        else()
            set(_where_${_id} "${_rel}")
            list(APPEND _names "${_name}")
        endif()
    endforeach()
endforeach()

list(LENGTH _names _count)
# The two families have over 40 distinct tensor names: far fewer means the scan is broken.
if(_count LESS 40)
    message(FATAL_ERROR "found only ${_count} tensor names under include/ (expected over 40): is the scan broken?")
endif()
if(_problems)
    message(FATAL_ERROR "tensor names written more than once under include/:\n${_problems}")
endif()
message(STATUS "${_count} tensor names, each written once under include/")

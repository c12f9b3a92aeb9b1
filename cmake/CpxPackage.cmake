# Install rules and the CMake package: find_package(cpx) after `cmake --install`,
# or straight from the build tree through the exported targets file.
include(CMakePackageConfigHelpers)

install(TARGETS cpx EXPORT cpxTargets)
# cpx::cuda in its own export set: cpxConfig.cmake loads it only where the consumer
# finds the CUDA Toolkit, so a CPU-only consumer needs no CUDA at all.
install(TARGETS cpx_cuda EXPORT cpxCudaTargets)
# cpx::text likewise: loaded where the consumer has PCRE2.
if(CPX_HAS_TEXT)
    install(TARGETS cpx_text EXPORT cpxTextTargets)
endif()
install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(CPX_CONFIG_DIR ${CMAKE_INSTALL_DATADIR}/cmake/cpx)
install(EXPORT cpxTargets NAMESPACE cpx:: DESTINATION ${CPX_CONFIG_DIR})
install(EXPORT cpxCudaTargets NAMESPACE cpx:: DESTINATION ${CPX_CONFIG_DIR})
if(CPX_HAS_TEXT)
    install(EXPORT cpxTextTargets NAMESPACE cpx:: DESTINATION ${CPX_CONFIG_DIR})
endif()
configure_package_config_file(cmake/cpxConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/cpxConfig.cmake
    INSTALL_DESTINATION ${CPX_CONFIG_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/cpxConfigVersion.cmake
    COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/cpxConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/cpxConfigVersion.cmake
    DESTINATION ${CPX_CONFIG_DIR})

# cpx_add_routing_table, the sources of its generator and the real-text
# frequency table, next to cpxConfig.cmake.
set(CPX_ROUTER_FILES cmake/CpxRouter.cmake tools/cpx_routing_table.cpp tools/cli_args.hpp
                     data/text_frequency_v32000.txt)
install(FILES ${CPX_ROUTER_FILES} DESTINATION ${CPX_CONFIG_DIR})

# Build tree: find_package(cpx) with cpx_DIR pointing at this build directory.
export(EXPORT cpxTargets NAMESPACE cpx:: FILE ${CMAKE_CURRENT_BINARY_DIR}/cpxTargets.cmake)
export(EXPORT cpxCudaTargets NAMESPACE cpx:: FILE ${CMAKE_CURRENT_BINARY_DIR}/cpxCudaTargets.cmake)
if(CPX_HAS_TEXT)
    export(EXPORT cpxTextTargets NAMESPACE cpx:: FILE ${CMAKE_CURRENT_BINARY_DIR}/cpxTextTargets.cmake)
endif()
foreach(file IN LISTS CPX_ROUTER_FILES)
    get_filename_component(name ${file} NAME)
    configure_file(${file} ${CMAKE_CURRENT_BINARY_DIR}/${name} COPYONLY)
endforeach()

# Install rules, the exported CMake package, pkg-config and CPack (.deb).
#
#   cmake --install build --prefix P     headers, libraries, generated proto
#                                         headers and .proto files, matrix-report,
#                                         P/lib*/cmake/matrix_cpp/, matrix-cpp.pc
#   find_package(matrix_cpp REQUIRED)    then matrix::plugins (and ::trace,
#                                         ::core, ::proto, ::testing) and
#                                         matrix_trace_methods(<target>)
#   pkg-config --cflags --libs matrix-cpp
#   cmake --build build --target package  a .deb (make package)
#
# See docs/integration.md.

include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MATRIX_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/matrix_cpp)

get_property(_matrix_targets GLOBAL PROPERTY MATRIX_EXPORTED_TARGETS)
install(TARGETS ${_matrix_targets}
        EXPORT matrix_cppTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT matrix_cppTargets
        NAMESPACE matrix::
        DESTINATION ${MATRIX_INSTALL_CMAKEDIR})

configure_package_config_file(
    ${CMAKE_CURRENT_LIST_DIR}/matrix_cppConfig.cmake.in
    ${PROJECT_BINARY_DIR}/matrix_cppConfig.cmake
    INSTALL_DESTINATION ${MATRIX_INSTALL_CMAKEDIR}
    PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
# 0.x: a minor version may change the API.
write_basic_package_version_file(
    ${PROJECT_BINARY_DIR}/matrix_cppConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES
          ${PROJECT_BINARY_DIR}/matrix_cppConfig.cmake
          ${PROJECT_BINARY_DIR}/matrix_cppConfigVersion.cmake
          ${CMAKE_CURRENT_LIST_DIR}/MatrixTraceMethods.cmake
        DESTINATION ${MATRIX_INSTALL_CMAKEDIR})

# pkg-config, relocatable: the prefix is found from the .pc file's own place,
# so `cmake --install --prefix P` and the .deb need no reconfigure.
file(RELATIVE_PATH _matrix_pc_to_prefix
     "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" _matrix_pc_to_prefix "${_matrix_pc_to_prefix}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/matrix-cpp.pc.in
               ${PROJECT_BINARY_DIR}/matrix-cpp.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/matrix-cpp.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# CPack: `make package` writes build/matrix-cpp-dev_<version>_<arch>.deb.
set(CPACK_PACKAGE_NAME matrix-cpp-dev)
set(CPACK_PACKAGE_VENDOR "matrix-cpp")
set(CPACK_PACKAGE_CONTACT "matrix-cpp developers <matrix-cpp@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Performance monitor for C++ event loops: jank, ANR, slow methods, startup, BlockCanary")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libabsl-dev, libprotobuf-dev, protobuf-compiler, libspdlog-dev, pkg-config")
# The toolkit adapters (matrix::glib, matrix::gtk, ...) need their toolkit's
# -dev package in the user's build, when the user links them.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libglib2.0-dev, libgtk-3-dev")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_OUTPUT_FILE_PREFIX ${PROJECT_BINARY_DIR}/packages)
include(CPack)

# Build helpers shared by every folder, in the style of Abseil's absl_cc_library.
#
#   matrix_cc_library(NAME core HDRS ... SRCS ... DEPS ... [PUBLIC_INCLUDE dir] [INTERNAL])
#     creates the library `matrix_core` (static, or shared with BUILD_SHARED_LIBS)
#     and its alias `matrix::core`, which is also its name in the installed
#     package. INTERNAL: always static, neither installed nor exported.
#   matrix_cc_test(NAME looper_test SRCS ... DEPS ... [LABELS ...] [TIMEOUT s])
#     creates a GoogleTest binary and registers each case with ctest.
#   matrix_cc_binary(NAME matrix-demo SRCS ... DEPS ...)

include_guard(GLOBAL)
include(GNUInstallDirs)

set(MATRIX_WARNING_FLAGS -Wall -Wextra)
if(MATRIX_WERROR)
  list(APPEND MATRIX_WARNING_FLAGS -Werror)
endif()
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  # Checked lock annotations (ABSL_GUARDED_BY and friends). GCC ignores them.
  list(APPEND MATRIX_WARNING_FLAGS -Wthread-safety -Wthread-safety-beta)
endif()

if(MATRIX_SANITIZE)
  add_compile_options(-fsanitize=${MATRIX_SANITIZE} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${MATRIX_SANITIZE})
endif()

function(_matrix_apply_common target)
  target_compile_options(${target} PRIVATE ${MATRIX_WARNING_FLAGS})
endfunction()

# A section per function and per variable in matrix's libraries: a program
# linked with --gc-sections leaves out what it does not call, and
# libmatrix-agent.so is linked that way with its functions in the order they
# first run (tools/matrix-run/CMakeLists.txt). The code is the same.
function(_matrix_apply_sections target)
  target_compile_options(${target} PRIVATE -ffunction-sections -fdata-sections)
endfunction()

function(matrix_cc_library)
  cmake_parse_arguments(ARG "INTERNAL" "NAME;PUBLIC_INCLUDE" "HDRS;SRCS;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target matrix_${ARG_NAME})
  if(ARG_INTERNAL)
    # Not installed: a tool's own code, always linked statically into it.
    add_library(${target} STATIC ${ARG_SRCS} ${ARG_HDRS})
  else()
    # Static unless BUILD_SHARED_LIBS is ON; exported as matrix::<NAME>.
    add_library(${target} ${ARG_SRCS} ${ARG_HDRS})
    set_target_properties(${target} PROPERTIES
        EXPORT_NAME ${ARG_NAME}
        VERSION ${PROJECT_VERSION}
        SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
    set_property(GLOBAL APPEND PROPERTY MATRIX_EXPORTED_TARGETS ${target})
  endif()
  add_library(matrix::${ARG_NAME} ALIAS ${target})
  if(NOT ARG_PUBLIC_INCLUDE)
    set(ARG_PUBLIC_INCLUDE ${CMAKE_CURRENT_SOURCE_DIR}/include)
  endif()
  target_include_directories(${target}
      PUBLIC $<BUILD_INTERFACE:${ARG_PUBLIC_INCLUDE}> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
      PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  # The public headers use C++20 (operator<=>, designated initializers): every
  # user of the target compiles as C++20 at least, whatever it selects itself.
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  _matrix_apply_common(${target})
  _matrix_apply_sections(${target})
  if(MATRIX_INSTALL AND NOT ARG_INTERNAL)
    install(DIRECTORY ${ARG_PUBLIC_INCLUDE}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
endfunction()

# RUN_SERIAL: ctest runs no other test beside this binary's cases (a
# latency measurement that brings its own load).
function(matrix_cc_test)
  cmake_parse_arguments(ARG "RUN_SERIAL" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  _matrix_apply_common(${ARG_NAME})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  # Prefix each case with its binary ("core_looper_test.LooperTest.Loop_...")
  # so `ctest -R core_` selects one folder's tests.
  set(serial FALSE)
  if(ARG_RUN_SERIAL)
    set(serial TRUE)
  endif()
  gtest_discover_tests(${ARG_NAME}
    TEST_PREFIX "${ARG_NAME}."
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${ARG_TIMEOUT} RUN_SERIAL ${serial})
  matrix_discovered_test_labels(${ARG_NAME} "${ARG_LABELS}")
endfunction()

# matrix_discovered_test_labels(<target> "<label;label>"): labels every case
# gtest_discover_tests found in <target>. Set by a script of ours that ctest
# runs after the discovered list: CMake 3.25's gtest_discover_tests flattens a
# list-valued property ("agent;no-sanitizer" became LABELS agent, and
# no-sanitizer was lost).
function(matrix_discovered_test_labels target labels)
  if(NOT labels)
    return()
  endif()
  set(labels_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake")
  file(WRITE "${labels_file}"
       "foreach(test IN LISTS ${target}_TESTS)\n"
       "  set_tests_properties(\"\${test}\" PROPERTIES LABELS \"${labels}\")\n"
       "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${labels_file}")
endfunction()

function(matrix_cc_binary)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  _matrix_apply_common(${ARG_NAME})
endfunction()

# matrix_trace_methods(<target> [EXCLUDE ...]): compiler-instrumented method tracing.
include(${CMAKE_CURRENT_LIST_DIR}/MatrixTraceMethods.cmake)

# Builds and runs a consumer project the way a user would, as one ctest test:
#
#   cmake -DMODE=install|add_subdirectory -DMATRIX_SOURCE_DIR=... -DMATRIX_BINARY_DIR=...
#         -DWORK_DIR=... -DCXX=... -DGENERATOR=... -P run_consumer.cmake
#
# install:          `cmake --install` matrix's build tree into WORK_DIR/prefix, check
#                   what was installed, then build tests/consumer/find_package
#                   against it with find_package(matrix_cpp), and consumer.cc
#                   once more with `pkg-config --cflags --libs matrix-cpp` and
#                   no CMake; run both.
# add_subdirectory: build tests/consumer/add_subdirectory, which pulls in
#                   matrix's source tree, with BUILD_SHARED_LIBS=ON; run it.
# Each run's consumer exits 0 only if its monitored loop reported a slow method.

foreach(var MODE MATRIX_SOURCE_DIR MATRIX_BINARY_DIR WORK_DIR CXX GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake: -D${var}=... is required")
  endif()
endforeach()
set(consumer_dir ${MATRIX_SOURCE_DIR}/tests/consumer)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "FAILED (${rc}): ${cmd}")
  endif()
endfunction()

function(build_and_run source build)
  run(${CMAKE_COMMAND} -S ${source} -B ${build} -G ${GENERATOR}
      -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo ${ARGN})
  run(${CMAKE_COMMAND} --build ${build} -j 2)
  run(${build}/consumer)
endfunction()

if(MODE STREQUAL "install")
  set(prefix ${WORK_DIR}/prefix)
  run(${CMAKE_COMMAND} --install ${MATRIX_BINARY_DIR} --prefix ${prefix})
  # What a user of the package expects to find.
  foreach(pattern
          include/matrix/core/matrix.h include/matrix/trace/frame_tracer.h
          include/matrix/plugins/trace_plugin.h include/matrix/testing/fake_tick_clock.h
          include/matrix/proto/issue.pb.h include/matrix/proto/issue.proto
          lib*/libmatrix_plugins.a lib*/libmatrix_proto.a
          lib*/libmatrix_trace.a lib*/libmatrix_trace_evidence.a lib*/libmatrix_trace_monitor.a
          include/matrix/trace/looper_monitor.h include/matrix/trace/symbolizer.h
          lib*/cmake/matrix_cpp/matrix_cppConfig.cmake
          lib*/cmake/matrix_cpp/MatrixTraceMethods.cmake
          lib*/pkgconfig/matrix-cpp.pc bin/matrix-report)
    file(GLOB found ${prefix}/${pattern})
    if(NOT found)
      message(FATAL_ERROR "not installed: ${pattern}")
    endif()
  endforeach()
  run(${prefix}/bin/matrix-report --help)
  # Installed headers are the public API: an internal/ header is installed
  # only because an installed public header includes it.
  file(GLOB_RECURSE installed_headers ${prefix}/include/*.h)
  set(public_text "")
  foreach(header ${installed_headers})
    if(NOT header MATCHES "/internal/")
      file(READ ${header} text)
      string(APPEND public_text "${text}")
    endif()
  endforeach()
  foreach(header ${installed_headers})
    if(header MATCHES "/include/(.*/internal/.*)$")
      set(include_path ${CMAKE_MATCH_1})
      string(FIND "${public_text}" "#include \"${include_path}\"" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "installed but private: ${include_path} (no installed public "
                            "header includes it; keep it in its library's src/internal/)")
      endif()
    endif()
  endforeach()

  build_and_run(${consumer_dir}/find_package ${WORK_DIR}/find_package
                -DCMAKE_PREFIX_PATH=${prefix})

  # pkg-config, no CMake: what a Makefile or Meson user does. Method tracing
  # by hand, as docs/method-tracing.md shows for non-CMake builds.
  file(GLOB pc_file ${prefix}/lib*/pkgconfig/matrix-cpp.pc)
  get_filename_component(pc_dir ${pc_file} DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} ${pc_dir})
  execute_process(COMMAND pkg-config --cflags --libs matrix-cpp
                  OUTPUT_VARIABLE pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags --libs matrix-cpp failed")
  endif()
  message(STATUS "pkg-config --cflags --libs matrix-cpp: ${pc_flags}")
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  run(${CXX} -O1 -g -finstrument-functions
      "-finstrument-functions-exclude-file-list=/usr/include,${prefix}/include"
      ${consumer_dir}/consumer.cc -o ${WORK_DIR}/consumer-pkg-config ${pc_flags})
  run(${WORK_DIR}/consumer-pkg-config)
elseif(MODE STREQUAL "add_subdirectory")
  build_and_run(${consumer_dir}/add_subdirectory ${WORK_DIR}/add_subdirectory
                -DMATRIX_SOURCE_DIR=${MATRIX_SOURCE_DIR} -DBUILD_SHARED_LIBS=ON)
else()
  message(FATAL_ERROR "run_consumer.cmake: unknown MODE '${MODE}'")
endif()

# Method tracing for a user's target (see docs/method-tracing.md).
#
#   matrix_trace_methods(<target> [PATCHABLE | FUNCTION_HOOKS]
#                        [EXCLUDE <path-or-substring>...])
#
# Builds <target> with compiler function hooks so that matrix::MethodTracer
# records every call on the traced (looper) thread, and links matrix::trace,
# which defines the hooks.
#
# Two mechanisms (MATRIX_TRACE_PATCHABLE picks the default, OFF; PATCHABLE
# or FUNCTION_HOOKS chooses for one target):
#
#   FUNCTION_HOOKS (the portable fallback): -finstrument-functions, below.
#   PATCHABLE (GCC on x86-64 Linux): MATRIX_PATCHABLE_FLAGS (below), five
#          one-byte nops at every function entry and a five-byte nop before
#          every return, and no hooks. The target runs untraced until
#          matrix::PatchableEntries::Patch() turns the nops into jumps and
#          calls to stubs (patchable_entries.h), with whichever of its two
#          mechanisms it measures to be cheaper on this CPU. No exclude list: every out-of-line function
#          of the target gets an entry, and EXCLUDE is ignored with a warning.
#          Other compilers or architectures fall back to FUNCTION_HOOKS with
#          a warning (clang emits one 5-byte nop, which Patch() does not
#          rewrite).
#
#   GCC:   -finstrument-functions, with
#          -finstrument-functions-exclude-file-list= listing the compiler's
#          system include directories (the C++ standard library, Abseil and
#          every other package under /usr/include), matrix-cpp's own public
#          headers, and the EXCLUDE entries. GCC matches each entry as a
#          substring of the path of the file that defines a function
#          (inline functions from an excluded header are not instrumented,
#          even when inlined into your code). Entries cannot contain commas.
#   Clang: -finstrument-functions-after-inlining: only functions that remain
#          calls after inlining are instrumented. Clang 14 has no exclude
#          list: out-of-line template instantiations from the standard
#          library (std::vector<T>::_M_realloc_insert, ...) emitted in your
#          objects are traced too, and EXCLUDE is ignored with a warning.
#          Mark hot helpers with __attribute__((no_instrument_function)) or
#          move them to a target built without this function.
#
# MATRIX_TRACE_SCOPES (ON by default) controls MATRIX_TRACE_SCOPE("name"),
# the manual scope macro; OFF compiles it to nothing everywhere.

include_guard(GLOBAL)

option(MATRIX_TRACE_PATCHABLE
       "matrix_trace_methods() targets use patchable entries by default (GCC, x86-64)" OFF)

# PATCHABLE's sites: five nops at each entry (__patchable_function_entries),
# and a five-byte nop before each return or tail call (__return_loc, -pg's
# return sites; -pg also calls __fentry__ after the nops, which the patched
# entries jump over). Every return stays in its function's one block
# (-fno-reorder-blocks-and-partition), so a return site's function is the one
# whose unwind entry holds it.
set(MATRIX_PATCHABLE_FLAGS -fpatchable-function-entry=5 -pg -mfentry -minstrument-return=nop5
    -mrecord-return -fno-reorder-blocks-and-partition)

option(MATRIX_TRACE_SCOPES "Compile MATRIX_TRACE_SCOPE() scopes (OFF: to nothing)" ON)
if(NOT MATRIX_TRACE_SCOPES)
  add_compile_definitions(MATRIX_TRACE_SCOPES_DISABLED=1)
endif()

# matrix-cpp's public headers: never instrumented in user code. The installed
# package (matrix_cppConfig.cmake) sets MATRIX_TRACE_OWN_HEADERS to its include
# directory before including this file; a source tree uses its own folders.
get_property(_matrix_own_headers_set GLOBAL PROPERTY MATRIX_TRACE_OWN_HEADERS SET)
if(NOT _matrix_own_headers_set)
  set_property(GLOBAL PROPERTY MATRIX_TRACE_OWN_HEADERS
      "${CMAKE_CURRENT_LIST_DIR}/../core/include/matrix/"
      "${CMAKE_CURRENT_LIST_DIR}/../core/testing/include/matrix/"
      "${CMAKE_CURRENT_LIST_DIR}/../tracers/include/matrix/"
      "${CMAKE_CURRENT_LIST_DIR}/../plugins/include/matrix/"
      "${PROJECT_BINARY_DIR}/proto/matrix/")
endif()

function(matrix_trace_methods target)
  cmake_parse_arguments(ARG "PATCHABLE;FUNCTION_HOOKS" "" "EXCLUDE" ${ARGN})
  if(NOT TARGET ${target})
    message(FATAL_ERROR "matrix_trace_methods: no target named '${target}'")
  endif()
  set(patchable ${MATRIX_TRACE_PATCHABLE})
  if(ARG_PATCHABLE)
    set(patchable ON)
  elseif(ARG_FUNCTION_HOOKS)
    set(patchable OFF)
  endif()
  if(patchable AND NOT (CMAKE_CXX_COMPILER_ID STREQUAL "GNU"
                        AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64"
                        AND CMAKE_SYSTEM_NAME STREQUAL "Linux"))
    message(WARNING "matrix_trace_methods(${target}): PATCHABLE needs GCC on x86-64 Linux; "
                    "using -finstrument-functions")
    set(patchable OFF)
  endif()
  if(patchable)
    target_compile_options(${target} PRIVATE ${MATRIX_PATCHABLE_FLAGS})
    if(ARG_EXCLUDE)
      message(WARNING "matrix_trace_methods(${target}): PATCHABLE has no exclude list; "
                      "EXCLUDE ${ARG_EXCLUDE} ignored")
    endif()
  elseif(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    set(excludes ${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES} ${CMAKE_C_IMPLICIT_INCLUDE_DIRECTORIES})
    get_property(own_headers GLOBAL PROPERTY MATRIX_TRACE_OWN_HEADERS)
    foreach(dir ${own_headers})
      get_filename_component(dir "${dir}" ABSOLUTE)
      list(APPEND excludes "${dir}/")
    endforeach()
    list(APPEND excludes ${ARG_EXCLUDE})
    list(REMOVE_DUPLICATES excludes)
    foreach(entry ${excludes})
      if(entry MATCHES ",")
        message(FATAL_ERROR
                "matrix_trace_methods: GCC exclude entries cannot contain ',': ${entry}")
      endif()
    endforeach()
    list(JOIN excludes "," exclude_list)
    target_compile_options(${target} PRIVATE
        -finstrument-functions
        "-finstrument-functions-exclude-file-list=${exclude_list}")
  elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    target_compile_options(${target} PRIVATE -finstrument-functions-after-inlining)
    if(ARG_EXCLUDE)
      message(WARNING "matrix_trace_methods(${target}): clang has no exclude list; "
                      "EXCLUDE ${ARG_EXCLUDE} ignored (use no_instrument_function)")
    endif()
  else()
    message(FATAL_ERROR "matrix_trace_methods: unsupported compiler ${CMAKE_CXX_COMPILER_ID}")
  endif()
  target_link_libraries(${target} PRIVATE matrix::trace)
endfunction()

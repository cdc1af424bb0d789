// File: matrix/testing/sanitizers.h
//
// Which sanitizer a test binary is built with, for the tests whose
// measurement or mechanism a sanitizer changes: both replace malloc; TSan
// also holds a signal until the thread runs instrumented code and allocates
// on the threads it watches. GCC says so with __SANITIZE_ADDRESS__ /
// __SANITIZE_THREAD__, clang with __has_feature. Each macro is 0 or 1, for
// #if as well as for ordinary conditions:
//
//   if (MATRIX_TESTING_THREAD_SANITIZER) GTEST_SKIP() << "...";
//
// Thread safety: compile-time constants.

#ifndef MATRIX_TESTING_SANITIZERS_H_
#define MATRIX_TESTING_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__)
#define MATRIX_TESTING_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MATRIX_TESTING_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef MATRIX_TESTING_ADDRESS_SANITIZER
#define MATRIX_TESTING_ADDRESS_SANITIZER 0
#endif

#if defined(__SANITIZE_THREAD__)
#define MATRIX_TESTING_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MATRIX_TESTING_THREAD_SANITIZER 1
#endif
#endif
#ifndef MATRIX_TESTING_THREAD_SANITIZER
#define MATRIX_TESTING_THREAD_SANITIZER 0
#endif

#endif  // MATRIX_TESTING_SANITIZERS_H_

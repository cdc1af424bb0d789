// The method-traced part of toolkits_qt_e2e_test, in its own target: the
// test's main file includes Qt, whose inline atomics an unoptimized clang
// build would emit instrumented into the test's objects, where the method
// tracer itself would call them (see cmake/MatrixTraceMethods.cmake, Clang).
// Nothing here comes from a header.

namespace qt_e2e {

// Runs `work` (uninstrumented) inside a traced frame: the slow-method key
// names this function.
__attribute__((noinline)) void SlowSlot(void (*work)()) { work(); }

}  // namespace qt_e2e

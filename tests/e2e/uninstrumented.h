// Functions for the end-to-end tests, built without method tracing.
#ifndef MATRIX_TESTS_E2E_UNINSTRUMENTED_H_
#define MATRIX_TESTS_E2E_UNINSTRUMENTED_H_

#include "absl/time/time.h"

namespace e2e {

// Blocks the calling thread in nanosleep for `d`.
void HangInUninstrumentedCode(absl::Duration d);
// The same, under another name (a hang in an I/O callback, toolkits tests).
void BlockInReadHandler(absl::Duration d);
// Spins on the CPU for `d`.
void SpinFor(absl::Duration d);
// A block with an early slow phase: spins in ParseHeader() for `early`, then
// sleeps in its own frame until `total` has passed since it was called.
void LoadDocument(absl::Duration total, absl::Duration early);
void ParseHeader(absl::Duration d);
// Spins for `d` in Measure(), Layout() and Paint() by turns, 7 ms each.
void RenderPage(absl::Duration d);
// Sleeps for `d` in WaitForDisk(), its callee.
void SaveCache(absl::Duration d);

}  // namespace e2e

#endif  // MATRIX_TESTS_E2E_UNINSTRUMENTED_H_

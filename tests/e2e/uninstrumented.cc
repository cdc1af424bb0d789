#include "uninstrumented.h"

#include <time.h>

#include "absl/time/clock.h"

namespace e2e {

__attribute__((noinline)) void HangInUninstrumentedCode(absl::Duration d) {
  const timespec ts = absl::ToTimespec(d);
  timespec rem;
  timespec req = ts;
  while (nanosleep(&req, &rem) != 0) req = rem;  // Signals (stack captures) interrupt it.
  asm volatile("" ::: "memory");                  // Keep the frame (no tail call).
}

__attribute__((noinline)) void SpinFor(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
  }
  asm volatile("" ::: "memory");
}

}  // namespace e2e

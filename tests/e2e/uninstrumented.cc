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

__attribute__((noinline)) void BlockInReadHandler(absl::Duration d) {
  timespec req = absl::ToTimespec(d);
  timespec rem;
  while (nanosleep(&req, &rem) != 0) req = rem;
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void SpinFor(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
  }
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void ParseHeader(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
  }
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void LoadDocument(absl::Duration total, absl::Duration early) {
  const absl::Time end = absl::Now() + total;
  ParseHeader(early);
  for (absl::Time now = absl::Now(); now < end; now = absl::Now()) {
    timespec req = absl::ToTimespec(end - now);
    nanosleep(&req, nullptr);  // Signals (stack captures) interrupt it.
  }
  asm volatile("" ::: "memory");
}

}  // namespace e2e

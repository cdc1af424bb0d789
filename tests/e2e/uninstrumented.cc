#include "uninstrumented.h"

#include <time.h>

#include <algorithm>
#include <cstdint>

#include "absl/time/clock.h"

namespace e2e {
namespace {

// The spins read the clock through libc's clock_gettime(), as most programs'
// busy loops make some library call. Under ThreadSanitizer this matters: it
// holds a signal (a stack capture) until the thread next enters one of its
// interceptors, and absl::Now() reads the cycle counter without one, so a
// capture of a spin on absl::Now() alone would time out.
__attribute__((always_inline)) inline int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Inlined: the frame a capture shows is its caller's (SpinFor, ParseHeader).
__attribute__((always_inline)) inline void Spin(absl::Duration d) {
  const int64_t end = MonotonicNs() + absl::ToInt64Nanoseconds(d);
  while (MonotonicNs() < end) {
  }
}

}  // namespace

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
  Spin(d);
  asm volatile("" ::: "memory");  // Keep the frame (no tail call).
}

__attribute__((noinline)) void ParseHeader(absl::Duration d) {
  Spin(d);
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

__attribute__((noinline)) void Measure(absl::Duration d) {
  Spin(d);
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void Layout(absl::Duration d) {
  Spin(d);
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void Paint(absl::Duration d) {
  Spin(d);
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void RenderPage(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  for (int step = 0; absl::Now() < end; ++step) {
    const absl::Duration slice = std::min(absl::Milliseconds(7), end - absl::Now());
    switch (step % 3) {
      case 0:
        Measure(slice);
        break;
      case 1:
        Layout(slice);
        break;
      default:
        Paint(slice);
    }
  }
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void WaitForDisk(absl::Duration d) {
  HangInUninstrumentedCode(d);
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void SaveCache(absl::Duration d) {
  WaitForDisk(d);
  asm volatile("" ::: "memory");
}

}  // namespace e2e

#include "matrix/testing/fake_tick_clock.h"

#include "matrix/core/check.h"

namespace matrix::testing {

FakeTickClock::FakeTickClock(TimeTicks start) : now_ns_(start.ToNanoseconds()) {}

TimeTicks FakeTickClock::NowTicks() const { return TimeTicks::FromNanoseconds(now_ns_.load()); }

absl::Duration FakeTickClock::ThreadCpuTime(const ThreadHandle&) const {
  return absl::Nanoseconds(cpu_ns_.load());
}

void FakeTickClock::Advance(absl::Duration delta) {
  MATRIX_CHECK(delta >= absl::ZeroDuration(), "a fake clock cannot go backwards");
  now_ns_.fetch_add(absl::ToInt64Nanoseconds(delta));
}

void FakeTickClock::SetNowTicks(TimeTicks now) {
  MATRIX_CHECK(now.ToNanoseconds() >= now_ns_.load(), "a fake clock cannot go backwards");
  now_ns_.store(now.ToNanoseconds());
}

void FakeTickClock::AdvanceThreadCpuTime(absl::Duration delta) {
  cpu_ns_.fetch_add(absl::ToInt64Nanoseconds(delta));
}

void FakeTickClock::SetThreadCpuTime(absl::Duration cpu) {
  cpu_ns_.store(absl::ToInt64Nanoseconds(cpu));
}

}  // namespace matrix::testing

#include "matrix/trace/stopped_time.h"

#include <algorithm>

namespace matrix {

bool StoppedTime::OnWakeup(TimeTicks scheduled, TimeTicks now) {
  const int64_t now_ns = now.ToNanoseconds();
  // Late from when the watchdog could have run it (see OnBusyUntil()).
  if (!scheduled.is_null()) {
    const TimeTicks busy_until =
        TimeTicks::FromNanoseconds(busy_until_ns_.load(std::memory_order_relaxed));
    if (busy_until > scheduled) scheduled = busy_until;
  }
  const bool late = !scheduled.is_null() && now - scheduled > kTolerance;
  if (late) {
    const int64_t begin_ns = scheduled.ToNanoseconds();
    sequence_.fetch_add(1, std::memory_order_acq_rel);  // Odd: writing.
    const uint64_t count = count_.load(std::memory_order_relaxed);
    Interval* last = count > 0 ? &intervals_[(count - 1) % kCapacity] : nullptr;
    if (last != nullptr && begin_ns <= last->end_ns.load(std::memory_order_relaxed)) {
      // The same stop, seen by another task: extend it.
      const int64_t old_end = last->end_ns.load(std::memory_order_relaxed);
      if (now_ns > old_end) {
        last->end_ns.store(now_ns, std::memory_order_relaxed);
        total_ns_.fetch_add(now_ns - old_end, std::memory_order_relaxed);
      }
    } else {
      Interval& slot = intervals_[count % kCapacity];
      slot.begin_ns.store(begin_ns, std::memory_order_relaxed);
      slot.end_ns.store(now_ns, std::memory_order_relaxed);
      count_.store(count + 1, std::memory_order_relaxed);
      total_ns_.fetch_add(now_ns - begin_ns, std::memory_order_relaxed);
    }
    sequence_.fetch_add(1, std::memory_order_acq_rel);  // Even: done.
  }
  if (now_ns > observed_ns_.load(std::memory_order_relaxed)) {
    observed_ns_.store(now_ns, std::memory_order_release);
  }
  return late;
}

absl::Duration StoppedTime::Within(TimeTicks begin, TimeTicks end) const {
  const int64_t from = begin.ToNanoseconds();
  const int64_t to = end.ToNanoseconds();
  if (to <= from) return absl::ZeroDuration();
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint64_t before = sequence_.load(std::memory_order_acquire);
    if (before % 2 == 1) continue;
    const uint64_t count = count_.load(std::memory_order_relaxed);
    const uint64_t first = count > kCapacity ? count - kCapacity : 0;
    int64_t stopped = 0;
    for (uint64_t i = count; i > first; --i) {
      const Interval& interval = intervals_[(i - 1) % kCapacity];
      const int64_t b = interval.begin_ns.load(std::memory_order_relaxed);
      const int64_t e = interval.end_ns.load(std::memory_order_relaxed);
      if (e <= from) break;  // Intervals are in time order.
      stopped += std::max<int64_t>(0, std::min(e, to) - std::max(b, from));
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (sequence_.load(std::memory_order_relaxed) == before) return absl::Nanoseconds(stopped);
  }
  return absl::ZeroDuration();  // A writer kept changing it: count nothing.
}

}  // namespace matrix

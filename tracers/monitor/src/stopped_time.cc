#include "matrix/trace/stopped_time.h"

#include <algorithm>

namespace matrix {

bool StoppedTime::OnBusy(TimeTicks begin, TimeTicks end, absl::Duration bound) {
  const bool late = end - begin > bound + kTolerance && OnWakeup(begin + bound, end);
  const int64_t ns = end.ToNanoseconds();
  if (ns > busy_until_ns_.load(std::memory_order_relaxed)) {
    busy_until_ns_.store(ns, std::memory_order_relaxed);
  }
  return late;
}

bool StoppedTime::OnWakeup(TimeTicks scheduled, TimeTicks now) {
  const int64_t now_ns = now.ToNanoseconds();
  // Late from when the watchdog could have run it: not before it was free
  // (see OnBusy()), nor before its last wake-up (the process ran then;
  // another late task already judged the time before it).
  TimeTicks from = scheduled;
  if (!from.is_null()) {
    for (const int64_t ns : {busy_until_ns_.load(std::memory_order_relaxed),
                             observed_ns_.load(std::memory_order_relaxed)}) {
      from = std::max(from, TimeTicks::FromNanoseconds(ns));
    }
  }
  const bool late = !from.is_null() && now - from > kTolerance;
  std::optional<WaitToRun> reading;
  if (reader_) reading = reader_();
  // What the counters say of the time since the last wake-up: the looper
  // thread waited to run (throttled, or on a run queue) for `waited` of it,
  // and ran or waited for `explained` of it. Running and waiting do not
  // overlap, but a kernel may count throttled time as run-queue wait too, and
  // a cgroup's throttled time adds up over CPUs: both are capped at the gap.
  const int64_t last_ns = observed_ns_.load(std::memory_order_relaxed);
  absl::Duration waited;
  absl::Duration explained;
  // The calling thread's own wait to run, since its last reading.
  absl::Duration caller_waited;
  if (reading) {
    const bool has_gap = last_ns > 0 && now_ns > last_ns;
    caller_waited = CallerWaitedSinceLast(
        *reading, has_gap ? absl::Nanoseconds(now_ns - last_ns) : absl::ZeroDuration());
  }
  if (reading && last_reading_ && last_ns > 0 && now_ns > last_ns) {
    const absl::Duration gap = absl::Nanoseconds(now_ns - last_ns);
    waited = std::clamp((reading->runnable - last_reading_->runnable) +
                            (reading->throttled - last_reading_->throttled),
                        absl::ZeroDuration(), gap);
    explained = std::clamp(waited + (reading->ran - last_reading_->ran), absl::ZeroDuration(),
                           gap);
    // Throttled time, placed at the end of the gap (where a late wake-up's
    // wait is).
    if (waited > absl::ZeroDuration()) {
      throttled_.Add(now_ns - absl::ToInt64Nanoseconds(waited), now_ns);
    }
  }
  bool stopped = false;
  if (late) {
    // The lateness the counters do not explain was a stop. The looper's
    // counters and the watchdog's own wait may cover the same time: the
    // larger of the two explains it.
    const absl::Duration unexplained =
        std::max(absl::ZeroDuration(), now - from - std::max(explained, caller_waited));
    if (unexplained > kTolerance) {
      const int64_t from_ns = from.ToNanoseconds();
      stopped_.Add(from_ns, from_ns + absl::ToInt64Nanoseconds(unexplained));
      stopped = true;
    }
  }
  if (reading) last_reading_ = reading;
  if (now_ns > observed_ns_.load(std::memory_order_relaxed)) {
    observed_ns_.store(now_ns, std::memory_order_release);
  }
  return stopped;
}

absl::Duration StoppedTime::CallerWaitedSinceLast(const WaitToRun& reading, absl::Duration gap) {
  if (reading.caller_tid == 0) return absl::ZeroDuration();
  CallerReading* slot = nullptr;
  for (CallerReading& caller : callers_) {
    if (caller.tid == reading.caller_tid) {
      slot = &caller;
      break;
    }
  }
  absl::Duration waited;
  if (slot != nullptr) {
    waited = std::clamp(reading.caller_runnable - slot->runnable, absl::ZeroDuration(), gap);
  } else {
    // A new caller: the oldest slot is taken over (readings are rare, callers few).
    slot = &callers_[next_caller_slot_++ % callers_.size()];
    slot->tid = reading.caller_tid;
  }
  slot->runnable = reading.caller_runnable;
  return waited;
}

void StoppedTime::IntervalLog::Add(int64_t begin_ns, int64_t end_ns) {
  sequence_.fetch_add(1, std::memory_order_acq_rel);  // Odd: writing.
  const uint64_t count = count_.load(std::memory_order_relaxed);
  Interval* last = count > 0 ? &intervals_[(count - 1) % kCapacity] : nullptr;
  if (last != nullptr && begin_ns <= last->end_ns.load(std::memory_order_relaxed)) {
    // The same interval, seen by another task: extend it.
    const int64_t old_end = last->end_ns.load(std::memory_order_relaxed);
    if (end_ns > old_end) {
      last->end_ns.store(end_ns, std::memory_order_relaxed);
      total_ns_.fetch_add(end_ns - old_end, std::memory_order_relaxed);
    }
  } else {
    Interval& slot = intervals_[count % kCapacity];
    slot.begin_ns.store(begin_ns, std::memory_order_relaxed);
    slot.end_ns.store(end_ns, std::memory_order_relaxed);
    count_.store(count + 1, std::memory_order_relaxed);
    total_ns_.fetch_add(end_ns - begin_ns, std::memory_order_relaxed);
  }
  sequence_.fetch_add(1, std::memory_order_acq_rel);  // Even: done.
}

absl::Duration StoppedTime::IntervalLog::Within(TimeTicks begin, TimeTicks end) const {
  const int64_t from = begin.ToNanoseconds();
  const int64_t to = end.ToNanoseconds();
  if (to <= from) return absl::ZeroDuration();
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint64_t before = sequence_.load(std::memory_order_acquire);
    if (before % 2 == 1) continue;
    const uint64_t count = count_.load(std::memory_order_relaxed);
    const uint64_t first = count > kCapacity ? count - kCapacity : 0;
    int64_t within = 0;
    for (uint64_t i = count; i > first; --i) {
      const Interval& interval = intervals_[(i - 1) % kCapacity];
      const int64_t b = interval.begin_ns.load(std::memory_order_relaxed);
      const int64_t e = interval.end_ns.load(std::memory_order_relaxed);
      if (e <= from) break;  // Intervals are in time order.
      within += std::max<int64_t>(0, std::min(e, to) - std::max(b, from));
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (sequence_.load(std::memory_order_relaxed) == before) return absl::Nanoseconds(within);
  }
  return absl::ZeroDuration();  // A writer kept changing it: count nothing.
}

}  // namespace matrix

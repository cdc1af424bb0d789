// File: matrix/trace/stopped_time.h
//
// StoppedTime: when the process was not running (SIGSTOP, a breakpoint, a
// frozen cgroup), and when it waited to run (a CPU quota, a busy machine). A
// watchdog task due at T that runs at T + L, L over kTolerance, saw the
// process not running over [T, T + L]; the kernel's counters (WaitToRun)
// say how much of L was a wait to run: the looper thread's (it stays in
// hang costs and is reported as throttled time) or the watchdog's own (its
// task waited for a CPU while the looper slept). The rest was a stop, left
// out of the costs
// (docs/architecture.md, "How a hang is detected").
//
//   // Set up (TracePlugin does it for the looper thread; the reader of the
//   // real counters is SystemWaitToRunReader(), proc_stats.h):
//   stopped.SetWaitToRunReader(matrix::SystemWaitToRunReader(looper_tid));
//   // Watchdog thread, in every timed task (the CPU sampler's 50 ms poll, the
//   // ANR checks), and after work that kept it busy (captures):
//   stopped.OnWakeup(scheduled_for, clock->NowTicks());
//   stopped.OnBusy(began, clock->NowTicks(), captures * StackCapturer::kLongestWait);
//   // Any thread:
//   absl::Duration stopped_in_dispatch = stopped.Within(begin, end);
//   absl::Duration throttled_in_dispatch = stopped.ThrottledWithin(begin, end);
//
// Two tasks late for the same stop count it once. The last kCapacity
// intervals of each kind are kept. Without a reader every late task counts
// as stopped.
//
// Thread safety: SetWaitToRunReader() before the first OnWakeup();
// OnWakeup() and OnBusy() from one thread at a time (the watchdog); the readers from any
// thread, lock-free (a sequence counter; a reader racing a write retries).

#ifndef MATRIX_TRACE_STOPPED_TIME_H_
#define MATRIX_TRACE_STOPPED_TIME_H_

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "absl/time/time.h"
#include "matrix/core/tick_clock.h"

namespace matrix {

class StoppedTime {
 public:
  static constexpr absl::Duration kTolerance = absl::Milliseconds(100);
  static constexpr int kCapacity = 64;

  // Cumulative counters of time the process did not run because it waited
  // to, not because it was stopped.
  struct WaitToRun {
    // The looper thread's CPU time and its time waiting on a run queue
    // (/proc/self/task/TID/schedstat): a stopped thread has neither.
    absl::Duration ran;
    absl::Duration runnable;
    // The process's cgroup's CPU-bandwidth throttled time (cpu.stat:
    // throttled_usec in cgroup v2, throttled_time in v1), the largest of
    // its cgroup and every ancestor's (a quota may be set higher up).
    absl::Duration throttled;
    // The calling thread's own run-queue wait (/proc/thread-self/schedstat)
    // and its id: a task late because its own thread waited for a CPU saw
    // no stop, whatever the looper thread did meanwhile (slept in a system
    // call, say, so its counters explain nothing). 0: not read.
    pid_t caller_tid = 0;
    absl::Duration caller_runnable;
  };
  using WaitToRunReader = std::function<std::optional<WaitToRun>()>;

  void SetWaitToRunReader(WaitToRunReader reader) { reader_ = std::move(reader); }

  // Watchdog thread: a task scheduled for `scheduled` runs at `now`. Returns
  // whether it saw a stop (a late task whose lateness the counters do not
  // explain, over kTolerance).
  bool OnWakeup(TimeTicks scheduled, TimeTicks now);

  // Watchdog thread: a task's work kept the watchdog itself busy from
  // `begin` to `end` (stack captures waiting for the looper thread, say). A
  // task due meanwhile that runs late is late from `end` on, not from when it
  // was due: the watchdog was working, not the process stopped. On a running
  // process the work takes at most `bound` (a capture's timeout and a late
  // handler's unwind: StackCapturer::kLongestWait per capture); what it took
  // beyond, over kTolerance, is judged as a task due at begin + bound that
  // ran at `end` (OnWakeup()): the process stopped while the watchdog waited,
  // or the watchdog waited for a CPU. Returns OnWakeup()'s answer, or false.
  bool OnBusy(TimeTicks begin, TimeTicks end, absl::Duration bound);

  // Any thread: the stopped time within [begin, end].
  absl::Duration Within(TimeTicks begin, TimeTicks end) const {
    return stopped_.Within(begin, end);
  }
  // Any thread: the time within [begin, end] that late tasks saw the process
  // wait to run (throttled or starved). Part of the costs, not of Within().
  absl::Duration ThrottledWithin(TimeTicks begin, TimeTicks end) const {
    return throttled_.Within(begin, end);
  }

  // Any thread: the latest wake-up seen; a stop that ended before it is
  // known, one still going on is not.
  TimeTicks observed_until() const {
    return TimeTicks::FromNanoseconds(observed_ns_.load(std::memory_order_acquire));
  }

  // Any thread: the stopped and throttled time seen so far.
  absl::Duration total() const { return stopped_.total(); }
  absl::Duration throttled_total() const { return throttled_.total(); }

 private:
  // Time intervals in order, the last kCapacity kept; one writer, lock-free
  // readers.
  class IntervalLog {
   public:
    void Add(int64_t begin_ns, int64_t end_ns);
    absl::Duration Within(TimeTicks begin, TimeTicks end) const;
    absl::Duration total() const {
      return absl::Nanoseconds(total_ns_.load(std::memory_order_relaxed));
    }

   private:
    struct Interval {
      std::atomic<int64_t> begin_ns{0};
      std::atomic<int64_t> end_ns{0};
    };
    std::array<Interval, kCapacity> intervals_;
    std::atomic<uint64_t> count_{0};     // Intervals written (the last is count_ - 1).
    std::atomic<uint64_t> sequence_{0};  // Odd while the writer changes an interval.
    std::atomic<int64_t> total_ns_{0};
  };

  IntervalLog stopped_;
  IntervalLog throttled_;
  std::atomic<int64_t> observed_ns_{0};
  std::atomic<int64_t> busy_until_ns_{0};
  // The run-queue wait `reading`'s caller had at its last reading, if that
  // thread read before: its own wait since then explains a late task.
  absl::Duration CallerWaitedSinceLast(const WaitToRun& reading, absl::Duration gap);

  // Watchdog thread only.
  WaitToRunReader reader_;
  std::optional<WaitToRun> last_reading_;
  // The last caller_runnable of each calling thread (a few watchdog tasks
  // on one or two threads), by tid; 0 is a free slot.
  struct CallerReading {
    pid_t tid = 0;
    absl::Duration runnable;
  };
  std::array<CallerReading, 4> callers_;
  size_t next_caller_slot_ = 0;
};

}  // namespace matrix

#endif  // MATRIX_TRACE_STOPPED_TIME_H_

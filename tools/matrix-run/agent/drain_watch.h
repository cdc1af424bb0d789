// How long an exit hook of libmatrix-agent.so waits for the drain thread
// (exit_hooks.h): for as long as the drain advances. The drain thread counts
// its steps (the request taken, the dispatch ended and FPS published, the
// reports delivered, the log line); the hook gives up only when one step
// takes longer than the stall limit. Under CPU load every step may start
// late (the drain thread waits for a CPU before it even reads the request),
// but each step is bounded (the reports' delivery by the shutdown drain
// timeout), so the wait is too: at most the number of steps times the limit,
// while a drain that stopped advancing (a deadlock) costs one limit.
//
// Pure arithmetic on times the caller reads (matrix::MonotonicNow() in the
// hooks, times fed by hand in tests): async-signal-safe.
//
// Thread safety: a DrainWatch belongs to the one hook that waits with it.

#ifndef MATRIX_TOOLS_MATRIX_RUN_AGENT_DRAIN_WATCH_H_
#define MATRIX_TOOLS_MATRIX_RUN_AGENT_DRAIN_WATCH_H_

#include <algorithm>
#include <cstdint>

#include "absl/time/time.h"
#include "matrix/core/time_ticks.h"

namespace matrix::agent {

class DrainWatch {
 public:
  // Watches from `now`, the drain thread having made `progress` steps.
  // `stall_limit`: how long one step may take; `slice`: how often the
  // waiter looks at the progress (its longest single wait).
  DrainWatch(absl::Duration stall_limit, absl::Duration slice, TimeTicks now, uint32_t progress)
      : stall_limit_(stall_limit), slice_(slice), last_step_(now), progress_(progress) {}

  // Whether to go on waiting at `now`, the drain thread having made
  // `progress` steps: a new step restarts the stall limit.
  bool KeepWaiting(TimeTicks now, uint32_t progress) {
    if (progress != progress_) {
      progress_ = progress;
      last_step_ = now;
      return true;
    }
    return now - last_step_ < stall_limit_;
  }

  // How long the next wait at `now` may last: a slice, never past the stall
  // limit (at least 1 ms, the poll's granularity).
  int NextWaitMs(TimeTicks now) const {
    const absl::Duration left = std::min(slice_, last_step_ + stall_limit_ - now);
    return static_cast<int>(
        std::max<int64_t>(1, absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)))));
  }

 private:
  const absl::Duration stall_limit_;
  const absl::Duration slice_;
  TimeTicks last_step_;
  uint32_t progress_;
};

}  // namespace matrix::agent

#endif  // MATRIX_TOOLS_MATRIX_RUN_AGENT_DRAIN_WATCH_H_

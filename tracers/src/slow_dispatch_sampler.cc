#include "slow_dispatch_sampler.h"

#include <algorithm>
#include <utility>

#include "matrix/core/handler.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace matrix {

SlowDispatchSampler::SlowDispatchSampler(Options options)
    : options_(std::move(options)), proc_(options_.proc_root) {
  MATRIX_CHECK(options_.monitor != nullptr, "SlowDispatchSampler needs a UIThreadMonitor");
  MATRIX_CHECK(options_.watchdog_looper != nullptr, "SlowDispatchSampler needs a watchdog looper");
  MATRIX_CHECK(options_.threshold != nullptr, "SlowDispatchSampler needs a threshold");
  MATRIX_CHECK(options_.interval > absl::ZeroDuration(), "the sample interval must be positive");
  MATRIX_CHECK(options_.max_samples >= 4 && options_.max_samples % 2 == 0,
               "max_samples must be even and at least 4");
  if (!options_.capture) {
    options_.capture = [](const ThreadHandle& thread, RawStack* out) {
      return StackCapturer::Get()->Capture(thread, out);
    };
  }
  handler_ = std::make_unique<Handler>(options_.watchdog_looper, "matrix::SlowDispatchSampler");
}

SlowDispatchSampler::~SlowDispatchSampler() {
  Stop();
  handler_.reset();  // No check runs after this.
}

void SlowDispatchSampler::Start() {
  running_.store(true);
  handler_->RemoveCallbacks(this);
  // The first check was not scheduled for a time: it cannot be late.
  handler_->PostDelayed(
      [this] {
        scheduled_for_ = TimeTicks();
        Check();
      },
      this, absl::ZeroDuration());
}

void SlowDispatchSampler::Stop() {
  running_.store(false);
  handler_->RemoveCallbacks(this);
}

void SlowDispatchSampler::ScheduleAt(TimeTicks at) {
  if (!running_.load()) return;
  scheduled_for_ = at;
  handler_->RemoveCallbacks(this);
  handler_->PostAtTime([this] { Check(); }, this, at);
}

void SlowDispatchSampler::CaptureSample(bool crossing) {
  // Captured without the lock (a capture waits for the looper thread), then
  // stored under it.
  UIThreadMonitor* monitor = options_.monitor;
  const absl::Status status = options_.capture(monitor->looper_thread(), &scratch_);
  // The stack's own instant when it has one (the looper thread may run the
  // capture's handler well after it was asked, on a loaded machine).
  TimeTicks at = monitor->clock()->NowTicks();
  if (status.ok() && !scratch_.captured_at.is_null() && scratch_.captured_at < at) {
    at = scratch_.captured_at;
  }
  captures_.fetch_add(1, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  Slot& slot = slots_[static_cast<size_t>(current_)];
  if (slot.number != sampling_number_) return;  // Taken meanwhile (the dispatch ended).
  if (crossing) {
    slot.captured_at = at;
    slot.crossing_status = status;
  }
  if (!status.ok()) return;
  if (slot.count == options_.max_samples) {
    // Keep every other sample, the crossing's included: they still span the
    // dispatch, at twice the spacing from now on.
    int kept = 0;
    for (int i = 0; i < slot.count; i += 2, ++kept) {
      if (kept != i) {
        slot.stacks[static_cast<size_t>(kept)] = slot.stacks[static_cast<size_t>(i)];
        slot.times[static_cast<size_t>(kept)] = slot.times[static_cast<size_t>(i)];
      }
    }
    slot.count = kept;
    spacing_ *= 2;
  }
  slot.stacks[static_cast<size_t>(slot.count)] = scratch_;
  slot.times[static_cast<size_t>(slot.count)] = at;
  ++slot.count;
}

void SlowDispatchSampler::Check() {
  if (!running_.load()) return;
  UIThreadMonitor* monitor = options_.monitor;
  const TimeTicks now = monitor->clock()->NowTicks();
  // A check far later than asked saw the process stopped (or waiting to run)
  // meanwhile: recorded before this check's captures mark the watchdog busy,
  // which would hide the stop from the other watchdog tasks.
  monitor->mutable_stopped_time().OnWakeup(scheduled_for_, now);
  const absl::Duration threshold = options_.threshold();
  const DispatchHeartbeat::Snapshot s = monitor->heartbeat().Read();
  if (!s.active) {
    sampling_number_ = 0;
    ScheduleAt(now + threshold);
    return;
  }
  if (s.dispatch_number == skipped_number_ ||
      (options_.stop_sampling && options_.stop_sampling(s.dispatch_number))) {
    // Not ours (or no longer): look at the next dispatch once it could cross.
    skipped_number_ = s.dispatch_number;
    sampling_number_ = 0;
    ScheduleAt(now + threshold);
    return;
  }
  if (s.dispatch_number != sampling_number_) {
    // Stopped time (a breakpoint, SIGSTOP) is not time the dispatch ran.
    const absl::Duration stopped = monitor->stopped_time().Within(s.begin, now);
    const TimeTicks crossing = s.begin + stopped + threshold;
    if (now < crossing) {
      ScheduleAt(crossing);
      return;
    }
    if (!options_.sample_with_debugger) {
      absl::StatusOr<bool> attached = proc_.IsDebuggerAttached();
      if (attached.ok() && *attached) {
        skipped_number_ = s.dispatch_number;
        ScheduleAt(now + threshold);
        return;
      }
    }
    sampling_number_ = s.dispatch_number;
    spacing_ = options_.interval;
    {
      absl::MutexLock lock(&mu_);
      // The older slot is overwritten; the newer one may still wait for Take().
      current_ = slots_[0].number == 0 || (slots_[1].number != 0 &&
                                           slots_[0].number < slots_[1].number)
                     ? 0
                     : 1;
      Slot& slot = slots_[static_cast<size_t>(current_)];
      // A slot's records are allocated when it first serves (here, on the
      // watchdog thread): a program with no slow dispatch never pays the
      // max_samples stacks (2 x 32 x 2.6 KiB by default).
      if (slot.stacks.empty()) {
        slot.stacks.resize(static_cast<size_t>(options_.max_samples));
        slot.times.resize(static_cast<size_t>(options_.max_samples));
      }
      slot.number = s.dispatch_number;
      slot.crossing = crossing;
      slot.captured_at = TimeTicks();
      slot.crossing_status = absl::OkStatus();
      slot.count = 0;
    }
    CaptureSample(/*crossing=*/true);
  } else {
    CaptureSample(/*crossing=*/false);
  }
  // The capture kept the watchdog busy: its other tasks due meanwhile were
  // late because of it, not because the process was stopped (a longer wait
  // than a capture takes is judged as a late task's).
  const TimeTicks after = monitor->clock()->NowTicks();
  monitor->mutable_stopped_time().OnBusy(now, after, StackCapturer::kLongestWait);
  ScheduleAt(std::max(after, now + spacing_));
}

std::optional<SlowDispatchSampler::Samples> SlowDispatchSampler::Take(uint64_t number,
                                                                     TimeTicks end) {
  absl::MutexLock lock(&mu_);
  for (Slot& slot : slots_) {
    if (slot.number != number || number == 0) continue;
    Samples samples;
    samples.dispatch_number = number;
    samples.crossing = slot.crossing;
    samples.captured_at = slot.captured_at;
    samples.crossing_status = slot.crossing_status;
    for (int i = 0; i < slot.count; ++i) {
      // A capture that finished after the end may show the next dispatch.
      if (slot.times[static_cast<size_t>(i)] > end) break;
      samples.stacks.push_back(slot.stacks[static_cast<size_t>(i)]);
      samples.times.push_back(slot.times[static_cast<size_t>(i)]);
    }
    slot.number = 0;
    slot.count = 0;
    return samples;
  }
  return std::nullopt;
}

}  // namespace matrix

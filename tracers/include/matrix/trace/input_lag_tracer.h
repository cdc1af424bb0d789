// File: matrix/trace/input_lag_tracer.h
//
// InputLagTracer (Matrix's TouchEventLagTracer) watches input events from the
// time they happened (their event time, as the windowing system stamps them)
// to the time the looper finished handling them:
//
//   - an event not handled within the threshold (2 s by default) is reported
//     as Trace_EvilMethod, detail LAG_TOUCH, with the looper thread's stack
//     captured when the threshold was crossed; at most one report per twice
//     the threshold (4 s), as Matrix throttles it;
//   - every handled event's latency goes to the FrameTracer, whose Trace_FPS
//     reports gain the per-scene median and worst input latency.
//
//   // Input thread (or wherever events arrive):
//   uint64_t id = input_lag->OnInputEventReceived(event.timestamp, "mouse-down");
//   handler.Post([=] {
//     HandleClick(event);
//     input_lag->OnInputEventHandled(id);   // looper thread
//   });
//
//   // Or let the tracer wrap the task:
//   input_lag->PostInputEvent(&handler, event.timestamp, "key", [=] { HandleKey(event); });
//
// Up to kMaxPending events can be in flight; beyond that new events are not
// tracked (counted in untracked_events()).
//
// Thread safety: OnInputEventReceived() and PostInputEvent() from any thread;
// OnInputEventHandled() on the looper thread; checks on the watchdog looper.

#ifndef MATRIX_TRACE_INPUT_LAG_TRACER_H_
#define MATRIX_TRACE_INPUT_LAG_TRACER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "matrix/core/app_state.h"
#include "matrix/core/location.h"
#include "matrix/core/message.h"
#include "matrix/trace/anr_tracer.h"
#include "matrix/trace/tracer.h"

namespace matrix {

class FrameTracer;
class Handler;
class Looper;

class InputLagTracer : public Tracer {
 public:
  static constexpr size_t kMaxPending = 64;

  struct Options {
    // Required: monitor, watchdog_looper, worker_looper, report.
    TracerEnv env;
    absl::Duration threshold = absl::Seconds(2);
    // Between two reports (Matrix: 2 x threshold).
    absl::Duration throttle = absl::Seconds(4);
    FrameTracer* frame_tracer = nullptr;  // Receives handled latencies (optional).
    AnrTracer::CaptureFn capture;         // Default: StackCapturer::Get().
  };

  explicit InputLagTracer(Options options);
  ~InputLagTracer() override;

  // An event that happened at `event_time` is on its way to the looper.
  // `description` must be a string literal (or otherwise outlive the event).
  // Returns its id (0 if not tracked). Any thread.
  uint64_t OnInputEventReceived(TimeTicks event_time, const char* description = "input");
  // The looper finished handling event `id`. Looper thread.
  void OnInputEventHandled(uint64_t id);
  // Posts `task` to `handler`, tracking it as an input event. The message
  // carries the caller's location.
  void PostInputEvent(Handler* handler, TimeTicks event_time, const char* description, Task task,
                      Location from = Location::Current());

  int64_t lag_count() const { return lag_count_.load(); }
  int64_t throttled_count() const { return throttled_.load(); }
  int64_t untracked_events() const { return untracked_.load(); }

 protected:
  void OnAlive() override;
  void OnDead() override;

 private:
  struct Slot {
    std::atomic<uint64_t> id{0};  // 0: free.
    std::atomic<int64_t> event_time_ns{0};
    std::atomic<const char*> description{nullptr};
    std::atomic<bool> reported{false};
  };
  void Check();
  void ScheduleCheck(TimeTicks at);

  Options options_;
  std::array<Slot, kMaxPending> slots_;
  std::atomic<uint64_t> next_id_{1};
  std::unique_ptr<Handler> watchdog_handler_;
  std::unique_ptr<Handler> worker_handler_;
  std::atomic<bool> alive_{false};
  std::atomic<int64_t> next_check_ns_{0};
  TimeTicks last_report_;  // Watchdog thread.
  std::atomic<int64_t> lag_count_{0};
  std::atomic<int64_t> throttled_{0};
  std::atomic<int64_t> untracked_{0};
};

}  // namespace matrix

#endif  // MATRIX_TRACE_INPUT_LAG_TRACER_H_

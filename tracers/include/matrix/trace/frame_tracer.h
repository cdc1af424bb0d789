// File: matrix/trace/frame_tracer.h
//
// FrameTracer measures every frame the UI thread draws: how many vsyncs it
// dropped (from the frame's vsync time and the refresh interval in effect, so
// it is exact at 60, 90, 120 or 144 Hz; see CountDroppedFrames), its drop
// level, and the time spent in each Choreographer queue. It delivers frames to IDoFrameListeners and, when
// FPS reporting is on, publishes a Trace_FPS report per scene every time slice
// (10 s of wall time; fps is the rate frames were drawn at, see
// FrameStatsCollector).
//
//   class JankLogger : public matrix::IDoFrameListener {
//    public:
//     explicit JankLogger(matrix::Executor* executor) : IDoFrameListener(executor) {}
//     void DoFrameAsync(const matrix::FrameData& frame) override {
//       if (frame.dropped_frames >= 3) Log(frame);
//     }
//   };
//   JankLogger logger(&worker_executor);
//   auto registration = trace_plugin->GetFrameTracer()->AddListener(&logger);
//
// Delivery: a listener without an executor gets DoFrameSync() on the looper
// thread, right after the frame (keep it fast: FrameTracer times it and warns,
// from the worker, when it takes more than a few ms). A listener with an
// executor gets DoFrameAsync() for each frame, in order, through that
// executor, or DoReplay() with N frames at a time when it asks for batches.
// The looper thread only writes each frame into a fixed ring (no allocation,
// lock or syscall); the worker drains the ring every `drain_period`.
//
// Only vsync frames are delivered and counted: long non-frame messages show up
// as the drops of the frame they delayed (Matrix's classic tracer counted every
// message as a frame, inflating FPS).
//
// Thread safety: AddListener(), OnStartTrace()/OnCloseTrace() and the
// LooperObserver callbacks on the looper thread; stats on the worker thread.

#ifndef MATRIX_TRACE_FRAME_TRACER_H_
#define MATRIX_TRACE_FRAME_TRACER_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "matrix/core/executor.h"
#include "matrix/core/observer_list.h"
#include "matrix/trace/frame_stats.h"
#include "matrix/trace/internal/spsc_ring.h"
#include "matrix/trace/timeline.h"
#include "matrix/trace/tracer.h"

namespace matrix {

class Handler;
class Looper;

// Matrix's IDoFrameListener.
class IDoFrameListener {
 public:
  // `executor` (not owned; must outlive the registration) null: frames are
  // delivered synchronously on the looper thread. `interval_frames` > 0:
  // async frames are delivered N at a time through DoReplay().
  explicit IDoFrameListener(Executor* executor = nullptr, int interval_frames = 0)
      : executor_(executor), interval_frames_(interval_frames) {}
  virtual ~IDoFrameListener() = default;

  Executor* executor() const { return executor_; }
  int interval_frame_replay() const { return interval_frames_; }
  // For warnings about slow sync listeners.
  virtual std::string name() const { return "IDoFrameListener"; }

  // Looper thread, right after each frame. Only without an executor.
  virtual void DoFrameSync(const FrameData& /*frame*/) {}
  // Through the executor, in frame order. Only with an executor.
  virtual void DoFrameAsync(const FrameData& /*frame*/) {}
  // Through the executor, with interval_frame_replay() frames (fewer when the
  // tracer stops). Default: DoFrameAsync() for each.
  virtual void DoReplay(const std::vector<FrameData>& frames) {
    for (const FrameData& frame : frames) DoFrameAsync(frame);
  }

 private:
  Executor* const executor_;
  const int interval_frames_;
};

class FrameTracer : public Tracer {
 public:
  struct Options {
    // Required: monitor, worker_looper (drains frames, builds reports),
    // report (Trace_FPS issues). The timeline, when given, goes with a report
    // that has frozen frames, detected when it is published.
    TracerEnv env;
    bool fps_report = true;            // Publish Trace_FPS reports.
    bool report_in_background = false;  // Count frames drawn in the background.
    DropThresholds thresholds;
    // Wall time covered by one Trace_FPS report per scene; a slice that
    // ended is reported on the next drain.
    absl::Duration time_slice = absl::Seconds(10);
    absl::Duration drain_period = absl::Milliseconds(100);
    // A sync listener taking longer than this is reported in a warning.
    absl::Duration slow_sync_listener = absl::Milliseconds(4);
  };
  static constexpr size_t kRingCapacity = 1024;

  explicit FrameTracer(Options options);
  ~FrameTracer() override;

  // AddListener()
  //
  // Registers `listener` (not owned) until the handle is destroyed. Once the
  // handle is gone, the listener is not called again (a call already running
  // on another thread finishes first). Looper thread.
  [[nodiscard]] ObserverRegistration AddListener(IDoFrameListener* listener);

  // Publishes the pending statistics of every scene now (worker thread
  // delivers them). Any thread.
  void FlushReports();

  // Frames refused because the worker fell behind. Any thread.
  uint64_t lost_frames() const { return ring_->dropped(); }
  // Sync listener calls that exceeded `slow_sync_listener`. Any thread.
  uint64_t slow_sync_listener_calls() const { return slow_sync_calls_.load(); }

  // An input event was handled `latency` after it happened, while `scene`
  // was visible (InputLagTracer calls this). Looper thread; no allocation.
  void OnInputHandled(SceneId scene, absl::Duration latency);

  void DoFrame(const FrameData& frame) override;
  void OnForeground(bool foreground) override;

 protected:
  void OnAlive() override;
  void OnDead() override;

 private:
  struct AsyncSlot;
  class SyncListenerEntry;
  // Empties the ring into the statistics and the async listeners (worker).
  void Drain();
  // Posts the periodic drain of timer `generation`; it re-posts itself only
  // while that timer is current (a stop then start does not leave two).
  void ScheduleDrain(uint64_t generation);
  void Deliver(const std::shared_ptr<AsyncSlot>& slot, std::vector<FrameData> frames);
  // Sends one Trace_FPS issue to options_.env.report (worker).
  void PublishReport(proto::FrameReport report);

  Options options_;
  std::unique_ptr<internal::SpscRing<FrameData, kRingCapacity>> ring_;
  struct InputLatency {
    SceneId scene = AppState::kDefaultScene;
    int64_t latency_ns = 0;
  };
  std::unique_ptr<internal::SpscRing<InputLatency, 256>> input_ring_;
  ObserverRegistration monitor_registration_;
  ObserverList<IDoFrameListener> sync_listeners_;
  TimeTicks last_frame_end_;  // Looper thread.
  std::unique_ptr<Handler> worker_handler_;

  // Async listeners, shared with the worker.
  absl::Mutex async_mu_;
  std::vector<std::shared_ptr<AsyncSlot>> async_slots_ ABSL_GUARDED_BY(async_mu_);
  std::atomic<bool> has_async_listeners_{false};

  // Worker-side state.
  FrameStatsCollector stats_;
  uint64_t reported_lost_ = 0;

  std::atomic<bool> draining_{false};  // Keep re-posting Drain() while true.
  std::atomic<uint64_t> drain_generation_{0};
  std::atomic<uint64_t> slow_sync_calls_{0};
  std::atomic<int64_t> slowest_sync_ns_{0};
  // The slowest sync listener's name(), taken on the looper thread only when
  // a call is slow (and slower than any before), for the worker's warning.
  absl::Mutex slowest_mu_;
  std::string slowest_sync_name_ ABSL_GUARDED_BY(slowest_mu_);
  uint64_t warned_slow_calls_ = 0;
  MATRIX_THREAD_CHECKER(thread_checker_);
};

}  // namespace matrix

#endif  // MATRIX_TRACE_FRAME_TRACER_H_

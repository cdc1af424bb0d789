// File: matrix/trace/ui_thread_monitor.h
//
// UIThreadMonitor watches the UI (looper) thread for the tracers. It reports
// each dispatch's begin and end and, for a dispatch that draws a frame, the
// frame (intended vsync, refresh rate, time in each Choreographer queue) to
// LooperObservers (FrameTracer, AnrTracer, EvilMethodTracer, StartupTracer):
//
//   DispatchBegin(dispatch) -> DoFrame(frame) (vsync frames only) -> DispatchEnd(dispatch)
//
// Its LooperMonitor writes every dispatch into this monitor's heartbeat and
// calls it only when an observer needs the event, so a plain message costs it
// no call. Frames are timed from the Choreographer's own queue starts; a
// foreign render loop reports them with MarkFrame() and MarkPhase(). Thread
// CPU time is sampled from the watchdog thread, never read per message. See
// docs/architecture.md, "The per-dispatch path" and "Frames".
//
//   matrix::UIThreadMonitor monitor(&looper_monitor, choreographer, options);
//   monitor.Start();
//   auto registration = monitor.AddObserver(&frame_tracer);
//
// Thread safety: looper-thread only, except heartbeat(), ReadProvisional(),
// CpuSampleFor(), stopped_time() and SnapshotFrame(), which any thread may
// call.

#ifndef MATRIX_TRACE_UI_THREAD_MONITOR_H_
#define MATRIX_TRACE_UI_THREAD_MONITOR_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "matrix/core/app_state.h"
#include "matrix/core/check.h"
#include "matrix/core/observer_list.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/core/thread_handle.h"
#include "matrix/core/time_ticks.h"
#include "matrix/trace/dispatch_heartbeat.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/stopped_time.h"

namespace matrix {

class Choreographer;
class Handler;
class Looper;
class MethodTracer;

// One dispatched message and, when it drew one, its frame.
struct FrameData {
  SceneId scene = AppState::kDefaultScene;
  TimeTicks start;  // Dispatch begin.
  TimeTicks end;    // Dispatch end.
  // When a render thread presented the frame (MarkPresented()); null: at `end`.
  TimeTicks presented;
  // When the frame reached the screen: drops count up to it.
  TimeTicks shown() const { return presented.is_null() ? end : presented; }
  bool is_vsync_frame = false;
  // The vsync that started the frame (== start for other messages).
  TimeTicks intended_frame_time;
  RefreshRate refresh_rate;
  int64_t frame_number = 0;
  // Nanoseconds in each Choreographer queue, in UIThreadMonitor::Phase order:
  // zero when not a frame or unknown, INT64_MAX for a phase without end.
  // input() to commit() give them as absl::Duration.
  std::array<int64_t, 4> phase_ns{};
  absl::Duration input() const { return PhaseCost(0); }
  absl::Duration animation() const { return PhaseCost(1); }
  absl::Duration traversal() const { return PhaseCost(2); }
  absl::Duration commit() const { return PhaseCost(3); }
  absl::Duration PhaseCost(int phase) const {
    const int64_t ns = phase_ns[phase];
    if (ns == INT64_MAX) return absl::InfiniteDuration();
    if (ns == INT64_MIN) return -absl::InfiniteDuration();
    return absl::Nanoseconds(ns);
  }
  // Sets the four costs (adapters, tests); saturates as ToInt64Nanoseconds().
  void SetPhaseCosts(absl::Duration input, absl::Duration animation = absl::ZeroDuration(),
                     absl::Duration traversal = absl::ZeroDuration(),
                     absl::Duration commit = absl::ZeroDuration()) {
    phase_ns = {absl::ToInt64Nanoseconds(input), absl::ToInt64Nanoseconds(animation),
                absl::ToInt64Nanoseconds(traversal), absl::ToInt64Nanoseconds(commit)};
  }
  // The vsyncs the frame missed (CountDroppedFrames()). Filled by FrameTracer.
  int64_t dropped_frames = 0;

  // The dropped vsyncs as UIThreadMonitor counted them once for every
  // observer, after the frame that ended at `counted_drops_after` (null for
  // its first frame). An observer whose last frame ended then uses them.
  // False / zero in a FrameData built elsewhere.
  bool has_counted_drops = false;
  int64_t counted_drops = 0;
  TimeTicks counted_drops_after;

  // end - intended vsync.
  absl::Duration jitter() const { return end - intended_frame_time; }
};

// A dispatch, as its observers see it.
struct DispatchData {
  uint64_t dispatch_number = 0;  // The heartbeat's number for this dispatch.
  TimeTicks begin;
  TimeTicks end;  // DispatchEnd only.
  bool is_vsync_frame = false;  // DispatchEnd only.
  // Thread CPU time over a window ending at `end`, when the dispatch was long
  // enough to be sampled (DispatchEnd only).
  bool cpu_sampled = false;
  absl::Duration cpu_time;
  absl::Duration cpu_wall;
  const DispatchInfo* info = nullptr;  // DispatchBegin only.
  // Method tracing, when on: the dispatch's records are [method_mark,
  // method_end) of the MethodTracer (method_end is set at DispatchEnd).
  uint64_t method_mark = 0;
  uint64_t method_end = 0;

  // Thread CPU / wall time in percent, or -1 when not sampled.
  double CpuUsagePercent() const {
    if (!cpu_sampled || cpu_wall <= absl::ZeroDuration()) return -1;
    return 100.0 * absl::FDivDuration(cpu_time, cpu_wall);
  }
};

// Matrix's LooperObserver. Callbacks run on the looper thread for every
// dispatch: keep them cheap (no allocation, lock, syscall or log line). An
// observer names the callbacks it wants at construction; only those are
// called.
//
// Thread safety: callbacks on the looper thread; the dispatch-end floor may
// be set from any thread.
class LooperObserver {
 public:
  enum Callbacks : uint8_t {
    kDispatchBegin = 1,
    kDoFrame = 2,
    kDispatchEnd = 4,
    kAllCallbacks = kDispatchBegin | kDoFrame | kDispatchEnd,
  };
  explicit LooperObserver(uint8_t callbacks = kAllCallbacks) : callbacks_(callbacks) {}
  virtual ~LooperObserver() = default;

  virtual void DispatchBegin(const DispatchData& /*dispatch*/) {}
  // Each vsync frame, between its DispatchBegin and DispatchEnd (plain
  // messages get DispatchEnd only).
  virtual void DoFrame(const FrameData& /*frame*/) {}
  virtual void DispatchEnd(const DispatchData& /*dispatch*/) {}

  uint8_t callbacks() const { return callbacks_; }

  // The shortest dispatch (ns) whose DispatchEnd() this observer needs;
  // shorter ones are skipped without a call. 0, the default: every dispatch;
  // kNoDispatchEnd: none. Any thread; the change applies from the next
  // dispatch end.
  static constexpr int64_t kNoDispatchEnd = INT64_MAX;
  void set_dispatch_end_floor_ns(int64_t ns) {
    if (dispatch_end_floor_ns_.exchange(ns) != ns) LooperDispatchListener::NoteEndFloorChange();
  }
  int64_t dispatch_end_floor_ns() const { return dispatch_end_floor_ns_.load(); }

 private:
  const uint8_t callbacks_;
  std::atomic<int64_t> dispatch_end_floor_ns_{0};
};

// FrameCadence: a program's own steady frame rate, learned from the
// intervals between its frames' ends (the median of the last kWindow
// intervals, when most lie near it; docs/architecture.md, "Frames"). A 30 fps
// stream on a 60 Hz display has a cadence of 33.3 ms. Fixed storage; a frame
// costs a store and a compare.
//
// Thread safety: one thread (the looper thread calls Add() once per frame).
class FrameCadence {
 public:
  static constexpr int kWindow = 8;  // A power of two.
  static constexpr int64_t kMaxIntervalNs = 100'000'000;  // 100 ms: 10 fps.

  void Add(int64_t interval_ns);
  // The cadence in ns, or 0 when the frames are not steady.
  int64_t SteadyNanoseconds() const { return steady_ns_; }

 private:
  int64_t intervals_ns_[kWindow] = {};
  int next_ = 0;
  int count_ = 0;
  int64_t steady_ns_ = 0;
};

class UIThreadMonitor : public LooperDispatchListener {
 public:
  enum class Phase { kInput = 0, kAnimation = 1, kTraversal = 2, kCommit = 3 };
  static constexpr int kPhaseCount = 4;

  struct Options {
    // The watchdog looper for the CPU sampler; null disables CPU sampling.
    Looper* sampler_looper = nullptr;
    absl::Duration cpu_sample_period = absl::Milliseconds(50);
    AppState* app_state = AppState::Get();
    // Writes each dispatch's begin and end into this method tracer (not
    // owned; null when method tracing is off).
    MethodTracer* method_tracer = nullptr;
    // Dispatches the heartbeat's ring keeps (see DispatchHeartbeat): the
    // watchdogs need only the last; a Timeline reads its dispatches there.
    size_t dispatch_history = DispatchHeartbeat::kMinCapacity;
    // Tells the watchdog's late wake-ups caused by a stop from those caused
    // by a wait to run (a CPU quota, a busy machine): see StoppedTime. Null:
    // every late wake-up is a stop. TracePlugin passes
    // SystemWaitToRunReader() (proc_stats.h) for the looper thread.
    StoppedTime::WaitToRunReader wait_to_run;
  };

  // `looper_monitor` and `choreographer` (null for a foreign render loop) are
  // not owned and must outlive the monitor. Construct on the looper thread.
  UIThreadMonitor(LooperMonitor* looper_monitor, Choreographer* choreographer, Options options);
  ~UIThreadMonitor() override;
  UIThreadMonitor(const UIThreadMonitor&) = delete;
  UIThreadMonitor& operator=(const UIThreadMonitor&) = delete;

  void Start();
  void Stop();
  bool is_alive() const { return alive_; }

  [[nodiscard]] ObserverRegistration AddObserver(LooperObserver* observer);

  // MarkFrame() / MarkPhase()
  //
  // Foreign render loops, inside a dispatch: this dispatch draws the frame
  // whose vsync was `intended_vsync`; then each phase as it starts. A frame
  // that waited behind the loop's own long dispatch counts from when it was
  // due at the program's pace (its cadence, else the refresh interval) while
  // an animation runs, so a stall anywhere on the thread is one frozen frame
  // with its drops (docs/architecture.md, "Frames"). Looper thread.
  static constexpr int kDueIntervals = 2;
  void MarkFrame(TimeTicks intended_vsync, RefreshRate rate, int64_t frame_number = 0);
  // A render thread presented the frame this dispatch marked, at `presented`
  // (no later than now): its drops, the cadence and the next frame's due time
  // count from then. Looper thread, after MarkFrame().
  void MarkPresented(TimeTicks presented);
  void MarkPhase(Phase phase, TimeTicks start);

  // A foreign render loop that calls MarkFrame() registers while attached, so
  // that tracers waiting for a frame know one will come. Looper thread.
  void AddFrameSource() { ++frame_sources_; }
  void RemoveFrameSource() {
    MATRIX_DCHECK(frame_sources_ > 0, "RemoveFrameSource without AddFrameSource");
    --frame_sources_;
  }
  // Whether a foreign frame source is registered. Looper thread.
  bool has_frame_source() const { return frame_sources_ > 0; }

  const DispatchHeartbeat& heartbeat() const { return heartbeat_; }
  // Whether a dispatch runs now, and when the first one since Start() began
  // (null before it). Looper thread.
  bool in_dispatch() const {
    // A dispatch runs, and it began after Start() (the heartbeat numbers the
    // dispatches the LooperMonitor records for this monitor).
    return alive_ && looper_monitor_->is_dispatching() &&
           heartbeat_.dispatch_number() > start_number_;
  }
  TimeTicks first_dispatch_begin() const { return first_dispatch_begin_; }

  // The frame the dispatch in progress draws, as DoFrame() passed it:
  // meaningful from DoFrame() until the dispatch's DispatchEnd() returns.
  // Looper thread.
  const FrameData& current_frame() const { return frame_; }
  // When heartbeat snapshot `s` has no dispatch open but the loop's
  // ProvisionalDispatchSource says the next one already runs, turns `*s` into
  // that dispatch as the heartbeat will publish it and returns true; else
  // false (`*s` unchanged, or re-read when a dispatch began meanwhile). Any
  // thread.
  bool ReadProvisional(DispatchHeartbeat::Snapshot* s) const;
  const TickClock* clock() const { return looper_monitor_->clock(); }
  MethodTracer* method_tracer() const { return options_.method_tracer; }
  // The looper thread, for stack capture and CPU reads from other threads.
  const ThreadHandle& looper_thread() const { return looper_thread_; }

  // The CPU sample the sampler took during dispatch `dispatch_number`, if it
  // caught it: the looper thread's CPU time and the wall time of the sample.
  // Any thread.
  struct CpuSample {
    absl::Duration cpu;
    TimeTicks wall;
  };
  std::optional<CpuSample> CpuSampleFor(uint64_t dispatch_number) const;

  // When the process was stopped (SIGSTOP, a breakpoint), as the watchdog's
  // timed tasks saw it (they feed mutable_stopped_time() on the watchdog
  // thread). Reads from any thread.
  const StoppedTime& stopped_time() const { return stopped_time_; }
  StoppedTime& mutable_stopped_time() { return stopped_time_; }
  // Whether the CPU sampler runs (it observes stops every cpu_sample_period).
  bool observes_stops() const { return cpu_sampler_ != nullptr; }
  absl::Duration cpu_sample_period() const { return options_.cpu_sample_period; }

  // What the frame being drawn has spent so far (finished phases, and the
  // running one up to `now`); all zero outside a frame. Any thread.
  struct FrameSnapshot {
    bool in_frame = false;
    std::array<absl::Duration, kPhaseCount> phase_costs{};
  };
  FrameSnapshot SnapshotFrame(TimeTicks now) const;

 private:
  class CpuSampler;
  class FrameHook;
  void OnDispatchBegin(TimeTicks begin, const DispatchInfo& info) override;
  void OnDispatchEnd(TimeTicks begin, TimeTicks end) override;
  // The frame part of a dispatch end (out of line: a plain message's end
  // saves no registers for it), and the CPU reading of a long dispatch.
  [[gnu::noinline]] void EndFrame(TimeTicks begin, TimeTicks end);
  void ReadCpuSample(TimeTicks end);
  void ArmInputMarker();
  void OnInputMarker(TimeTicks input_start);
  void OnPhaseMarker(Phase phase);
  void BeginPhase(Phase phase, TimeTicks start);
  void SetFrame(TimeTicks intended_vsync, RefreshRate rate, int64_t frame_number);
  void OnObserverRemoved(LooperObserver* observer);
  void RebuildFlatLists();
  // What this monitor needs to hear from the LooperMonitor (see
  // LooperDispatchListener): recomputed when observers or floors change.
  void UpdateListenerNeeds();
  void FillDispatch(TimeTicks begin);
  void ResetFrameState();

  LooperMonitor* const looper_monitor_;
  Choreographer* const choreographer_;
  const Options options_;
  const int64_t cpu_sample_period_ns_;
  const ThreadHandle looper_thread_;
  bool alive_ = false;
  ObserverRegistration monitor_registration_;
  // The observers of each callback (see AddObserver()): the registrations.
  ObserverList<LooperObserver> begin_observers_;
  ObserverList<LooperObserver> frame_observers_;
  ObserverList<LooperObserver> end_observers_;
  // Flat copies of the three lists, walked per dispatch; rebuilt outside a
  // dispatch (flat_stale_). One removed during a dispatch is cleared at once.
  std::vector<LooperObserver*> flat_begin_;
  std::vector<LooperObserver*> flat_frame_;
  std::vector<LooperObserver*> flat_end_;
  bool flat_stale_ = false;
  // The lowest dispatch-end floor among flat_end_'s observers, read when
  // LooperDispatchListener::end_floor_changes() was end_floors_seen_.
  int64_t min_end_floor_ns_ = 0;
  uint64_t end_floors_seen_ = 0;
  // The heartbeat's dispatch number at Start(): later ones are tracked.
  uint64_t start_number_ = 0;
  TimeTicks first_dispatch_begin_;
  // Keeps AddObserver() handles' active() honest once the monitor is gone.
  std::shared_ptr<UIThreadMonitor*> self_ = std::make_shared<UIThreadMonitor*>(this);
  DispatchHeartbeat heartbeat_;
  std::unique_ptr<CpuSampler> cpu_sampler_;
  StoppedTime stopped_time_;

  // The dispatch in progress (looper thread).
  DispatchData dispatch_;
  FrameData frame_;
  std::array<TimeTicks, kPhaseCount> phase_start_{};
  bool phases_marked_ = false;  // Some phase_start_ is set (cleared lazily).
  bool input_marker_armed_ = false;
  // The Choreographer's frame-start hook, whether it is ours, and whether it
  // claimed the frame in progress.
  std::unique_ptr<FrameHook> frame_hook_;
  bool frame_hook_installed_ = false;
  bool hooked_frame_ = false;
  int frame_sources_ = 0;
  // The due rule (MarkFrame()). Whether the loop waited kDueIntervals paces
  // since the last frame is the LooperMonitor's waited() (due_gap_ns_).
  TimeTicks last_frame_end_;
  TimeTicks frame_before_last_end_;
  int64_t last_interval_ns_ = 0;  // The last frame's refresh interval.
  FrameCadence cadence_;
  int64_t pace_ns_ = 0;
  int64_t due_gap_ns_ = 0;  // kDueIntervals * pace_ns_.
  RefreshRate last_frame_rate_ = RefreshRate::FromMillihertz(-1);  // None yet.

  // For SnapshotFrame() from other threads.
  std::atomic<bool> snapshot_in_frame_{false};
  std::atomic<bool> snapshot_hooked_frame_{false};
  std::array<std::atomic<int64_t>, kPhaseCount> snapshot_phase_start_ns_{};
  MATRIX_THREAD_CHECKER(thread_checker_);
};

}  // namespace matrix

#endif  // MATRIX_TRACE_UI_THREAD_MONITOR_H_

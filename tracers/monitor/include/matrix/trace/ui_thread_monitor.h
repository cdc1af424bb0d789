// File: matrix/trace/ui_thread_monitor.h
//
// UIThreadMonitor watches the UI (looper) thread for the tracers. For every
// dispatch it reports begin and end, and for a dispatch that draws a frame it
// reports the frame: the intended vsync time, the refresh rate, and how long
// each Choreographer queue took. It fans these out to LooperObservers
// (FrameTracer, AnrTracer, EvilMethodTracer, StartupTracer):
//
//   DispatchBegin(dispatch) -> [message runs; a frame runs its queues]
//   -> DoFrame(frame) (vsync frames only) -> DispatchEnd(dispatch)
//
// A plain message costs it no call: its LooperMonitor writes each dispatch
// once into this monitor's heartbeat (and the MethodTracer's dispatch
// records) and keeps the due rule's wait (LooperMonitor::RecordDispatches(),
// SetWaitThreshold()); it calls this monitor at a begin only for
// DispatchBegin() observers, and at an end only for a frame, a dispatch at
// least as long as the lowest dispatch-end floor of its observers, or a
// change among observers or floors. One UIThreadMonitor per LooperMonitor.
//
// Frames are timed as Matrix does: a marker at the head of the INPUT queue
// (armed without requesting a frame) marks the start of a vsync frame. With
// the Choreographer's frame-start hook (Choreographer::SetFrameStartListener)
// the marker is a flag the hook reads when INPUT starts, and the later phases
// start at the Choreographer's own queue starts (Choreographer::queue_start(),
// read when the frame ends); when another monitor holds the hook, the marker
// is a callback inserted at the head of INPUT, and it inserts callbacks at
// the heads of ANIMATION, TRAVERSAL and COMMIT. Either way each phase starts at the time the Choreographer took
// when that queue started, so timing a frame costs no extra clock read.
//
//   input      = ANIMATION start - INPUT start
//   animation  = TRAVERSAL start - ANIMATION start (includes INSETS_ANIMATION)
//   traversal  = COMMIT start - TRAVERSAL start
//   commit     = dispatch end - COMMIT start
//
// A foreign render loop reports its frames through the same monitor: inside a
// dispatch (see LooperMonitor's foreign hooks) it calls MarkFrame() and
// MarkPhase() for each phase.
//
// CPU time: reading a thread's CPU clock is a syscall, so it is never read per
// message. A sampler on the watchdog thread polls the heartbeat every
// `cpu_sample_period` (default 50 ms) and reads the looper thread's CPU clock
// once when it first sees a dispatch; the looper reads its own CPU clock at the
// end of those (long) dispatches only. Dispatches shorter than the period
// usually carry no CPU time; long ones carry thread CPU over the wall time
// since the sample (covering all but at most one period).
//
//   matrix::UIThreadMonitor monitor(&looper_monitor, choreographer, options);
//   monitor.Start();
//   auto registration = monitor.AddObserver(&frame_tracer);
//
// Thread safety: looper-thread only, except heartbeat(), ReadProvisional()
// and SnapshotFrame(), which any thread may call.

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
  // When a render thread's present put the frame on screen, if the loop knows
  // it (UIThreadMonitor::MarkPresented()); null: the frame was shown at `end`.
  TimeTicks presented;
  // When the frame reached the screen: drops count up to it, and the next
  // frame counts from it.
  TimeTicks shown() const { return presented.is_null() ? end : presented; }
  bool is_vsync_frame = false;
  // The vsync that started the frame (== start for other messages).
  TimeTicks intended_frame_time;
  RefreshRate refresh_rate;
  int64_t frame_number = 0;
  // Time in each Choreographer queue, in UIThreadMonitor::Phase order
  // (input, animation, traversal, commit), in whole nanoseconds: zero when
  // not a frame or unknown, INT64_MAX for a phase without end (an infinite
  // end). Nanoseconds, so that the looper thread converts nothing (an
  // absl::Duration conversion is a division); input() to commit() give them
  // as absl::Duration.
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
  // Sets the four costs (a FrameData built elsewhere: adapters, tests).
  // Saturates beyond the nanosecond range, as ToInt64Nanoseconds() does.
  void SetPhaseCosts(absl::Duration input, absl::Duration animation = absl::ZeroDuration(),
                     absl::Duration traversal = absl::ZeroDuration(),
                     absl::Duration commit = absl::ZeroDuration()) {
    phase_ns = {absl::ToInt64Nanoseconds(input), absl::ToInt64Nanoseconds(animation),
                absl::ToInt64Nanoseconds(traversal), absl::ToInt64Nanoseconds(commit)};
  }
  // The vsyncs the frame missed (see CountDroppedFrames). Filled by
  // FrameTracer.
  int64_t dropped_frames = 0;

  // Set by UIThreadMonitor so that its observers need not redo the work on
  // the looper thread (false / zero in a FrameData built elsewhere):
  // - the dropped vsyncs, counted once for every observer
  //   (CountDroppedFrames() after the frame that ended at
  //   `counted_drops_after`, null for the monitor's first frame). An
  //   observer whose last frame ended then uses it instead of counting.
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
// dispatch: keep them cheap (no allocation, lock, syscall or log line).
//
// An observer says which callbacks it wants when it is constructed; the
// monitor calls only those (a no-op virtual call per message per observer
// adds up on a hot path).
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
  // Each vsync frame, between its DispatchBegin and DispatchEnd. (Matrix also
  // calls doFrame for every other message, which is how its classic FPS came
  // to count messages as frames; here plain messages get DispatchEnd only.)
  virtual void DoFrame(const FrameData& /*frame*/) {}
  virtual void DispatchEnd(const DispatchData& /*dispatch*/) {}

  uint8_t callbacks() const { return callbacks_; }

  // The shortest dispatch, in nanoseconds, whose DispatchEnd() this observer
  // needs: the monitor skips the call for shorter ones (a slow-dispatch
  // detector costs one load and compare per message, not a virtual call).
  // 0, the default: every dispatch. Any thread may change it; the monitor
  // reads it at each dispatch end.
  static constexpr int64_t kNoDispatchEnd = INT64_MAX;  // A floor: no DispatchEnd() at all.
  // A change reaches the monitor at the next dispatch end: it keeps the
  // lowest floor of its observers, and the LooperMonitor calls it only for
  // dispatches that long (LooperDispatchListener::NoteEndFloorChange()).
  void set_dispatch_end_floor_ns(int64_t ns) {
    if (dispatch_end_floor_ns_.exchange(ns) != ns) LooperDispatchListener::NoteEndFloorChange();
  }
  int64_t dispatch_end_floor_ns() const { return dispatch_end_floor_ns_.load(); }

 private:
  const uint8_t callbacks_;
  std::atomic<int64_t> dispatch_end_floor_ns_{0};
};

// FrameCadence: a program's own steady frame rate, learned from the
// intervals between its frames' ends (UIThreadMonitor adds those of at least
// half a refresh interval: frames closer than that, from an uncapped
// renderer or a paced one catching up after a hitch, say nothing of a
// cadence). The median of the last kWindow intervals of at most
// kMaxIntervalNs (longer ones are idle or a stall) becomes the cadence when
// 3/4 of them lie within 25 % of it, and stays it while half do and the
// median moves less than 25 % (a late frame and its catch-up are two odd
// intervals; the first intervals stand for it until there are kWindow).
// A 30 fps stream on a 60 Hz display has a cadence of 33.3 ms; frames of
// anything from 16 to 50 ms have none. A full window is judged again every
// kWindow intervals, so a frame costs a store and a compare. Fixed storage,
// no allocation: the looper thread calls Add() once per frame.
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

  // Foreign render loops, inside a dispatch: this dispatch draws the frame
  // whose vsync was `intended_vsync`; then each phase as it starts.
  //
  // A foreign loop often cannot know when a frame was due (no vsync request
  // to see), so a frame that waited behind a long dispatch of its own would
  // look smooth. The due rule works at the program's pace: its steady
  // cadence (FrameCadence: a game capped at 30 fps, a video at its own
  // rate) when it has one, else the refresh interval. While an animation
  // runs (the previous frame came at most kDueIntervals paces after the one
  // before it) and the loop has not waited kDueIntervals paces or more since
  // the previous frame, the next frame was due one pace less half a refresh
  // interval after the previous one ended, and counts from there when that
  // is earlier than `intended_vsync`. So a 6 s stall in a 60 Hz or a 30 fps
  // animation, wherever on the thread it happened, is one frozen frame of
  // ~360 dropped; a frame of a steady 30 fps stream drops nothing while a
  // late one drops the vsyncs it was late by; a gap within 1.5 refresh
  // intervals of the pace is no drop (timer and swap jitter); and a frame
  // after an idle wait, or a first frame after none for a while, counts from
  // `intended_vsync`. The rule only ever adds drops. Looper thread.
  static constexpr int kDueIntervals = 2;
  void MarkFrame(TimeTicks intended_vsync, RefreshRate rate, int64_t frame_number = 0);
  // A render thread presented the frame this dispatch marked, at `presented`
  // (no later than now; it may be before the dispatch began, during the
  // loop's wait). The frame counts as shown then: its drops, the cadence and
  // the next frame's due time count from the present, not from the main
  // thread's dispatch end. Looper thread, after MarkFrame().
  void MarkPresented(TimeTicks presented);
  void MarkPhase(Phase phase, TimeTicks start);

  // A foreign render loop that will draw frames (calls MarkFrame()) registers
  // for as long as it is attached, so that tracers waiting for a frame (the
  // StartupTracer's "scene shown") know one will come. Looper thread.
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
  // Any thread (the watchdogs). When `s` (a heartbeat snapshot) has no
  // dispatch open and the loop's ProvisionalDispatchSource (see
  // LooperMonitor::SetProvisionalSource()) says the loop thread already runs
  // the next one, and no dispatch began meanwhile, turns `*s` into that
  // dispatch as the heartbeat will publish it (number + 1, active, the
  // source's begin and label, no message, method mark 0) and returns true.
  // Otherwise returns false, leaving `*s` alone, or re-read when a dispatch
  // began meanwhile. Loops without a source pay
  // one atomic load.
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
  // timed tasks saw it: the CPU sampler's poll every cpu_sample_period and
  // AnrTracer's checks feed it (watchdog thread, mutable_stopped_time());
  // hang and slow-method costs leave it out. Reads from any thread.
  const StoppedTime& stopped_time() const { return stopped_time_; }
  StoppedTime& mutable_stopped_time() { return stopped_time_; }
  // Whether the CPU sampler runs (it observes stops every cpu_sample_period).
  bool observes_stops() const { return cpu_sampler_ != nullptr; }
  absl::Duration cpu_sample_period() const { return options_.cpu_sample_period; }

  // What the frame being drawn has spent so far, readable from any thread
  // (for ANR reports): costs of finished phases and the running phase's time
  // up to `now`. All zero when the current dispatch is not a frame.
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
  // Flat copies of the three lists, walked per dispatch (no list iteration
  // bookkeeping per event). Rebuilt when observers come or go, outside a
  // dispatch (after it, when they change during one: flat_stale_); an
  // observer removed during a dispatch is cleared from them at once.
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
  // The Choreographer's frame-start hook (see FrameHook), whether it is
  // ours, and whether it claimed the frame in progress (whose later phases
  // are then the Choreographer's queue starts).
  std::unique_ptr<FrameHook> frame_hook_;
  bool frame_hook_installed_ = false;
  bool hooked_frame_ = false;
  int frame_sources_ = 0;
  // The due rule (MarkFrame()): the last two frames' ends, the refresh
  // interval of the last one, the program's cadence and its pace (the longer of the
  // two). Whether the loop waited kDueIntervals paces or more since the
  // last frame is the LooperMonitor's waited() (threshold due_gap_ns_).
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

#include "matrix/trace/ui_thread_monitor.h"

#include <algorithm>

#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/trace/dropped_frames.h"
#include "matrix/trace/method_tracer.h"

namespace matrix {

// Polls the heartbeat on the sampler (watchdog) looper and reads the looper
// thread's CPU clock once per dispatch it catches running.
class UIThreadMonitor::CpuSampler {
 public:
  CpuSampler(UIThreadMonitor* monitor, Looper* looper, absl::Duration period)
      : monitor_(monitor), handler_(looper, "matrix::UIThreadMonitor$CpuSampler"), period_(period) {
    PostPoll();
  }

  // Looper thread, at the end of dispatch `number`: the CPU sample taken
  // during it, if any.
  bool SampleFor(uint64_t number, absl::Duration* cpu, TimeTicks* wall) const {
    if (sampled_number_.load(std::memory_order_acquire) != number) return false;
    *cpu = absl::Nanoseconds(sample_cpu_ns_.load(std::memory_order_relaxed));
    *wall = TimeTicks::FromNanoseconds(sample_wall_ns_.load(std::memory_order_relaxed));
    return true;
  }

 private:
  void PostPoll() {
    due_ = monitor_->looper_monitor_->clock()->NowTicks() + period_;
    handler_.PostDelayed([this] { Poll(); }, this, period_);
  }

  void Poll() {
    // A poll far later than due: the process was stopped meanwhile.
    monitor_->stopped_time_.OnWakeup(due_, monitor_->looper_monitor_->clock()->NowTicks());
    const DispatchHeartbeat::Snapshot s = monitor_->heartbeat_.Read();
    if (s.active && s.dispatch_number != sampled_number_.load(std::memory_order_relaxed)) {
      const TickClock* clock = monitor_->looper_monitor_->clock();
      const absl::Duration cpu = clock->ThreadCpuTime(monitor_->looper_thread_);
      const TimeTicks now = clock->NowTicks();
      // Still the same dispatch? Otherwise the reading belongs to no one.
      if (monitor_->heartbeat_.dispatch_number() == s.dispatch_number) {
        sample_cpu_ns_.store(absl::ToInt64Nanoseconds(cpu), std::memory_order_relaxed);
        sample_wall_ns_.store(now.ToNanoseconds(), std::memory_order_relaxed);
        sampled_number_.store(s.dispatch_number, std::memory_order_release);
      }
    }
    PostPoll();
  }

  UIThreadMonitor* const monitor_;
  Handler handler_;
  const absl::Duration period_;
  TimeTicks due_;  // When the next poll should run (sampler thread).
  std::atomic<uint64_t> sampled_number_{0};
  std::atomic<int64_t> sample_cpu_ns_{0};
  std::atomic<int64_t> sample_wall_ns_{0};
};

// Claims the frame whose INPUT queue starts when the INPUT marker is armed
// (the marker, as a flag): one virtual call per frame. The later phases'
// starts are the Choreographer's own (Choreographer::queue_start()), read
// when the frame ends, instead of a marker callback per queue.
class UIThreadMonitor::FrameHook final : public Choreographer::FrameStartListener {
 public:
  explicit FrameHook(UIThreadMonitor* monitor) : monitor_(monitor) {}
  void OnFrameStart(TimeTicks input_start) override {
    // The hook runs before the INPUT queue's callbacks, as the marker at its
    // head did, with the same start time.
    if (monitor_->input_marker_armed_) monitor_->OnInputMarker(input_start);
  }

 private:
  UIThreadMonitor* const monitor_;
};

UIThreadMonitor::UIThreadMonitor(LooperMonitor* looper_monitor, Choreographer* choreographer,
                                 Options options)
    : looper_monitor_(looper_monitor),
      choreographer_(choreographer),
      options_(options),
      cpu_sample_period_ns_(absl::ToInt64Nanoseconds(options.cpu_sample_period)),
      looper_thread_(ThreadHandle::Current()),
      heartbeat_(options.dispatch_history) {
  MATRIX_CHECK(looper_monitor_ != nullptr, "UIThreadMonitor needs a LooperMonitor");
  MATRIX_CHECK(options_.app_state != nullptr, "UIThreadMonitor needs an AppState");
  stopped_time_.SetWaitToRunReader(options_.wait_to_run);
}

UIThreadMonitor::~UIThreadMonitor() { Stop(); }

void UIThreadMonitor::Start() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (alive_) return;
  alive_ = true;
  monitor_registration_ = looper_monitor_->AddListener(this);
  // The LooperMonitor writes each dispatch into the heartbeat and the method
  // trace, and keeps the due rule's wait, before any listener runs: this
  // monitor is called only for what it needs (see UpdateListenerNeeds()).
  looper_monitor_->RecordDispatches(&heartbeat_, options_.method_tracer);
  looper_monitor_->SetWaitThreshold(due_gap_ns_);
  start_number_ = heartbeat_.dispatch_number();
  first_dispatch_begin_ = TimeTicks();
  RebuildFlatLists();
  if (options_.sampler_looper != nullptr) {
    cpu_sampler_ =
        std::make_unique<CpuSampler>(this, options_.sampler_looper, options_.cpu_sample_period);
  }
  if (choreographer_ != nullptr) {
    // The Choreographer has one hook slot: when another monitor holds it,
    // this one times phases with a marker at the head of each queue.
    if (frame_hook_ == nullptr) frame_hook_ = std::make_unique<FrameHook>(this);
    frame_hook_installed_ = choreographer_->SetFrameStartListener(frame_hook_.get());
  }
  ArmInputMarker();
}

void UIThreadMonitor::Stop() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (!alive_) return;
  const bool was_in_dispatch = in_dispatch();
  alive_ = false;
  monitor_registration_.Reset();
  looper_monitor_->RecordDispatches(nullptr, nullptr);  // Ours (see Start()).
  cpu_sampler_.reset();
  if (choreographer_ != nullptr) {
    for (auto type : {Choreographer::kInput, Choreographer::kAnimation, Choreographer::kTraversal,
                      Choreographer::kCommit}) {
      choreographer_->RemoveCallbacks(type, this);
    }
    if (frame_hook_installed_) choreographer_->SetFrameStartListener(nullptr);
  }
  frame_hook_installed_ = false;
  hooked_frame_ = false;
  input_marker_armed_ = false;
  if (was_in_dispatch) {
    // Stopped mid-dispatch: end it for the observers that saw it begin.
    FillDispatch(looper_monitor_->dispatch_begin());
    dispatch_.end = looper_monitor_->clock()->NowTicks();
    for (LooperObserver* o : flat_end_) {
      if (o != nullptr) o->DispatchEnd(dispatch_);
    }
    ResetFrameState();
    if (flat_stale_) RebuildFlatLists();
  }
}

void UIThreadMonitor::FillDispatch(TimeTicks begin) {
  dispatch_.dispatch_number = heartbeat_.dispatch_number();
  dispatch_.method_mark = looper_monitor_->dispatch_method_mark();
  dispatch_.begin = begin;
}

void UIThreadMonitor::ResetFrameState() {
  frame_.is_vsync_frame = false;
  if (phases_marked_) {  // Only a dispatch that marked a phase left any.
    phase_start_.fill(TimeTicks());
    phases_marked_ = false;
  }
}

void UIThreadMonitor::UpdateListenerNeeds() {
  // Begins: for the first one since Start() (first_dispatch_begin()) and
  // for DispatchBegin() observers. Ends: of dispatches as long as the
  // lowest observer floor; frames and marked phases ask for theirs.
  set_wants_dispatch_begin(first_dispatch_begin_.is_null() || !flat_begin_.empty());
  end_floors_seen_ = LooperDispatchListener::end_floor_changes();
  min_end_floor_ns_ = LooperObserver::kNoDispatchEnd;
  for (LooperObserver* o : flat_end_) {
    if (o != nullptr) min_end_floor_ns_ = std::min(min_end_floor_ns_, o->dispatch_end_floor_ns());
  }
  set_dispatch_end_floor_ns(min_end_floor_ns_);
}

ObserverRegistration UIThreadMonitor::AddObserver(LooperObserver* observer) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  MATRIX_CHECK(observer != nullptr, "null observer");
  // One list per callback: a notification walks only the observers that
  // want it (no per-observer test and skipped entry per event).
  const uint8_t callbacks = observer->callbacks();
  std::array<ObserverRegistration, 3> registrations;
  if (callbacks & LooperObserver::kDispatchBegin) {
    registrations[0] = begin_observers_.Add(observer);
  }
  if (callbacks & LooperObserver::kDoFrame) registrations[1] = frame_observers_.Add(observer);
  if (callbacks & LooperObserver::kDispatchEnd) registrations[2] = end_observers_.Add(observer);
  // Not during a dispatch: its walks see the observers present at its begin.
  if (in_dispatch()) {
    flat_stale_ = true;
    RequestDispatchEnd();  // Rebuilt at its end.
  } else {
    RebuildFlatLists();
  }
  return ObserverRegistration(
      [registrations = std::move(registrations), weak = std::weak_ptr<UIThreadMonitor*>(self_),
       observer]() mutable {
        for (ObserverRegistration& r : registrations) r.Reset();
        if (auto self = weak.lock()) (*self)->OnObserverRemoved(observer);
      },
      std::weak_ptr<const void>(self_));
}

void UIThreadMonitor::OnObserverRemoved(LooperObserver* observer) {
  if (!in_dispatch()) {
    RebuildFlatLists();
    return;
  }
  // Mid-dispatch: it hears nothing more of this dispatch; the lists are
  // rebuilt when it ends.
  for (std::vector<LooperObserver*>* flat : {&flat_begin_, &flat_frame_, &flat_end_}) {
    for (LooperObserver*& o : *flat) {
      if (o == observer) o = nullptr;
    }
  }
  flat_stale_ = true;
  RequestDispatchEnd();
}

void UIThreadMonitor::RebuildFlatLists() {
  flat_stale_ = false;
  auto copy = [](ObserverList<LooperObserver>& list, std::vector<LooperObserver*>* flat) {
    flat->clear();
    list.Notify([&](LooperObserver* o) { flat->push_back(o); });
  };
  copy(begin_observers_, &flat_begin_);
  copy(frame_observers_, &flat_frame_);
  copy(end_observers_, &flat_end_);
  UpdateListenerNeeds();
}

void UIThreadMonitor::ArmInputMarker() {
  if (choreographer_ == nullptr || input_marker_armed_ || !alive_) return;
  input_marker_armed_ = true;
  // With the frame-start hook, the flag is the marker: the hook claims the
  // next frame when its INPUT queue starts (no callback inserted per frame).
  if (frame_hook_installed_) return;
  // At the head of INPUT, without requesting a frame: it runs first in the
  // next frame that somebody else asks for.
  choreographer_->InsertCallbackAtHead(
      Choreographer::kInput,
      [this] { OnInputMarker(choreographer_->current_queue_start()); }, this);
}

void UIThreadMonitor::OnInputMarker(TimeTicks input_start) {
  input_marker_armed_ = false;
  if (!in_dispatch()) {
    ArmInputMarker();  // A frame outside a tracked dispatch: wait for the next.
    return;
  }
  const Choreographer::FrameInfo& info = choreographer_->frame_info();
  // The Choreographer knows the vsync each frame was scheduled for.
  SetFrame(info.intended_vsync, info.refresh_rate, info.frame_number);
  BeginPhase(Phase::kInput, input_start);
  if (frame_hook_installed_) {
    // The Choreographer's queue starts time the later phases of this frame.
    hooked_frame_ = true;
    snapshot_hooked_frame_.store(true, std::memory_order_relaxed);
    return;
  }
  choreographer_->InsertCallbackAtHead(
      Choreographer::kAnimation, [this] { OnPhaseMarker(Phase::kAnimation); }, this);
  choreographer_->InsertCallbackAtHead(
      Choreographer::kTraversal, [this] { OnPhaseMarker(Phase::kTraversal); }, this);
  choreographer_->InsertCallbackAtHead(
      Choreographer::kCommit, [this] { OnPhaseMarker(Phase::kCommit); }, this);
}

void UIThreadMonitor::OnPhaseMarker(Phase phase) {
  BeginPhase(phase, choreographer_->current_queue_start());
}

void UIThreadMonitor::MarkFrame(TimeTicks intended_vsync, RefreshRate rate, int64_t frame_number) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (!in_dispatch()) return;  // A frame is drawn by a dispatch.
  // The due rule (see the header), at the program's pace: its steady
  // cadence when it has one, else the refresh interval.
  // In whole nanoseconds: frame ends are finite, and no absl::Duration
  // arithmetic runs on the looper thread per frame.
  const int64_t last_end_ns = last_frame_end_.ToNanoseconds();
  const bool animating = !frame_before_last_end_.is_null() &&
                         last_end_ns - frame_before_last_end_.ToNanoseconds() <= due_gap_ns_;
  if (animating && !looper_monitor_->waited()) {
    const TimeTicks due =
        TimeTicks::FromNanoseconds(last_end_ns + pace_ns_ - last_interval_ns_ / 2);
    if (due < intended_vsync) intended_vsync = due;
  }
  SetFrame(intended_vsync, rate, frame_number);
}

void UIThreadMonitor::MarkPresented(TimeTicks presented) {
  if (!in_dispatch() || !frame_.is_vsync_frame) return;
  frame_.presented = presented;
}

void UIThreadMonitor::SetFrame(TimeTicks intended_vsync, RefreshRate rate, int64_t frame_number) {
  RequestDispatchEnd();  // The frame ends with the dispatch.
  frame_.is_vsync_frame = true;
  frame_.presented = TimeTicks();
  frame_.intended_frame_time = intended_vsync;
  frame_.refresh_rate = rate;
  frame_.frame_number = frame_number;
  for (auto& start : snapshot_phase_start_ns_) start.store(0, std::memory_order_relaxed);
  snapshot_hooked_frame_.store(false, std::memory_order_relaxed);
  snapshot_in_frame_.store(true, std::memory_order_relaxed);
}

void UIThreadMonitor::MarkPhase(Phase phase, TimeTicks start) {
  if (!in_dispatch()) return;  // Outside a dispatch a phase belongs to no frame.
  RequestDispatchEnd();  // Its end clears the phases.
  BeginPhase(phase, start);
}

void UIThreadMonitor::BeginPhase(Phase phase, TimeTicks start) {
  const int i = static_cast<int>(phase);
  phase_start_[i] = start;
  phases_marked_ = true;
  snapshot_phase_start_ns_[i].store(start.ToNanoseconds(), std::memory_order_relaxed);
}

bool UIThreadMonitor::ReadProvisional(DispatchHeartbeat::Snapshot* s) const {
  if (s->active) return false;
  const char* label = nullptr;
  const TimeTicks begin = looper_monitor_->ProvisionalBegin(&label);
  if (begin.is_null()) return false;
  // The answer describes the dispatch after `s` only if none began since:
  // the source's reads come before this check (a seqlock-style re-read).
  std::atomic_thread_fence(std::memory_order_acquire);
  if (heartbeat_.dispatch_number() != s->dispatch_number) {
    *s = heartbeat_.Read();  // A dispatch began: that one is the news.
    return false;
  }
  DispatchHeartbeat::Snapshot next;
  next.dispatch_number = s->dispatch_number + 1;
  next.active = true;
  next.begin = begin;
  next.last_end = s->last_end;
  next.label = label;
  next.provisional = true;
  *s = std::move(next);
  return true;
}

void UIThreadMonitor::OnDispatchBegin(TimeTicks begin, const DispatchInfo& info) {
  // Heard only when wanted (UpdateListenerNeeds()): the LooperMonitor has
  // written the dispatch into the heartbeat and the method trace already.
  if (first_dispatch_begin_.is_null()) {
    first_dispatch_begin_ = begin;
    UpdateListenerNeeds();
  }
  if (flat_begin_.empty()) return;
  FillDispatch(begin);
  dispatch_.info = &info;
  for (LooperObserver* o : flat_begin_) {
    if (o != nullptr) o->DispatchBegin(dispatch_);
  }
  dispatch_.info = nullptr;
}

void UIThreadMonitor::OnDispatchEnd(TimeTicks begin, TimeTicks end) {
  // Heard for frames, marked phases, observer changes, and dispatches at
  // least as long as the lowest observer floor (and once after any floor
  // changed): the LooperMonitor skips the call for every other message.
  if (heartbeat_.dispatch_number() <= start_number_) return;  // Began before Start().
  if (frame_.is_vsync_frame) {
    EndFrame(begin, end);
    for (LooperObserver* o : flat_frame_) {
      if (o != nullptr) o->DoFrame(frame_);
    }
  }
  // A floor changed somewhere: read the observers' floors again (the
  // LooperMonitor calls this once after any change).
  if (LooperDispatchListener::end_floor_changes() != end_floors_seen_) UpdateListenerNeeds();
  const int64_t cost_ns = end.ToNanoseconds() - begin.ToNanoseconds();
  if (cost_ns >= min_end_floor_ns_) {
    // Some observer hears this end: its DispatchData.
    FillDispatch(begin);
    dispatch_.method_end =
        options_.method_tracer != nullptr ? options_.method_tracer->Mark() : 0;
    dispatch_.end = end;
    dispatch_.is_vsync_frame = frame_.is_vsync_frame;
    dispatch_.cpu_sampled = false;
    // Only a dispatch that lasted at least a sample period reads the CPU
    // clock (one syscall at its end). A short one that the sampler happened
    // to catch in flight does not: in a stream of fast messages that would
    // be a syscall every period on the looper thread, for a useless sample.
    if (cpu_sampler_ != nullptr && cost_ns >= cpu_sample_period_ns_) ReadCpuSample(end);
    for (LooperObserver* o : flat_end_) {
      if (o != nullptr && cost_ns >= o->dispatch_end_floor_ns()) o->DispatchEnd(dispatch_);
    }
  }
  ResetFrameState();
  if (flat_stale_) RebuildFlatLists();  // Observers came or went during it.
}

void UIThreadMonitor::ReadCpuSample(TimeTicks end) {
  TimeTicks sample_wall;
  absl::Duration sample_cpu;
  if (!cpu_sampler_->SampleFor(dispatch_.dispatch_number, &sample_cpu, &sample_wall)) return;
  const absl::Duration cpu_end = looper_monitor_->clock()->ThreadCpuTime(looper_thread_);
  dispatch_.cpu_sampled = true;
  dispatch_.cpu_time = cpu_end - sample_cpu;
  dispatch_.cpu_wall = end - sample_wall;
}

void UIThreadMonitor::EndFrame(TimeTicks begin, TimeTicks end) {
  if (hooked_frame_) {
    // The phases after INPUT, from the Choreographer's queue starts
    // (INSETS_ANIMATION counts as animation).
    phase_start_[static_cast<int>(Phase::kAnimation)] =
        choreographer_->queue_start(Choreographer::kAnimation);
    phase_start_[static_cast<int>(Phase::kTraversal)] =
        choreographer_->queue_start(Choreographer::kTraversal);
    phase_start_[static_cast<int>(Phase::kCommit)] =
        choreographer_->queue_start(Choreographer::kCommit);
  }
  frame_.scene = options_.app_state->visible_scene_id();
  frame_.start = begin;
  frame_.end = end;
  // Each phase lasts until the next phase that started, or the dispatch end.
  const int64_t s0 = phase_start_[0].ToNanoseconds();
  const int64_t s1 = phase_start_[1].ToNanoseconds();
  const int64_t s2 = phase_start_[2].ToNanoseconds();
  const int64_t s3 = phase_start_[3].ToNanoseconds();
  const int64_t e = end.ToNanoseconds();
  if (s0 > 0 && s0 <= s1 && s1 <= s2 && s2 <= s3 && s3 <= e && !end.is_max()) {
    // Every phase started (none is null: all follow a positive one), in
    // order, before a finite end: four subtractions that cannot overflow.
    frame_.phase_ns = {s1 - s0, s2 - s1, s3 - s2, e - s3};
  } else {
    // With TimeTicks' saturating arithmetic (an infinite end, say).
    TimeTicks next = end;
    for (int i = kPhaseCount - 1; i >= 0; --i) {
      if (phase_start_[i].is_null()) {
        frame_.phase_ns[i] = 0;
      } else {
        frame_.phase_ns[i] = absl::ToInt64Nanoseconds(next - phase_start_[i]);
        next = phase_start_[i];
      }
    }
  }
  // A render thread's present (MarkPresented()) is when the frame was shown;
  // otherwise the dispatch end is.
  if (frame_.presented > end) frame_.presented = end;
  const TimeTicks shown = frame_.shown();
  // Counted once here for every observer (see FrameData).
  frame_.counted_drops = CountDroppedFrames(frame_.intended_frame_time, shown, last_frame_end_,
                                            frame_.refresh_rate);
  frame_.counted_drops_after = last_frame_end_;
  frame_.has_counted_drops = true;
  snapshot_in_frame_.store(false, std::memory_order_relaxed);
  // Frames less than half a refresh interval apart (an uncapped renderer, a
  // paced one catching up after a hitch) say nothing of a cadence.
  if (!last_frame_end_.is_null() &&
      (shown.ToNanoseconds() - last_frame_end_.ToNanoseconds()) * 2 >= last_interval_ns_) {
    cadence_.Add(shown.ToNanoseconds() - last_frame_end_.ToNanoseconds());
  }
  frame_before_last_end_ = last_frame_end_;
  last_frame_end_ = shown;
  // One interval in whole nanoseconds (RefreshRate::Intervals(1), without
  // absl::Duration arithmetic on the looper thread), worked out again only
  // when the rate changes.
  if (frame_.refresh_rate != last_frame_rate_) {
    last_frame_rate_ = frame_.refresh_rate;
    last_interval_ns_ = frame_.refresh_rate.TickAfter(TimeTicks(), 1).ToNanoseconds();
  }
  // A cadence slower than 1.5 refresh intervals is the program's own pace;
  // a faster one is the display's (its jitter is not a pace).
  const int64_t cadence_ns = cadence_.SteadyNanoseconds();
  pace_ns_ = cadence_ns * 2 >= last_interval_ns_ * 3 ? cadence_ns : last_interval_ns_;
  if (due_gap_ns_ != pace_ns_ * kDueIntervals) {
    due_gap_ns_ = pace_ns_ * kDueIntervals;
    looper_monitor_->SetWaitThreshold(due_gap_ns_);
  }
  looper_monitor_->ClearWaited();
  hooked_frame_ = false;
  ArmInputMarker();
}

void FrameCadence::Add(int64_t interval_ns) {
  if (interval_ns <= 0 || interval_ns > kMaxIntervalNs) return;  // Idle or stalled.
  intervals_ns_[next_] = interval_ns;
  next_ = (next_ + 1) & (kWindow - 1);
  if (count_ < kWindow) {
    ++count_;
  } else if (next_ != 0) {
    return;  // A full window is judged once per kWindow intervals.
  }
  // The median of the window (insertion sort of at most kWindow values).
  int64_t sorted[kWindow] = {};
  for (int i = 0; i < count_; ++i) {
    int64_t v = intervals_ns_[i];
    int j = i;
    for (; j > 0 && sorted[j - 1] > v; --j) sorted[j] = sorted[j - 1];
    sorted[j] = v;
  }
  const int64_t median = sorted[count_ / 2];
  int near = 0;
  for (int i = 0; i < count_; ++i) {
    const int64_t off = sorted[i] > median ? sorted[i] - median : median - sorted[i];
    near += off * 4 <= median;  // Within 25 %.
  }
  // Becomes steady with 3/4 near the median; stays steady with half of a
  // full window, while the median stays within 25 % of the cadence.
  const int64_t moved = median > steady_ns_ ? median - steady_ns_ : steady_ns_ - median;
  const bool holds =
      steady_ns_ != 0 && count_ == kWindow && near * 2 >= count_ && moved * 4 <= steady_ns_;
  steady_ns_ = near * 4 >= count_ * 3 || holds ? median : 0;
}

std::optional<UIThreadMonitor::CpuSample> UIThreadMonitor::CpuSampleFor(
    uint64_t dispatch_number) const {
  CpuSample sample;
  if (cpu_sampler_ == nullptr ||
      !cpu_sampler_->SampleFor(dispatch_number, &sample.cpu, &sample.wall)) {
    return std::nullopt;
  }
  return sample;
}

UIThreadMonitor::FrameSnapshot UIThreadMonitor::SnapshotFrame(TimeTicks now) const {
  FrameSnapshot snapshot;
  snapshot.in_frame = snapshot_in_frame_.load(std::memory_order_relaxed);
  if (!snapshot.in_frame) return snapshot;
  int64_t starts[kPhaseCount];
  for (int i = 0; i < kPhaseCount; ++i) {
    starts[i] = snapshot_phase_start_ns_[i].load(std::memory_order_relaxed);
  }
  if (snapshot_hooked_frame_.load(std::memory_order_relaxed)) {
    // The Choreographer's queue starts (see EndFrame()); any that started
    // before this frame's INPUT belong to the frame before.
    const Choreographer::CallbackType queues[] = {
        Choreographer::kAnimation, Choreographer::kTraversal, Choreographer::kCommit};
    for (int i = 1; i < kPhaseCount; ++i) {
      const int64_t start = choreographer_->queue_start(queues[i - 1]).ToNanoseconds();
      starts[i] = start >= starts[0] ? start : 0;
    }
  }
  int64_t next = now.ToNanoseconds();
  for (int i = kPhaseCount - 1; i >= 0; --i) {
    if (starts[i] == 0) continue;
    snapshot.phase_costs[i] = absl::Nanoseconds(next - starts[i]);
    next = starts[i];
  }
  return snapshot;
}

}  // namespace matrix

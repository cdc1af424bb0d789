#include "matrix/trace/anr_tracer.h"

#include <algorithm>

#include "matrix/core/handler.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"
#include "matrix/trace/call_tree.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/report_context.h"
#include "matrix/trace/symbolizer.h"

namespace matrix {

// Everything taken at a threshold crossing, on the watchdog thread, and
// turned into a report on the worker.
struct AnrTracer::Crossing {
  proto::Detail detail = proto::ANR;
  DispatchHeartbeat::Snapshot snapshot;
  // Taken while the dispatch runs: the snapshot points into the message's
  // Handler, which may be gone by the time the worker builds the report.
  proto::MessageInfo message;
  TimeTicks captured_at;   // When the stack was taken (else when the watchdog asked).
  TimeTicks threshold_at;  // When the threshold was crossed.
  TimeTicks end;           // LAG: when the dispatch ended.
  RawStack stack;
  absl::Status stack_status;
  std::vector<RawStack> key_stacks;  // Captured shortly before the crossing.
  std::string thread_name;
  bool has_records = false;
  RecordCopy records;
  UIThreadMonitor::FrameSnapshot frame;
  proto::ThreadInfo thread;
  proto::MemoryInfo memory;
  std::optional<UIThreadMonitor::CpuSample> cpu_sample;
  absl::Duration cpu_now;
  SceneId scene = AppState::kDefaultScene;
  bool foreground = true;
  bool has_timeline = false;
  TimelineSnapshot timeline;
};

AnrTracer::AnrTracer(Options options)
    : Tracer(kDispatchEnd), options_(std::move(options)), proc_(options_.proc_root) {
  // DispatchEnd() matters only while a LAG is pending (see SyncEndFloor()).
  set_dispatch_end_floor_ns(kNoDispatchEnd);
  MATRIX_CHECK(options_.env.monitor != nullptr, "AnrTracer needs a UIThreadMonitor");
  MATRIX_CHECK(options_.env.watchdog_looper != nullptr, "AnrTracer needs a watchdog looper");
  MATRIX_CHECK(options_.env.worker_looper != nullptr, "AnrTracer needs a worker looper");
  MATRIX_CHECK(options_.lag_threshold < options_.anr_threshold,
               "the lag threshold must be shorter than the ANR threshold");
  MATRIX_CHECK(options_.key_captures >= 0 && options_.key_captures <= kMaxKeyCaptures,
               "key_captures must be in [0, kMaxKeyCaptures]");
  MATRIX_CHECK(options_.key_captures == 0 || options_.key_capture_spacing > absl::ZeroDuration(),
               "key_capture_spacing must be positive");
  if (!options_.key_capture) {
    options_.key_capture = options_.capture ? options_.capture
                                            : [](const ThreadHandle& thread, RawStack* out) {
                                                return StackCapturer::Get()->Capture(
                                                    thread, out, kKeyCaptureTimeout);
                                              };
  }
  if (!options_.capture) options_.capture = CaptureStack;
  watchdog_handler_ = std::make_unique<Handler>(options_.env.watchdog_looper, "matrix::AnrTracer");
  worker_handler_ =
      std::make_unique<Handler>(options_.env.worker_looper, "matrix::AnrTracer$Report");
}

AnrTracer::~AnrTracer() {
  OnCloseTrace();
  watchdog_handler_.reset();  // No check runs after this.
  worker_handler_.reset();
}

void AnrTracer::OnAlive() {
  monitor_registration_ = options_.env.monitor->AddObserver(this);
  alive_.store(true);
  // The first check: any dispatch running now is watched from its begin. It
  // was not scheduled, so it cannot be late (the last check before a stop
  // was scheduled long ago).
  watchdog_handler_->PostDelayed(
      [this] {
        scheduled_for_ = TimeTicks();
        Check();
      },
      this, absl::ZeroDuration());
}

void AnrTracer::OnDead() {
  monitor_registration_.Reset();
  alive_.store(false);
  watchdog_handler_->RemoveCallbacks(this);
  lag_pending_number_.store(0);
}

void AnrTracer::ScheduleCheck(TimeTicks at) {
  scheduled_for_ = at;
  watchdog_handler_->RemoveCallbacks(this);
  watchdog_handler_->PostAtTime([this] { Check(); }, this, at);
}

bool AnrTracer::DebuggerSuppresses() {
  if (options_.report_with_debugger) return false;
  absl::StatusOr<bool> attached = proc_.IsDebuggerAttached();
  if (!attached.ok() || !*attached) return false;
  debugger_suppressed_.fetch_add(1);
  return true;
}

std::unique_ptr<AnrTracer::Crossing> AnrTracer::Capture(const DispatchHeartbeat::Snapshot& s,
                                                        TimeTicks now, TimeTicks threshold_at,
                                                        bool for_anr) {
  claimed_dispatch_.store(s.dispatch_number);
  auto crossing = std::make_unique<Crossing>();
  crossing->snapshot = s;
  FillMessageInfo(s, &crossing->message);
  crossing->captured_at = now;
  crossing->threshold_at = threshold_at;
  const ThreadHandle& looper_thread = options_.env.monitor->looper_thread();
  crossing->stack_status = options_.capture(looper_thread, &crossing->stack);
  ++captures_in_check_;
  // The stack's own instant (the looper thread ran the capture's handler
  // then; a loaded machine may run it well after the watchdog asked), on the
  // same monotonic clock: the report's detection delay and cost are the
  // truth, not when the watchdog decided.
  if (crossing->stack_status.ok() && !crossing->stack.captured_at.is_null() &&
      crossing->stack.captured_at > now) {
    crossing->captured_at = crossing->stack.captured_at;
  }
  if (key_captures_.dispatch_number == s.dispatch_number && key_captures_.for_anr == for_anr) {
    crossing->key_stacks.assign(key_captures_.stacks.begin(),
                                key_captures_.stacks.begin() + key_captures_.count);
  }
  key_captures_.count = 0;
  // The rest of the evidence, as close to the crossing as possible.
  crossing->frame = options_.env.monitor->SnapshotFrame(now);
  FillThreadInfo(proc_, looper_thread.tid(), &crossing->thread);
  FillMemoryInfo(proc_, &crossing->memory);
  crossing->thread_name = crossing->thread.name();
  crossing->cpu_sample = options_.env.monitor->CpuSampleFor(s.dispatch_number);
  crossing->cpu_now = options_.env.monitor->clock()->ThreadCpuTime(looper_thread);
  crossing->scene = options_.env.app_state->visible_scene_id();
  crossing->foreground = options_.env.app_state->is_foreground();
  // A provisional dispatch has no begin record yet: no call tree.
  if (MethodTracer* tracer = options_.env.monitor->method_tracer();
      tracer != nullptr && !s.provisional) {
    crossing->records = tracer->Copy(s.method_mark, tracer->Mark());
    crossing->has_records = true;
  }
  if (options_.env.timeline.enabled()) {
    // The stuck dispatch and the window of what came before it.
    crossing->timeline = options_.env.timeline.Snapshot(now, now, now - s.begin);
    crossing->has_timeline = true;
  }
  return crossing;
}

void AnrTracer::Check() {
  if (!alive_.load()) return;
  const TickClock* clock = options_.env.monitor->clock();
  const TimeTicks now = clock->NowTicks();
  // A check far later than scheduled saw the process stopped meanwhile (one
  // tolerance for the stopped time and for what this tracer watched).
  StoppedTime& stopped_time = options_.env.monitor->mutable_stopped_time();
  const bool late = stopped_time.OnWakeup(scheduled_for_, now);
  if (late) late_wakeups_.fetch_add(1);
  captures_in_check_ = 0;

  DispatchHeartbeat::Snapshot s = options_.env.monitor->heartbeat().Read();
  // A loop that reports its dispatches late (libuv's I/O callbacks) may say
  // that the next one already runs: watch it as that dispatch.
  const bool provisional = options_.env.monitor->ReadProvisional(&s);
  if (!s.active && watch_.provisional && watch_.number == s.dispatch_number + 1) {
    // The provisional dispatch was never reported (the source went away):
    // forget it, so the dispatch that will carry its number is judged alone.
    uint64_t expected = watch_.number;
    if (lag_pending_number_.compare_exchange_strong(expected, 0)) pending_lag_.reset();
    watch_ = Watch{};
  }
  TimeTicks next = now + options_.lag_threshold;
  bool watched_ended = false;
  if (s.active) {
    if (s.dispatch_number != watch_.number) {
      watch_ = Watch{s.dispatch_number, s.begin, s.begin};
    } else if (s.begin != watch_.begin && !watch_.lag_done) {
      // A provisional begin moves while the loop still waits; the reported
      // dispatch may differ from the last provisional answer. Once a
      // threshold was crossed the dispatch is the one reported: keep it.
      watch_.begin = s.begin;
      watch_.watch_from = s.begin;
    }
    watch_.provisional = provisional;
    // Time the process was stopped (a breakpoint, SIGSTOP) is not the
    // dispatch's: it is left out, and the deadlines move by it. The
    // dispatch's clock is not restarted on a late check, which would also
    // drop the real hang time of a loaded machine.
    const absl::Duration stopped = stopped_time.Within(watch_.watch_from, now);
    const absl::Duration watched = now - watch_.watch_from - stopped;
    const TimeTicks running_from = watch_.watch_from + stopped;

    if (!watch_.anr_done && watched >= options_.anr_threshold) {
      CrossAnr(s, now, running_from + options_.anr_threshold);
    } else if (!watch_.lag_done && watched >= options_.lag_threshold) {
      watched_ended = CrossLag(s, provisional, now, running_from + options_.lag_threshold);
    }
    if (watched_ended) {
      next = now;
    } else if (!watch_.lag_done) {
      next = TakeKeyCapture(s, now, running_from + options_.lag_threshold, /*for_anr=*/false);
    } else if (!watch_.anr_done) {
      next = TakeKeyCapture(s, now, running_from + options_.anr_threshold, /*for_anr=*/true);
    }
  }
  SyncEndFloor();
  // Captures can keep the watchdog busy (a looper thread slow to take the
  // signal): its other tasks due meanwhile are not a stopped process, but a
  // check that took longer than its captures can saw one.
  stopped_time.OnBusy(now, clock->NowTicks(), StackCapturer::kLongestWait * captures_in_check_);
  ScheduleCheck(next);
}

void AnrTracer::CrossAnr(const DispatchHeartbeat::Snapshot& s, TimeTicks now,
                         TimeTicks crossed_at) {
  watch_.anr_done = watch_.lag_done = true;
  lag_pending_number_.store(0);  // The ANR replaces the pending LAG.
  pending_lag_.reset();
  if (DebuggerSuppresses()) return;
  auto crossing = Capture(s, now, crossed_at, /*for_anr=*/true);
  crossing->detail = proto::ANR;
  anr_count_.fetch_add(1);
  worker_handler_->Post(
      [this, c = std::shared_ptr<Crossing>(std::move(crossing))] { BuildAndReport(*c); });
}

bool AnrTracer::CrossLag(const DispatchHeartbeat::Snapshot& s, bool provisional, TimeTicks now,
                         TimeTicks crossed_at) {
  watch_.lag_done = true;
  // Published before the capture, and even when suppressed (no pending
  // report then): the next check is this dispatch's ANR deadline, so its
  // end must wake the watchdog (DispatchEnd), or the dispatches after it
  // would go unwatched until that deadline. Before the capture, so that a
  // dispatch ending while the capture runs (a slow capture: a loaded
  // machine, ThreadSanitizer) still reports its own end time: its
  // DispatchEnd posts the LAG, which runs on this thread after this check.
  set_dispatch_end_floor_ns(0);  // First: the looper must call DispatchEnd() now.
  lag_pending_number_.store(s.dispatch_number);
  if (!DebuggerSuppresses()) {
    pending_lag_ = Capture(s, now, crossed_at, /*for_anr=*/false);
    pending_lag_->detail = proto::LAG;
  }
  // If the dispatch ended before the looper could see the pending
  // number, report it from here and look at the looper again at once.
  // (A provisional dispatch runs on while the heartbeat shows the one
  // before it, or shows it running.)
  const DispatchHeartbeat::Snapshot after = options_.env.monitor->heartbeat().Read();
  const bool still_provisional = provisional && after.dispatch_number + 1 == s.dispatch_number;
  if (still_provisional || (after.dispatch_number == s.dispatch_number && after.active)) {
    return false;
  }
  uint64_t expected = s.dispatch_number;
  if (lag_pending_number_.compare_exchange_strong(expected, 0)) {
    EmitLag(after.dispatch_number == s.dispatch_number ? after.last_end : now);
  }
  return true;
}

void AnrTracer::SyncEndFloor() {
  // Watchdog thread, the only one that sets a pending number: with none
  // pending, none can appear before this store, and the looper thread skips
  // DispatchEnd() again. (The looper only ever clears the number.)
  if (lag_pending_number_.load() == 0) set_dispatch_end_floor_ns(kNoDispatchEnd);
}

TimeTicks AnrTracer::TakeKeyCapture(const DispatchHeartbeat::Snapshot& s, TimeTicks now,
                                    TimeTicks deadline, bool for_anr) {
  const int n = options_.key_captures;
  KeyCaptures& k = key_captures_;
  if (k.dispatch_number != s.dispatch_number || k.for_anr != for_anr) {
    k.dispatch_number = s.dispatch_number;
    k.for_anr = for_anr;
    k.count = 0;
  }
  if (k.count >= n) return deadline;
  const absl::Duration spacing = options_.key_capture_spacing;
  const TimeTicks due = deadline - spacing * (n - k.count);
  if (now < due) return due;
  RawStack& stack = k.stacks[static_cast<size_t>(k.count++)];
  if (!options_.key_capture(options_.env.monitor->looper_thread(), &stack).ok()) stack.depth = 0;
  ++captures_in_check_;
  if (k.count >= n) return deadline;
  return std::min(deadline, std::max(deadline - spacing * (n - k.count), now + spacing));
}

void AnrTracer::DispatchEnd(const DispatchData& dispatch) {
  // Looper thread: one atomic load per dispatch; the post happens only for a
  // dispatch that already lagged (>= the lag threshold).
  uint64_t pending = lag_pending_number_.load();
  if (pending != dispatch.dispatch_number || pending == 0) return;
  if (!lag_pending_number_.compare_exchange_strong(pending, 0)) return;
  const int64_t end_ns = dispatch.end.ToNanoseconds();
  watchdog_handler_->Post([this, end_ns, mark = dispatch.method_mark] {
    EmitLag(TimeTicks::FromNanoseconds(end_ns), std::optional<uint64_t>(mark));
    // The watchdog was asleep until this dispatch's ANR deadline: watch the
    // looper again now, so the next dispatch is judged from its own begin.
    scheduled_for_ = TimeTicks();
    Check();
  });
}

void AnrTracer::EmitLag(TimeTicks end, std::optional<uint64_t> method_mark) {
  if (pending_lag_ == nullptr) return;
  std::unique_ptr<Crossing> crossing = std::move(pending_lag_);
  crossing->end = end;
  // Captured provisionally: the dispatch's begin record is known now.
  if (crossing->snapshot.provisional && method_mark.has_value()) {
    crossing->snapshot.method_mark = *method_mark;
    crossing->snapshot.provisional = false;
  }
  if (MethodTracer* tracer = options_.env.monitor->method_tracer();
      tracer != nullptr && !crossing->snapshot.provisional) {
    // The whole dispatch is known now.
    crossing->records = tracer->Copy(crossing->snapshot.method_mark, tracer->Mark());
    crossing->has_records = true;
  }
  if (options_.env.timeline.enabled()) {
    // Again, now that the dispatch has ended; the detection stays the crossing.
    const TimeTicks now = std::max(options_.env.monitor->clock()->NowTicks(), end);
    crossing->timeline = options_.env.timeline.Snapshot(
        now, crossing->captured_at, crossing->captured_at - crossing->snapshot.begin);
  }
  lag_count_.fetch_add(1);
  worker_handler_->Post(
      [this, c = std::shared_ptr<Crossing>(std::move(crossing))] { BuildAndReport(*c); });
}

void AnrTracer::BuildAndReport(const Crossing& crossing) {
  const Crossing* c = &crossing;
  proto::AnrReport anr;
  anr.set_detail(c->detail);
  const TimeTicks until = c->detail == proto::LAG && !c->end.is_null() ? c->end : c->captured_at;
  // Stopped time (a breakpoint, SIGSTOP) is reported apart, not as cost.
  const absl::Duration stopped =
      options_.env.monitor->stopped_time().Within(c->snapshot.begin, until);
  const absl::Duration cost = until - c->snapshot.begin - stopped;
  anr.set_cost_ms(absl::ToDoubleMilliseconds(cost));
  anr.set_stopped_ms(absl::ToDoubleMilliseconds(stopped));
  anr.set_throttled_ms(absl::ToDoubleMilliseconds(
      options_.env.monitor->stopped_time().ThrottledWithin(c->snapshot.begin, until)));
  anr.set_scene(std::string(options_.env.app_state->SceneName(c->scene)));
  anr.set_is_process_foreground(c->foreground);
  anr.set_detection_delay_ms(absl::ToDoubleMilliseconds(c->captured_at - c->threshold_at));

  proto::ThreadStack* stack = anr.mutable_thread_stack();
  const SymbolizedStack symbolized = FillCapturedStack(
      c->stack, c->stack_status, options_.env.monitor->looper_thread().tid(), stack);
  stack->set_thread_name(c->thread_name);
  stack->set_captured_at_ms(absl::ToDoubleMilliseconds(c->captured_at - c->snapshot.begin));

  std::vector<SymbolizedStack> earlier;
  earlier.reserve(c->key_stacks.size());
  for (const RawStack& raw : c->key_stacks) earlier.push_back(SymbolizeStack(raw));

  std::optional<TracedCallTree> traced_tree;
  absl::flat_hash_set<uintptr_t> traced;
  if (c->has_records) {
    traced_tree = BuildCallTree(c->records.records, until, cost);
    traced = TracedFunctions(symbolized, c->records.records);
  }
  const std::string key =
      HangStackKey(symbolized, traced_tree ? &traced_tree->tree : nullptr, traced, cost, earlier);
  anr.set_stack_key(key);
  if (traced_tree) {
    FillCallTree(traced_tree->tree, anr.mutable_stack(), anr.mutable_stack_text());
    anr.set_stack_truncated(c->records.truncated());
  }

  proto::QueueCosts* queues = anr.mutable_queue_costs();
  queues->set_input_ms(absl::ToDoubleMilliseconds(c->frame.phase_costs[0]));
  queues->set_animation_ms(absl::ToDoubleMilliseconds(c->frame.phase_costs[1]));
  queues->set_traversal_ms(absl::ToDoubleMilliseconds(c->frame.phase_costs[2]));
  queues->set_commit_ms(absl::ToDoubleMilliseconds(c->frame.phase_costs[3]));
  *anr.mutable_thread() = c->thread;
  *anr.mutable_memory() = c->memory;
  *anr.mutable_message() = c->message;
  if (c->cpu_sample && c->captured_at > c->cpu_sample->wall) {
    anr.set_cpu_usage(100.0 * absl::FDivDuration(c->cpu_now - c->cpu_sample->cpu,
                                                 c->captured_at - c->cpu_sample->wall));
  } else {
    anr.set_cpu_usage(-1);
  }

  Issue issue;
  issue.mutable_proto()->set_tag(kTagEvilMethod);
  issue.mutable_proto()->set_key(key);
  *issue.mutable_proto()->mutable_anr() = std::move(anr);
  if (c->has_timeline) {
    options_.env.timeline
        .Fill(c->timeline, c->detail == proto::ANR ? "ANR watchdog" : "lag watchdog",
              options_.env.monitor->looper_thread().tid(), issue.mutable_proto())
        ->set_thread_name(c->thread_name);
  }
  if (options_.env.report) options_.env.report(std::move(issue));
}

}  // namespace matrix

#include "matrix/trace/evil_method_tracer.h"

#include <algorithm>
#include <vector>

#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/trace/anr_tracer.h"
#include "matrix/trace/call_tree.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/report_context.h"
#include "matrix/trace/sampled_stacks.h"
#include "matrix/trace/symbolizer.h"
#include "slow_dispatch_sampler.h"

namespace matrix {

// What the worker needs to explain one slow dispatch.
struct EvilMethodTracer::SlowDispatch {
  DispatchData dispatch;
  DispatchHeartbeat::Snapshot message;
  // Filled at the dispatch's end: the snapshot points into the message's
  // Handler, which may be gone by the time the worker builds the report.
  proto::MessageInfo message_info;
  FrameData frame;
  bool is_frame = false;
  SceneId scene = AppState::kDefaultScene;
  bool foreground = true;
};

namespace {
// How long after a dispatch's end the worker waits for the watchdog to run:
// a process just continued after a stop may wait for a CPU, the watchdog's
// thread too, for hundreds of milliseconds on a loaded machine.
constexpr absl::Duration kWaitForTheWatchdog = absl::Seconds(2);
}  // namespace

EvilMethodTracer::EvilMethodTracer(Options options)
    : Tracer(kDispatchEnd), options_(std::move(options)) {
  // The monitor calls DispatchEnd() for dispatches this long only.
  set_dispatch_end_floor_ns(absl::ToInt64Nanoseconds(options_.threshold));
  MATRIX_CHECK(options_.env.monitor != nullptr, "EvilMethodTracer needs a UIThreadMonitor");
  MATRIX_CHECK(options_.env.worker_looper != nullptr, "EvilMethodTracer needs a worker looper");
  MATRIX_CHECK(options_.threshold > absl::ZeroDuration(), "the evil threshold must be positive");
  worker_handler_ =
      std::make_unique<Handler>(options_.env.worker_looper, "matrix::EvilMethodTracer");
  if (const Sampling& sampling = options_.sampling; sampling.enabled) {
    SlowDispatchSampler::Options sampler;
    sampler.monitor = options_.env.monitor;
    sampler.watchdog_looper = options_.env.watchdog_looper;
    sampler.interval = sampling.interval;
    sampler.max_samples = sampling.max_samples;
    sampler.threshold = [this] { return evil_threshold(); };
    sampler.stop_sampling = [this](uint64_t number) {
      // Reported as LAG or ANR, with the hang's own evidence.
      return options_.anr_tracer != nullptr &&
             options_.anr_tracer->last_claimed_dispatch() == number;
    };
    sampler.sample_with_debugger = options_.report_with_debugger;
    sampler.proc_root = options_.proc_root;
    sampler.capture = sampling.capture;
    sampler_ = std::make_unique<SlowDispatchSampler>(std::move(sampler));
  }
}

EvilMethodTracer::~EvilMethodTracer() {
  OnCloseTrace();
  sampler_.reset();  // No capture runs after this.
  worker_handler_.reset();
}

int64_t EvilMethodTracer::stack_samples() const {
  return sampler_ != nullptr ? sampler_->captures() : 0;
}

void EvilMethodTracer::ModifyEvilThreshold(absl::Duration threshold) {
  if (threshold <= absl::ZeroDuration()) return;
  set_dispatch_end_floor_ns(absl::ToInt64Nanoseconds(threshold));
}

void EvilMethodTracer::OnAlive() {
  closing_.store(false);
  cancelled_.store(false);
  monitor_registration_ = options_.env.monitor->AddObserver(this);
  if (sampler_ != nullptr) sampler_->Start();
}

void EvilMethodTracer::OnDead() {
  monitor_registration_.Reset();
  if (sampler_ != nullptr) sampler_->Stop();
  // The stop detector stops with the monitor.
  StopWaitingForStopDetector();
}

void EvilMethodTracer::StopWaitingForStopDetector() {
  closing_.store(true);
  worker_handler_->Post([this] {
    std::vector<std::shared_ptr<SlowDispatch>> deferred;
    deferred.swap(deferred_);
    for (const auto& slow : deferred) Analyze(*slow);
  });
}

void EvilMethodTracer::CancelPendingAnalyses() { cancelled_.store(true); }

void EvilMethodTracer::DispatchEnd(const DispatchData& dispatch) {
  // The monitor skips shorter dispatches (the floor is the threshold); a
  // caller outside it may not.
  const int64_t cost_ns = dispatch.end.ToNanoseconds() - dispatch.begin.ToNanoseconds();
  if (cost_ns < dispatch_end_floor_ns()) return;
  OnSlowDispatch(dispatch);
}

__attribute__((noinline)) void EvilMethodTracer::OnSlowDispatch(const DispatchData& dispatch) {
  if (options_.anr_tracer != nullptr &&
      options_.anr_tracer->last_claimed_dispatch() == dispatch.dispatch_number) {
    return;  // Reported as LAG or ANR, with more evidence.
  }
  // A slow dispatch (>= the threshold): allocating here costs nothing that
  // matters next to it. Everything else happens on the worker.
  evil_count_.fetch_add(1);
  auto slow = std::make_shared<SlowDispatch>();
  slow->dispatch = dispatch;
  slow->dispatch.info = nullptr;
  slow->message = options_.env.monitor->heartbeat().Read();
  FillMessageInfo(slow->message, &slow->message_info);
  // The monitor still holds the frame this dispatch drew (no copy per frame
  // on the looper thread: only a slow dispatch reads it).
  slow->is_frame = dispatch.is_vsync_frame;
  if (slow->is_frame) slow->frame = options_.env.monitor->current_frame();
  slow->scene = options_.env.app_state->visible_scene_id();
  slow->foreground = options_.env.app_state->is_foreground();
  worker_handler_->Post([this, slow] { Analyze(*slow); });
}

void EvilMethodTracer::Analyze(const SlowDispatch& slow) {
  if (cancelled_.load()) {
    dropped_.fetch_add(1);
    return;
  }
  // Stopped time (a breakpoint, SIGSTOP) is not the dispatch's cost. A stop
  // is known once the watchdog ran after it: if the sampler has not polled
  // since the dispatch ended (the process may just have been continued),
  // look again one poll later, for up to kWaitForTheWatchdog; not once the
  // tracer closes (the sampler stopped with it), when it is judged on what
  // the sampler saw.
  const UIThreadMonitor* monitor = options_.env.monitor;
  const DispatchData& d = slow.dispatch;
  if (monitor->observes_stops() && monitor->stopped_time().observed_until() < d.end &&
      options_.env.worker_looper->clock()->NowTicks() - d.end < kWaitForTheWatchdog &&
      !closing_.load()) {
    auto again = std::make_shared<SlowDispatch>(slow);
    deferred_.push_back(again);
    worker_handler_->PostDelayed(
        [this, again] {
          // Gone from the list: OnDead() already ran it.
          auto it = std::find(deferred_.begin(), deferred_.end(), again);
          if (it == deferred_.end()) return;
          deferred_.erase(it);
          Analyze(*again);
        },
        monitor->cpu_sample_period());
    return;
  }
  const absl::Duration stopped = monitor->stopped_time().Within(d.begin, d.end);
  Conclude(slow, d.end - d.begin - stopped, stopped);
}

void EvilMethodTracer::Conclude(const SlowDispatch& slow, absl::Duration cost,
                                absl::Duration stopped) {
  const DispatchData& d = slow.dispatch;
  if (stopped > absl::ZeroDuration() &&
      cost < absl::Nanoseconds(dispatch_end_floor_ns())) {
    stopped_suppressed_.fetch_add(1);
    return;  // Slow only because the process was stopped.
  }
  if (!options_.report_with_debugger) {
    // On the worker: reading /proc never costs the looper thread.
    absl::StatusOr<bool> attached = ProcReader(options_.proc_root).IsDebuggerAttached();
    if (attached.ok() && *attached) {
      debugger_suppressed_.fetch_add(1);
      return;
    }
  }
  proto::EvilMethodReport report;
  report.set_detail(proto::NORMAL);
  report.set_cost_ms(absl::ToDoubleMilliseconds(cost));
  report.set_stopped_ms(absl::ToDoubleMilliseconds(stopped));
  report.set_throttled_ms(absl::ToDoubleMilliseconds(
      options_.env.monitor->stopped_time().ThrottledWithin(d.begin, d.end)));
  report.set_scene(std::string(options_.env.app_state->SceneName(slow.scene)));
  report.set_is_process_foreground(slow.foreground);
  report.set_cpu_usage(d.CpuUsagePercent());
  *report.mutable_message() = slow.message_info;
  if (slow.is_frame) {
    proto::QueueCosts* q = report.mutable_queue_costs();
    q->set_input_ms(absl::ToDoubleMilliseconds(slow.frame.input()));
    q->set_animation_ms(absl::ToDoubleMilliseconds(slow.frame.animation()));
    q->set_traversal_ms(absl::ToDoubleMilliseconds(slow.frame.traversal()));
    q->set_commit_ms(absl::ToDoubleMilliseconds(slow.frame.commit()));
  }

  std::string key;
  if (MethodTracer* tracer = options_.env.monitor->method_tracer(); tracer != nullptr) {
    RecordCopy copy = tracer->Copy(d.method_mark, d.method_end);
    TracedCallTree traced = BuildCallTree(copy.records, d.end, cost);
    key = std::move(traced.key);
    FillCallTree(traced.tree, report.mutable_stack(), report.mutable_stack_text());
    report.set_stack_truncated(copy.truncated());
  }
  if (sampler_ != nullptr) AddSamples(d, &report, &key);
  if (key.empty()) {
    // No traced call explains it: name the message instead.
    key = slow.message.posted_from.has_source_info() ? slow.message.posted_from.ToString()
                                                    : "dispatch";
  }
  report.set_stack_key(key);

  Issue issue;
  issue.mutable_proto()->set_tag(kTagEvilMethod);
  issue.mutable_proto()->set_key(key);
  *issue.mutable_proto()->mutable_evil_method() = std::move(report);
  options_.env.timeline.Attach(*options_.env.monitor, d.end, d.end - d.begin,
                               "slow-method check at dispatch end", issue.mutable_proto());
  if (options_.env.report) options_.env.report(std::move(issue));
}

void EvilMethodTracer::AddSamples(const DispatchData& d, proto::EvilMethodReport* report,
                                  std::string* key) {
  std::optional<SlowDispatchSampler::Samples> samples = sampler_->Take(d.dispatch_number, d.end);
  if (!samples.has_value()) return;  // Ended before the sampler saw it cross.
  const UIThreadMonitor* monitor = options_.env.monitor;
  const pid_t tid = monitor->looper_thread().tid();
  proto::ThreadStack* crossing = report->mutable_thread_stack();
  if (!samples->crossing_status.ok()) {
    crossing->set_tid(tid);
    crossing->set_error(samples->crossing_status.ToString());
  }
  if (!samples->captured_at.is_null()) {
    crossing->set_captured_at_ms(absl::ToDoubleMilliseconds(samples->captured_at - d.begin));
    report->set_detection_delay_ms(
        absl::ToDoubleMilliseconds(samples->captured_at - samples->crossing));
  }
  report->set_sample_count(static_cast<int32_t>(samples->stacks.size()));
  if (samples->stacks.empty()) return;
  if (!key->empty()) {
    // The method trace explains the dispatch: only the crossing's stack is
    // reported.
    if (samples->crossing_status.ok()) {
      FillThreadStack(SymbolizeStack(samples->stacks[0]), crossing);
    }
    return;
  }
  std::vector<SymbolizedStack> stacks;
  stacks.reserve(samples->stacks.size());
  for (const RawStack& raw : samples->stacks) stacks.push_back(SymbolizeStack(raw));
  if (samples->crossing_status.ok()) FillThreadStack(stacks[0], crossing);
  // Each sample stands for the time until the next one (the last: until the
  // end), less the time the process was stopped.
  std::vector<WeightedStack> weighted;
  weighted.reserve(stacks.size());
  for (size_t i = 0; i < stacks.size(); ++i) {
    const TimeTicks from = samples->times[i];
    const TimeTicks to = i + 1 < stacks.size() ? samples->times[i + 1] : d.end;
    const absl::Duration stopped = monitor->stopped_time().Within(from, to);
    weighted.push_back({&stacks[i], std::max(absl::ZeroDuration(), to - from - stopped)});
  }
  // No traced call explains it (no tracing, or none traced): the samples do.
  report->clear_stack();
  report->clear_stack_text();
  report->set_stack_truncated(false);
  FillSampledCallTree(weighted, CallTree::kDefaultTargetCount, report->mutable_stack(),
                      report->mutable_stack_text());
  *key = SampledStackKey(weighted);
}

}  // namespace matrix

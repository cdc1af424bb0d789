#include "matrix/plugins/trace_plugin.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/report_context.h"
#include "matrix/trace/stack_capture.h"
#include "matrix/trace/symbolizer.h"

namespace matrix {

TracePlugin::TracePlugin(TraceConfig config) : Plugin(kTag), config_(std::move(config)) {}

TracePlugin::~TracePlugin() {
  if (state() != State::kDestroyed && state() != State::kCreated) Destroy().IgnoreError();
}

absl::Status TracePlugin::OnInit() {
  // A TraceConfig filled in by hand skipped Builder::Build(): an invalid
  // value is an error here, not an abort in a tracer at Start.
  if (absl::Status status = config_.Validate(); !status.ok()) return status;
  SetStackKeyRule(config_.stack_key_rule);
  if (!config_.symbolize) Symbolizer::Get()->SetRawFrames(true);
  if (context().main_looper == nullptr &&
      config_.looper_source != LooperMonitor::Source::kForeign) {
    return absl::FailedPreconditionError(
        "TracePlugin: no main looper. Call Looper::PrepareMainLooper() before Matrix::Init, "
        "or use TraceConfig::SetLooperSource(kForeign) for a foreign loop.");
  }
  return absl::OkStatus();
}

void TracePlugin::RunOnLooperThread(absl::AnyInvocable<void()> fn, bool wait) {
  // A foreign loop's components belong to the thread that drives it, which
  // is the one calling the lifecycle methods.
  if (config_.looper_source == LooperMonitor::Source::kForeign) {
    fn();
    return;
  }
  RunOnMainLooper(std::move(fn), wait);
}

void TracePlugin::CreateMonitors() {
  if (looper_monitor_ != nullptr) return;
  Looper* looper = context().main_looper;
  if (looper != nullptr && config_.looper_source != LooperMonitor::Source::kForeign) {
    LooperMonitor::Options options;
    options.source = config_.looper_source;
    looper_monitor_ = std::make_unique<LooperMonitor>(looper, options);
  } else {
    looper_monitor_ = std::make_unique<LooperMonitor>(context().clock);
  }
  Choreographer* choreographer = nullptr;
  if (config_.use_choreographer && Looper::MyLooper() != nullptr) {
    choreographer = Choreographer::Peek();
    if (choreographer == nullptr) choreographer = Choreographer::GetInstance();
  }
  if (config_.method_trace_enabled()) {
    method_tracer_ = MethodTracer::Current();
    // A buffer of 0 bytes: the program's own tracer or none.
    if (method_tracer_ == nullptr && config_.method_trace_buffer_bytes > 0) {
      MethodTracer::Options options;
      options.buffer_bytes = config_.method_trace_buffer_bytes;
      options.clock = context().clock;
      owned_method_tracer_ = MethodTracer::Start(options);
      method_tracer_ = owned_method_tracer_.get();
    }
  }
  UIThreadMonitor::Options monitor_options;
  monitor_options.sampler_looper = context().watchdog_looper;
  monitor_options.cpu_sample_period = config_.cpu_sample_period;
  monitor_options.app_state = context().app_state;
  monitor_options.method_tracer = method_tracer_;
  // On the looper thread: a late watchdog tells a stop from a CPU quota or
  // a busy machine by the looper thread's and its cgroup's counters.
  monitor_options.wait_to_run = SystemWaitToRunReader(ThreadHandle::Current().tid());
  // The flight recorder's dispatches are the heartbeat's records.
  if (config_.timeline_capacity > 0) monitor_options.dispatch_history = config_.timeline_capacity;
  ui_thread_monitor_ =
      std::make_unique<UIThreadMonitor>(looper_monitor_.get(), choreographer, monitor_options);
  if (config_.timeline_capacity > 0) {
    TimelineOptions timeline_options;
    timeline_options.capacity = config_.timeline_capacity;
    timeline_options.method_tracer = method_tracer_;
    timeline_options.dispatches = &ui_thread_monitor_->heartbeat();
    timeline_ = std::make_unique<Timeline>(timeline_options);
  }

  CreateTracers(/*has_choreographer=*/choreographer != nullptr);
}

TracerEnv TracePlugin::TracerEnvFor() {
  return {.monitor = ui_thread_monitor_.get(),
          .watchdog_looper = context().watchdog_looper,
          .worker_looper = context().worker_looper,
          .app_state = context().app_state,
          .report = [this](Issue issue) { OnDetectIssue(std::move(issue)); },
          .timeline = TimelineAttachmentFor()};
}

void TracePlugin::CreateTracers(bool has_choreographer) {
  const TracerEnv env = TracerEnvFor();
  // Startup and the lag tracers attach no flight recorder.
  TracerEnv no_timeline = env;
  no_timeline.timeline = {};

  FrameTracer::Options frame_options;
  frame_options.env = env;
  frame_options.fps_report = config_.fps;
  frame_options.report_in_background = config_.fps_in_background;
  frame_options.thresholds = config_.drop_thresholds;
  frame_options.time_slice = config_.fps_time_slice;
  frame_tracer_ = std::make_unique<FrameTracer>(std::move(frame_options));

  if (config_.anr) {
    AnrTracer::Options anr_options;
    anr_options.env = env;
    anr_options.anr_threshold = config_.anr_threshold;
    anr_options.lag_threshold = config_.lag_threshold;
    anr_options.report_with_debugger = config_.anr_with_debugger;
    anr_tracer_ = std::make_unique<AnrTracer>(std::move(anr_options));
  }
  if (config_.evil_method) {
    EvilMethodTracer::Options evil_options;
    evil_options.env = env;
    evil_options.threshold = config_.evil_threshold;
    evil_options.anr_tracer = anr_tracer_.get();
    evil_options.report_with_debugger = config_.anr_with_debugger;
    evil_options.sampling.enabled = config_.evil_method_stacks;
    evil_options.sampling.interval = config_.evil_method_sample_interval;
    evil_method_tracer_ = std::make_unique<EvilMethodTracer>(std::move(evil_options));
  }
  if (config_.startup) {
    StartupTracer::Options startup_options;
    startup_options.env = no_timeline;
    startup_options.looper = context().main_looper;
    startup_options.cold_threshold = config_.cold_startup_threshold;
    startup_options.warm_threshold = config_.warm_startup_threshold;
    startup_options.splash_scenes = config_.splash_scenes;
    startup_options.wait_for_frame = has_choreographer;
    startup_tracer_ = std::make_unique<StartupTracer>(std::move(startup_options));
  }
  CreateLagTracers(no_timeline);
}

void TracePlugin::CreateLagTracers(const TracerEnv& env) {
  Looper* looper = context().main_looper;
  // Our Looper's idle handlers, or a foreign loop's idle callbacks (reported
  // by its adapter through the LooperMonitor, e.g. matrix::glib).
  const bool foreign = looper_monitor_->source() == LooperMonitor::Source::kForeign;
  if (config_.idle_handler && (foreign || looper != nullptr)) {
    IdleHandlerLagTracer::Options idle_options;
    idle_options.env = env;
    if (foreign) {
      idle_options.looper_monitor = looper_monitor_.get();
    } else {
      idle_options.looper = looper;
    }
    idle_options.threshold = config_.idle_handler_threshold;
    idle_handler_tracer_ = std::make_unique<IdleHandlerLagTracer>(std::move(idle_options));
  }
  if (config_.touch_event) {
    InputLagTracer::Options input_options;
    input_options.env = env;
    input_options.threshold = config_.touch_event_threshold;
    input_options.throttle = config_.touch_event_threshold * 2;
    input_options.frame_tracer = frame_tracer_.get();
    input_lag_tracer_ = std::make_unique<InputLagTracer>(std::move(input_options));
  }
  if (config_.signal_anr) {
    SignalAnrTracer::Options signal_options;
    signal_options.env = env;
    signal_options.looper = looper;
    signal_options.signal_number = config_.signal_anr_signal;
    signal_anr_tracer_ = std::make_unique<SignalAnrTracer>(std::move(signal_options));
  }
}

void TracePlugin::StartTracers() {
  CreateMonitors();
  looper_monitor_->Start();
  ui_thread_monitor_->Start();
  // First, so that the tracers' callbacks see the event already recorded.
  if (timeline_ != nullptr) {
    timeline_registration_ = ui_thread_monitor_->AddObserver(timeline_.get());
  }
  // The FrameTracer always runs: listeners may be added even without FPS
  // reports (Matrix creates it unconditionally too).
  frame_tracer_->OnStartTrace();
  if (anr_tracer_ != nullptr) anr_tracer_->OnStartTrace();
  if (evil_method_tracer_ != nullptr) evil_method_tracer_->OnStartTrace();
  if (startup_tracer_ != nullptr) startup_tracer_->OnStartTrace();
  if (idle_handler_tracer_ != nullptr) idle_handler_tracer_->OnStartTrace();
  if (input_lag_tracer_ != nullptr) input_lag_tracer_->OnStartTrace();
  if (signal_anr_tracer_ != nullptr) signal_anr_tracer_->OnStartTrace();
  PreloadSymbols();
}

void TracePlugin::PreloadSymbols() {
  // Only the tracers that capture and symbolize stacks need it.
  if (!config_.anr && !config_.evil_method && !config_.signal_anr) return;
  Looper* worker = context().worker_looper;
  if (worker == nullptr || preloaded_symbols_.load() > 0) return;
  // The looper thread's stack, taken and symbolized on the worker as an ANR
  // capture is: the executable, libc, the loop's library and matrix-cpp, the
  // modules an ANR stack shows. Loading their symbol tables and DWARF cold
  // on the first ANR would delay its report by a few hundred milliseconds.
  if (preload_handler_ == nullptr) {
    preload_handler_ = std::make_unique<Handler>(worker, "matrix::TracePlugin$PreloadSymbols");
  }
  const ThreadHandle looper_thread = ui_thread_monitor_->looper_thread();
  preload_handler_->Post([this, looper_thread] {
    // The capture first: it interrupts the looper thread once, right at
    // start, not later in the program's run.
    RawStack raw;
    const absl::Status captured = CaptureStack(looper_thread, &raw);
    // The program's own modules: symbol tables, DWARF and unit indexes, so a
    // first report in any of them costs what later ones do.
    Symbolizer::Get()->PreloadModules();
    if (!captured.ok()) return;
    // Not matrix-cpp's own frames when it is a shared object of its own
    // (matrix-run's agent starts Matrix inside the looper's wait): their
    // DWARF is the largest of the program's, and reports seldom show them.
    // Under matrix-run this was 150 M of the preload's 150 M instructions.
    int kept = 0;
    for (int i = 0; i < raw.depth; ++i) {
      const uintptr_t pc = raw.pcs[static_cast<size_t>(i)];
      if (Symbolizer::InMatrixSharedObject(pc)) {
        if (i == 0) raw.exact_top_pc = false;
        continue;
      }
      raw.pcs[static_cast<size_t>(kept++)] = pc;
    }
    raw.depth = kept;
    const SymbolizedStack symbolized = SymbolizeStack(raw);
    preloaded_symbols_.fetch_add(static_cast<int64_t>(symbolized.frames.size()));
  });
}

void TracePlugin::StopTracers() {
  if (looper_monitor_ == nullptr) return;
  if (signal_anr_tracer_ != nullptr) signal_anr_tracer_->OnCloseTrace();
  if (input_lag_tracer_ != nullptr) input_lag_tracer_->OnCloseTrace();
  if (idle_handler_tracer_ != nullptr) idle_handler_tracer_->OnCloseTrace();
  if (startup_tracer_ != nullptr) startup_tracer_->OnCloseTrace();
  if (evil_method_tracer_ != nullptr) evil_method_tracer_->OnCloseTrace();
  if (anr_tracer_ != nullptr) anr_tracer_->OnCloseTrace();
  frame_tracer_->OnCloseTrace();
  timeline_registration_.Reset();
  ui_thread_monitor_->Stop();
  looper_monitor_->Stop();
}

void TracePlugin::DestroyMonitors() {
  signal_anr_tracer_.reset();
  input_lag_tracer_.reset();
  idle_handler_tracer_.reset();
  startup_tracer_.reset();
  evil_method_tracer_.reset();
  anr_tracer_.reset();
  frame_tracer_.reset();
  timeline_.reset();
  ui_thread_monitor_.reset();
  looper_monitor_.reset();
  method_tracer_ = nullptr;
  owned_method_tracer_.reset();  // On the traced thread, as it requires.
}

absl::Status TracePlugin::OnStart() {
  RunOnLooperThread([this] { StartTracers(); }, /*wait=*/false);
  return absl::OkStatus();
}

absl::Status TracePlugin::OnStop() {
  RunOnLooperThread([this] { StopTracers(); }, /*wait=*/false);
  return absl::OkStatus();
}

absl::Status TracePlugin::OnDestroy() {
  // Stop every tracer, let the matrix threads finish what the tracers gave
  // them (a report being built uses the tracers and this plugin), then free.
  RunOnLooperThread([this] { StopTracers(); }, /*wait=*/true);
  DrainReports();
  RunOnLooperThread([this] { DestroyMonitors(); }, /*wait=*/true);
  return absl::OkStatus();
}

bool TracePlugin::FlushReportsFor(absl::Duration timeout) {
  if (state() != State::kStarted) return true;
  if (evil_method_tracer_ != nullptr) evil_method_tracer_->StopWaitingForStopDetector();
  if (frame_tracer_ != nullptr && config_.fps) frame_tracer_->FlushReports();
  // Twice: an analysis that finishes during the first posts its delivery
  // behind it.
  const absl::Time deadline = absl::Now() + timeout;
  return FlushMatrixThreadsFor(timeout) && FlushMatrixThreadsFor(deadline - absl::Now());
}

void TracePlugin::DrainReports() {
  // What the tracers detected before they stopped (a slow dispatch that just
  // ended, a hang being captured) is analysed and delivered within the
  // drain timeout; what is still queued then is dropped, counted and logged.
  if (FlushMatrixThreadsFor(context().shutdown_drain_timeout)) return;
  if (evil_method_tracer_ != nullptr) evil_method_tracer_->CancelPendingAnalyses();
  FlushMatrixThreads();  // The analysis running now, and the cancelled ones.
  const int64_t dropped =
      evil_method_tracer_ != nullptr ? evil_method_tracer_->dropped_analyses() : 0;
  dropped_at_shutdown_.store(dropped);
  Logger()->error(
      "TracePlugin: the shutdown drain timed out after {}; {} slow dispatch(es) dropped "
      "unanalysed (Matrix::Builder::SetShutdownDrainTimeout)",
      absl::FormatDuration(context().shutdown_drain_timeout), dropped);
}

void TracePlugin::OnForegroundChanged(bool foreground) {
  if (frame_tracer_ != nullptr) frame_tracer_->OnForeground(foreground);
}

TimelineAttachment TracePlugin::TimelineAttachmentFor() const {
  return {.timeline = timeline_.get(),
          .window = config_.timeline_window,
          .max_bytes = config_.timeline_max_bytes};
}

void TracePlugin::AttachTimeline(Issue& issue, TimeTicks detected_at, const std::string& detected_by,
                                 absl::Duration span) const {
  if (ui_thread_monitor_ == nullptr) return;
  TimelineAttachmentFor().Attach(*ui_thread_monitor_, detected_at, span, detected_by,
                                 issue.mutable_proto());
}

void TracePlugin::DecorateIssue(Issue& issue) {
  // Matrix's device context on every report.
  FillDeviceInfo(proc_, issue.mutable_proto()->mutable_device());
}

}  // namespace matrix

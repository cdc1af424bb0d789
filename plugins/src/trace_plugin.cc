#include "matrix/plugins/trace_plugin.h"

#include "absl/synchronization/notification.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"

namespace matrix {

TracePlugin::TracePlugin(TraceConfig config) : Plugin(kTag), config_(std::move(config)) {}

TracePlugin::~TracePlugin() {
  if (state() != State::kDestroyed && state() != State::kCreated) Destroy().IgnoreError();
}

absl::Status TracePlugin::OnInit() {
  if (context().main_looper == nullptr &&
      config_.looper_source != LooperMonitor::Source::kForeign) {
    return absl::FailedPreconditionError(
        "TracePlugin: no main looper. Call Looper::PrepareMainLooper() before Matrix::Init, "
        "or use TraceConfig::SetLooperSource(kForeign) for a foreign loop.");
  }
  if (context().main_looper != nullptr) {
    looper_handler_ = std::make_unique<Handler>(context().main_looper, "matrix::TracePlugin");
  }
  return absl::OkStatus();
}

void TracePlugin::RunOnLooperThread(absl::AnyInvocable<void()> fn, bool wait) {
  Looper* looper = context().main_looper;
  if (looper == nullptr || looper->IsCurrentThread() || looper_handler_ == nullptr) {
    fn();
    return;
  }
  if (!wait) {
    looper_handler_->Post(std::move(fn));
    return;
  }
  if (!looper->is_looping()) {
    // Nobody runs the looper (not started, or quit): no thread to race with.
    fn();
    return;
  }
  absl::Notification done;
  looper_handler_->Post([&] {
    fn();
    done.Notify();
  });
  done.WaitForNotification();
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
  UIThreadMonitor::Options monitor_options;
  monitor_options.sampler_looper = context().watchdog_looper;
  monitor_options.cpu_sample_period = config_.cpu_sample_period;
  monitor_options.app_state = context().app_state;
  ui_thread_monitor_ =
      std::make_unique<UIThreadMonitor>(looper_monitor_.get(), choreographer, monitor_options);

  FrameTracer::Options frame_options;
  frame_options.monitor = ui_thread_monitor_.get();
  frame_options.worker_looper = context().worker_looper;
  frame_options.app_state = context().app_state;
  frame_options.fps_report = config_.fps;
  frame_options.report_in_background = config_.fps_in_background;
  frame_options.thresholds = config_.drop_thresholds;
  frame_options.time_slice = config_.fps_time_slice;
  frame_options.report = [this](Issue issue) { OnDetectIssue(std::move(issue)); };
  frame_tracer_ = std::make_unique<FrameTracer>(std::move(frame_options));
}

void TracePlugin::StartTracers() {
  CreateMonitors();
  looper_monitor_->Start();
  ui_thread_monitor_->Start();
  // The FrameTracer always runs: listeners may be added even without FPS
  // reports (Matrix creates it unconditionally too).
  frame_tracer_->OnStartTrace();
}

void TracePlugin::StopTracers() {
  if (looper_monitor_ == nullptr) return;
  frame_tracer_->OnCloseTrace();
  ui_thread_monitor_->Stop();
  looper_monitor_->Stop();
}

void TracePlugin::DestroyMonitors() {
  frame_tracer_.reset();
  ui_thread_monitor_.reset();
  looper_monitor_.reset();
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
  RunOnLooperThread(
      [this] {
        StopTracers();
        DestroyMonitors();
      },
      /*wait=*/true);
  looper_handler_.reset();
  return absl::OkStatus();
}

void TracePlugin::OnForegroundChanged(bool foreground) {
  if (frame_tracer_ != nullptr) frame_tracer_->OnForeground(foreground);
}

void TracePlugin::DecorateIssue(Issue& /*issue*/) {}

}  // namespace matrix

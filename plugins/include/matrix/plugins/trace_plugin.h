// File: matrix/plugins/trace_plugin.h
//
// TracePlugin is Matrix's Trace Canary: it owns the monitors of the main
// looper (LooperMonitor, UIThreadMonitor) and the tracers enabled in its
// TraceConfig, and reports their issues through the Matrix facade.
//
//   auto config = matrix::TraceConfig::Builder().EnableFps(true).EnableAnrTrace(true).Build();
//   auto trace = std::make_unique<matrix::TracePlugin>(*config);
//   matrix::TracePlugin* plugin = trace.get();
//   matrix::Matrix::Init(matrix::Matrix::Builder().AddPlugin(std::move(trace)).Build());
//   plugin->Start();   // on the main thread: monitors exist when it returns
//   plugin->GetFrameTracer()->AddListener(&my_frame_listener);
//
// Method tracing (for the evil-method, ANR and startup tracers) uses the
// MethodTracer the application started (MethodTracer::Start() at the top of
// main() also traces startup), or one the plugin starts with the looper's
// clock and the configured buffer size.
//
// Start() and Stop() do their work on the main looper's thread: called there
// they act at once; called elsewhere they post to it (as Matrix does). For a
// foreign loop (no main looper; TraceConfig::SetLooperSource(kForeign)), call
// them on the loop's thread, and feed GetLooperMonitor()'s hooks.
//
// Thread safety: lifecycle methods from any thread (see above); the Get*()
// accessors return objects bound to the main looper thread.

#ifndef MATRIX_PLUGINS_TRACE_PLUGIN_H_
#define MATRIX_PLUGINS_TRACE_PLUGIN_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"
#include "matrix/core/handler.h"

#include "matrix/core/plugin.h"
#include "matrix/plugins/trace_config.h"
#include "matrix/trace/anr_tracer.h"
#include "matrix/trace/evil_method_tracer.h"
#include "matrix/trace/frame_tracer.h"
#include "matrix/trace/idle_handler_lag_tracer.h"
#include "matrix/trace/input_lag_tracer.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/signal_anr_tracer.h"
#include "matrix/trace/startup_tracer.h"
#include "matrix/trace/timeline.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace matrix {

class TracePlugin : public Plugin {
 public:
  static constexpr char kTag[] = "Trace";

  explicit TracePlugin(TraceConfig config);
  ~TracePlugin() override;

  const TraceConfig& config() const { return config_; }
  // Null until the first Start() has run on the looper thread.
  LooperMonitor* GetLooperMonitor() const { return looper_monitor_.get(); }
  UIThreadMonitor* GetUIThreadMonitor() const { return ui_thread_monitor_.get(); }
  FrameTracer* GetFrameTracer() const { return frame_tracer_.get(); }
  // Null when the tracer is disabled in the config.
  AnrTracer* GetAnrTracer() const { return anr_tracer_.get(); }
  EvilMethodTracer* GetEvilMethodTracer() const { return evil_method_tracer_.get(); }
  StartupTracer* GetStartupTracer() const { return startup_tracer_.get(); }
  IdleHandlerLagTracer* GetIdleHandlerLagTracer() const { return idle_handler_tracer_.get(); }
  InputLagTracer* GetInputLagTracer() const { return input_lag_tracer_.get(); }
  SignalAnrTracer* GetSignalAnrTracer() const { return signal_anr_tracer_.get(); }
  // The method tracer in use (the plugin's own, or one the application
  // started before Matrix), or null when no enabled tracer needs one.
  MethodTracer* GetMethodTracer() const { return method_tracer_; }
  // The flight recorder (docs/timeline.md), or null when
  // TraceConfig::timeline_capacity is 0 or before the first Start().
  const Timeline* GetTimeline() const { return timeline_.get(); }
  // How many frames of the looper thread's stack at start were captured and
  // symbolized on the worker (preloading the symbol tables and DWARF of the
  // modules an ANR stack is most likely to show, so the first report does
  // not pay the cold load). Any thread.
  int64_t preloaded_symbols() const { return preloaded_symbols_.load(); }
  // FlushReportsFor()
  //
  // Delivers what the tracers have detected so far, for a process about to
  // end without Matrix::Shutdown() (a fatal signal): the FPS statistics
  // gathered so far, and slow dispatches whose analysis waits for the stop
  // detector's next poll (they stop waiting). Waits at most `timeout` for
  // the matrix threads; false when they did not finish in time. The tracers
  // keep running. Any thread but the matrix threads; not concurrently with
  // Destroy().
  bool FlushReportsFor(absl::Duration timeout);
  // Slow dispatches detected before Destroy() but dropped unanalysed because
  // the shutdown drain timed out (Matrix::Builder::SetShutdownDrainTimeout).
  // Set during Destroy(), before the listeners' OnDestroy(). Any thread.
  int64_t dropped_at_shutdown() const { return dropped_at_shutdown_.load(); }

  // AttachTimeline()
  //
  // Snapshots the timeline up to now into `issue` (Issue.timeline): the
  // issue's own `span` (a block's duration) and TraceConfig::timeline_window
  // before it, marking `detected_at` as detected by `detected_by`. Does
  // nothing without a timeline. Any thread but the looper's (it allocates and
  // symbolizes); the plugin must be alive.
  void AttachTimeline(Issue& issue, TimeTicks detected_at, const std::string& detected_by,
                      absl::Duration span = absl::ZeroDuration()) const;

 protected:
  absl::Status OnInit() override;
  absl::Status OnStart() override;
  absl::Status OnStop() override;
  absl::Status OnDestroy() override;
  void OnForegroundChanged(bool foreground) override;
  void DecorateIssue(Issue& issue) override;

 private:
  // Runs `fn` on the main looper's thread: now if already there (or there is
  // no main looper, or it is not looping), else posted. With `wait`, blocks
  // until it ran.
  void RunOnLooperThread(absl::AnyInvocable<void()> fn, bool wait);
  // Looper thread: the monitors, the flight recorder, then the tracers the
  // configuration enables.
  void CreateMonitors();
  void CreateTracers(bool has_choreographer);
  // The idle-handler, input and signal lag tracers.
  void CreateLagTracers(const TracerEnv& env);
  // What every tracer is given: this plugin's monitor, loopers, app state
  // and report channel, and the flight recorder.
  TracerEnv TracerEnvFor();
  void StartTracers();
  void StopTracers();
  void DestroyMonitors();
  // Waits for the reports the tracers already detected (OnDestroy).
  void DrainReports();
  // Looper thread: posts to the worker the capture and symbolization of the
  // looper thread's stack (see preloaded_symbols()).
  void PreloadSymbols();
  // The flight recorder as the tracers attach it (TraceConfig's window and
  // budget).
  TimelineAttachment TimelineAttachmentFor() const;

  const TraceConfig config_;
  std::unique_ptr<LooperMonitor> looper_monitor_;
  std::unique_ptr<UIThreadMonitor> ui_thread_monitor_;
  std::unique_ptr<FrameTracer> frame_tracer_;
  std::unique_ptr<AnrTracer> anr_tracer_;
  std::unique_ptr<EvilMethodTracer> evil_method_tracer_;
  std::unique_ptr<StartupTracer> startup_tracer_;
  std::unique_ptr<IdleHandlerLagTracer> idle_handler_tracer_;
  std::unique_ptr<InputLagTracer> input_lag_tracer_;
  std::unique_ptr<SignalAnrTracer> signal_anr_tracer_;
  std::unique_ptr<Timeline> timeline_;
  std::unique_ptr<Handler> preload_handler_;  // On the worker looper.
  std::atomic<int64_t> preloaded_symbols_{0};
  std::atomic<int64_t> dropped_at_shutdown_{0};
  ObserverRegistration timeline_registration_;
  std::unique_ptr<MethodTracer> owned_method_tracer_;
  MethodTracer* method_tracer_ = nullptr;
  const ProcReader proc_;
};

}  // namespace matrix

#endif  // MATRIX_PLUGINS_TRACE_PLUGIN_H_

// File: matrix/plugins/trace_config.h
//
// TraceConfig holds TracePlugin's switches and thresholds, with Matrix's
// defaults. Build() validates them and returns one clear error naming every
// value that makes no sense (negative or zero durations, drop levels out of
// order, a fault signal as the dump signal, a CPU sample period under 10 ms,
// a method-trace buffer over 1 GiB, ...).
//
//   absl::StatusOr<matrix::TraceConfig> config = matrix::TraceConfig::Builder()
//       .EnableFps(true)
//       .EnableAnrTrace(true)
//       .EnableEvilMethodTrace(true)
//       .SetEvilThreshold(absl::Milliseconds(500))
//       .Build();
//   if (!config.ok()) { std::cerr << config.status() << "\n"; return 1; }
//
// Defaults (Matrix's): every tracer off; evil method 700 ms; ANR 5 s; lag 2 s;
// idle handler 2 s; input (touch) 2 s; startup cold 10 s, warm 4 s; drop levels
// 3/9/24/42 frames; an FPS report every 10 s of frame time.
//
// Thread safety: a value type.

#ifndef MATRIX_PLUGINS_TRACE_CONFIG_H_
#define MATRIX_PLUGINS_TRACE_CONFIG_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "matrix/trace/frame_stats.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/stack_key.h"

namespace matrix {

struct TraceConfig {
  // Which tracers run.
  bool fps = false;
  bool evil_method = false;
  bool anr = false;
  bool startup = false;
  bool idle_handler = false;
  bool touch_event = false;
  bool signal_anr = false;

  // Thresholds.
  absl::Duration evil_threshold = absl::Milliseconds(700);
  absl::Duration anr_threshold = absl::Seconds(5);
  absl::Duration lag_threshold = absl::Seconds(2);
  absl::Duration idle_handler_threshold = absl::Seconds(2);
  absl::Duration touch_event_threshold = absl::Seconds(2);
  absl::Duration cold_startup_threshold = absl::Seconds(10);
  absl::Duration warm_startup_threshold = absl::Seconds(4);
  DropThresholds drop_thresholds;
  // Wall time covered by one FPS report per scene; at least kMinFpsTimeSlice.
  absl::Duration fps_time_slice = absl::Seconds(10);

  // Frames drawn in the background count towards FPS reports.
  bool fps_in_background = false;
  // Scenes shown before the first real scene during a cold start.
  std::vector<std::string> splash_scenes;
  // Report hangs (ANR, LAG) and slow methods while a debugger is attached.
  bool anr_with_debugger = false;
  // How LooperMonitor learns about dispatches.
  LooperMonitor::Source looper_source = LooperMonitor::Source::kDispatchObserver;
  // Time frames with the thread's Choreographer (created if missing). Turn
  // off for a foreign render loop that reports frames itself.
  bool use_choreographer = true;
  // The method-trace ring buffer, in bytes (rounded down to a power of two).
  // In [kMinMethodTraceBufferBytes, kMaxMethodTraceBufferBytes] when method
  // tracing is on, or 0: no MethodTracer of the plugin's own (no ring, no
  // ticker thread), for a program that is not method-traced; one the
  // program started itself (MethodTracer::Current()) is still used.
  size_t method_trace_buffer_bytes = size_t{8} << 20;
  // Stacks of slow dispatches (EvilMethodTracer::Options::sampling): the
  // watchdog captures the looper thread's stack when a dispatch crosses
  // evil_threshold and every `evil_method_sample_interval` after it, so a
  // slow dispatch of code that is not method-traced still says what held
  // the thread. Dispatches under the threshold are never sampled. Off by
  // default; matrix-run turns it on. The interval is in
  // [kMinEvilMethodSampleInterval, evil_threshold].
  bool evil_method_stacks = false;
  absl::Duration evil_method_sample_interval = absl::Milliseconds(50);
  static constexpr absl::Duration kMinEvilMethodSampleInterval = absl::Milliseconds(10);
  // How often the watchdog samples the looper thread's CPU clock. At least
  // kMinCpuSamplePeriod.
  absl::Duration cpu_sample_period = absl::Milliseconds(50);
  // SIGQUIT unless changed. Only signals whose default action the program
  // does not rely on: SIGQUIT, SIGUSR1, SIGUSR2, or a real-time signal other
  // than the stack capturer's (StackCapturer::DefaultSignal(), SIGRTMIN + 5).
  // Never SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGALRM, SIGPIPE, ... (a dump
  // handler would keep SIGTERM from ending the process), nor a fault signal.
  int signal_anr_signal = 3;

  // The smallest CPU sample period. The watchdog wakes once per period, and
  // every dispatch that lasts a period reads the looper thread's CPU clock (a
  // syscall on the looper thread): below 10 ms that approaches a syscall per
  // message and a watchdog that never sleeps.
  static constexpr absl::Duration kMinCpuSamplePeriod = absl::Milliseconds(10);
  // The shortest FPS slice: shorter slices turn Trace_FPS into a report per
  // frame or two and flood the sinks.
  static constexpr absl::Duration kMinFpsTimeSlice = absl::Milliseconds(500);
  // Bounds of the method-trace ring. The ring is allocated and zeroed up
  // front, and each evil-method or ANR report copies up to all of it on the
  // worker thread, so more than 1 GiB of resident memory is a mistake (the
  // 8 MiB default holds 512 Ki traced calls).
  static constexpr size_t kMinMethodTraceBufferBytes = 4096;
  static constexpr size_t kMaxMethodTraceBufferBytes = size_t{1} << 30;
  // The flight recorder (docs/timeline.md): a ring of the looper thread's
  // last `timeline_capacity` events (dispatches and frames, 64 bytes each,
  // allocated at start; 0 turns it off). Each ANR, LAG, slow-method, block
  // and frozen-frame FPS report carries the issue's own span (the stuck
  // dispatch up to its detection, the block) and `timeline_window` before
  // it: by default an ANR's timeline covers 5 + 5 s. 4096 events (256 KiB)
  // hold 5 s of a loop running ~800 messages and frames per second.
  size_t timeline_capacity = 4096;
  absl::Duration timeline_window = absl::Seconds(5);
  // The most one issue's timeline may take as JSON: runs of short events are
  // merged into counted aggregates until it fits (FitTimelineToBudget,
  // docs/timeline.md). 0 for no limit, else at least kMinTimelineMaxBytes.
  size_t timeline_max_bytes = size_t{64} << 10;
  static constexpr size_t kMinTimelineMaxBytes = 4096;
  static constexpr size_t kMinTimelineCapacity = 16;
  static constexpr size_t kMaxTimelineCapacity = size_t{1} << 22;
  // Which frames may be a report's group key (matrix/trace/stack_key.h,
  // docs/stacks.md "Group keys"): modules to skip besides the built-in
  // system and runtime ones, and modules that are the program's own even
  // under /usr/lib. Process-wide: set at Matrix::Init, it also applies to
  // BlockCanary's keys.
  StackKeyRule stack_key_rule;
  // Name frames in the process (matrix/trace/symbolizer.h: symbol tables and
  // DWARF, read on a worker thread). False records frames raw: module, build
  // id and ELF address only, nothing read from the modules' files, for
  // hosts where in-process symbolization costs too much; unnamed frames key
  // reports by "module+0xaddress" and `matrix-report symbolize` names them
  // off the host (docs/stacks.md). Process-wide, like stack_key_rule.
  bool symbolize = true;
  // Matrix's isDebug / isDevEnv: verbose logs.
  bool debug = false;
  bool dev_env = false;

  // Every invalid field, in one InvalidArgument message ("; " between them),
  // or OK. Builder::Build() runs it; TracePlugin runs it again at
  // Matrix::Init, so a TraceConfig filled in by hand is checked too.
  absl::Status Validate() const;

  // Method tracing is needed by the evil-method and startup tracers.
  bool method_trace_enabled() const { return evil_method || startup || anr; }

  class Builder;
};

class TraceConfig::Builder {
 public:
  Builder& EnableFps(bool on) { c_.fps = on; return *this; }
  Builder& EnableEvilMethodTrace(bool on) { c_.evil_method = on; return *this; }
  Builder& EnableAnrTrace(bool on) { c_.anr = on; return *this; }
  Builder& EnableStartup(bool on) { c_.startup = on; return *this; }
  Builder& EnableIdleHandlerTrace(bool on) { c_.idle_handler = on; return *this; }
  Builder& EnableTouchEventTrace(bool on) { c_.touch_event = on; return *this; }
  Builder& EnableSignalAnrTrace(bool on) { c_.signal_anr = on; return *this; }
  Builder& SetEvilThreshold(absl::Duration d) { c_.evil_threshold = d; return *this; }
  Builder& EnableEvilMethodStacks(bool on) { c_.evil_method_stacks = on; return *this; }
  Builder& SetEvilMethodSampleInterval(absl::Duration d) {
    c_.evil_method_sample_interval = d;
    return *this;
  }
  Builder& SetAnrThreshold(absl::Duration d) { c_.anr_threshold = d; return *this; }
  Builder& SetLagThreshold(absl::Duration d) { c_.lag_threshold = d; return *this; }
  Builder& SetIdleHandlerThreshold(absl::Duration d) { c_.idle_handler_threshold = d; return *this; }
  Builder& SetTouchEventThreshold(absl::Duration d) { c_.touch_event_threshold = d; return *this; }
  Builder& SetColdStartupThreshold(absl::Duration d) { c_.cold_startup_threshold = d; return *this; }
  Builder& SetWarmStartupThreshold(absl::Duration d) { c_.warm_startup_threshold = d; return *this; }
  Builder& SetDropThresholds(int normal, int middle, int high, int frozen) {
    c_.drop_thresholds = DropThresholds{normal, middle, high, frozen};
    return *this;
  }
  Builder& SetFpsTimeSlice(absl::Duration d) { c_.fps_time_slice = d; return *this; }
  Builder& EnableFpsInBackground(bool on) { c_.fps_in_background = on; return *this; }
  Builder& SetSplashScenes(std::vector<std::string> scenes) {
    c_.splash_scenes = std::move(scenes);
    return *this;
  }
  Builder& ReportAnrWithDebugger(bool on) { c_.anr_with_debugger = on; return *this; }
  Builder& SetLooperSource(LooperMonitor::Source source) { c_.looper_source = source; return *this; }
  Builder& UseChoreographer(bool on) { c_.use_choreographer = on; return *this; }
  Builder& SetMethodTraceBufferBytes(size_t bytes) { c_.method_trace_buffer_bytes = bytes; return *this; }
  Builder& SetCpuSamplePeriod(absl::Duration d) { c_.cpu_sample_period = d; return *this; }
  Builder& SetSignalAnrSignal(int signo) { c_.signal_anr_signal = signo; return *this; }
  Builder& SetTimelineCapacity(size_t events) { c_.timeline_capacity = events; return *this; }
  Builder& SetTimelineWindow(absl::Duration d) { c_.timeline_window = d; return *this; }
  Builder& SetTimelineMaxBytes(size_t bytes) { c_.timeline_max_bytes = bytes; return *this; }
  Builder& SetStackKeyRule(StackKeyRule rule) { c_.stack_key_rule = std::move(rule); return *this; }
  Builder& EnableSymbolize(bool on) { c_.symbolize = on; return *this; }
  Builder& IsDebug(bool on) { c_.debug = on; return *this; }
  Builder& IsDevEnv(bool on) { c_.dev_env = on; return *this; }

  // Validates and returns the config, or InvalidArgument naming every
  // invalid field (all of them, in one message, separated by "; ").
  absl::StatusOr<TraceConfig> Build() const;

 private:
  TraceConfig c_;
};

}  // namespace matrix

#endif  // MATRIX_PLUGINS_TRACE_CONFIG_H_

// matrix-demo: a small "app" with a main-thread event loop and a 60 Hz
// Choreographer, monitored by matrix-cpp. Every tracer gets something to find:
//
//   startup       a slow, method-traced init and a splash scene (Trace_StartUp,
//                 and Trace_EvilMethod STARTUP with the init's call tree)
//   frames        two animated scenes that drop frames on purpose, with input
//                 events (Trace_FPS per scene, with input latency)
//   idle handler  a cache compaction run from an IdleHandler (LAG_IDLE_HANDLER)
//   slow method   LoadGallery > DecodeAll > DecodeImage (NORMAL)
//   hang          SaveSettings blocks the main thread (ANR); an input event
//                 waits meanwhile (LAG_TOUCH) and a SIGQUIT asks for a dump
//                 (SIGNAL_ANR); BlockCanaryPlugin, running beside the Trace
//                 Canary, reports the same hang as a block with stack samples
//
// Thresholds are shortened so the whole run takes about 10 s. Issues are
// printed and written as JSON lines to ./matrix-reports/ (read them with
// matrix-report); blocks also as BlockCanary text files in
// ./matrix-reports/blockcanary/.
//
//   make demo                         # build and run
//   ./build/samples/demo/matrix-demo --reports=/tmp/r

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/executor.h"
#include "matrix/core/handler.h"
#include "matrix/core/handler_thread.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/block_canary_plugin.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/startup_tracer.h"

namespace {

// Burns CPU for `d` on the calling thread, like real work would. A helper
// excluded from method tracing, so reports name its callers.
__attribute__((no_instrument_function)) void Work(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
  }
}

// A slow method buried in a call chain: the EvilMethod report names
// DecodeImage as the culprit, with ParseManifest's own cost beside it.
__attribute__((noinline)) void ParseManifest() { Work(absl::Milliseconds(150)); }
__attribute__((noinline)) void DecodeImage() { Work(absl::Milliseconds(450)); }
__attribute__((noinline)) void DecodeAll() { DecodeImage(); }
__attribute__((noinline)) void LoadGallery() {
  ParseManifest();
  DecodeAll();
}

// A slow startup: what the app does before its first scene.
__attribute__((noinline)) void LoadConfig() { Work(absl::Milliseconds(250)); }
__attribute__((noinline)) void OpenDatabase() { Work(absl::Milliseconds(200)); }
__attribute__((noinline)) void WarmCaches() { Work(absl::Milliseconds(400)); }
__attribute__((noinline)) void InitApp() {
  LoadConfig();
  OpenDatabase();
  WarmCaches();
}

// Input handling: quick, except when the main thread is busy elsewhere.
__attribute__((noinline)) void HandleTap() { Work(absl::Milliseconds(2)); }

// Work done when the main thread is idle, for too long.
class CompactThumbnailCache : public matrix::IdleHandler {
 public:
  bool QueueIdle() override {
    std::printf("[demo] idle handler: compacting the thumbnail cache (1.2 s)\n");
    Compact();
    return false;  // Once.
  }

 private:
  __attribute__((noinline)) static void Compact() { Work(absl::Milliseconds(1200)); }
};

// A hang: the main thread blocks (not spinning) long enough for an ANR.
__attribute__((noinline)) void WaitForDiskFlush(absl::Duration d) { absl::SleepFor(d); }
__attribute__((noinline)) void SaveSettings() { WaitForDiskFlush(absl::Milliseconds(2600)); }

// Prints every issue as it arrives (on the matrix-worker thread).
class ConsoleListener : public matrix::PluginListener {
 public:
  void OnReportIssue(const matrix::Issue& issue) override {
    std::printf("[issue] %s\n", matrix::SummarizeIssue(issue).c_str());
    std::fflush(stdout);
    ++count_;
  }
  int count() const { return count_.load(); }

 private:
  std::atomic<int> count_{0};
};

// Counts janky frames as they are drawn, through an executor (the worker).
class JankCounter : public matrix::IDoFrameListener {
 public:
  explicit JankCounter(matrix::Executor* executor) : IDoFrameListener(executor) {}
  void DoFrameAsync(const matrix::FrameData& frame) override {
    ++frames_;
    if (frame.dropped_frames >= 3) {
      std::printf("[frame] #%lld dropped %lld frames (input %.1fms, animation %.1fms, "
                  "traversal %.1fms)\n",
                  static_cast<long long>(frame.frame_number),
                  static_cast<long long>(frame.dropped_frames),
                  absl::ToDoubleMilliseconds(frame.input()),
                  absl::ToDoubleMilliseconds(frame.animation()),
                  absl::ToDoubleMilliseconds(frame.traversal()));
      std::fflush(stdout);
    }
  }
  int frames() const { return frames_.load(); }

 private:
  std::atomic<int> frames_{0};
};

// A tiny animated scene: each frame does some input, animation and drawing
// work; every `jank_every` frames the drawing takes `jank` instead.
class Scene {
 public:
  Scene(std::string name, int frames, int jank_every, absl::Duration jank)
      : name_(std::move(name)), frames_left_(frames), jank_every_(jank_every), jank_(jank) {}

  void Show(absl::AnyInvocable<void()> done) {
    done_ = std::move(done);
    matrix::AppState::Get()->OnSceneCreated(name_);
    matrix::AppState::Get()->OnSceneShown(name_);
    std::printf("[demo] scene %s: %d frames\n", name_.c_str(), frames_left_);
    ScheduleFrame();
  }

 private:
  void ScheduleFrame() {
    auto* choreographer = matrix::Choreographer::GetInstance();
    choreographer->PostCallback(matrix::Choreographer::kInput,
                                [] { Work(absl::Microseconds(300)); });
    choreographer->PostFrameCallback([this](matrix::TimeTicks) { Animate(); });
  }

  void Animate() {
    Work(absl::Microseconds(800));
    ++frame_;
    const bool janky = jank_every_ > 0 && frame_ % jank_every_ == 0;
    matrix::Choreographer::GetInstance()->PostCallback(
        matrix::Choreographer::kTraversal,
        [janky, this] { Work(janky ? jank_ : absl::Milliseconds(2)); });
    if (--frames_left_ > 0) {
      ScheduleFrame();
    } else {
      // The next scene is created before this one goes away, as in a real
      // app (no scene alive in between would be a warm start).
      if (done_) std::exchange(done_, nullptr)();
      matrix::AppState::Get()->OnSceneDestroyed(name_);
    }
  }

  const std::string name_;
  int frames_left_;
  const int jank_every_;
  const absl::Duration jank_;
  int frame_ = 0;
  absl::AnyInvocable<void()> done_;
};

// The reports' directory: --reports=DIR, else ./matrix-reports.
std::string ReportsDir(int argc, char** argv) {
  std::string reports = "./matrix-reports";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--reports=", 10) == 0) reports = argv[i] + 10;
  }
  return reports;
}

// Matrix's thresholds, shortened so the demo stays brief (defaults in
// brackets): slow method 300 ms [700 ms], lag 1 s [2 s], ANR 2 s [5 s],
// idle handler 1 s [2 s], input 1 s [2 s], cold startup 1 s [10 s].
absl::StatusOr<matrix::TraceConfig> DemoTraceConfig() {
  return matrix::TraceConfig::Builder()
      .EnableFps(true)
      .SetFpsTimeSlice(absl::Seconds(2))
      .EnableEvilMethodTrace(true)
      .SetEvilThreshold(absl::Milliseconds(300))
      .EnableAnrTrace(true)
      .SetLagThreshold(absl::Seconds(1))
      .SetAnrThreshold(absl::Seconds(2))
      .EnableStartup(true)
      .SetColdStartupThreshold(absl::Seconds(1))
      .SetSplashScenes({"Splash"})
      .EnableIdleHandlerTrace(true)
      .SetIdleHandlerThreshold(absl::Seconds(1))
      .EnableTouchEventTrace(true)
      .SetTouchEventThreshold(absl::Seconds(1))
      .EnableSignalAnrTrace(true)
      .Build();
}

// BlockCanary beside the Trace Canary: BlockCanary's 1 s threshold, its
// text files under <reports>/blockcanary/, a line printed per block.
absl::StatusOr<matrix::BlockCanaryContext> DemoBlockCanaryContext(const std::string& reports) {
  return matrix::BlockCanaryContext::Builder()
      .SetQualifier("matrix-demo")
      .SetLogPath(reports + "/blockcanary")
      .DisplayNotification(false)
      .OnBlock([](const matrix::BlockInfo& block) {
        std::printf("[block] blocked %lld ms at %s, %zu stack samples -> %s\n",
                    static_cast<long long>(block.time_cost_ms), block.key.c_str(),
                    block.samples.size(), block.log_file.c_str());
        std::fflush(stdout);
      })
      .Build();
}

// Initializes Matrix with the Trace Canary and BlockCanary, their issues
// printed by `console` and written as JSON lines to `reports`, and starts
// both. Returns the TracePlugin, or null (the reason printed).
matrix::TracePlugin* StartMatrix(const std::string& reports,
                                 std::shared_ptr<ConsoleListener> console) {
  absl::StatusOr<matrix::TraceConfig> config = DemoTraceConfig();
  if (!config.ok()) {
    std::fprintf(stderr, "bad config: %s\n", config.status().ToString().c_str());
    return nullptr;
  }
  auto json_sink = matrix::JsonLinesIssueSink::Create({.directory = reports});
  if (!json_sink.ok()) {
    std::fprintf(stderr, "cannot write reports: %s\n", json_sink.status().ToString().c_str());
    return nullptr;
  }
  absl::StatusOr<matrix::BlockCanaryContext> block_context = DemoBlockCanaryContext(reports);
  if (!block_context.ok()) {
    std::fprintf(stderr, "bad config: %s\n", block_context.status().ToString().c_str());
    return nullptr;
  }
  auto block_canary = std::make_unique<matrix::BlockCanaryPlugin>(*block_context);
  matrix::BlockCanaryPlugin* block_plugin = block_canary.get();
  auto trace = std::make_unique<matrix::TracePlugin>(*config);
  matrix::TracePlugin* plugin = trace.get();
  absl::Status status = matrix::Matrix::Init(matrix::Matrix::Builder()
                                                 .AddPlugin(std::move(trace))
                                                 .AddPlugin(std::move(block_canary))
                                                 .AddPluginListener(std::move(console))
                                                 .AddPluginListener(*json_sink)
                                                 .Build());
  if (status.ok()) status = block_plugin->Start();
  if (!status.ok() || !(status = plugin->Start()).ok()) {
    std::fprintf(stderr, "matrix: %s\n", status.ToString().c_str());
    return nullptr;
  }
  return plugin;
}

// What the script's last part touches: the main thread's loop, the input
// thread's flag, the idle handler, the thread that interrupts the hang.
struct Script {
  Script(matrix::Looper* main_looper, matrix::Handler* main_handler, matrix::TracePlugin* trace)
      : looper(main_looper), handler(main_handler), plugin(trace) {}

  matrix::Looper* const looper;
  matrix::Handler* const handler;
  matrix::TracePlugin* const plugin;
  std::atomic<bool> input_running{true};
  CompactThumbnailCache compactor;
  std::thread dumper;
  bool running = true;
};

// Input events arrive from an "input thread" with their event time, until
// the scenes are over.
std::thread StartInput(Script& s) {
  return std::thread([&s] {
    matrix::InputLagTracer* input = s.plugin->GetInputLagTracer();
    while (s.input_running.load()) {
      input->PostInputEvent(s.handler, matrix::MonotonicNow(), "tap", [] { HandleTap(); });
      absl::SleepFor(absl::Milliseconds(150));
    }
  });
}

// The hang: SaveSettings blocks the main thread for 2.6 s; meanwhile a key
// press waits, and the demo sends itself SIGQUIT. Main thread.
void Hang(Script& s) {
  std::printf("[demo] a hang: SaveSettings blocks the main thread for 2.6 s; "
              "a key press waits, and the demo sends itself SIGQUIT\n");
  s.dumper = std::thread([&s] {
    absl::SleepFor(absl::Milliseconds(300));
    s.plugin->GetInputLagTracer()->PostInputEvent(s.handler, matrix::MonotonicNow(), "key",
                                                   [] { HandleTap(); });
    absl::SleepFor(absl::Milliseconds(2000));
    kill(getpid(), SIGQUIT);
  });
  SaveSettings();
}

// After the scenes: an idle handler that lags, a slow method, a hang, then
// quit. Main thread.
void AfterScenes(Script& s) {
  s.input_running.store(false);
  s.plugin->GetFrameTracer()->FlushReports();
  s.looper->queue()->AddIdleHandler(&s.compactor);
  s.handler->PostDelayed(
      [] {
        std::printf("[demo] a slow method: LoadGallery > DecodeAll > DecodeImage\n");
        LoadGallery();
      },
      absl::Milliseconds(1500));
  s.handler->PostDelayed([&s] { Hang(s); }, absl::Milliseconds(1600));
  // Give the worker a moment to deliver the last reports, then stop.
  s.handler->PostDelayed([&s] { s.running = false; }, absl::Milliseconds(3500));
}

void PrintSummary(int frames, int issues, const std::string& reports) {
  std::printf("[demo] done: %d frames delivered to the frame listener, %d issues reported; "
              "JSON lines in %s/issues*.jsonl (hangs in issues.jsonl, each other kind beside)\n",
              frames, issues, reports.c_str());
  // The hang, LAG, slow-method and block reports carry the looper thread's
  // last seconds (docs/timeline.md).
  std::printf("[demo] the ANR's timeline, for https://ui.perfetto.dev, chrome://tracing or "
              "speedscope:\n"
              "         matrix-report timeline --detail=ANR -o anr-trace.json %s\n",
              reports.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  // Trace methods from the very start, so a slow startup has a call tree.
  std::unique_ptr<matrix::MethodTracer> method_tracer = matrix::MethodTracer::Start();
  const std::string reports = ReportsDir(argc, argv);

  matrix::MarkApplicationCreateBegin();
  std::printf("[demo] starting: InitApp (LoadConfig, OpenDatabase, WarmCaches)\n");
  InitApp();
  matrix::MarkApplicationCreateEnd();

  matrix::Looper* looper = matrix::Looper::PrepareMainLooper();
  matrix::Choreographer* choreographer = matrix::Choreographer::GetInstance();  // 60 Hz
  std::printf("[demo] main looper ready, Choreographer at %s\n",
              choreographer->refresh_rate().ToString().c_str());

  auto console = std::make_shared<ConsoleListener>();
  matrix::TracePlugin* plugin = StartMatrix(reports, console);
  if (plugin == nullptr) return 1;

  matrix::LooperExecutor worker(matrix::Matrix::With().context().worker_looper);
  JankCounter jank(&worker);
  matrix::ObserverRegistration jank_registration = plugin->GetFrameTracer()->AddListener(&jank);
  matrix::Handler handler(looper);
  Script script(looper, &handler, plugin);
  std::thread input_thread = StartInput(script);

  // The script: Splash, Gallery (smooth, one janky frame in 40), Settings
  // (heavy: a 60 ms draw every 15 frames), then AfterScenes.
  Scene splash("Splash", 20, 0, absl::ZeroDuration());
  Scene gallery("Gallery", 180, 40, absl::Milliseconds(70));
  Scene settings("Settings", 150, 15, absl::Milliseconds(60));
  handler.Post([&] {
    splash.Show([&] { gallery.Show([&] { settings.Show([&] { AfterScenes(script); }); }); });
  });
  // The main looper cannot quit (as in Android), so the demo polls it until
  // its script is done instead of calling Looper::Loop().
  while (script.running) looper->PollOnce(absl::Milliseconds(100));
  input_thread.join();
  if (script.dumper.joinable()) script.dumper.join();

  jank_registration.Reset();
  matrix::Matrix::Shutdown();
  PrintSummary(jank.frames(), console->count(), reports);
  matrix::FlushLogs();
  return 0;
}

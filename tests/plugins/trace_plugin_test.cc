// End-to-end tests for TracePlugin in a TestEnvironment: the main looper and
// a Choreographer on the manual vsync, background loopers standing in for
// matrix-watchdog and matrix-worker, wired through Matrix::Builder.

#include "matrix/plugins/trace_plugin.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/matrix.h"
#include "matrix/core/observer_list.h"
#include "matrix/plugins/trace_config.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/testing/test_environment.h"

namespace {

namespace mt = ::matrix::testing;
using ::matrix::AppState;
using ::matrix::Choreographer;
using ::matrix::FrameData;
using ::matrix::IDoFrameListener;
using ::matrix::Issue;
using ::matrix::Looper;
using ::matrix::LooperMonitor;
using ::matrix::Matrix;
using ::matrix::MethodTracer;
using ::matrix::ObserverRegistration;
using ::matrix::Plugin;
using ::matrix::PluginListener;
using ::matrix::TimeTicks;
using ::matrix::TraceConfig;
using ::matrix::TracePlugin;
using ::matrix::UIThreadMonitor;
using ::testing::IsEmpty;
using ::testing::SizeIs;

class RecordingListener : public PluginListener {
 public:
  explicit RecordingListener(Looper* worker) : worker_(worker) {}
  void OnReportIssue(const Issue& issue) override {
    issues.push_back(issue);
    on_worker.push_back(worker_->is_dispatching());
  }
  std::vector<Issue> issues;
  std::vector<bool> on_worker;

 private:
  Looper* worker_;
};

class SyncRecorder : public IDoFrameListener {
 public:
  void DoFrameSync(const FrameData& frame) override { frames.push_back(frame); }
  std::vector<FrameData> frames;
};

// Keeps posting frame callbacks, like an endless animation.
class Animation {
 public:
  explicit Animation(Choreographer* c) : c_(c) { Post(); }
  ~Animation() { c_->RemoveFrameCallback(this); }

 private:
  void Post() {
    c_->PostFrameCallback([this](TimeTicks) { Post(); }, this);
  }
  Choreographer* c_;
};

class TracePluginTest : public ::testing::Test {
 protected:
  TracePluginTest() {
    AppState::Get()->ResetForTesting();
    watchdog_ = env_.CreateBackgroundLooper("matrix-watchdog");
    worker_ = env_.CreateBackgroundLooper("matrix-worker");
    listener_ = std::make_shared<RecordingListener>(worker_);
  }
  ~TracePluginTest() override {
    Matrix::Shutdown();
    AppState::Get()->ResetForTesting();
  }

  TracePlugin* InitWith(TraceConfig::Builder builder) {
    absl::StatusOr<TraceConfig> config = builder.Build();
    EXPECT_TRUE(config.ok()) << config.status();
    auto plugin = std::make_unique<TracePlugin>(*config);
    TracePlugin* ptr = plugin.get();
    absl::Status status = Matrix::Init(Matrix::Builder()
                                           .SetClock(env_.clock())
                                           .SetMainLooper(env_.looper())
                                           .SetWatchdogLooper(watchdog_)
                                           .SetWorkerLooper(worker_)
                                           .SetPluginListener(listener_)
                                           .AddPlugin(std::move(plugin))
                                           .Build());
    EXPECT_TRUE(status.ok()) << status;
    return ptr;
  }

  static TraceConfig::Builder FpsConfig() {
    TraceConfig::Builder builder;
    builder.EnableFps(true).SetFpsTimeSlice(absl::Seconds(1));
    return builder;
  }

  void RunPending() { env_.FastForwardBy(absl::ZeroDuration()); }

  mt::TestEnvironment env_;
  Looper* watchdog_ = nullptr;
  Looper* worker_ = nullptr;
  std::shared_ptr<RecordingListener> listener_;
};

TEST_F(TracePluginTest, Start_OnTheLooperThread_CreatesAndStartsTheMonitors) {
  TracePlugin* plugin = InitWith(FpsConfig());
  EXPECT_EQ(Matrix::With().GetPluginByClass<TracePlugin>(), plugin);
  EXPECT_EQ(Matrix::With().GetPluginByTag("Trace"), plugin);
  EXPECT_EQ(plugin->GetFrameTracer(), nullptr);  // Not before Start().

  ASSERT_TRUE(plugin->Start().ok());

  ASSERT_NE(plugin->GetLooperMonitor(), nullptr);
  ASSERT_NE(plugin->GetUIThreadMonitor(), nullptr);
  ASSERT_NE(plugin->GetFrameTracer(), nullptr);
  EXPECT_TRUE(plugin->GetLooperMonitor()->is_started());
  EXPECT_EQ(plugin->GetLooperMonitor()->source(), LooperMonitor::Source::kDispatchObserver);
  EXPECT_TRUE(plugin->GetUIThreadMonitor()->is_alive());
  EXPECT_TRUE(plugin->GetFrameTracer()->is_alive());
  // The frame marker waits for the next INPUT queue (a flag the monitor's
  // queue-start hook reads), without asking for a frame.
  struct OtherHook : Choreographer::FrameStartListener {
    void OnFrameStart(TimeTicks) override {}
  } other_hook;
  EXPECT_FALSE(env_.choreographer()->SetFrameStartListener(&other_hook));
  EXPECT_FALSE(env_.choreographer()->HasPendingCallbacks(Choreographer::kInput));
  EXPECT_FALSE(env_.vsync()->vsync_requested());
}

// Method tracing (here for ANRs) starts a MethodTracer of the plugin's own,
// unless the buffer is 0 bytes: then only one the program runs is used.
TEST_F(TracePluginTest, ZeroMethodTraceBuffer_StartsNoTracer_ButUsesTheProgramsOwn) {
  TracePlugin* plugin = InitWith(FpsConfig().EnableAnrTrace(true).SetMethodTraceBufferBytes(0));
  ASSERT_TRUE(plugin->Start().ok());
  EXPECT_EQ(plugin->GetUIThreadMonitor()->method_tracer(), nullptr);
  EXPECT_EQ(MethodTracer::Current(), nullptr);
  ASSERT_TRUE(plugin->Stop().ok());
  Matrix::Shutdown();

  std::unique_ptr<MethodTracer> own = MethodTracer::Start();
  plugin = InitWith(FpsConfig().EnableAnrTrace(true).SetMethodTraceBufferBytes(0));
  ASSERT_TRUE(plugin->Start().ok());
  EXPECT_EQ(plugin->GetUIThreadMonitor()->method_tracer(), own.get());
  ASSERT_TRUE(plugin->Stop().ok());
  Matrix::Shutdown();
}

TEST_F(TracePluginTest, MethodTracing_StartsATracerOfThePluginsOwn) {
  TracePlugin* plugin = InitWith(FpsConfig().EnableAnrTrace(true));
  ASSERT_TRUE(plugin->Start().ok());
  EXPECT_NE(plugin->GetUIThreadMonitor()->method_tracer(), nullptr);
  EXPECT_EQ(MethodTracer::Current(), plugin->GetUIThreadMonitor()->method_tracer());
}

TEST_F(TracePluginTest, FramesWithAutoVsync_ProduceAnFpsIssueForTheVisibleScene) {
  TracePlugin* plugin = InitWith(FpsConfig());
  ASSERT_TRUE(plugin->Start().ok());
  AppState::Get()->OnSceneCreated("Gallery");
  AppState::Get()->OnSceneShown("Gallery");
  Animation animation(env_.choreographer());

  env_.FastForwardBy(absl::Milliseconds(900));
  EXPECT_THAT(listener_->issues, IsEmpty());  // Less than a time slice of frames.
  env_.FastForwardBy(absl::Milliseconds(200));

  ASSERT_THAT(listener_->issues, SizeIs(1));
  EXPECT_TRUE(listener_->on_worker[0]);
  const Issue& issue = listener_->issues[0];
  EXPECT_EQ(issue.tag(), matrix::kTagFps);
  EXPECT_EQ(issue.key(), "Gallery");
  EXPECT_EQ(issue.plugin(), plugin);
  EXPECT_EQ(issue.proto().plugin(), "Trace");
  EXPECT_EQ(issue.proto().pid(), getpid());
  EXPECT_FALSE(issue.proto().process().empty());
  EXPECT_GT(issue.proto().time_ms(), 0);
  ASSERT_TRUE(issue.proto().has_frame());
  EXPECT_EQ(issue.proto().frame().scene(), "Gallery");
  EXPECT_EQ(issue.proto().frame().frames(), 60);
  EXPECT_DOUBLE_EQ(issue.proto().frame().fps(), 60.0);
  EXPECT_DOUBLE_EQ(issue.proto().frame().refresh_rate(), 60.0);
  // Matrix's device context on every report.
  EXPECT_GT(issue.proto().device().cpu_cores(), 0);
}

TEST_F(TracePluginTest, GoingToTheBackground_FlushesThePendingFpsStats) {
  TracePlugin* plugin = InitWith(FpsConfig().SetFpsTimeSlice(absl::Seconds(10)));
  ASSERT_TRUE(plugin->Start().ok());
  AppState::Get()->OnSceneShown("Feed");
  {
    Animation animation(env_.choreographer());
    env_.FastForwardBy(absl::Milliseconds(500));
  }
  RunPending();
  EXPECT_THAT(listener_->issues, IsEmpty());

  AppState::Get()->SetForeground(false);  // Matrix -> TracePlugin -> FrameTracer.
  RunPending();
  ASSERT_THAT(listener_->issues, SizeIs(1));
  EXPECT_EQ(listener_->issues[0].proto().frame().scene(), "Feed");
  EXPECT_EQ(listener_->issues[0].proto().frame().frames(), 30);
}

TEST_F(TracePluginTest, Stop_UnhooksEverything) {
  TracePlugin* plugin = InitWith(FpsConfig());
  ASSERT_TRUE(plugin->Start().ok());
  SyncRecorder recorder;
  ObserverRegistration r = plugin->GetFrameTracer()->AddListener(&recorder);
  {
    Animation animation(env_.choreographer());
    env_.FastForwardBy(absl::Milliseconds(100));
  }
  const size_t frames_before = recorder.frames.size();
  ASSERT_GT(frames_before, 0u);
  const uint64_t dispatches_before =
      plugin->GetUIThreadMonitor()->heartbeat().dispatch_number();

  ASSERT_TRUE(plugin->Stop().ok());
  EXPECT_EQ(plugin->state(), Plugin::State::kStopped);
  EXPECT_FALSE(plugin->GetLooperMonitor()->is_started());
  EXPECT_FALSE(plugin->GetUIThreadMonitor()->is_alive());
  EXPECT_FALSE(plugin->GetFrameTracer()->is_alive());
  // No marker left in the Choreographer, and nothing asks for frames.
  EXPECT_FALSE(env_.choreographer()->HasPendingCallbacks(Choreographer::kInput));
  env_.FastForwardBy(absl::Seconds(1));
  EXPECT_FALSE(env_.vsync()->vsync_requested());

  // The app keeps drawing and dispatching: none of it is observed.
  const int64_t fired_before = env_.vsync()->frames_fired();
  {
    Animation animation(env_.choreographer());
    matrix::Handler handler(env_.looper(), "app");
    handler.Post([] {});
    env_.FastForwardBy(absl::Seconds(2));
  }
  EXPECT_GT(env_.vsync()->frames_fired(), fired_before + 100);
  EXPECT_EQ(recorder.frames.size(), frames_before);
  EXPECT_EQ(plugin->GetUIThreadMonitor()->heartbeat().dispatch_number(), dispatches_before);
  EXPECT_THAT(listener_->issues, IsEmpty());
}

TEST_F(TracePluginTest, StartAfterStop_ObservesFramesAgain) {
  TracePlugin* plugin = InitWith(FpsConfig());
  ASSERT_TRUE(plugin->Start().ok());
  ASSERT_TRUE(plugin->Stop().ok());
  ASSERT_TRUE(plugin->Start().ok());
  SyncRecorder recorder;
  ObserverRegistration r = plugin->GetFrameTracer()->AddListener(&recorder);
  Animation animation(env_.choreographer());
  env_.FastForwardBy(absl::Milliseconds(1100));
  EXPECT_THAT(recorder.frames, SizeIs(66));
  EXPECT_THAT(listener_->issues, SizeIs(1));
}

TEST_F(TracePluginTest, Destroy_ReleasesTheMonitorsAndRestoresThePrinter) {
  TracePlugin* plugin =
      InitWith(FpsConfig().SetLooperSource(LooperMonitor::Source::kPrinter));
  ASSERT_TRUE(plugin->Start().ok());
  EXPECT_NE(env_.looper()->GetMessageLogging(), nullptr);
  {
    Animation animation(env_.choreographer());
    env_.FastForwardBy(absl::Milliseconds(1100));
  }
  EXPECT_THAT(listener_->issues, SizeIs(1));  // The printer source works end to end.

  ASSERT_TRUE(plugin->Destroy().ok());
  EXPECT_EQ(plugin->state(), Plugin::State::kDestroyed);
  EXPECT_EQ(plugin->GetLooperMonitor(), nullptr);
  EXPECT_EQ(plugin->GetUIThreadMonitor(), nullptr);
  EXPECT_EQ(plugin->GetFrameTracer(), nullptr);
  EXPECT_EQ(env_.looper()->GetMessageLogging(), nullptr);
  EXPECT_FALSE(env_.choreographer()->HasPendingCallbacks(Choreographer::kInput));
  EXPECT_EQ(watchdog_->queue()->PendingCount(), 0u);  // No CPU sampler left.

  // The app goes on without the monitor.
  Animation animation(env_.choreographer());
  env_.FastForwardBy(absl::Seconds(2));
  EXPECT_THAT(listener_->issues, SizeIs(1));
  EXPECT_EQ(plugin->Start().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(TracePluginTest, ForeignLoop_FeedsFramesThroughTheHooks) {
  TracePlugin* plugin = InitWith(TraceConfig::Builder()
                                     .EnableFps(true)
                                     .SetLooperSource(LooperMonitor::Source::kForeign)
                                     .UseChoreographer(false));
  ASSERT_TRUE(plugin->Start().ok());
  ASSERT_EQ(plugin->GetLooperMonitor()->source(), LooperMonitor::Source::kForeign);
  // No marker in our Choreographer: the foreign loop reports its own frames.
  EXPECT_FALSE(env_.choreographer()->HasPendingCallbacks(Choreographer::kInput));
  SyncRecorder recorder;
  ObserverRegistration r = plugin->GetFrameTracer()->AddListener(&recorder);

  LooperMonitor* loop = plugin->GetLooperMonitor();
  UIThreadMonitor* monitor = plugin->GetUIThreadMonitor();
  const TimeTicks vsync = env_.Now();
  loop->DispatchBegin(vsync + absl::Milliseconds(1), "render");
  monitor->MarkFrame(vsync, matrix::RefreshRate::FromHz(144), 7);
  monitor->MarkPhase(UIThreadMonitor::Phase::kInput, vsync + absl::Milliseconds(1));
  monitor->MarkPhase(UIThreadMonitor::Phase::kTraversal, vsync + absl::Milliseconds(3));
  loop->DispatchEnd(vsync + absl::Milliseconds(22));

  ASSERT_THAT(recorder.frames, SizeIs(1));
  EXPECT_EQ(recorder.frames[0].frame_number, 7);
  EXPECT_EQ(recorder.frames[0].input(), absl::Milliseconds(2));
  EXPECT_EQ(recorder.frames[0].traversal(), absl::Milliseconds(19));
  EXPECT_EQ(recorder.frames[0].dropped_frames, 3);  // 22 ms at 144 Hz.
}

TEST_F(TracePluginTest, InvalidConfigFilledInByHand_FailsInitInsteadOfAbortingAtStart) {
  // Skips Builder::Build(): a zero slow-method threshold used to reach a
  // CHECK in EvilMethodTracer at Start and abort the host.
  TraceConfig config;
  config.evil_method = true;
  config.evil_threshold = absl::ZeroDuration();
  auto trace = std::make_unique<TracePlugin>(config);
  absl::Status status = Matrix::Init(Matrix::Builder()
                                         .SetClock(env_.clock())
                                         .SetMainLooper(env_.looper())
                                         .SetWatchdogLooper(watchdog_)
                                         .SetWorkerLooper(worker_)
                                         .AddPlugin(std::move(trace))
                                         .Build());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), testing::HasSubstr("evil_threshold"));
}

TEST_F(TracePluginTest, NoMainLooper_InitFailsUnlessForeign) {
  // A TracePlugin given no main looper (and not told about a foreign loop).
  absl::StatusOr<TraceConfig> config = FpsConfig().Build();
  ASSERT_TRUE(config.ok());
  TracePlugin plugin(*config);
  matrix::PluginContext context;
  absl::Status status = plugin.Init(context);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), testing::HasSubstr("PrepareMainLooper"));
}

}  // namespace

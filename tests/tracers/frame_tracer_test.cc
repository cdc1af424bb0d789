// Tests for FrameTracer in a TestEnvironment: exact dropped frames at several
// refresh rates, Trace_FPS reports (time slices, scenes, phases, background,
// lost frames, FlushReports), and IDoFrameListener delivery (sync, async
// through an executor, batches, listeners changing the set in callbacks,
// slow sync listeners).

#include "matrix/trace/frame_tracer.h"

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/executor.h"
#include "matrix/core/handler.h"
#include "matrix/core/issue.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"
#include "matrix/core/observer_list.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/spdlog.h"

namespace {

namespace mt = ::matrix::testing;
using ::matrix::AppState;
using ::matrix::Choreographer;
using ::matrix::Executor;
using ::matrix::FrameData;
using ::matrix::FrameTracer;
using ::matrix::IDoFrameListener;
using ::matrix::Issue;
using ::matrix::Looper;
using ::matrix::LooperExecutor;
using ::matrix::LooperMonitor;
using ::matrix::ObserverRegistration;
using ::matrix::RefreshRate;
using ::matrix::Task;
using ::matrix::TimeTicks;
using ::matrix::UIThreadMonitor;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

absl::Duration Ms(double ms) { return absl::Milliseconds(ms); }

// A TestEnvironment with the monitors and a FrameTracer on a background
// "matrix-worker" looper.
class Harness {
 public:
  explicit Harness(RefreshRate rate = RefreshRate(),
                   const std::function<void(FrameTracer::Options&)>& tweak = {})
      : env_(EnvOptions(rate)) {
    AppState::Get()->ResetForTesting();
    worker_ = env_.CreateBackgroundLooper("matrix-worker");
    looper_monitor_ = std::make_unique<LooperMonitor>(env_.looper());
    looper_monitor_->Start();
    monitor_ = std::make_unique<UIThreadMonitor>(looper_monitor_.get(), env_.choreographer(),
                                                 UIThreadMonitor::Options{});
    monitor_->Start();
    FrameTracer::Options options;
    options.env.monitor = monitor_.get();
    options.env.worker_looper = worker_;
    options.env.report = [this](Issue issue) { issues_.push_back(std::move(issue)); };
    if (tweak) tweak(options);
    tracer_ = std::make_unique<FrameTracer>(std::move(options));
    tracer_->OnStartTrace();
  }
  ~Harness() {
    tracer_.reset();
    monitor_.reset();
    looper_monitor_.reset();
  }

  static mt::TestEnvironment::Options EnvOptions(RefreshRate rate) {
    mt::TestEnvironment::Options options;
    options.refresh_rate = rate;
    options.auto_vsync = false;
    return options;
  }

  // Runs everything due now (robust to a clock moved by hand).
  void RunPending() { env_.FastForwardBy(absl::ZeroDuration()); }

  // A frame whose vsync is now and whose INPUT work takes `cost`.
  void DrawFrame(absl::Duration cost, std::function<void()> during = {}) {
    env_.choreographer()->PostCallback(Choreographer::kInput, [this, cost, during] {
      env_.AdvanceClock(cost);
      if (during) during();
    });
    ASSERT_TRUE(env_.vsync()->Fire(env_.Now()));
    RunPending();
  }

  // Lets the worker drain the frames (one drain period).
  void Drain() { env_.FastForwardBy(Ms(100)); }

  mt::TestEnvironment& env() { return env_; }
  Looper* worker() { return worker_; }
  FrameTracer* tracer() { return tracer_.get(); }
  std::vector<Issue>& issues() { return issues_; }

 private:
  mt::TestEnvironment env_;
  Looper* worker_ = nullptr;
  std::unique_ptr<LooperMonitor> looper_monitor_;
  std::unique_ptr<UIThreadMonitor> monitor_;
  std::vector<Issue> issues_;
  std::unique_ptr<FrameTracer> tracer_;
};

class SyncRecorder : public IDoFrameListener {
 public:
  void DoFrameSync(const FrameData& frame) override {
    frames.push_back(frame);
    if (hook) hook(frame);
  }
  std::vector<FrameData> frames;
  std::function<void(const FrameData&)> hook;
};

class AsyncRecorder : public IDoFrameListener {
 public:
  explicit AsyncRecorder(Executor* executor, int interval = 0)
      : IDoFrameListener(executor, interval) {}
  void DoFrameAsync(const FrameData& frame) override {
    frames.push_back(frame);
    if (hook) hook(frame);
  }
  void DoReplay(const std::vector<FrameData>& batch) override {
    batches.push_back(batch.size());
    IDoFrameListener::DoReplay(batch);
  }
  std::vector<FrameData> frames;
  std::vector<size_t> batches;
  std::function<void(const FrameData&)> hook;
};

// Queues tasks until the test runs them.
class ManualExecutor : public Executor {
 public:
  void Execute(Task task) override { tasks_.push_back(std::move(task)); }
  size_t pending() const { return tasks_.size(); }
  void RunAll() {
    std::vector<Task> tasks = std::move(tasks_);
    tasks_.clear();
    for (Task& task : tasks) task();
  }

 private:
  std::vector<Task> tasks_;
};

// Forwards to a looper, noting whether a listener call happens inside.
class TrackingExecutor : public Executor {
 public:
  explicit TrackingExecutor(Looper* looper) : inner_(looper) {}
  void Execute(Task task) override {
    ++executes;
    inner_.Execute([this, task = std::move(task)]() mutable {
      inside = true;
      task();
      inside = false;
    });
  }
  int executes = 0;
  bool inside = false;

 private:
  LooperExecutor inner_;
};

// Keeps posting frame callbacks, like an endless animation.
class Animation {
 public:
  explicit Animation(Choreographer* c, std::function<void(int)> on_frame = {})
      : c_(c), on_frame_(std::move(on_frame)) {
    Post();
  }
  ~Animation() { c_->RemoveFrameCallback(this); }
  int frames() const { return frames_; }

 private:
  void Post() {
    c_->PostFrameCallback(
        [this](TimeTicks) {
          if (on_frame_) on_frame_(frames_);
          ++frames_;
          Post();
        },
        this);
  }
  Choreographer* c_;
  std::function<void(int)> on_frame_;
  int frames_ = 0;
};

// --- Dropped frames -------------------------------------------------------------

struct RateCase {
  double hz;
  int64_t cost_ns;
  int64_t dropped;
};

class FrameTracerDropTest : public ::testing::TestWithParam<RateCase> {};

TEST_P(FrameTracerDropTest, FrameEndingAfterItsVsync_HasExactDroppedFrames) {
  const RateCase& c = GetParam();
  Harness h(RefreshRate::FromHz(c.hz));
  SyncRecorder recorder;
  ObserverRegistration r = h.tracer()->AddListener(&recorder);

  h.DrawFrame(absl::Nanoseconds(c.cost_ns));

  ASSERT_THAT(recorder.frames, SizeIs(1));
  EXPECT_EQ(recorder.frames[0].dropped_frames, c.dropped);
  EXPECT_EQ(recorder.frames[0].refresh_rate, RefreshRate::FromHz(c.hz));
  EXPECT_EQ(recorder.frames[0].jitter(), absl::Nanoseconds(c.cost_ns));
}

INSTANTIATE_TEST_SUITE_P(
    Rates, FrameTracerDropTest,
    ::testing::Values(RateCase{60, 16'000'000, 0}, RateCase{60, 33'400'000, 2},
                      RateCase{60, 49'999'999, 2}, RateCase{60, 50'000'000, 2},
                      RateCase{90, 33'333'333, 2}, RateCase{90, 33'333'334, 3},
                      RateCase{90, 33'400'000, 3}, RateCase{120, 24'999'999, 2},
                      RateCase{120, 25'000'000, 2}, RateCase{120, 33'400'000, 4},
                      RateCase{144, 20'833'333, 2}, RateCase{144, 20'833'334, 3},
                      RateCase{144, 33'400'000, 4}),
    [](const auto& info) {
      return std::to_string(static_cast<int>(info.param.hz)) + "Hz_" +
             std::to_string(info.param.cost_ns) + "ns";
    });

TEST(FrameTracerTest, RefreshRateChange_TakesEffectFromTheNextFrame) {
  Harness h(RefreshRate::FromHz(60));
  SyncRecorder recorder;
  ObserverRegistration r = h.tracer()->AddListener(&recorder);

  // The display switches to 120 Hz while this frame is being drawn.
  h.DrawFrame(Ms(25), [&] { h.env().SetRefreshRate(RefreshRate::FromHz(120)); });
  h.env().AdvanceClock(Ms(5));
  h.DrawFrame(Ms(25));

  ASSERT_THAT(recorder.frames, SizeIs(2));
  EXPECT_EQ(recorder.frames[0].refresh_rate, RefreshRate::FromHz(60));
  EXPECT_EQ(recorder.frames[0].dropped_frames, 1);
  EXPECT_EQ(recorder.frames[1].refresh_rate, RefreshRate::FromHz(120));
  // 25 ms is exactly 3 intervals at 120 Hz: shown on the third vsync.
  EXPECT_EQ(recorder.frames[1].dropped_frames, 2);
}

TEST(FrameTracerTest, FrameQueuedBehindAJankyFrame_IsNotChargedForTheSameVsyncs) {
  Harness h(RefreshRate::FromHz(60));
  SyncRecorder recorder;
  ObserverRegistration r = h.tracer()->AddListener(&recorder);
  const RefreshRate rate = RefreshRate::FromHz(60);
  const TimeTicks v0 = h.env().Now();
  Choreographer* c = h.env().choreographer();

  c->PostCallback(Choreographer::kInput, [&] {
    // The next frame is requested, and its vsync arrives, while this one
    // still runs: its frame message waits behind this frame.
    c->PostCallback(Choreographer::kInput, [&] { h.env().AdvanceClock(Ms(5)); });
    h.env().AdvanceClock(rate.TickAfter(v0, 1) - v0);
    ASSERT_TRUE(h.env().vsync()->Fire(h.env().Now()));
    h.env().AdvanceClock(v0 + Ms(40) - h.env().Now());
  });
  ASSERT_TRUE(h.env().vsync()->Fire(v0));
  h.RunPending();

  ASSERT_THAT(recorder.frames, SizeIs(2));
  EXPECT_EQ(recorder.frames[0].end, v0 + Ms(40));
  EXPECT_EQ(recorder.frames[0].dropped_frames, 2);
  EXPECT_EQ(recorder.frames[1].intended_frame_time, rate.TickAfter(v0, 1));
  EXPECT_EQ(recorder.frames[1].end, v0 + Ms(45));
  // Matrix would charge it (45 - 16.7) / 16.7 = 1 more; the 33.3 ms vsync it
  // missed was already counted for the first frame.
  EXPECT_EQ(recorder.frames[1].dropped_frames, 0);
}

TEST(FrameTracerTest, LongMessageDelayingAFrame_ShowsAsThatFramesDrops) {
  Harness h(RefreshRate::FromHz(60));
  SyncRecorder recorder;
  ObserverRegistration r = h.tracer()->AddListener(&recorder);
  matrix::Handler handler(h.env().looper(), "app");

  handler.Post([&] { h.env().AdvanceClock(Ms(100)); });  // Runs first.
  h.env().choreographer()->PostCallback(Choreographer::kInput, [] {});
  ASSERT_TRUE(h.env().vsync()->Fire(h.env().Now()));
  h.RunPending();

  // The long message is not a frame; the frame it delayed ends exactly 6
  // intervals (100 ms at 60 Hz) after its vsync: 5 vsyncs passed without it.
  ASSERT_THAT(recorder.frames, SizeIs(1));
  EXPECT_EQ(recorder.frames[0].dropped_frames, 5);
}

TEST(FrameTracerTest, NonFrameMessages_AreNotDeliveredNorCounted) {
  Harness h;
  SyncRecorder recorder;
  ObserverRegistration r = h.tracer()->AddListener(&recorder);
  matrix::Handler handler(h.env().looper(), "app");
  for (int i = 0; i < 5; ++i) handler.Post([&] { h.env().AdvanceClock(Ms(50)); });
  h.RunPending();
  h.tracer()->FlushReports();
  h.RunPending();
  EXPECT_THAT(recorder.frames, IsEmpty());
  EXPECT_THAT(h.issues(), IsEmpty());
}

// --- Trace_FPS reports ----------------------------------------------------------

TEST(FrameTracerReportTest, AutoVsyncFrames_ReportEveryTimeSliceForTheVisibleScene) {
  Harness h(RefreshRate::FromHz(60),
            [](FrameTracer::Options& o) { o.time_slice = absl::Seconds(1); });
  AppState::Get()->OnSceneShown("Gallery");
  h.env().set_auto_vsync(true);
  Animation animation(h.env().choreographer());

  h.env().FastForwardBy(Ms(900));
  EXPECT_THAT(h.issues(), IsEmpty());
  h.env().FastForwardBy(Ms(200));  // 60 frames (1 s of frame time) drawn and drained.
  ASSERT_THAT(h.issues(), SizeIs(1));
  const Issue& issue = h.issues()[0];
  EXPECT_EQ(issue.tag(), matrix::kTagFps);
  EXPECT_EQ(issue.key(), "Gallery");
  ASSERT_TRUE(issue.proto().has_frame());
  const matrix::proto::FrameReport& report = issue.proto().frame();
  EXPECT_EQ(report.scene(), "Gallery");
  EXPECT_EQ(report.frames(), 60);
  EXPECT_EQ(report.dropped_frames(), 0);
  EXPECT_DOUBLE_EQ(report.fps(), 60.0);
  EXPECT_DOUBLE_EQ(report.refresh_rate(), 60.0);
  EXPECT_DOUBLE_EQ(report.window_ms(), 1000.0);
  EXPECT_EQ(report.drop_level().best(), 60);

  h.env().FastForwardBy(absl::Seconds(1));
  EXPECT_THAT(h.issues(), SizeIs(2));
}

TEST(FrameTracerReportTest, SceneThatStopsDrawing_IsReportedOnTheDrainAfterItsSliceEnds) {
  // Slices are wall time: three frames, then nothing. The slice (1 s from the
  // first frame's vsync) is reported by the first drain after it ends, not
  // whenever the scene draws again, and only once.
  Harness h(RefreshRate::FromHz(60),
            [](FrameTracer::Options& o) { o.time_slice = absl::Seconds(1); });
  AppState::Get()->OnSceneShown("Reader");
  for (int i = 0; i < 3; ++i) {
    h.DrawFrame(Ms(2));
    h.env().AdvanceClock(Ms(15));
  }
  h.env().FastForwardBy(Ms(850));  // 0.9 s after the first vsync.
  EXPECT_THAT(h.issues(), IsEmpty());
  h.env().FastForwardBy(Ms(200));
  ASSERT_THAT(h.issues(), SizeIs(1));
  const matrix::proto::FrameReport& report = h.issues()[0].proto().frame();
  EXPECT_EQ(report.scene(), "Reader");
  EXPECT_EQ(report.frames(), 3);
  // Frames 17 ms apart: each stands for its 60 Hz interval, the second and
  // third also for the 1/3 ms they waited after the previous frame's vsync
  // (a program pacing itself); the idle time after them is nobody's. Three
  // frames are too few to measure a rate.
  EXPECT_NEAR(report.window_ms(), 50.0 + 2.0 / 3, 1e-3);  // Vsyncs round to ns.
  EXPECT_TRUE(report.too_short_for_rate());
  EXPECT_EQ(report.fps(), 0);
  h.env().FastForwardBy(absl::Seconds(5));
  EXPECT_THAT(h.issues(), SizeIs(1));
}

TEST(FrameTracerReportTest, At120Hz_ReportsTheRefreshRateAndItsFrames) {
  Harness h(RefreshRate::FromHz(120),
            [](FrameTracer::Options& o) { o.time_slice = absl::Seconds(1); });
  h.env().set_auto_vsync(true);
  Animation animation(h.env().choreographer());
  h.env().FastForwardBy(Ms(1100));
  ASSERT_THAT(h.issues(), SizeIs(1));
  const matrix::proto::FrameReport& report = h.issues()[0].proto().frame();
  EXPECT_EQ(report.scene(), "default");
  EXPECT_EQ(report.frames(), 120);
  EXPECT_DOUBLE_EQ(report.fps(), 120.0);
  EXPECT_DOUBLE_EQ(report.refresh_rate(), 120.0);
}

TEST(FrameTracerReportTest, JankyFrames_FillTheDropLevels) {
  Harness h(RefreshRate::FromHz(60));
  for (absl::Duration cost : {Ms(1), Ms(60), Ms(160), Ms(410), Ms(710)}) {
    h.DrawFrame(cost);
    h.env().AdvanceClock(Ms(1));
  }
  h.tracer()->FlushReports();
  h.RunPending();
  ASSERT_THAT(h.issues(), SizeIs(1));
  const matrix::proto::FrameReport& report = h.issues()[0].proto().frame();
  EXPECT_EQ(report.frames(), 5);
  EXPECT_EQ(report.drop_level().best(), 1);    // 0 dropped.
  EXPECT_EQ(report.drop_level().normal(), 1);  // 3 dropped.
  EXPECT_EQ(report.drop_level().middle(), 1);  // 9 dropped.
  EXPECT_EQ(report.drop_level().high(), 1);    // 24 dropped.
  EXPECT_EQ(report.drop_level().frozen(), 1);  // 42 dropped.
  EXPECT_EQ(report.drop_sum().normal(), 3);
  EXPECT_EQ(report.drop_sum().middle(), 9);
  EXPECT_EQ(report.drop_sum().high(), 24);
  EXPECT_EQ(report.drop_sum().frozen(), 42);
  EXPECT_EQ(report.dropped_frames(), 78);
}

TEST(FrameTracerReportTest, InterleavedScenes_GoToSeparateReports) {
  Harness h;
  h.env().set_auto_vsync(true);
  Animation animation(h.env().choreographer(), [](int frame) {
    AppState::Get()->SetVisibleScene(frame % 2 == 0 ? "Feed" : "Chat");
  });
  h.env().FastForwardBy(absl::Seconds(1));  // 60 frames.
  h.tracer()->FlushReports();
  h.RunPending();

  ASSERT_THAT(h.issues(), SizeIs(2));
  int64_t total = 0;
  for (const Issue& issue : h.issues()) {
    const matrix::proto::FrameReport& report = issue.proto().frame();
    EXPECT_TRUE(report.scene() == "Feed" || report.scene() == "Chat") << report.scene();
    EXPECT_EQ(issue.key(), report.scene());
    EXPECT_EQ(report.frames(), 30);
    total += report.frames();
  }
  EXPECT_EQ(total, 60);
  EXPECT_NE(h.issues()[0].proto().frame().scene(), h.issues()[1].proto().frame().scene());
}

TEST(FrameTracerReportTest, PhaseCosts_AreAveragedInTheReport) {
  Harness h;
  Choreographer* c = h.env().choreographer();
  for (int i = 0; i < 2; ++i) {
    c->PostCallback(Choreographer::kAnimation, [&h, i] { h.env().AdvanceClock(Ms(i == 0 ? 1 : 3)); });
    c->PostCallback(Choreographer::kTraversal, [&h] { h.env().AdvanceClock(Ms(6)); });
    c->PostCallback(Choreographer::kCommit, [&h] { h.env().AdvanceClock(Ms(0.5)); });
    h.DrawFrame(Ms(2));
    h.env().AdvanceClock(Ms(20));
  }
  h.tracer()->FlushReports();
  h.RunPending();
  ASSERT_THAT(h.issues(), SizeIs(1));
  const matrix::proto::FrameReport& report = h.issues()[0].proto().frame();
  EXPECT_DOUBLE_EQ(report.input_ms(), 2.0);
  EXPECT_DOUBLE_EQ(report.animation_ms(), 2.0);
  EXPECT_DOUBLE_EQ(report.traversal_ms(), 6.0);
  EXPECT_DOUBLE_EQ(report.commit_ms(), 0.5);
  EXPECT_DOUBLE_EQ(report.frame_ms(), 10.5);  // (9.5 + 11.5) / 2, vsync to end.
}

TEST(FrameTracerReportTest, Background_CountsNothingByDefault) {
  Harness h;
  SyncRecorder recorder;
  ObserverRegistration r = h.tracer()->AddListener(&recorder);
  AppState::Get()->SetForeground(false);
  h.DrawFrame(Ms(1));
  h.DrawFrame(Ms(1));
  h.tracer()->FlushReports();
  h.RunPending();
  EXPECT_THAT(recorder.frames, IsEmpty());
  EXPECT_THAT(h.issues(), IsEmpty());

  AppState::Get()->SetForeground(true);
  h.DrawFrame(Ms(1));
  h.tracer()->FlushReports();
  h.RunPending();
  EXPECT_THAT(recorder.frames, SizeIs(1));
  ASSERT_THAT(h.issues(), SizeIs(1));
  EXPECT_EQ(h.issues()[0].proto().frame().frames(), 1);
}

TEST(FrameTracerReportTest, Background_CountedWhenConfigured) {
  Harness h(RefreshRate(), [](FrameTracer::Options& o) { o.report_in_background = true; });
  SyncRecorder recorder;
  ObserverRegistration r = h.tracer()->AddListener(&recorder);
  AppState::Get()->SetForeground(false);
  h.DrawFrame(Ms(1));
  h.DrawFrame(Ms(1));
  h.tracer()->FlushReports();
  h.RunPending();
  EXPECT_THAT(recorder.frames, SizeIs(2));
  ASSERT_THAT(h.issues(), SizeIs(1));
  EXPECT_EQ(h.issues()[0].proto().frame().frames(), 2);
}

TEST(FrameTracerReportTest, FlushReports_PublishesPendingStatsOnTheWorkerOnce) {
  Harness h;
  AppState::Get()->OnSceneShown("Home");
  h.DrawFrame(Ms(1));
  h.DrawFrame(Ms(40));
  h.tracer()->FlushReports();
  EXPECT_THAT(h.issues(), IsEmpty());  // Published by the worker.
  h.RunPending();
  ASSERT_THAT(h.issues(), SizeIs(1));
  EXPECT_EQ(h.issues()[0].proto().frame().scene(), "Home");
  EXPECT_EQ(h.issues()[0].proto().frame().frames(), 2);
  EXPECT_EQ(h.issues()[0].proto().frame().dropped_frames(), 2);

  h.tracer()->FlushReports();
  h.RunPending();
  EXPECT_THAT(h.issues(), SizeIs(1));
}

TEST(FrameTracerReportTest, FpsReportOff_NoIssuesButListenersGetFrames) {
  Harness h(RefreshRate(), [](FrameTracer::Options& o) {
    o.fps_report = false;
    o.time_slice = Ms(50);
  });
  SyncRecorder recorder;
  ObserverRegistration r = h.tracer()->AddListener(&recorder);
  for (int i = 0; i < 5; ++i) h.DrawFrame(Ms(1));
  h.Drain();
  h.tracer()->FlushReports();
  h.RunPending();
  EXPECT_THAT(recorder.frames, SizeIs(5));
  EXPECT_THAT(h.issues(), IsEmpty());
}

TEST(FrameTracerReportTest, FramesBeyondTheRing_AreCountedAsLost) {
  Harness h(RefreshRate(), [](FrameTracer::Options& o) { o.time_slice = absl::Hours(1); });
  FrameData frame;
  frame.is_vsync_frame = true;
  frame.refresh_rate = RefreshRate();
  for (size_t i = 0; i < FrameTracer::kRingCapacity + 76; ++i) {
    frame.intended_frame_time = TimeTicks::FromNanoseconds(1'000'000'000 + i * 16'666'667);
    frame.start = frame.intended_frame_time;
    frame.end = frame.start + Ms(1);
    h.tracer()->DoFrame(frame);  // The worker does not run meanwhile.
  }
  EXPECT_EQ(h.tracer()->lost_frames(), 76u);
  h.tracer()->FlushReports();
  h.RunPending();
  ASSERT_THAT(h.issues(), SizeIs(1));
  EXPECT_EQ(h.issues()[0].proto().frame().frames(),
            static_cast<int64_t>(FrameTracer::kRingCapacity));
  EXPECT_EQ(h.issues()[0].proto().frame().lost_frames(), 76);
}

// --- IDoFrameListener -------------------------------------------------------------

TEST(FrameListenerTest, SyncListener_IsCalledOnTheLooperThreadDuringTheFrame) {
  Harness h;
  SyncRecorder recorder;
  bool dispatching = false;
  bool on_looper_thread = false;
  recorder.hook = [&](const FrameData&) {
    dispatching = h.env().looper()->is_dispatching();
    on_looper_thread = h.env().looper()->IsCurrentThread();
  };
  ObserverRegistration r = h.tracer()->AddListener(&recorder);
  h.DrawFrame(Ms(20));
  ASSERT_THAT(recorder.frames, SizeIs(1));  // Before any worker drain.
  EXPECT_TRUE(dispatching);
  EXPECT_TRUE(on_looper_thread);
  EXPECT_EQ(recorder.frames[0].dropped_frames, 1);
}

TEST(FrameListenerTest, AsyncListener_GetsFramesInOrderThroughItsExecutorAfterADrain) {
  Harness h;
  Looper* listener_looper = h.env().CreateBackgroundLooper("listener");
  TrackingExecutor executor(listener_looper);
  AsyncRecorder recorder(&executor);
  bool inside_executor = true;
  recorder.hook = [&](const FrameData&) { inside_executor &= executor.inside; };
  ObserverRegistration r = h.tracer()->AddListener(&recorder);

  for (int i = 0; i < 3; ++i) h.DrawFrame(Ms(1));
  EXPECT_THAT(recorder.frames, IsEmpty());  // Not on the looper thread.
  h.Drain();

  ASSERT_THAT(recorder.frames, SizeIs(3));
  EXPECT_EQ(recorder.frames[0].frame_number, 1);
  EXPECT_EQ(recorder.frames[1].frame_number, 2);
  EXPECT_EQ(recorder.frames[2].frame_number, 3);
  EXPECT_GE(executor.executes, 1);
  EXPECT_TRUE(inside_executor);
  EXPECT_THAT(recorder.batches, IsEmpty());  // Not batched.
}

TEST(FrameListenerTest, BatchedListener_GetsIntervalFramesAtATimeAndTheRestOnStop) {
  Harness h;
  ManualExecutor executor;
  AsyncRecorder recorder(&executor, /*interval=*/4);
  ObserverRegistration r = h.tracer()->AddListener(&recorder);

  for (int i = 0; i < 10; ++i) h.DrawFrame(Ms(1));
  h.Drain();
  executor.RunAll();
  EXPECT_THAT(recorder.batches, ElementsAre(4u, 4u));
  EXPECT_THAT(recorder.frames, SizeIs(8));

  h.tracer()->OnCloseTrace();  // The rest is delivered when the tracer stops.
  h.RunPending();
  executor.RunAll();
  EXPECT_THAT(recorder.batches, ElementsAre(4u, 4u, 2u));
  ASSERT_THAT(recorder.frames, SizeIs(10));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(recorder.frames[i].frame_number, i + 1);
}

TEST(FrameListenerTest, SyncListenerAddedDuringACallback_FirstGetsTheNextFrame) {
  Harness h;
  SyncRecorder first, late;
  ObserverRegistration late_registration;
  first.hook = [&](const FrameData&) {
    if (!late_registration.active()) late_registration = h.tracer()->AddListener(&late);
  };
  ObserverRegistration r = h.tracer()->AddListener(&first);
  h.DrawFrame(Ms(1));
  EXPECT_THAT(late.frames, IsEmpty());
  h.DrawFrame(Ms(1));
  EXPECT_THAT(late.frames, SizeIs(1));
  EXPECT_THAT(first.frames, SizeIs(2));
}

TEST(FrameListenerTest, SyncListenerRemovingItself_IsNotCalledAgain) {
  Harness h;
  SyncRecorder self_removing, other;
  ObserverRegistration r1 = h.tracer()->AddListener(&self_removing);
  ObserverRegistration r2 = h.tracer()->AddListener(&other);
  self_removing.hook = [&](const FrameData&) { r1.Reset(); };
  h.DrawFrame(Ms(1));
  h.DrawFrame(Ms(1));
  EXPECT_THAT(self_removing.frames, SizeIs(1));
  EXPECT_THAT(other.frames, SizeIs(2));
}

TEST(FrameListenerTest, SyncListenerRemovedByAnotherDuringACallback_IsNotCalled) {
  Harness h;
  SyncRecorder remover, victim;
  ObserverRegistration r1 = h.tracer()->AddListener(&remover);
  ObserverRegistration r2 = h.tracer()->AddListener(&victim);
  remover.hook = [&](const FrameData&) { r2.Reset(); };
  h.DrawFrame(Ms(1));
  EXPECT_THAT(victim.frames, IsEmpty());
}

TEST(FrameListenerTest, AsyncListenerRemovedWhileDeliveryIsQueued_IsNotCalled) {
  Harness h;
  ManualExecutor executor;
  AsyncRecorder recorder(&executor);
  ObserverRegistration r = h.tracer()->AddListener(&recorder);
  h.DrawFrame(Ms(1));
  h.Drain();
  ASSERT_GE(executor.pending(), 1u);  // A delivery is on its way...
  r.Reset();                          // ...when the listener goes away.
  executor.RunAll();
  h.DrawFrame(Ms(1));
  h.Drain();
  executor.RunAll();
  EXPECT_THAT(recorder.frames, IsEmpty());
}

TEST(FrameListenerTest, AsyncListenerRemovingItself_GetsNoMoreFramesEvenFromItsBatch) {
  Harness h;
  ManualExecutor executor;
  AsyncRecorder recorder(&executor);
  ObserverRegistration r = h.tracer()->AddListener(&recorder);
  recorder.hook = [&](const FrameData&) { r.Reset(); };
  for (int i = 0; i < 3; ++i) h.DrawFrame(Ms(1));
  h.Drain();
  executor.RunAll();  // One delivery with three frames.
  h.DrawFrame(Ms(1));
  h.Drain();
  executor.RunAll();
  EXPECT_THAT(recorder.frames, SizeIs(1));
}

TEST(FrameListenerTest, AsyncListenerAddedDuringAnAsyncCallback_GetsOnlyLaterFrames) {
  Harness h;
  ManualExecutor executor;
  AsyncRecorder first(&executor), late(&executor);
  ObserverRegistration late_registration;
  first.hook = [&](const FrameData&) {
    if (!late_registration.active()) late_registration = h.tracer()->AddListener(&late);
  };
  ObserverRegistration r = h.tracer()->AddListener(&first);
  h.DrawFrame(Ms(1));
  h.Drain();
  executor.RunAll();
  EXPECT_THAT(late.frames, IsEmpty());
  h.DrawFrame(Ms(1));
  h.Drain();
  executor.RunAll();
  ASSERT_THAT(late.frames, SizeIs(1));
  EXPECT_EQ(late.frames[0].frame_number, 2);
  EXPECT_THAT(first.frames, SizeIs(2));
}

// Captures log lines and whether the worker looper was dispatching then.
class CapturingSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit CapturingSink(Looper* worker) : worker_(worker) {}
  struct Line {
    spdlog::level::level_enum level;
    std::string text;
    bool on_worker;
  };
  std::vector<Line> lines;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines.push_back({msg.level, std::string(msg.payload.data(), msg.payload.size()),
                     worker_->is_dispatching()});
  }
  void flush_() override {}

 private:
  Looper* worker_;
};

// Routes matrix's log to a sink for the test's duration.
class ScopedLogger {
 public:
  explicit ScopedLogger(std::shared_ptr<spdlog::sinks::sink> sink) {
    matrix::SetLogger(std::make_shared<spdlog::logger>("capture", std::move(sink)));
  }
  ~ScopedLogger() { matrix::SetLogger(nullptr); }
};

TEST(FrameListenerTest, SlowSyncListener_IsCountedAndWarnedAboutFromTheWorker) {
  Harness h;
  auto sink = std::make_shared<CapturingSink>(h.worker());
  ScopedLogger scoped_logger(sink);
  class NamedRecorder : public SyncRecorder {
   public:
    std::string name() const override { return "JankLogger"; }
  };
  NamedRecorder slow;
  SyncRecorder fast;
  slow.hook = [&](const FrameData&) { h.env().AdvanceClock(Ms(10)); };
  ObserverRegistration r1 = h.tracer()->AddListener(&slow);
  ObserverRegistration r2 = h.tracer()->AddListener(&fast);

  h.DrawFrame(Ms(1));
  EXPECT_EQ(h.tracer()->slow_sync_listener_calls(), 1u);
  auto warnings = [&] {
    std::vector<CapturingSink::Line> out;
    for (const auto& line : sink->lines) {
      if (absl::StrContains(line.text, "sync frame listener")) out.push_back(line);
    }
    return out;
  };
  EXPECT_THAT(warnings(), IsEmpty());  // Not from the looper thread.

  h.Drain();
  std::vector<CapturingSink::Line> lines = warnings();
  ASSERT_THAT(lines, SizeIs(1));
  EXPECT_EQ(lines[0].level, spdlog::level::warn);
  EXPECT_TRUE(lines[0].on_worker);
  EXPECT_TRUE(absl::StrContains(lines[0].text, "1 sync frame listener call(s)")) << lines[0].text;
  EXPECT_TRUE(absl::StrContains(lines[0].text, "slowest 10ms (JankLogger)")) << lines[0].text;

  // A fast frame adds no call and no warning.
  slow.hook = nullptr;
  h.DrawFrame(Ms(1));
  h.Drain();
  EXPECT_EQ(h.tracer()->slow_sync_listener_calls(), 1u);
  EXPECT_THAT(warnings(), SizeIs(1));
}

// --- Lifecycle ------------------------------------------------------------------

TEST(FrameTracerLifecycleTest, OnCloseTrace_StopsObservingFrames) {
  Harness h;
  SyncRecorder recorder;
  ObserverRegistration r = h.tracer()->AddListener(&recorder);
  h.DrawFrame(Ms(1));
  h.tracer()->OnCloseTrace();
  h.DrawFrame(Ms(1));
  EXPECT_THAT(recorder.frames, SizeIs(1));
  h.tracer()->OnStartTrace();
  h.DrawFrame(Ms(1));
  EXPECT_THAT(recorder.frames, SizeIs(2));
}

TEST(FrameTracerLifecycleTest, RestartedTracer_KeepsASingleDrainTimer) {
  Harness h;
  h.RunPending();
  EXPECT_EQ(h.worker()->queue()->PendingCount(), 1u);
  for (int i = 0; i < 3; ++i) {
    h.tracer()->OnCloseTrace();
    h.tracer()->OnStartTrace();
  }
  h.env().FastForwardBy(Ms(250));
  EXPECT_EQ(h.worker()->queue()->PendingCount(), 1u);
}

TEST(FrameTracerLifecycleTest, OnCloseTrace_StopsTheDrainTimer) {
  Harness h;
  h.tracer()->OnCloseTrace();
  h.env().FastForwardBy(Ms(250));
  EXPECT_EQ(h.worker()->queue()->PendingCount(), 0u);
}

}  // namespace

// matrix::qt on Qt's offscreen platform, timed with a fake clock. The
// dispatcher-signals mode is driven by emitting the dispatcher's awake() /
// aboutToBlock() by hand (Options::force_dispatcher_signals); events are sent
// with QCoreApplication::sendEvent and advance the fake clock in handlers.

#include "matrix/qt/qt_monitor.h"

#include <QAbstractEventDispatcher>
#include <QApplication>
#include <QMouseEvent>
#include <QPaintEvent>
#include <QWidget>
#include <QWindow>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/testing/fake_tick_clock.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace {

using matrix::TimeTicks;
using Phase = matrix::UIThreadMonitor::Phase;

absl::Duration Ms(int64_t ms) { return absl::Milliseconds(ms); }

QApplication* App() {
  static QApplication* app = [] {
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
    static int argc = 1;
    static char arg0[] = "toolkits_qt_monitor_test";
    static char* argv[] = {arg0, nullptr};
    return new QApplication(argc, argv);
  }();
  return app;
}

class RecordingObserver : public matrix::LooperObserver {
 public:
  void DispatchEnd(const matrix::DispatchData& dispatch) override {
    durations.push_back(dispatch.end - dispatch.begin);
  }
  void DoFrame(const matrix::FrameData& frame) override { frames.push_back(frame); }
  std::vector<absl::Duration> durations;
  std::vector<matrix::FrameData> frames;
};

// Advances the clock in its handlers: `input` per mouse press, `paint` per paint.
class Canvas : public QWidget {
 public:
  explicit Canvas(matrix::testing::FakeTickClock* clock) : clock_(clock) {}
  absl::Duration input;
  absl::Duration paint;
  int paints = 0;

 protected:
  void mousePressEvent(QMouseEvent*) override { clock_->Advance(input); }
  void paintEvent(QPaintEvent*) override {
    ++paints;
    clock_->Advance(paint);
  }

 private:
  matrix::testing::FakeTickClock* clock_;
};

// Runs before the monitor's filter on UpdateRequest (filters installed later
// run first, so the test installs it after Attach()): advances the clock.
class UpdateDelay : public QObject {
 public:
  UpdateDelay(matrix::testing::FakeTickClock* clock, absl::Duration delay)
      : clock_(clock), delay_(delay) {}

 protected:
  bool eventFilter(QObject*, QEvent* event) override {
    if (event->type() == QEvent::UpdateRequest) clock_->Advance(delay_);
    return false;
  }

 private:
  matrix::testing::FakeTickClock* clock_;
  absl::Duration delay_;
};

class QtMonitorTest : public ::testing::Test {
 protected:
  QtMonitorTest() : looper_monitor_(&clock_), ui_monitor_(&looper_monitor_, nullptr, {}) {
    App();
    matrix::AppState::Get()->ResetForTesting();
    looper_monitor_.Start();
    ui_monitor_.Start();
    registration_ = ui_monitor_.AddObserver(&observer_);
    dispatcher_ = QAbstractEventDispatcher::instance();
  }

  absl::StatusOr<std::unique_ptr<matrix::qt::QtMonitor>> AttachSignals(
      matrix::qt::Options options = {}) {
    options.force_dispatcher_signals = true;
    return matrix::qt::Attach(&looper_monitor_, &ui_monitor_, std::move(options));
  }

  matrix::testing::FakeTickClock clock_;
  matrix::LooperMonitor looper_monitor_;
  matrix::UIThreadMonitor ui_monitor_;
  RecordingObserver observer_;
  matrix::ObserverRegistration registration_;
  QAbstractEventDispatcher* dispatcher_ = nullptr;
};

TEST_F(QtMonitorTest, AwakeToAboutToBlockIsOneDispatch) {
  matrix::qt::Options no_frames;
  no_frames.frames = false;
  auto qt = AttachSignals(no_frames);
  ASSERT_TRUE(qt.ok()) << qt.status();
  EXPECT_EQ((*qt)->dispatch_source(), matrix::qt::DispatchSource::kDispatcherSignals);

  emit dispatcher_->awake();
  EXPECT_TRUE((*qt)->in_dispatch());
  clock_.Advance(Ms(10));
  emit dispatcher_->aboutToBlock();
  EXPECT_FALSE((*qt)->in_dispatch());
  clock_.Advance(Ms(500));  // Blocked: idle, not a dispatch.
  emit dispatcher_->aboutToBlock();  // A second one outside a dispatch: nothing.
  ASSERT_EQ(observer_.durations.size(), 1u);
  EXPECT_EQ(observer_.durations[0], Ms(10));
  EXPECT_EQ((*qt)->dispatch_count(), 1u);
}

TEST_F(QtMonitorTest, EventsAfterThePollStartADispatchThatEndsAtTheNextAwake) {
  matrix::qt::Options no_frames;
  no_frames.frames = false;
  auto qt = AttachSignals(no_frames);
  ASSERT_TRUE(qt.ok()) << qt.status();
  QObject target;
  // Qt activates timers and window-system events after its poll, before the
  // next awake(): the first such event starts a dispatch.
  QEvent timer(QEvent::Timer);
  QCoreApplication::sendEvent(&target, &timer);
  EXPECT_TRUE((*qt)->in_dispatch());
  clock_.Advance(Ms(30));
  emit dispatcher_->awake();  // Ends it, starts the next.
  clock_.Advance(Ms(4));
  emit dispatcher_->aboutToBlock();
  ASSERT_EQ(observer_.durations.size(), 2u);
  EXPECT_EQ(observer_.durations[0], Ms(30));
  EXPECT_EQ(observer_.durations[1], Ms(4));

  qt->reset();  // Detached: events and signals are not seen.
  emit dispatcher_->awake();
  QCoreApplication::sendEvent(&target, &timer);
  EXPECT_EQ(observer_.durations.size(), 2u);
  EXPECT_FALSE(looper_monitor_.is_dispatching());
}

TEST_F(QtMonitorTest, DetachMidDispatchEndsIt) {
  auto qt = AttachSignals();
  ASSERT_TRUE(qt.ok()) << qt.status();
  emit dispatcher_->awake();
  clock_.Advance(Ms(7));
  (*qt)->Detach();
  EXPECT_FALSE((*qt)->attached());
  ASSERT_EQ(observer_.durations.size(), 1u);
  EXPECT_EQ(observer_.durations[0], Ms(7));
  (*qt)->Detach();  // Idempotent.
  EXPECT_EQ(observer_.durations.size(), 1u);
}

TEST_F(QtMonitorTest, FramePhasesFromInputUpdateRequestAndPaint) {
  Canvas canvas(&clock_);
  canvas.setWindowTitle("QtMonitorTestCanvas");
  canvas.resize(100, 80);
  canvas.show();
  canvas.input = Ms(3);
  canvas.paint = Ms(10);
  QCoreApplication::processEvents();  // Show and first paint, unmonitored.
  // Installed first, so it runs after the monitor's filter (Qt runs the
  // filter installed last first): 4 ms of "animation" after the mark.
  UpdateDelay delay(&clock_, Ms(4));
  App()->installEventFilter(&delay);
  auto qt = AttachSignals();
  ASSERT_TRUE(qt.ok()) << qt.status();

  const int paints = canvas.paints;
  emit dispatcher_->awake();
  const TimeTicks begin = clock_.NowTicks();
  clock_.Advance(Ms(1));
  // Input to the window (Qt delivers it to the QWindow first).
  QMouseEvent press(QEvent::MouseButtonPress, QPointF(5, 5), QPointF(5, 5), Qt::LeftButton,
                    Qt::LeftButton, Qt::NoModifier);
  QCoreApplication::sendEvent(canvas.windowHandle(), &press);
  canvas.update();
  QEvent update(QEvent::UpdateRequest);
  QCoreApplication::sendEvent(&canvas, &update);  // +4 ms (delay), then paint +10 ms.
  QCoreApplication::sendEvent(&canvas, &update);  // A second one: not a second frame.
  clock_.Advance(Ms(2));
  emit dispatcher_->aboutToBlock();

  EXPECT_GT(canvas.paints, paints);
  ASSERT_EQ(observer_.frames.size(), 1u);
  const matrix::FrameData& frame = observer_.frames[0];
  EXPECT_TRUE(frame.is_vsync_frame);
  EXPECT_EQ(frame.start, begin);
  EXPECT_EQ(frame.intended_frame_time, begin + Ms(1));  // The input event.
  EXPECT_EQ(frame.input(), Ms(3));
  EXPECT_EQ(frame.animation(), Ms(4));
  // Paint, the second UpdateRequest's delay, then until the dispatch ends.
  EXPECT_EQ(frame.traversal(), Ms(10 + 4 + 2));
  EXPECT_EQ(frame.commit(), absl::ZeroDuration());
  EXPECT_EQ(frame.refresh_rate, matrix::RefreshRate::FromMillihertz(std::llround(
                                    canvas.screen()->refreshRate() * 1000)));
  EXPECT_EQ((*qt)->frame_count(), 1);

  // A frame without input: input is empty, the frame starts at UpdateRequest.
  emit dispatcher_->awake();
  clock_.Advance(Ms(5));
  const TimeTicks update_time = clock_.NowTicks();
  canvas.update();
  QCoreApplication::sendEvent(&canvas, &update);
  emit dispatcher_->aboutToBlock();
  ASSERT_EQ(observer_.frames.size(), 2u);
  EXPECT_EQ(observer_.frames[1].intended_frame_time, update_time);
  EXPECT_EQ(observer_.frames[1].input(), absl::ZeroDuration());
  EXPECT_EQ(observer_.frames[1].animation(), Ms(4));
  EXPECT_EQ(observer_.frames[1].traversal(), Ms(10));

  // An UpdateRequest outside a dispatch is not a frame.
  canvas.update();
  QCoreApplication::sendEvent(&canvas, &update);  // Starts a dispatch (signal mode)...
  emit dispatcher_->aboutToBlock();
  EXPECT_EQ(observer_.frames.size(), 3u);  // ...so it is one: the event began it.
  App()->removeEventFilter(&delay);
}

TEST_F(QtMonitorTest, SceneIsTheFocusWindowTitleOrClassName) {
  QWidget titled;
  titled.setWindowTitle("Orders");
  titled.show();
  auto qt = AttachSignals();
  ASSERT_TRUE(qt.ok()) << qt.status();
  titled.activateWindow();
  QCoreApplication::processEvents();
  if (QGuiApplication::focusWindow() != titled.windowHandle()) {
    GTEST_SKIP() << "the offscreen platform gave no focus";
  }
  EXPECT_EQ((*qt)->scene(), "Orders");
  titled.setWindowTitle("Invoices");
  EXPECT_EQ((*qt)->scene(), "Invoices");
  EXPECT_EQ(matrix::AppState::Get()->visible_scene(), "Invoices");

  QWidget untitled;
  untitled.show();
  untitled.activateWindow();
  QCoreApplication::processEvents();
  EXPECT_EQ((*qt)->scene(), "QWidget");

  // The application's own scene stands.
  matrix::AppState::Get()->OnSceneShown("Checkout");
  titled.activateWindow();
  QCoreApplication::processEvents();
  EXPECT_EQ(matrix::AppState::Get()->visible_scene(), "Checkout");
}

TEST_F(QtMonitorTest, ClearErrors) {
  EXPECT_EQ(matrix::qt::Attach(static_cast<matrix::TracePlugin*>(nullptr)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(matrix::qt::Attach(static_cast<matrix::LooperMonitor*>(nullptr), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  matrix::testing::FakeTickClock clock;
  auto qt = AttachSignals();
  ASSERT_TRUE(qt.ok()) << qt.status();
  auto again = AttachSignals();
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("already attached"), std::string::npos);
  qt->reset();

  absl::Status from_thread;
  std::thread([&] { from_thread = AttachSignals().status(); }).join();
  EXPECT_EQ(from_thread.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(from_thread.message().find("GUI thread"), std::string::npos) << from_thread;
}

TEST_F(QtMonitorTest, GlibDispatcherIsMonitoredThroughItsPollFunction) {
  if (!dispatcher_->inherits("QEventDispatcherGlib")) GTEST_SKIP() << "Qt without GLib";
  auto qt = matrix::qt::Attach(&looper_monitor_, &ui_monitor_, {});
  ASSERT_TRUE(qt.ok()) << qt.status();
  EXPECT_EQ((*qt)->dispatch_source(), matrix::qt::DispatchSource::kGlibPoll);
  QCoreApplication::processEvents();
  QCoreApplication::processEvents();
  EXPECT_GE((*qt)->dispatch_count(), 1u);
  emit dispatcher_->awake();  // The signals are not used in this mode.
  const uint64_t count = (*qt)->dispatch_count();
  emit dispatcher_->awake();
  EXPECT_EQ((*qt)->dispatch_count(), count);
}

}  // namespace

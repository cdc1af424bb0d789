// A real Qt 6 Widgets program under Xvfb (xvfb-run, QT_QPA_PLATFORM=xcb),
// monitored with one line (matrix::qt::Attach). A 16 ms QTimer calls update()
// so the window draws at about 60 Hz; 5 paints are janky (100 ms each); a
// timer blocks the loop for 1.5 s in a function built without method tracing;
// a slot spins for 300 ms. The reports must show:
//   FPS: the window's title as scene, the 5 janky frames (each >= 3 dropped
//        frames at 60 Hz; tolerance: up to 3 more slow frames from start-up)
//        and their paint time in the traversal phase (>= 450 ms in all);
//   ANR: the native stack names HangInUninstrumentedCode;
//   slow method: the key names qt_e2e::SlowSlot (qt_e2e_traced.cc is
//                method-traced; this file is not).
// ctest runs it twice: with Qt's default GLib dispatcher (kGlibPoll) and with
// QT_NO_GLIB=1 (QEventDispatcherUNIX: kDispatcherSignals).

#include <QApplication>
#include <QPaintEvent>
#include <QPainter>
#include <QTimer>
#include <QWidget>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "e2e_util.h"
#include "toolkit_e2e.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/qt/qt_monitor.h"
#include "uninstrumented.h"

namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kTitle[] = "MatrixQtE2E";
constexpr int kFirstJankyPaint = 60;  // After about 1 s of steady frames.
constexpr int kJankyPaints = 5;

class Canvas : public QWidget {
 public:
  int paints = 0;
  int janky = 0;

 protected:
  void paintEvent(QPaintEvent*) override {
    const int paint = paints++;
    QPainter painter(this);
    painter.fillRect(rect(), QColor::fromHsv((paint * 6) % 360, 160, 200));
    if (paint >= kFirstJankyPaint && paint < kFirstJankyPaint + kJankyPaints) {
      e2e::SpinFor(absl::Milliseconds(100));
      ++janky;
    }
  }
};

bool g_slow_slot_ran = false;

}  // namespace

namespace qt_e2e {
// qt_e2e_traced.cc (method-traced): runs `work` in a traced frame.
void SlowSlot(void (*work)());
}  // namespace qt_e2e

namespace {

void SpinInSlowSlot() {
  qt_e2e::SlowSlot(+[] {
    e2e::SpinFor(absl::Milliseconds(300));
    g_slow_slot_ran = true;
  });
}

TEST(QtE2ETest, FramesJankAnrAndSlowSlotOnARealWindow) {
  int argc = 1;
  char arg0[] = "toolkits_qt_e2e_test";
  char* argv[] = {arg0, nullptr};
  QApplication app(argc, argv);
  auto config = e2e::ToolkitTraceConfig(absl::Seconds(30));
  ASSERT_TRUE(config.ok()) << config.status();
  e2e::TracedProgram traced(*config, e2e::MainLooper::kNone);
  ASSERT_TRUE(traced.status().ok()) << traced.status();
  matrix::TracePlugin* plugin = traced.plugin();
  e2e::CollectingListener* listener = &traced.listener();

  Canvas canvas;
  canvas.setWindowTitle(kTitle);
  canvas.resize(320, 240);

  auto monitor = matrix::qt::Attach(plugin);  // The one line.
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  const bool no_glib = std::getenv("QT_NO_GLIB") != nullptr;
  EXPECT_EQ((*monitor)->dispatch_source(), no_glib ? matrix::qt::DispatchSource::kDispatcherSignals
                                                   : matrix::qt::DispatchSource::kGlibPoll);
  canvas.show();

  QTimer frames;
  QObject::connect(&frames, &QTimer::timeout, &canvas, [&canvas] { canvas.update(); });
  frames.setTimerType(Qt::PreciseTimer);
  frames.start(16);
  QTimer::singleShot(2500, [] { e2e::HangInUninstrumentedCode(absl::Milliseconds(1500)); });
  QTimer::singleShot(4500, &SpinInSlowSlot);
  QTimer::singleShot(6000, [plugin] {
    plugin->GetFrameTracer()->FlushReports();
    QCoreApplication::quit();
  });
  app.exec();

  const int64_t frame_count = (*monitor)->frame_count();
  EXPECT_EQ(canvas.janky, kJankyPaints);
  EXPECT_TRUE(g_slow_slot_ran);
  EXPECT_GT(frame_count, 100);  // About 6 s at 60 Hz minus the blocks and janks.
  EXPECT_EQ((*monitor)->scene(), kTitle);

  auto has = [](const std::vector<matrix::Issue>& issues, auto pred) {
    return e2e::HasIssue(issues, pred);
  };
  const auto is_fps = e2e::IsFps;
  const auto is_anr = e2e::IsAnr;
  const auto is_slow = e2e::IsSlowMethod;
  EXPECT_TRUE(listener->WaitFor(
      [&](const auto& issues) {
        return has(issues, is_fps) && has(issues, is_anr) && has(issues, is_slow);
      },
      absl::Seconds(15)));
  monitor->reset();
  std::vector<matrix::Issue> issues = listener->issues();

  // FPS.
  const e2e::FpsTotals fps = e2e::SumFps(issues);
  std::printf("qt e2e (%s): frames %lld, slow %lld, dropped %lld, traversal %.1f ms\n",
              matrix::qt::DispatchSourceName(no_glib ? matrix::qt::DispatchSource::kDispatcherSignals
                                                     : matrix::qt::DispatchSource::kGlibPoll),
              static_cast<long long>(fps.frames), static_cast<long long>(fps.slow_frames),
              static_cast<long long>(fps.dropped), fps.traversal_ms);
  EXPECT_THAT(fps.scenes, ElementsAre(kTitle));
  EXPECT_GT(fps.frames, 100);
  EXPECT_GE(fps.slow_frames, kJankyPaints);
  EXPECT_LE(fps.slow_frames, kJankyPaints + 3);
  EXPECT_GE(fps.dropped, kJankyPaints * 5);  // 100 ms at 60 Hz: 5 or 6 vsyncs each.
  EXPECT_GE(fps.traversal_ms, 0.9 * kJankyPaints * 100) << "paint time in the traversal phase";
  EXPECT_LE(fps.traversal_ms, 2.0 * kJankyPaints * 100 + fps.frames * 5.0);

  // ANR: the native stack names the blocking function.
  std::string anrs;
  const matrix::Issue* anr = e2e::FindAnrNaming(issues, "HangInUninstrumentedCode", &anrs);
  ASSERT_NE(anr, nullptr) << "no ANR names the hang; ANRs:\n" << anrs;
  EXPECT_EQ(anr->proto().anr().scene(), kTitle);

  // Slow method: the key names the slot.
  EXPECT_THAT(e2e::SlowMethodKeys(issues), Contains(HasSubstr("SlowSlot")));
}

}  // namespace

// A frozen animation is one FROZEN frame, whatever draws it
// (docs/tracers.md "Frames that were due"): programs animating at 60 Hz stall
// their main thread in a dispatch of its own, then draw again, under
// matrix-run. Counted from its own dispatch the overdue frame would look
// smooth; the due rule counts it from the last frame before the stall.
//   QmlBasicLoop      Debian's qml runtime (qml-qt6), QSG_RENDER_LOOP=basic:
//                     a NumberAnimation, a Timer busy 6 s in JavaScript
//                     (the issue's case: ~359 dropped)
//   QmlThreadedLoop   the same with Qt Quick's default threaded render loop
//                     (the render thread presents; the main thread stalls)
//   Gtk3FrameClock    a GTK 3 program of ours (agent_gtk_target), a tick
//                     callback animation frozen 3 s by a busy timeout
//   Gtk4FrameClock    the same in GTK 4 (agent_gtk4_target), which draws
//                     through EGL via libepoxy
//   GlSwapLoop        a program of ours presenting through a dlopen'ed GL
//                     library (present_target stall, no display), frozen 3 s
// Each run must give exactly one FROZEN frame, of the stall's length in
// vsyncs (60 Hz: Xvfb reports no rate), within 5 %.

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

struct Frozen {
  int64_t frozen_frames = 0;   // FROZEN frames over every FPS report.
  int64_t frozen_dropped = 0;  // Their dropped frames.
  int64_t frames = 0;
};

Frozen RunAndCount(const std::string& name, const std::vector<std::string>& program,
                   const std::vector<std::string>& env = {}) {
  const std::string dir = agent_test::NewReportDir("frozen-" + name);
  std::vector<std::string> args = {MATRIX_RUN_PATH, "--report-dir", dir, "--"};
  args.insert(args.end(), program.begin(), program.end());
  const agent_test::RunResult run = agent_test::Run(args, env);
  EXPECT_EQ(run.exit_code(), 0) << run.out << run.err;
  Frozen f;
  for (const auto& record : agent_test::ReadIssues(dir)) {
    if (record.kind != "frame") continue;
    const auto& frame = record.issue.frame();
    f.frozen_frames += frame.drop_level().frozen();
    f.frozen_dropped += frame.drop_sum().frozen();
    f.frames += frame.frames();
  }
  std::printf("%s: %lld frames, %lld frozen frame(s) of %lld dropped\n", name.c_str(),
              static_cast<long long>(f.frames), static_cast<long long>(f.frozen_frames),
              static_cast<long long>(f.frozen_dropped));
  return f;
}

constexpr char kQml[] = R"(import QtQuick
import QtQuick.Window
Window {
    width: 320; height: 240; visible: true; title: "matrix-frozen"
    Rectangle {
        width: 40; height: 40; color: "red"
        NumberAnimation on x { from: 0; to: 280; duration: 1000; loops: Animation.Infinite }
    }
    // 120 frames (2 s at 60 Hz) drawn, then the stall in a dispatch of its
    // own. Armed by frames, not time since start: on a loaded machine the
    // first frame can come late, and a stall before it freezes nothing.
    // afterAnimating is emitted on the main thread for each frame of an
    // exposed window, in both render loops.
    property int framesDrawn: 0
    onAfterAnimating: if (++framesDrawn == 120) stall.start()
    Timer {
        id: stall; interval: 1
        onTriggered: { var t = Date.now(); while (Date.now() - t < 6000) {} quit.start() }
    }
    Timer { id: quit; interval: 1500; onTriggered: Qt.quit() }
}
)";

std::string QmlFile(const std::string& name) {
  const std::string path = agent_test::NewReportDir(name) + ".qml";
  std::ofstream(path) << kQml;
  return path;
}

// A 6 s stall at 60 Hz: 360 vsyncs.
TEST(FrozenFrameTest, QmlBasicLoop) {
  const Frozen f = RunAndCount("qml-basic", {QML_PATH, QmlFile("qml-basic")},
                               {"QSG_RENDER_LOOP=basic"});
  EXPECT_EQ(f.frozen_frames, 1);
  EXPECT_NEAR(f.frozen_dropped, 360, 18);
}

TEST(FrozenFrameTest, QmlThreadedLoop) {
  const Frozen f = RunAndCount("qml-threaded", {QML_PATH, QmlFile("qml-threaded")});
  EXPECT_EQ(f.frozen_frames, 1);
  EXPECT_NEAR(f.frozen_dropped, 360, 18);
}

// A 3 s stall: 180 vsyncs.
TEST(FrozenFrameTest, Gtk3FrameClock) {
  const Frozen f = RunAndCount("gtk3", {GTK_TARGET_PATH, "2500", "0", "3000"});
  EXPECT_EQ(f.frozen_frames, 1);
  EXPECT_NEAR(f.frozen_dropped, 180, 9);
}

// GTK 4 presents through EGL (libepoxy) on its frame clock: a 3 s stall,
// 180 vsyncs.
TEST(FrozenFrameTest, Gtk4FrameClock) {
#ifdef GTK4_TARGET_PATH
  const Frozen f = RunAndCount("gtk4", {GTK4_TARGET_PATH, "2500", "3000"});
  EXPECT_EQ(f.frozen_frames, 1);
  EXPECT_NEAR(f.frozen_dropped, 180, 9);
#else
  GTEST_SKIP() << "agent_gtk4_target not built (libgtk-4-dev: make deps)";
#endif
}

TEST(FrozenFrameTest, GlSwapLoop) {
  const Frozen f = RunAndCount("gl", {PRESENT_TARGET_PATH, "stall", FAKE_GL_PATH});
  EXPECT_EQ(f.frames, 60);
  EXPECT_EQ(f.frozen_frames, 1);
  EXPECT_NEAR(f.frozen_dropped, 180, 9);
}

}  // namespace

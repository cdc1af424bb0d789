// Renderers the agent finds however they present (docs/matrix-run.md,
// "Frames"): unmodified Debian programs under xvfb-run through matrix-run,
// with libswap_counter.so (swap_counter.c) preloaded after the agent to count
// the real swaps independently. One program per test binary (RENDERER_KIND):
//   qml       Qt Quick's qml runtime (qml-qt6), default (threaded) render
//             loop: the render thread swaps (eglSwapBuffers/glXSwapBuffers
//             by symbol, off the main thread).
//   gtk4      gtk4-widget-factory (gtk-4-examples): libepoxy looks the swap
//             up with dlsym on its own GL library handle.
//   sdl       chromium-bsu (SDL 2 game): SDL looks glXSwapBuffers up with
//             dlsym on its own libGL handle.
// Each must give FPS reports whose rate (frames over the wall time between
// the first and the last report, as glxgears_e2e_test) is within 10 % of the
// counter's steady rate (swaps between its second and last lines), and one
// startup report that ends at the first presented frame (the counter's first
// swap, measured from process start as the StartupTracer does; margin 300 ms
// for the loaded machine and the 10 ms tick of /proc's start time).

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

struct CounterLine {
  double swaps = 0;
  double seconds = 0;
};

constexpr char kQml[] = R"(import QtQuick
import QtQuick.Window
Window {
    width: 320; height: 240; visible: true; title: "matrix-qml"
    Rectangle {
        width: 40; height: 40; color: "red"
        NumberAnimation on x { from: 0; to: 280; duration: 1000; loops: Animation.Infinite }
    }
}
)";

std::vector<std::string> ProgramArgs(const std::string& dir) {
  const std::string kind = RENDERER_KIND;
  if (kind == "qml") {
    const std::string qml = dir + "-anim.qml";
    std::ofstream(qml) << kQml;
    return {PROGRAM_PATH, qml};
  }
  if (kind == "sdl") return {PROGRAM_PATH, "-na", "-w"};  // No audio, windowed.
  return {PROGRAM_PATH};
}

TEST(RendererTest, FpsMatchesTheRealSwapsAndStartupEndsAtTheFirstSwap) {
  const std::string dir = agent_test::NewReportDir(std::string("renderer-") + RENDERER_KIND);
  std::vector<std::string> args = {"/usr/bin/timeout", "-s",          "TERM", "14",
                                   MATRIX_RUN_PATH,    "--report-dir", dir,    "--fps-slice",
                                   "1000",             "--"};
  for (const std::string& a : ProgramArgs(dir)) args.push_back(a);
  const agent_test::RunResult run =
      agent_test::Run(args, {std::string("LD_PRELOAD=") + SWAP_COUNTER_PATH});

  double first_swap_ms = -1;
  std::vector<CounterLine> counter;
  for (absl::string_view line : absl::StrSplit(run.err, '\n')) {
    if (!absl::StartsWith(line, "swap-counter: ")) continue;
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    if (absl::StrContains(line, "first swap at") && words.size() > 4) {
      ASSERT_TRUE(absl::SimpleAtod(words[4], &first_swap_ms)) << line;
    } else if (words.size() > 4) {
      CounterLine c;
      ASSERT_TRUE(absl::SimpleAtod(words[1], &c.swaps)) << line;
      ASSERT_TRUE(absl::SimpleAtod(words[4], &c.seconds)) << line;
      counter.push_back(c);
    }
  }
  ASSERT_GE(first_swap_ms, 0) << run.err;
  ASSERT_GE(counter.size(), 4u) << run.err;
  const CounterLine& from = counter[1];
  const CounterLine& to = counter.back();
  const double real_rate = (to.swaps - from.swaps) / (to.seconds - from.seconds);

  int startups = 0;
  double startup_ms = -1;
  const auto records = agent_test::ReadIssues(dir);
  for (const auto& record : records) {
    if (record.kind != "startup") continue;
    ++startups;
    startup_ms = record.issue.startup().startup_duration_ms();
  }
  const agent_test::ReportedFrameRate reported = agent_test::FrameRateOf(records);
  ASSERT_GE(reported.reports, 4) << run.err;
  ASSERT_GT(reported.last_ms, reported.first_ms);
  const double agent_rate = reported.per_second();
  std::printf("%s: %.1f swaps/s counted, %.1f FPS from %d matrix reports; startup %.0f ms, "
              "first swap %.0f ms\n",
              RENDERER_KIND, real_rate, agent_rate, reported.reports, startup_ms, first_swap_ms);
  EXPECT_NEAR(agent_rate, real_rate, 0.1 * real_rate) << run.err;
  EXPECT_EQ(startups, 1) << run.err;
  EXPECT_NEAR(startup_ms, first_swap_ms, 300) << run.err;
}

}  // namespace

// Vulkan presents are frames (docs/matrix-run.md, "Frames"): vkcube (Debian
// vulkan-tools, not built by us) on Mesa's software driver lavapipe
// (mesa-vulkan-drivers, its ICD chosen with VK_ICD_FILENAMES) under xvfb-run,
// through matrix-run, for a fixed number of frames (--c). vkcube gets its
// present as most programs do: vkGetInstanceProcAddr(instance,
// "vkGetDeviceProcAddr"), then vkGetDeviceProcAddr(device,
// "vkQueuePresentKHR"). libswap_counter.so (swap_counter.c), preloaded after
// the agent, counts the presents independently (the agent's real look-ups
// are the counter's) and times the first one.
//
// The FPS reports' frames (every report, the exit's flush included) must add
// up to the frames vkcube drew within 10 %, and the one startup report must
// end at the first present (the counter's first, both from process start as
// the StartupTracer measures). Without the agent's Vulkan hooks there are no
// frames and the startup ends at the first poll, well before.
//
// vulkan_target (vulkan_target.c, ours) covers what vkcube does not: a
// loader dlopen()ed RTLD_LOCAL (SDL, GLFW, volk), whose functions are not in
// the global scope, and presents on a render thread while the main thread
// polls. Its presents must all be frames (the agent's exit line counts
// them); on the render thread each present meets a main-thread dispatch end,
// as present_hooks_e2e_test's.
//
// Skipped (not failed) only when vkcube or the lavapipe ICD is missing.

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

constexpr char kLavapipeIcd[] = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";
constexpr int kFrames = 600;

// The agent's exit line: "matrix-agent: vkcube (pid N): D dispatches, F
// frames; reports in ...". -1 when absent.
int64_t AgentFrames(const std::string& err) {
  const size_t end = err.find(" frames; reports in");
  if (end == std::string::npos) return -1;
  const size_t begin = err.rfind(' ', end - 1) + 1;
  int64_t frames = -1;
  return absl::SimpleAtoi(err.substr(begin, end - begin), &frames) ? frames : -1;
}

TEST(VulkanTest, VkcubePresentsAreFramesAndStartupEndsAtTheFirstPresent) {
  if (access(VKCUBE_PATH, X_OK) != 0) {
    GTEST_SKIP() << "no vkcube at " << VKCUBE_PATH << " (vulkan-tools: make deps)";
  }
  if (!std::filesystem::exists(kLavapipeIcd)) {
    GTEST_SKIP() << "no lavapipe ICD " << kLavapipeIcd << " (mesa-vulkan-drivers: make deps)";
  }
  const std::string dir = agent_test::NewReportDir("vulkan");
  const agent_test::RunResult run = agent_test::Run(
      {"/usr/bin/timeout", "-s", "TERM", "60", MATRIX_RUN_PATH, "--report-dir", dir,
       "--fps-slice", "1000", "--", VKCUBE_PATH, "--c", std::to_string(kFrames)},
      {std::string("LD_PRELOAD=") + SWAP_COUNTER_PATH,
       std::string("VK_ICD_FILENAMES=") + kLavapipeIcd});
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;

  double first_present_ms = -1;
  int64_t counted = -1;
  for (absl::string_view line : absl::StrSplit(run.err, '\n')) {
    if (!absl::StartsWith(line, "swap-counter: ")) continue;
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    if (absl::StrContains(line, "first swap at") && words.size() > 4) {
      ASSERT_TRUE(absl::SimpleAtod(words[4], &first_present_ms)) << line;
    } else if (words.size() == 3 && words[1] == "total") {
      ASSERT_TRUE(absl::SimpleAtoi(words[2], &counted)) << line;
    }
  }
  // vkcube presents once per frame it draws, exactly --c of them.
  ASSERT_GE(first_present_ms, 0) << run.err;
  EXPECT_EQ(counted, kFrames) << run.err;

  int startups = 0;
  double startup_ms = -1;
  int reports = 0;
  int64_t reported = 0;
  for (const auto& record : agent_test::ReadIssues(dir)) {
    if (record.kind == "frame") {
      ++reports;
      reported += record.issue.frame().frames();
    }
    if (record.kind != "startup") continue;
    ++startups;
    startup_ms = record.issue.startup().startup_duration_ms();
    EXPECT_EQ(record.issue.startup().first_scene(), "vkcube");
  }
  const int64_t agent_frames = AgentFrames(run.err);
  std::printf("vkcube: %d frames drawn, %lld presents counted, %lld frames in %d matrix FPS "
              "reports (agent: %lld); startup %.0f ms, first present %.0f ms\n",
              kFrames, static_cast<long long>(counted), static_cast<long long>(reported), reports,
              static_cast<long long>(agent_frames), startup_ms, first_present_ms);
  EXPECT_GE(reports, 1) << run.err;
  EXPECT_NEAR(reported, kFrames, 0.1 * kFrames) << run.err;
  EXPECT_NEAR(agent_frames, kFrames, 0.1 * kFrames) << run.err;
  EXPECT_EQ(startups, 1) << run.err;
  // The startup ends at the end of the first frame, when the first present
  // returns: never before the counter saw it enter (both measured from the
  // same /proc start time; 5 ms for rounding), within 150 ms after (it
  // ended 7-41 ms after here). The first poll (the X connection,
  // where the startup ends when the presents are not seen) comes about 60 ms
  // before the first present here: lavapipe builds the device, swapchain and
  // pipeline between them.
  EXPECT_GE(startup_ms, first_present_ms - 5) << run.err;
  EXPECT_LE(startup_ms, first_present_ms + 150) << run.err;
}

#ifdef VULKAN_TARGET_PATH
struct Counts {
  int64_t presents = -1;
  int64_t frames = -1;
};

Counts RunVulkanTarget(const std::string& mode) {
  const std::string dir = agent_test::NewReportDir("vulkan-target-" + mode);
  const agent_test::RunResult run = agent_test::Run(
      {"/usr/bin/timeout", "-s", "TERM", "60", MATRIX_RUN_PATH, "--report-dir", dir, "--",
       VULKAN_TARGET_PATH, mode},
      {std::string("VK_ICD_FILENAMES=") + kLavapipeIcd});
  EXPECT_EQ(run.exit_code(), 0) << run.out << run.err;
  Counts counts;
  for (absl::string_view line : absl::StrSplit(run.out, '\n')) {
    if (absl::ConsumePrefix(&line, "presents ")) {
      EXPECT_TRUE(absl::SimpleAtoi(line, &counts.presents));
    }
  }
  counts.frames = AgentFrames(run.err);
  EXPECT_GE(counts.frames, 0) << run.err;
  return counts;
}

TEST(VulkanTest, PresentsThroughALoaderDlopenedLocallyAreFrames) {
  if (!std::filesystem::exists(kLavapipeIcd)) {
    GTEST_SKIP() << "no lavapipe ICD " << kLavapipeIcd << " (mesa-vulkan-drivers: make deps)";
  }
  const Counts counts = RunVulkanTarget("main");
  EXPECT_EQ(counts.presents, 100);
  EXPECT_EQ(counts.frames, 100);
}

TEST(VulkanTest, RenderThreadPresentsBecomeMainThreadFrames) {
  if (!std::filesystem::exists(kLavapipeIcd)) {
    GTEST_SKIP() << "no lavapipe ICD " << kLavapipeIcd << " (mesa-vulkan-drivers: make deps)";
  }
  const Counts counts = RunVulkanTarget("thread");
  EXPECT_EQ(counts.presents, 100);
  // Each present (20 ms apart) meets a main-thread dispatch end (every 2 ms);
  // two landing before one end on a loaded machine count once.
  EXPECT_GE(counts.frames, 90);
  EXPECT_LE(counts.frames, 100);
}
#endif  // VULKAN_TARGET_PATH

}  // namespace

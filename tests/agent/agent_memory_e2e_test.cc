// What matrix-run's agent adds to a small real program's memory: glxgears
// (mesa-utils) under xvfb-run for 4 s, alone, under matrix-run, and under
// matrix-run --symbolize=off. The figure is the peak resident set (wait4's
// ru_maxrss, which covers the program as `timeout` waited for it), the median
// of three runs of each, compared within one run. The budgets
// (docs/performance.md, "matrix-run agent") are 8 MB added by default and
// 4 MB with --symbolize=off; the agent adds 4.1-4.5 MB and 3.1-3.5 MB (it
// releases the pages of its libraries that its start alone read:
// tools/matrix-run/agent/own_pages.h). The ceilings below are those figures
// and 0.5-0.6 MB for run-to-run differences and a loaded machine; the second
// is the budget itself.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

// Runs `args` with its output discarded; returns the peak RSS in KiB of it
// and the children it waited for, or -1.
long PeakRssKib(const std::vector<std::string>& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stdout);
    freopen("/dev/null", "w", stderr);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (pid < 0 || wait4(pid, &status, 0, &usage) != pid) return -1;
  return usage.ru_maxrss;
}

// The median of three runs of `args`.
long MedianPeakRssKib(const std::vector<std::string>& args) {
  std::vector<long> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(PeakRssKib(args));
  std::sort(runs.begin(), runs.end());
  return runs[1];
}

TEST(AgentMemoryTest, TheAgentAddsUnder8MBToGlxgears_LessWithoutSymbolizing) {
  const std::string dir = agent_test::NewReportDir("memory");
  const std::vector<std::string> timeout = {"/usr/bin/timeout", "-s", "INT", "4"};
  auto with = [&](std::vector<std::string> tail) {
    std::vector<std::string> args = timeout;
    args.insert(args.end(), tail.begin(), tail.end());
    return args;
  };
  const long bare = MedianPeakRssKib(with({GLXGEARS_PATH}));
  const long agent = MedianPeakRssKib(
      with({MATRIX_RUN_PATH, "--quiet", "--report-dir", dir, "--", GLXGEARS_PATH}));
  const long raw = MedianPeakRssKib(with({MATRIX_RUN_PATH, "--quiet", "--symbolize=off",
                                          "--report-dir", dir, "--", GLXGEARS_PATH}));
  std::printf("glxgears peak RSS: %ld KiB alone, %ld KiB under matrix-run (+%ld), %ld KiB with "
              "--symbolize=off (+%ld)\n",
              bare, agent, agent - bare, raw, raw - bare);
  ASSERT_GT(bare, 0);
  // Above these, something new is loaded, allocated or touched at start.
  EXPECT_LE(agent - bare, 5 * 1024);
  EXPECT_LE(raw - bare, 4 * 1024);
  // Raw frames load no symbol tables.
  EXPECT_LT(raw, agent);
}

}  // namespace

// matrix_agent_bench: the overhead of libmatrix-agent.so on an unmodified
// poll loop (agent_bench_loop), per loop iteration, with and without
// LD_PRELOAD, in the same run (docs/performance.md, "matrix-run agent").
//
// Each benchmark iteration runs the loop program once (kLoopIterations
// calls); the iteration's time is the program's own measurement of its loop
// (manual time), so process start-up is not counted; ns_per_poll is that
// time per poll.
//
//   ./build/tests/bench/agent/matrix_agent_bench --benchmark_repetitions=5

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "benchmark/benchmark.h"

namespace {

constexpr long kLoopIterations = 200000;

// Runs the loop program; returns its ns per iteration, or a negative value.
double RunLoop(bool preload, const char* where, const char* call) {
  const std::string report_dir =
      (std::filesystem::temp_directory_path() / ("matrix-agent-bench-" + std::to_string(getpid())))
          .string();
  int out[2];
  if (pipe(out) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    if (preload) {
      setenv("LD_PRELOAD", AGENT_PATH, 1);
      setenv("MATRIX_REPORT_DIR", report_dir.c_str(), 1);
    } else {
      unsetenv("LD_PRELOAD");
    }
    const std::string n = std::to_string(kLoopIterations);
    execl(LOOP_PATH, LOOP_PATH, n.c_str(), where, call, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  char buffer[64] = {};
  const ssize_t got = read(out[0], buffer, sizeof(buffer) - 1);
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  std::filesystem::remove_all(report_dir);
  if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return std::atof(buffer);
}

void BM_Loop(benchmark::State& state, bool preload, const char* where, const char* call) {
  double total_ns = 0;
  for (auto _ : state) {
    const double ns = RunLoop(preload, where, call);
    if (ns < 0) {
      state.SkipWithError("the loop program failed");
      return;
    }
    state.SetIterationTime(ns * 1e-9 * static_cast<double>(kLoopIterations));
    total_ns += ns;
  }
  // The loop program's own time per iteration, averaged over the runs.
  state.counters["ns_per_call"] = total_ns / static_cast<double>(state.iterations());
}

void BM_PollLoop(benchmark::State& state, bool preload, const char* where) {
  BM_Loop(state, preload, where, "poll");
}

// Calls the agent interposes only to learn loop wait sites, made by work on
// the main thread: what the agent adds when they are not waits.
void BM_SyscallPassThrough(benchmark::State& state, bool preload) {
  BM_Loop(state, preload, "main", "syscall");
}
void BM_ReadPassThrough(benchmark::State& state, bool preload) {
  BM_Loop(state, preload, "main", "read");
}

// Baseline first, then the agent: the same program, the same run.
BENCHMARK_CAPTURE(BM_PollLoop, main_thread_baseline, false, "main")->UseManualTime();
BENCHMARK_CAPTURE(BM_PollLoop, main_thread_agent, true, "main")->UseManualTime();
BENCHMARK_CAPTURE(BM_PollLoop, other_thread_baseline, false, "thread")->UseManualTime();
BENCHMARK_CAPTURE(BM_PollLoop, other_thread_agent, true, "thread")->UseManualTime();
BENCHMARK_CAPTURE(BM_SyscallPassThrough, main_thread_baseline, false)->UseManualTime();
BENCHMARK_CAPTURE(BM_SyscallPassThrough, main_thread_agent, true)->UseManualTime();
BENCHMARK_CAPTURE(BM_ReadPassThrough, main_thread_baseline, false)->UseManualTime();
BENCHMARK_CAPTURE(BM_ReadPassThrough, main_thread_agent, true)->UseManualTime();

}  // namespace

BENCHMARK_MAIN();

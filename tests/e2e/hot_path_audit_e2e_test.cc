// The hot-path audit: with every tracer on, the looper thread's work per
// dispatched message and per drawn frame gets no more heap allocations, mutex
// locks or system calls than with monitoring off. Counted exactly on the
// looper thread (hot_path_counters.h), in a child process so the syscall trap
// stays there.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "hot_path_counters.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/testing/manual_vsync_source.h"

namespace {

constexpr int kMessages = 20000;
constexpr int kFrames = 2000;

struct Counts {
  int64_t allocations, locks, syscalls;
  char syscall_numbers[64];
};
struct AuditResult {
  bool trap_installed;
  Counts messages_on, frames_on, messages_off, frames_off;
  int64_t frames_seen;
  // Events the flight recorder (Timeline, on by default) wrote while counted.
  int64_t timeline_events;
};

class NullListener : public matrix::PluginListener {
 public:
  void OnReportIssue(const matrix::Issue&) override {}
};

Counts ToCounts(const matrix_test::HotPathCounts& c) {
  Counts out{c.allocations, c.locks, c.syscalls, {}};
  std::snprintf(out.syscall_numbers, sizeof(out.syscall_numbers), "%s", c.syscall_numbers.c_str());
  return out;
}

// Everything here runs in the child, on its main thread (the looper thread).
AuditResult RunAudit() {
  AuditResult result{};
  matrix::Looper* looper = matrix::Looper::PrepareMainLooper();
  auto source = std::make_unique<matrix::testing::ManualVsyncSource>();
  matrix::testing::ManualVsyncSource* vsync = source.get();
  matrix::Choreographer* choreographer = matrix::Choreographer::Install(std::move(source));

  auto config = matrix::TraceConfig::Builder()
                    .EnableFps(true)
                    .EnableEvilMethodTrace(true)
                    .EnableAnrTrace(true)
                    .EnableStartup(true)
                    .EnableIdleHandlerTrace(true)
                    .EnableTouchEventTrace(true)
                    .EnableSignalAnrTrace(true)
                    .Build();
  auto trace = std::make_unique<matrix::TracePlugin>(*config);
  matrix::TracePlugin* plugin = trace.get();
  if (!matrix::Matrix::Init(matrix::Matrix::Builder()
                                .AddPlugin(std::move(trace))
                                .SetPluginListener(std::make_shared<NullListener>())
                                .Build())
           .ok() ||
      !plugin->Start().ok()) {
    return result;
  }

  matrix::Handler handler(looper);
  auto drain = [&] {
    while (looper->PollOnce(absl::ZeroDuration()) == matrix::Looper::PollResult::kDispatched) {
    }
  };
  auto run_messages = [&](int n) {
    for (int i = 0; i < n; ++i) {
      handler.Post([] {});
      drain();
    }
  };
  int64_t frames_seen = 0;
  auto run_frames = [&](int n) {
    for (int i = 0; i < n; ++i) {
      choreographer->PostFrameCallback([&](matrix::TimeTicks) { ++frames_seen; });
      vsync->Fire(matrix::MonotonicNow());
      drain();
    }
  };

  // Warm up: pools, vectors and caches reach their steady size.
  run_messages(kMessages);
  run_frames(kFrames);
  result.trap_installed = matrix_test::HotPathCounters::InstallSyscallTrap();

  const uint64_t timeline_before =
      plugin->GetTimeline() != nullptr ? plugin->GetTimeline()->event_count() : 0;
  matrix_test::HotPathCounters::Start();
  run_messages(kMessages);
  result.messages_on = ToCounts(matrix_test::HotPathCounters::Stop());
  matrix_test::HotPathCounters::Start();
  frames_seen = 0;
  run_frames(kFrames);
  result.frames_on = ToCounts(matrix_test::HotPathCounters::Stop());
  result.frames_seen = frames_seen;
  if (plugin->GetTimeline() != nullptr) {
    result.timeline_events =
        static_cast<int64_t>(plugin->GetTimeline()->event_count() - timeline_before);
  }

  // Monitoring off: the same work, as the runtime alone does it.
  if (!plugin->Stop().ok()) return result;
  run_messages(1000);
  run_frames(100);
  matrix_test::HotPathCounters::Start();
  run_messages(kMessages);
  result.messages_off = ToCounts(matrix_test::HotPathCounters::Stop());
  matrix_test::HotPathCounters::Start();
  run_frames(kFrames);
  result.frames_off = ToCounts(matrix_test::HotPathCounters::Stop());
  return result;
}

std::string Describe(const char* what, const Counts& c, int n) {
  return absl::StrFormat("%s: %d allocations, %d locks, %d syscalls [%s] over %d", what,
                         c.allocations, c.locks, c.syscalls, c.syscall_numbers, n);
}

TEST(HotPathAuditE2ETest, AllTracersOn_AddNoAllocationLockOrSyscall_PerMessageOrFrame) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    const AuditResult result = RunAudit();
    [[maybe_unused]] ssize_t n = write(fds[1], &result, sizeof(result));
    _exit(0);  // Skip destructors: the looper thread is trapped.
  }
  close(fds[1]);
  AuditResult result{};
  ASSERT_EQ(read(fds[0], &result, sizeof(result)), static_cast<ssize_t>(sizeof(result)));
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(result.trap_installed) << "seccomp is unavailable";

  const std::string report =
      Describe("messages, monitoring on", result.messages_on, kMessages) + "\n" +
      Describe("messages, monitoring off", result.messages_off, kMessages) + "\n" +
      Describe("frames, monitoring on", result.frames_on, kFrames) + "\n" +
      Describe("frames, monitoring off", result.frames_off, kFrames);
  std::printf("%s\n", report.c_str());
  EXPECT_EQ(result.frames_seen, kFrames);
  // The flight recorder was on and recorded every message and frame (a
  // frame is a vsync dispatch plus its frame event) while counted.
  EXPECT_GE(result.timeline_events, kMessages + 2 * kFrames) << report;

  // Monitoring adds nothing...
  EXPECT_EQ(result.messages_on.allocations, result.messages_off.allocations) << report;
  EXPECT_EQ(result.messages_on.locks, result.messages_off.locks) << report;
  EXPECT_EQ(result.messages_on.syscalls, result.messages_off.syscalls) << report;
  EXPECT_EQ(result.frames_on.allocations, result.frames_off.allocations) << report;
  EXPECT_EQ(result.frames_on.locks, result.frames_off.locks) << report;
  EXPECT_EQ(result.frames_on.syscalls, result.frames_off.syscalls) << report;
  // ...and a dispatched message costs the runtime itself no allocation or
  // syscall (the queue's lock is the runtime's own).
  EXPECT_EQ(result.messages_on.allocations, 0) << report;
  EXPECT_EQ(result.messages_on.syscalls, 0) << report;
}

}  // namespace

// matrix_dispatch_cost: runs N messages (and frames) through Looper::Loop() with
// monitoring off or with every tracer on, for instruction counting under
// callgrind, which is exact and repeatable on a noisy machine:
//
//   valgrind --tool=callgrind '--toggle-collect=*RunMeasured*'
//       ./matrix_dispatch_cost --monitored --messages=100000   (one command)
//
// (RunMeasured is in an anonymous namespace, hence the wildcards.) For frames,
// use --messages=0 --frames=N (messages default to 100000).
//
// Divide the total by N, and compare with the run without --monitored.

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/testing/manual_vsync_source.h"

namespace {

class NullListener : public matrix::PluginListener {
 public:
  void OnReportIssue(const matrix::Issue&) override {}
};

struct Program {
  matrix::Looper* looper;
  matrix::Handler* handler;
  matrix::Choreographer* choreographer;
  matrix::testing::ManualVsyncSource* vsync;
  int messages_left = 0;
  int frames_left = 0;

  // Warm-up, with PollOnce.
  void Warm(int messages, int frames) {
    auto drain = [&] {
      while (looper->PollOnce(absl::ZeroDuration()) == matrix::Looper::PollResult::kDispatched) {
      }
    };
    for (int i = 0; i < messages; ++i) {
      handler->Post([] {});
      drain();
    }
    for (int i = 0; i < frames; ++i) {
      choreographer->PostFrameCallback([](matrix::TimeTicks) {});
      vsync->Fire(matrix::MonotonicNow());
      drain();
    }
  }
  // The measured work, through Looper::Loop() as a program runs it: each
  // message posts the next; then each frame requests the next; then quit.
  void NextMessage() {
    if (messages_left-- > 0) {
      handler->Post([this] { NextMessage(); });
    } else {
      NextFrame();
    }
  }
  void NextFrame() {
    if (frames_left-- > 0) {
      choreographer->PostFrameCallback([this](matrix::TimeTicks) { NextFrame(); });
      vsync->Fire(matrix::MonotonicNow());
    } else {
      looper->Quit();
    }
  }
};

__attribute__((noinline)) void RunMeasured(Program& program, int messages, int frames) {
  program.messages_left = messages;
  program.frames_left = frames;
  program.handler->Post([&] { program.NextMessage(); });
  matrix::Looper::Loop();
}

}  // namespace

int main(int argc, char** argv) {
  bool monitored = false;
  int messages = 100000;
  int frames = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--monitored") == 0) monitored = true;
    if (std::strncmp(argv[i], "--messages=", 11) == 0) messages = std::atoi(argv[i] + 11);
    if (std::strncmp(argv[i], "--frames=", 9) == 0) frames = std::atoi(argv[i] + 9);
  }
  // Both configurations run as Matrix::Init leaves the process: without
  // Abseil's mutex deadlock detection (see Matrix::Builder).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // A looper that may quit (the main looper cannot), monitored as the main one.
  matrix::Looper* looper = matrix::Looper::Prepare();
  auto source = std::make_unique<matrix::testing::ManualVsyncSource>();
  matrix::testing::ManualVsyncSource* vsync = source.get();
  matrix::Choreographer* choreographer = matrix::Choreographer::Install(std::move(source));
  matrix::Handler handler(looper);
  if (monitored) {
    auto config = matrix::TraceConfig::Builder()
                      .EnableFps(true)
                      .EnableEvilMethodTrace(true)
                      .EnableAnrTrace(true)
                      .EnableStartup(true)
                      .EnableIdleHandlerTrace(true)
                      .EnableTouchEventTrace(true)
                      .Build();
    auto trace = std::make_unique<matrix::TracePlugin>(*config);
    matrix::TracePlugin* plugin = trace.get();
    if (!matrix::Matrix::Init(matrix::Matrix::Builder()
                                  .AddPlugin(std::move(trace))
                                  .SetPluginListener(std::make_shared<NullListener>())
                                  .SetMainLooper(looper)
                                  .Build())
             .ok() ||
        !plugin->Start().ok()) {
      return 1;
    }
  }
  Program program{looper, &handler, choreographer, vsync};
  program.Warm(10000, 1000);
  RunMeasured(program, messages, frames);
  std::printf("%s: %d messages, %d frames\n", monitored ? "monitored" : "unmonitored", messages,
              frames);
  matrix::Matrix::Shutdown();
  return 0;
}

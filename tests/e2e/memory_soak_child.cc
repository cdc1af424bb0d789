// A busy program for memory_soak_e2e_test: every tracer, BlockCanary, method
// tracing and the JSON-lines sink at their defaults, on a main looper that
// runs 10 M short messages (each a traced call) with a 1.1 s dispatch after
// every 500 k of them (20 in all: each over the 700 ms slow-method and 1 s
// block thresholds, under LAG's 2 s), while a Choreographer animation draws
// every frame.
//
//   memory_soak_child REPORT_DIR [MESSAGES SLOW_DISPATCHES]
//
// Prints "peak_rss_kb N" (VmHWM, /proc/self/status) after Matrix shut down
// and every report was written, and "messages N" for the short ones run.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/block_canary_plugin.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/trace/method_tracer.h"

namespace {

volatile uint64_t g_sink = 0;

// Traced calls (this file is compiled with method tracing).
__attribute__((noinline)) void ShortWork(uint64_t i) { g_sink = g_sink + i; }

__attribute__((noinline)) void DecodeRow(int row) {
  for (int i = 0; i < 2000; ++i) g_sink = g_sink + static_cast<uint64_t>(row * i);
}

__attribute__((noinline)) void SlowDispatch(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  int row = 0;
  while (absl::Now() < end) DecodeRow(row++);
}

// A "Name:   N kB" line of /proc/self/status, in kB; -1 when missing.
int64_t StatusKb(const std::string& name) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(name + ":", 0) == 0) return std::atoll(line.c_str() + name.size() + 1);
  }
  return -1;
}

// Runs `messages` short messages, one posting the next (the queue holds one
// at a time, as a busy program's does), with a slow dispatch after every
// `messages / slow_dispatches`.
class Script {
 public:
  Script(matrix::Handler* handler, int64_t messages, int slow_dispatches)
      : handler_(handler),
        messages_(messages),
        slow_every_(messages / slow_dispatches),
        slow_left_(slow_dispatches) {}

  void Start() { handler_->Post([this] { Step(); }); }
  bool done() const { return done_; }
  int64_t ran() const { return ran_; }

 private:
  void Step() {
    ShortWork(static_cast<uint64_t>(ran_));
    ++ran_;
    if (ran_ % slow_every_ == 0 && slow_left_ > 0) {
      --slow_left_;
      handler_->Post([] { SlowDispatch(absl::Milliseconds(1100)); });
    }
    if (ran_ < messages_) {
      handler_->Post([this] { Step(); });
    } else {
      // After the last slow dispatch (posted before), give the worker 500 ms
      // to analyse it (a slow-method report waits for the CPU sampler's next
      // poll, up to 150 ms, to know whether the process was stopped) and to
      // write the last reports.
      handler_->Post([this] {
        handler_->PostDelayed([this] { done_ = true; }, absl::Milliseconds(500));
      });
    }
  }

  matrix::Handler* const handler_;
  const int64_t messages_;
  const int64_t slow_every_;
  int slow_left_;
  int64_t ran_ = 0;
  bool done_ = false;
};

void Animate(bool* running) {
  if (!*running) return;
  matrix::Choreographer::GetInstance()->PostFrameCallback(
      [running](matrix::TimeTicks) { Animate(running); });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: memory_soak_child REPORT_DIR [MESSAGES SLOW_DISPATCHES]\n");
    return 2;
  }
  const std::string reports = argv[1];
  const int64_t messages = argc > 2 ? std::atoll(argv[2]) : 10'000'000;
  const int slow_dispatches = argc > 3 ? std::atoi(argv[3]) : 20;
  std::unique_ptr<matrix::MethodTracer> method_tracer = matrix::MethodTracer::Start();
  matrix::Looper* looper = matrix::Looper::PrepareMainLooper();

  // Every tracer on, every threshold at its default.
  absl::StatusOr<matrix::TraceConfig> config = matrix::TraceConfig::Builder()
                                                   .EnableFps(true)
                                                   .EnableEvilMethodTrace(true)
                                                   .EnableAnrTrace(true)
                                                   .EnableStartup(true)
                                                   .EnableIdleHandlerTrace(true)
                                                   .EnableTouchEventTrace(true)
                                                   .Build();
  auto json_sink = matrix::JsonLinesIssueSink::Create({.directory = reports});
  absl::StatusOr<matrix::BlockCanaryContext> block_context =
      matrix::BlockCanaryContext::Builder()
          .SetLogPath(reports + "/blockcanary")
          .DisplayNotification(false)
          .Build();
  if (!config.ok() || !json_sink.ok() || !block_context.ok()) {
    std::fprintf(stderr, "setup failed\n");
    return 1;
  }
  auto trace = std::make_unique<matrix::TracePlugin>(*config);
  matrix::TracePlugin* plugin = trace.get();
  auto block_canary = std::make_unique<matrix::BlockCanaryPlugin>(*block_context);
  matrix::BlockCanaryPlugin* block_plugin = block_canary.get();
  absl::Status status = matrix::Matrix::Init(matrix::Matrix::Builder()
                                                 .AddPlugin(std::move(trace))
                                                 .AddPlugin(std::move(block_canary))
                                                 .AddPluginListener(*json_sink)
                                                 .Build());
  if (status.ok()) status = block_plugin->Start();
  if (status.ok()) status = plugin->Start();
  if (!status.ok()) {
    std::fprintf(stderr, "matrix: %s\n", status.ToString().c_str());
    return 1;
  }

  matrix::Handler handler(looper);
  Script script(&handler, messages, slow_dispatches);
  bool animating = true;
  Animate(&animating);
  script.Start();
  while (!script.done()) looper->PollOnce(absl::Milliseconds(100));
  animating = false;
  plugin->GetFrameTracer()->FlushReports();
  looper->PollOnce(absl::Milliseconds(100));
  matrix::Matrix::Shutdown();
  std::printf("messages %lld\n", static_cast<long long>(script.ran()));
  std::printf("failed_writes %lld\n", static_cast<long long>((*json_sink)->failed_writes()));
  // The peak, and what is resident now: anonymous (heap, stacks) and
  // file-backed (code, and the debug info the symbolizer mapped).
  std::printf("peak_rss_kb %lld\n", static_cast<long long>(StatusKb("VmHWM")));
  std::printf("rss_anon_kb %lld\nrss_file_kb %lld\n", static_cast<long long>(StatusKb("RssAnon")),
              static_cast<long long>(StatusKb("RssFile")));
  return 0;
}

// A user's program, built outside matrix-cpp's tree: against an installed
// prefix (find_package or pkg-config) or with add_subdirectory. It selects
// no C++ standard itself: matrix's targets (or matrix-cpp.pc) must carry
// C++20. It runs a monitored main looper with one 300 ms message and exits 0
// only when the slow method was reported to its PluginListener with the
// function that spent the time as the report's key (which needs method
// tracing: matrix_trace_methods() or -finstrument-functions).
//
//   consumer            exit 0: the slow method was reported; 1: it was not

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/plugins/trace_plugin.h"

namespace {

std::atomic<bool> g_reported{false};

// Traced with matrix_trace_methods() in the CMake builds: the report's key.
__attribute__((noinline)) void ParseConfigFile() {
  const absl::Time end = absl::Now() + absl::Milliseconds(300);
  while (absl::Now() < end) {
  }
}

class QuitOnSlowMethod : public matrix::PluginListener {
 public:
  void OnReportIssue(const matrix::Issue& issue) override {
    const std::string summary = matrix::SummarizeIssue(issue);
    std::printf("[consumer] issue: %s\n", summary.c_str());
    std::fflush(stdout);
    if (issue.proto().has_evil_method() &&
        issue.proto().evil_method().detail() == matrix::proto::NORMAL &&
        summary.find("ParseConfigFile") != std::string::npos) {
      g_reported = true;
    }
  }
};

}  // namespace

int main() {
  matrix::Looper::PrepareMainLooper();
  absl::StatusOr<matrix::TraceConfig> config = matrix::TraceConfig::Builder()
                                                   .EnableEvilMethodTrace(true)
                                                   .SetEvilThreshold(absl::Milliseconds(100))
                                                   .Build();
  if (!config.ok()) {
    std::fprintf(stderr, "[consumer] %s\n", config.status().ToString().c_str());
    return 1;
  }
  auto trace = std::make_unique<matrix::TracePlugin>(*config);
  matrix::TracePlugin* plugin = trace.get();
  absl::Status init = matrix::Matrix::Init(matrix::Matrix::Builder()
                                               .AddPlugin(std::move(trace))
                                               .AddPluginListener(std::make_shared<QuitOnSlowMethod>())
                                               .Build());
  if (!init.ok() || !plugin->Start().ok()) {
    std::fprintf(stderr, "[consumer] matrix did not start\n");
    return 1;
  }
  {
    matrix::Handler handler(matrix::Looper::MainLooper());
    handler.Post([] { ParseConfigFile(); });
    // The main looper cannot quit (as in Android): poll it until the report
    // arrives, with a generous deadline (it comes ~300 ms in).
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!g_reported && absl::Now() < deadline) {
      matrix::Looper::MainLooper()->PollOnce(absl::Milliseconds(50));
    }
  }
  matrix::Matrix::Shutdown();
  std::printf("[consumer] slow method %s\n", g_reported ? "reported" : "NOT reported");
  return g_reported ? 0 : 1;
}

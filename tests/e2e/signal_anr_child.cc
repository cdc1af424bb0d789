// A program for signal_anr_e2e_test: Matrix with a TracePlugin whose
// SignalAnrTracer is on, reporting into a JSON-lines file, and a main looper
// that hangs inside e2e::HangInUninstrumentedCode.
//
//   signal_anr_child <dir> [--own-handler]
//
// Files in <dir>:
//   issues.jsonl    the issues (JsonLinesIssueSink)
//   ready           written by the hanging task just before it hangs
//   own_handler     (--own-handler) one line per SIGQUIT seen by the
//                   program's own handler, installed before Matrix
//   release         created by the test: the hang ends, the plugin stops
//   stopped         then written: "restored" if SIGQUIT's handler is the
//                   program's own again, "not-restored" otherwise
// After "stopped" the program hangs again until killed.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/plugins/trace_config.h"
#include "matrix/plugins/trace_plugin.h"
#include "uninstrumented.h"

namespace {

char g_marker_path[4096];

// Async-signal-safe: open, write, close.
void OwnSigquitHandler(int) {
  const int saved_errno = errno;
  const int fd = open(g_marker_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd >= 0) {
    [[maybe_unused]] ssize_t n = write(fd, "sigquit\n", 8);
    close(fd);
  }
  errno = saved_errno;
}

bool WriteFile(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  std::fputs(contents.c_str(), f);
  std::fclose(f);
  return std::rename(tmp.c_str(), path.c_str()) == 0;  // Appears whole.
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The looper thread waits here (in uninstrumented code) until the test
// creates `release`.
__attribute__((noinline)) void WaitForRelease(const std::string& release) {
  while (!Exists(release)) e2e::HangInUninstrumentedCode(absl::Milliseconds(20));
  asm volatile("" ::: "memory");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <dir> [--own-handler]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const bool own_handler = argc > 2 && std::strcmp(argv[2], "--own-handler") == 0;

  if (own_handler) {
    std::snprintf(g_marker_path, sizeof(g_marker_path), "%s/own_handler", dir.c_str());
    struct sigaction action {};
    action.sa_handler = OwnSigquitHandler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (sigaction(SIGQUIT, &action, nullptr) != 0) return 3;
  }

  matrix::Looper* looper = matrix::Looper::PrepareMainLooper();
  auto sink = matrix::JsonLinesIssueSink::Create({.directory = dir, .name = "issues"});
  if (!sink.ok()) {
    std::fprintf(stderr, "sink: %s\n", sink.status().ToString().c_str());
    return 4;
  }
  auto config = matrix::TraceConfig::Builder().EnableSignalAnrTrace(true).Build();
  if (!config.ok()) return 5;
  auto trace = std::make_unique<matrix::TracePlugin>(*config);
  matrix::TracePlugin* plugin = trace.get();
  absl::Status status = matrix::Matrix::Init(
      matrix::Matrix::Builder().AddPlugin(std::move(trace)).SetPluginListener(*sink).Build());
  if (!status.ok()) return 6;
  if (!plugin->Start().ok()) return 7;

  matrix::Handler handler(looper);
  handler.Post([&] {
    if (!WriteFile(dir + "/ready", "ready\n")) _exit(8);
    if (!own_handler) {
      e2e::HangInUninstrumentedCode(absl::Seconds(120));
      _exit(9);  // The test kills us long before.
    }
    WaitForRelease(dir + "/release");
    // Stopping the plugin stops its tracers now (we are on the looper thread).
    if (!plugin->Stop().ok()) _exit(10);
    struct sigaction current {};
    sigaction(SIGQUIT, nullptr, &current);
    const bool restored =
        !(current.sa_flags & SA_SIGINFO) && current.sa_handler == OwnSigquitHandler;
    if (!WriteFile(dir + "/stopped", restored ? "restored\n" : "not-restored\n")) _exit(11);
    e2e::HangInUninstrumentedCode(absl::Seconds(120));
    _exit(12);
  });
  matrix::Looper::Loop();
  return 0;
}

// What the toolkit benchmarks that report through Matrix share (gtk_bench.cc,
// sdl_bench.cc): Matrix with a started TracePlugin for a foreign loop.

#ifndef MATRIX_TESTS_BENCH_TOOLKITS_MONITORING_H_
#define MATRIX_TESTS_BENCH_TOOLKITS_MONITORING_H_

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

#include "matrix/core/matrix.h"
#include "matrix/plugins/trace_plugin.h"

namespace bench {

// Matrix with a started TracePlugin (FPS, ANR, slow method) for a foreign
// loop, from construction to destruction. A benchmark that could not start
// it would measure nothing: it exits, saying why.
class Monitoring {
 public:
  Monitoring() {
    auto config = matrix::TraceConfig::Builder()
                      .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
                      .UseChoreographer(false)
                      .EnableFps(true)
                      .EnableAnrTrace(true)
                      .EnableEvilMethodTrace(true)
                      .Build();
    if (!config.ok()) Fail("config", config.status());
    auto trace = std::make_unique<matrix::TracePlugin>(*config);
    plugin_ = trace.get();
    const absl::Status init =
        matrix::Matrix::Init(matrix::Matrix::Builder().AddPlugin(std::move(trace)).Build());
    if (!init.ok()) Fail("Matrix::Init", init);
    const absl::Status start = plugin_->Start();
    if (!start.ok()) Fail("TracePlugin::Start", start);
  }
  ~Monitoring() { matrix::Matrix::Shutdown(); }
  Monitoring(const Monitoring&) = delete;
  Monitoring& operator=(const Monitoring&) = delete;

  matrix::TracePlugin* plugin() const { return plugin_; }

 private:
  [[noreturn]] static void Fail(const char* what, const absl::Status& status) {
    std::fprintf(stderr, "benchmark set-up: %s: %s\n", what, status.ToString().c_str());
    std::exit(1);
  }

  matrix::TracePlugin* plugin_ = nullptr;
};

}  // namespace bench

#endif  // MATRIX_TESTS_BENCH_TOOLKITS_MONITORING_H_

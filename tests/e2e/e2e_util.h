// A real Matrix + TracePlugin on the test thread's main looper, collecting
// the issues it reports.
#ifndef MATRIX_TESTS_E2E_E2E_UTIL_H_
#define MATRIX_TESTS_E2E_E2E_UTIL_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "matrix/core/issue.h"
#include "matrix/core/looper.h"
#include "matrix/core/plugin.h"
#include "matrix/plugins/trace_plugin.h"

namespace e2e {

class CollectingListener : public matrix::PluginListener {
 public:
  void OnReportIssue(const matrix::Issue& issue) override;
  std::vector<matrix::Issue> issues() const;
  // When each issue reached the listener (real time), in order.
  std::vector<absl::Time> arrivals() const;
  // Waits (real time) until `predicate(issues)` holds or `timeout` passes.
  bool WaitFor(const std::function<bool(const std::vector<matrix::Issue>&)>& predicate,
               absl::Duration timeout) const;

 private:
  mutable absl::Mutex mu_;
  std::vector<matrix::Issue> issues_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> arrivals_ ABSL_GUARDED_BY(mu_);
};

// Whether TracedProgram prepares matrix's main Looper: the end-to-end tests
// run their messages on it, the toolkit tests run a toolkit's own loop
// (TraceConfig's LooperMonitor::Source::kForeign) and attach an adapter.
enum class MainLooper { kPrepare, kNone };

// Installs Matrix with a TracePlugin built from `config`, a CollectingListener
// for its issues, and starts it (on the main looper it prepares, or for a
// foreign loop). Shuts Matrix down on destruction, so a test that stops at a
// failed assertion leaves nothing running.
//
//   e2e::TracedProgram traced(*config, e2e::MainLooper::kNone);
//   ASSERT_TRUE(traced.status().ok()) << traced.status();
//   auto monitor = matrix::glib::Attach(context, traced.plugin());
class TracedProgram {
 public:
  explicit TracedProgram(matrix::TraceConfig config, MainLooper main_looper = MainLooper::kPrepare);
  // Also installs and starts `extra` (e.g. a BlockCanaryPlugin) beside it.
  TracedProgram(matrix::TraceConfig config, std::unique_ptr<matrix::Plugin> extra);
  ~TracedProgram();
  TracedProgram(const TracedProgram&) = delete;
  TracedProgram& operator=(const TracedProgram&) = delete;

  // Matrix::Init's and the plugins' Start's first error; OK when all started.
  const absl::Status& status() const { return status_; }
  // The main looper; null with MainLooper::kNone.
  matrix::Looper* looper() const { return looper_; }
  matrix::TracePlugin* plugin() const { return plugin_; }
  CollectingListener& listener() { return *listener_; }
  // Runs the main looper (real time) for `d`.
  void RunFor(absl::Duration d);

 private:
  TracedProgram(matrix::TraceConfig config, std::unique_ptr<matrix::Plugin> extra,
                MainLooper main_looper);

  absl::Status status_;
  matrix::Looper* looper_ = nullptr;
  matrix::TracePlugin* plugin_ = nullptr;
  std::shared_ptr<CollectingListener> listener_;
};

// The ANR-family reports (ANR, LAG, LAG_IDLE_HANDLER...) of one detail
// among the issues, oldest first.
std::vector<const matrix::proto::AnrReport*> AnrReports(const std::vector<matrix::Issue>& issues,
                                                        matrix::proto::Detail detail);

}  // namespace e2e

#endif  // MATRIX_TESTS_E2E_E2E_UTIL_H_

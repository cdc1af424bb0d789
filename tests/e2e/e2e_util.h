// A real Matrix + TracePlugin on the test thread's main looper, collecting
// the issues it reports.
#ifndef MATRIX_TESTS_E2E_E2E_UTIL_H_
#define MATRIX_TESTS_E2E_E2E_UTIL_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
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

// Prepares the main looper, installs Matrix with a TracePlugin built from
// `config` and starts it. Tears everything down on destruction.
class TracedProgram {
 public:
  explicit TracedProgram(matrix::TraceConfig config);
  // Also installs and starts `extra` (e.g. a BlockCanaryPlugin) beside it.
  TracedProgram(matrix::TraceConfig config, std::unique_ptr<matrix::Plugin> extra);
  ~TracedProgram();

  matrix::Looper* looper() const { return looper_; }
  matrix::TracePlugin* plugin() const { return plugin_; }
  CollectingListener& listener() { return *listener_; }
  // Runs the main looper (real time) for `d`.
  void RunFor(absl::Duration d);

 private:
  matrix::Looper* looper_ = nullptr;
  matrix::TracePlugin* plugin_ = nullptr;
  std::shared_ptr<CollectingListener> listener_;
};

}  // namespace e2e

#endif  // MATRIX_TESTS_E2E_E2E_UTIL_H_

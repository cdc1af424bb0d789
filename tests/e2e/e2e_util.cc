#include "e2e_util.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/matrix.h"

namespace e2e {

void CollectingListener::OnReportIssue(const matrix::Issue& issue) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  issues_.push_back(issue);
  arrivals_.push_back(now);
}

std::vector<absl::Time> CollectingListener::arrivals() const {
  absl::MutexLock lock(&mu_);
  return arrivals_;
}

std::vector<matrix::Issue> CollectingListener::issues() const {
  absl::MutexLock lock(&mu_);
  return issues_;
}

bool CollectingListener::WaitFor(
    const std::function<bool(const std::vector<matrix::Issue>&)>& predicate,
    absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (predicate(issues())) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return predicate(issues());
}

TracedProgram::TracedProgram(matrix::TraceConfig config, MainLooper main_looper)
    : TracedProgram(std::move(config), nullptr, main_looper) {}

TracedProgram::TracedProgram(matrix::TraceConfig config, std::unique_ptr<matrix::Plugin> extra)
    : TracedProgram(std::move(config), std::move(extra), MainLooper::kPrepare) {}

TracedProgram::TracedProgram(matrix::TraceConfig config, std::unique_ptr<matrix::Plugin> extra,
                             MainLooper main_looper)
    : listener_(std::make_shared<CollectingListener>()) {
  if (main_looper == MainLooper::kPrepare) looper_ = matrix::Looper::PrepareMainLooper();
  auto plugin = std::make_unique<matrix::TracePlugin>(std::move(config));
  plugin_ = plugin.get();
  matrix::Plugin* extra_plugin = extra.get();
  matrix::Matrix::Builder builder;
  builder.AddPlugin(std::move(plugin)).SetPluginListener(listener_);
  if (extra != nullptr) builder.AddPlugin(std::move(extra));
  status_ = matrix::Matrix::Init(builder.Build());
  if (status_.ok()) status_ = plugin_->Start();
  if (status_.ok() && extra_plugin != nullptr) status_ = extra_plugin->Start();
  EXPECT_TRUE(status_.ok()) << status_;
}

TracedProgram::~TracedProgram() {
  matrix::Matrix::Shutdown();
  if (looper_ != nullptr) {
    matrix::Choreographer::ReleaseForTesting();
    matrix::Looper::ReleaseForTesting();
  }
}

void TracedProgram::RunFor(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  for (absl::Time now = absl::Now(); now < end; now = absl::Now()) {
    looper_->PollOnce(end - now);
  }
}

std::vector<const matrix::proto::AnrReport*> AnrReports(const std::vector<matrix::Issue>& issues,
                                                        matrix::proto::Detail detail) {
  std::vector<const matrix::proto::AnrReport*> found;
  for (const matrix::Issue& issue : issues) {
    if (issue.proto().has_anr() && issue.proto().anr().detail() == detail) {
      found.push_back(&issue.proto().anr());
    }
  }
  return found;
}

}  // namespace e2e

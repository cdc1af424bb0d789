// Matrix::Shutdown with real matrix threads: issues a plugin reported before
// it was destroyed still reach the listeners.

#include <atomic>
#include <memory>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/matrix.h"

namespace matrix {
namespace {

class ReportingPlugin : public Plugin {
 public:
  ReportingPlugin() : Plugin("Reporting") {}
  void Report(const std::string& key) {
    Issue issue;
    issue.mutable_proto()->set_key(key);
    OnDetectIssue(std::move(issue));
  }
};

class CountingListener : public PluginListener {
 public:
  void OnReportIssue(const Issue&) override { count_.fetch_add(1); }
  int count() const { return count_.load(); }

 private:
  std::atomic<int> count_{0};
};

TEST(MatrixShutdownRealTest, Shutdown_DeliversIssuesAlreadyReported) {
  auto plugin = std::make_unique<ReportingPlugin>();
  ReportingPlugin* reporting = plugin.get();
  auto listener = std::make_shared<CountingListener>();
  ASSERT_TRUE(Matrix::Init(Matrix::Builder()
                               .AddPlugin(std::move(plugin))
                               .SetPluginListener(listener)
                               .Build())
                  .ok());
  // Keep the worker busy, so the deliveries are still queued at Shutdown.
  Looper* worker = Matrix::With().context().worker_looper;
  absl::Notification worker_busy;
  Handler handler(worker);
  handler.Post([&] {
    worker_busy.Notify();
    absl::SleepFor(absl::Milliseconds(300));
  });
  worker_busy.WaitForNotification();
  for (int i = 0; i < 5; ++i) reporting->Report("issue");
  Matrix::Shutdown();
  EXPECT_EQ(listener->count(), 5);
}

}  // namespace
}  // namespace matrix

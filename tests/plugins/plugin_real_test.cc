// Real-thread test for Plugin: destroying a plugin while its worker thread
// is delivering an issue to the listeners.

#include <atomic>
#include <memory>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "matrix/core/handler_thread.h"
#include "matrix/core/issue.h"
#include "matrix/core/plugin.h"

namespace {

using ::matrix::HandlerThread;
using ::matrix::Issue;
using ::matrix::Plugin;
using ::matrix::PluginContext;
using ::matrix::PluginListener;

class FakePlugin : public Plugin {
 public:
  FakePlugin() : Plugin("Fake") {}
};

class SlowListener : public PluginListener {
 public:
  void OnReportIssue(const Issue&) override {
    entered.Notify();
    absl::SleepFor(absl::Milliseconds(100));
    returned.store(true);
  }
  absl::Notification entered;
  std::atomic<bool> returned{false};
};

TEST(PluginRealTest, DestroyedWhileTheWorkerDelivers_WaitsForTheDelivery) {
  HandlerThread worker("matrix-worker");
  worker.Start();
  auto listener = std::make_shared<SlowListener>();
  auto plugin = std::make_unique<FakePlugin>();
  PluginContext context;
  context.worker_looper = worker.GetLooper();
  context.listeners.push_back(listener);
  ASSERT_TRUE(plugin->Init(context).ok());

  plugin->OnDetectIssue(Issue());
  ASSERT_TRUE(listener->entered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  plugin.reset();  // The delivery still walks the plugin's listeners.
  EXPECT_TRUE(listener->returned.load());
}

}  // namespace

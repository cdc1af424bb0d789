// Real-thread tests for Plugin: destroying a plugin while its worker thread
// is delivering an issue to the listeners; a listener that throws on the real
// matrix-worker thread (uncaught, it would terminate the host).

#include <atomic>
#include <memory>
#include <stdexcept>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "matrix/core/handler_thread.h"
#include "matrix/core/issue.h"
#include "matrix/core/looper.h"
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

class ThrowingListener : public PluginListener {
 public:
  void OnReportIssue(const Issue&) override { throw std::runtime_error("listener failed"); }
};

class CountingListener : public PluginListener {
 public:
  void OnReportIssue(const Issue&) override {
    if (count.fetch_add(1) + 1 == 3) all.Notify();
  }
  std::atomic<int> count{0};
  absl::Notification all;
};

TEST(PluginRealTest, ListenerThrowingOnTheWorkerThread_DoesNotTerminateTheHost) {
  HandlerThread worker("matrix-worker");
  worker.Start();
  auto counting = std::make_shared<CountingListener>();
  FakePlugin plugin;
  PluginContext context;
  context.worker_looper = worker.GetLooper();
  context.listeners.push_back(std::make_shared<ThrowingListener>());
  context.listeners.push_back(counting);
  ASSERT_TRUE(plugin.Init(context).ok());

  for (int i = 0; i < 3; ++i) plugin.OnDetectIssue(Issue());
  ASSERT_TRUE(counting->all.WaitForNotificationWithTimeout(absl::Seconds(20)));
  worker.GetLooper()->Flush();  // The worker is still alive and looping.
  EXPECT_EQ(counting->count.load(), 3);
  EXPECT_EQ(plugin.listener_failures(), 3);
}

}  // namespace

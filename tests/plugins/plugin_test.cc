// Tests for Plugin: Matrix's lifecycle state machine, the misuse errors,
// PluginListener lifecycle events, and OnDetectIssue()'s decoration and
// delivery on the worker looper.

#include "matrix/core/plugin.h"

#include <errno.h>
#include <unistd.h>

#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_identity.h"
#include "matrix/core/issue.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"
#include "matrix/testing/test_environment.h"
#include "matrix/testing/log_capture.h"

namespace {

namespace mt = ::matrix::testing;
using ::matrix::Issue;
using ::matrix::Looper;
using ::matrix::Plugin;
using ::matrix::PluginContext;
using ::matrix::PluginListener;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// Records every hook; each hook's status can be set.
class FakePlugin : public Plugin {
 public:
  explicit FakePlugin(std::string tag = "Fake") : Plugin(std::move(tag)) {}

  std::vector<std::string> hooks;
  absl::Status start_status;
  void MarkUnsupported() { UnSupportPlugin(); }

 protected:
  absl::Status OnInit() override {
    hooks.push_back("init");
    return absl::OkStatus();
  }
  absl::Status OnStart() override {
    hooks.push_back("start");
    return start_status;
  }
  absl::Status OnStop() override {
    hooks.push_back("stop");
    return absl::OkStatus();
  }
  absl::Status OnDestroy() override {
    hooks.push_back("destroy");
    return absl::OkStatus();
  }
  void DecorateIssue(Issue& issue) override {
    issue.mutable_proto()->mutable_device()->set_cpu_cores(64);
  }
};

// Records lifecycle events and issues, and where issues arrived.
class RecordingListener : public PluginListener {
 public:
  explicit RecordingListener(Looper* worker = nullptr) : worker_(worker) {}
  void OnInit(Plugin& p) override { events.push_back("OnInit:" + p.GetTag()); }
  void OnStart(Plugin& p) override { events.push_back("OnStart:" + p.GetTag()); }
  void OnStop(Plugin& p) override { events.push_back("OnStop:" + p.GetTag()); }
  void OnDestroy(Plugin& p) override { events.push_back("OnDestroy:" + p.GetTag()); }
  void OnReportIssue(const Issue& issue) override {
    issues.push_back(issue);
    on_worker.push_back(worker_ != nullptr && worker_->is_dispatching());
  }

  std::vector<std::string> events;
  std::vector<Issue> issues;
  std::vector<bool> on_worker;

 private:
  Looper* worker_;
};

PluginContext ContextWith(std::shared_ptr<PluginListener> listener, Looper* worker = nullptr) {
  PluginContext context;
  context.worker_looper = worker;
  context.listeners.push_back(std::move(listener));
  return context;
}

TEST(PluginLifecycleTest, FullLifecycle_MovesThroughTheStatesAndNotifiesListeners) {
  auto listener = std::make_shared<RecordingListener>();
  FakePlugin plugin;
  EXPECT_EQ(plugin.state(), Plugin::State::kCreated);
  EXPECT_EQ(plugin.GetTag(), "Fake");

  ASSERT_TRUE(plugin.Init(ContextWith(listener)).ok());
  EXPECT_EQ(plugin.state(), Plugin::State::kInited);
  ASSERT_TRUE(plugin.Start().ok());
  EXPECT_EQ(plugin.state(), Plugin::State::kStarted);
  ASSERT_TRUE(plugin.Stop().ok());
  EXPECT_EQ(plugin.state(), Plugin::State::kStopped);
  ASSERT_TRUE(plugin.Start().ok());  // A stopped plugin can start again.
  ASSERT_TRUE(plugin.Stop().ok());
  ASSERT_TRUE(plugin.Destroy().ok());
  EXPECT_EQ(plugin.state(), Plugin::State::kDestroyed);

  EXPECT_THAT(plugin.hooks, ElementsAre("init", "start", "stop", "start", "stop", "destroy"));
  EXPECT_THAT(listener->events,
              ElementsAre("OnInit:Fake", "OnStart:Fake", "OnStop:Fake", "OnStart:Fake",
                          "OnStop:Fake", "OnDestroy:Fake"));
}

TEST(PluginLifecycleTest, StartAfterDestroy_IsFailedPreconditionNamingBothStates) {
  auto listener = std::make_shared<RecordingListener>();
  FakePlugin plugin;
  ASSERT_TRUE(plugin.Init(ContextWith(listener)).ok());
  ASSERT_TRUE(plugin.Destroy().ok());
  listener->events.clear();
  plugin.hooks.clear();

  absl::Status status = plugin.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("start"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("destroyed"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("Fake"));
  EXPECT_EQ(plugin.state(), Plugin::State::kDestroyed);
  EXPECT_THAT(plugin.hooks, IsEmpty());
  EXPECT_THAT(listener->events, IsEmpty());
}

TEST(PluginLifecycleTest, InitTwice_IsFailedPrecondition) {
  auto listener = std::make_shared<RecordingListener>();
  FakePlugin plugin;
  ASSERT_TRUE(plugin.Init(ContextWith(listener)).ok());
  absl::Status status = plugin.Init(ContextWith(listener));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("init"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("inited"));
  EXPECT_THAT(plugin.hooks, ElementsAre("init"));
  EXPECT_THAT(listener->events, ElementsAre("OnInit:Fake"));
}

TEST(PluginLifecycleTest, StopWhenNotStarted_IsFailedPrecondition) {
  FakePlugin plugin;
  ASSERT_TRUE(plugin.Init(ContextWith(std::make_shared<RecordingListener>())).ok());
  absl::Status status = plugin.Stop();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("stop"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("inited"));
  EXPECT_EQ(plugin.state(), Plugin::State::kInited);

  ASSERT_TRUE(plugin.Start().ok());
  ASSERT_TRUE(plugin.Stop().ok());
  EXPECT_EQ(plugin.Stop().code(), absl::StatusCode::kFailedPrecondition);  // Stopped.
}

TEST(PluginLifecycleTest, StartTwice_IsFailedPrecondition) {
  FakePlugin plugin;
  ASSERT_TRUE(plugin.Init(ContextWith(std::make_shared<RecordingListener>())).ok());
  ASSERT_TRUE(plugin.Start().ok());
  absl::Status status = plugin.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("started"));
  EXPECT_THAT(plugin.hooks, ElementsAre("init", "start"));
}

TEST(PluginLifecycleTest, StartBeforeInit_IsFailedPrecondition) {
  FakePlugin plugin;
  absl::Status status = plugin.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("created"));
  EXPECT_THAT(plugin.hooks, IsEmpty());
}

TEST(PluginLifecycleTest, DestroyWhenStarted_StopsFirst) {
  auto listener = std::make_shared<RecordingListener>();
  FakePlugin plugin;
  ASSERT_TRUE(plugin.Init(ContextWith(listener)).ok());
  ASSERT_TRUE(plugin.Start().ok());
  ASSERT_TRUE(plugin.Destroy().ok());
  EXPECT_EQ(plugin.state(), Plugin::State::kDestroyed);
  EXPECT_THAT(plugin.hooks, ElementsAre("init", "start", "stop", "destroy"));
  EXPECT_THAT(listener->events,
              ElementsAre("OnInit:Fake", "OnStart:Fake", "OnStop:Fake", "OnDestroy:Fake"));
}

TEST(PluginLifecycleTest, DestroyTwice_IsFailedPrecondition) {
  FakePlugin plugin;
  ASSERT_TRUE(plugin.Init(ContextWith(std::make_shared<RecordingListener>())).ok());
  ASSERT_TRUE(plugin.Destroy().ok());
  absl::Status status = plugin.Destroy();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("destroyed"));
  EXPECT_THAT(plugin.hooks, ElementsAre("init", "destroy"));
}

TEST(PluginLifecycleTest, FailingHook_KeepsTheStateAndNotifiesNoOne) {
  auto listener = std::make_shared<RecordingListener>();
  FakePlugin plugin;
  ASSERT_TRUE(plugin.Init(ContextWith(listener)).ok());
  plugin.start_status = absl::InternalError("no display");
  absl::Status status = plugin.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(plugin.state(), Plugin::State::kInited);
  EXPECT_THAT(listener->events, ElementsAre("OnInit:Fake"));

  plugin.start_status = absl::OkStatus();
  EXPECT_TRUE(plugin.Start().ok());
  EXPECT_EQ(plugin.state(), Plugin::State::kStarted);
}

TEST(PluginLifecycleTest, UnsupportedPlugin_StartDoesNothing) {
  auto listener = std::make_shared<RecordingListener>();
  FakePlugin plugin;
  ASSERT_TRUE(plugin.Init(ContextWith(listener)).ok());
  plugin.MarkUnsupported();
  EXPECT_FALSE(plugin.IsSupported());
  EXPECT_EQ(plugin.Start().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(plugin.state(), Plugin::State::kInited);
  EXPECT_THAT(plugin.hooks, ElementsAre("init"));
}

TEST(PluginLifecycleTest, StateNames_AreReadable) {
  EXPECT_STREQ(Plugin::StateName(Plugin::State::kCreated), "created");
  EXPECT_STREQ(Plugin::StateName(Plugin::State::kInited), "inited");
  EXPECT_STREQ(Plugin::StateName(Plugin::State::kStarted), "started");
  EXPECT_STREQ(Plugin::StateName(Plugin::State::kStopped), "stopped");
  EXPECT_STREQ(Plugin::StateName(Plugin::State::kDestroyed), "destroyed");
}

// --- OnDetectIssue --------------------------------------------------------------

class PluginIssueTest : public ::testing::Test {
 protected:
  PluginIssueTest() {
    mt::TestEnvironment::Options options;
    options.choreographer = false;
    options.main_looper = false;
    env_ = std::make_unique<mt::TestEnvironment>(options);
    worker_ = env_->CreateBackgroundLooper("matrix-worker");
    listener_ = std::make_shared<RecordingListener>(worker_);
  }

  std::unique_ptr<mt::TestEnvironment> env_;
  Looper* worker_ = nullptr;
  std::shared_ptr<RecordingListener> listener_;
};

TEST_F(PluginIssueTest, OnDetectIssue_FillsTheEnvelopeAndDeliversOnTheWorkerWhenItRuns) {
  FakePlugin plugin("Trace");
  ASSERT_TRUE(plugin.Init(ContextWith(listener_, worker_)).ok());
  Issue issue;
  issue.mutable_proto()->set_key("k1");
  const int64_t before_ms = absl::ToUnixMillis(absl::Now());
  plugin.OnDetectIssue(std::move(issue));
  const int64_t after_ms = absl::ToUnixMillis(absl::Now());

  EXPECT_THAT(listener_->issues, IsEmpty());  // Not before the worker runs.
  env_->RunUntilIdle();
  ASSERT_THAT(listener_->issues, SizeIs(1));
  EXPECT_TRUE(listener_->on_worker[0]);

  const Issue& got = listener_->issues[0];
  EXPECT_EQ(got.tag(), "Trace");  // Empty tag: the plugin's.
  EXPECT_EQ(got.key(), "k1");
  EXPECT_EQ(got.plugin(), &plugin);
  EXPECT_EQ(got.proto().plugin(), "Trace");
  EXPECT_EQ(got.proto().process(), program_invocation_short_name);
  EXPECT_EQ(got.proto().pid(), getpid());
  EXPECT_GE(got.proto().time_ms(), before_ms);
  EXPECT_LE(got.proto().time_ms(), after_ms);
  EXPECT_EQ(got.proto().device().cpu_cores(), 64);  // DecorateIssue ran.
  // Who reported it (docs/fleet.md): the host and build ids, the app's version.
  EXPECT_EQ(got.proto().app().host_id(), matrix::CurrentAppIdentity().host_id());
  EXPECT_FALSE(got.proto().app().build_id().empty());
}

TEST_F(PluginIssueTest, OnDetectIssue_CarriesTheVersionTheAppSet) {
  FakePlugin plugin("Trace");
  ASSERT_TRUE(plugin.Init(ContextWith(listener_, worker_)).ok());
  matrix::SetAppVersion("2.3.1-test");
  plugin.OnDetectIssue(Issue());
  env_->RunUntilIdle();
  ASSERT_THAT(listener_->issues, SizeIs(1));
  EXPECT_EQ(listener_->issues[0].proto().app().version(), "2.3.1-test");
}

TEST_F(PluginIssueTest, OnDetectIssue_KeepsAnExplicitTagAndDeliversInOrder) {
  FakePlugin plugin("Trace");
  auto second = std::make_shared<RecordingListener>(worker_);
  PluginContext context = ContextWith(listener_, worker_);
  context.listeners.push_back(second);
  ASSERT_TRUE(plugin.Init(context).ok());
  for (const char* key : {"a", "b", "c"}) {
    Issue issue;
    issue.mutable_proto()->set_tag(matrix::kTagFps);
    issue.mutable_proto()->set_key(key);
    plugin.OnDetectIssue(std::move(issue));
  }
  env_->RunUntilIdle();
  for (const auto& l : {listener_, second}) {
    ASSERT_THAT(l->issues, SizeIs(3));
    EXPECT_EQ(l->issues[0].tag(), "Trace_FPS");
    EXPECT_EQ(l->issues[0].key(), "a");
    EXPECT_EQ(l->issues[1].key(), "b");
    EXPECT_EQ(l->issues[2].key(), "c");
  }
}

TEST_F(PluginIssueTest, OnDetectIssue_WithoutWorker_DeliversOnTheCallingThread) {
  FakePlugin plugin("Trace");
  ASSERT_TRUE(plugin.Init(ContextWith(listener_, /*worker=*/nullptr)).ok());
  plugin.OnDetectIssue(Issue());
  ASSERT_THAT(listener_->issues, SizeIs(1));
  EXPECT_FALSE(listener_->on_worker[0]);
}

TEST_F(PluginIssueTest, PluginDestroyedBeforeDelivery_DropsTheIssue) {
  auto plugin = std::make_unique<FakePlugin>("Trace");
  ASSERT_TRUE(plugin->Init(ContextWith(listener_, worker_)).ok());
  plugin->OnDetectIssue(Issue());
  plugin.reset();
  env_->RunUntilIdle();
  EXPECT_THAT(listener_->issues, IsEmpty());
}

// --- Throwing listeners ---------------------------------------------------------

using ::matrix::testing::ScopedLogCapture;

// Throws from every callback: a std::exception, or (with `non_standard`) an int.
class ThrowingListener : public PluginListener {
 public:
  explicit ThrowingListener(bool non_standard = false) : non_standard_(non_standard) {}
  void OnInit(Plugin&) override { Throw(); }
  void OnStart(Plugin&) override { Throw(); }
  void OnStop(Plugin&) override { Throw(); }
  void OnDestroy(Plugin&) override { Throw(); }
  void OnReportIssue(const Issue&) override { Throw(); }
  int calls = 0;

 private:
  void Throw() {
    ++calls;
    if (non_standard_) throw 42;
    throw std::runtime_error("listener failed");
  }
  const bool non_standard_;
};

TEST_F(PluginIssueTest, ThrowingListener_OthersStillGetEveryIssueAndFailuresAreCounted) {
  ScopedLogCapture logs;
  auto thrower = std::make_shared<ThrowingListener>();
  auto after = std::make_shared<RecordingListener>(worker_);
  PluginContext context = ContextWith(thrower, worker_);
  context.listeners.push_back(after);
  FakePlugin plugin("Trace");
  ASSERT_TRUE(plugin.Init(context).ok());
  const int64_t lifecycle_failures = plugin.listener_failures();  // OnInit threw.

  for (const char* key : {"a", "b", "c", "d", "e"}) {
    Issue issue;
    issue.mutable_proto()->set_key(key);
    plugin.OnDetectIssue(std::move(issue));
  }
  env_->RunUntilIdle();

  ASSERT_THAT(after->issues, SizeIs(5));
  EXPECT_EQ(after->issues[0].key(), "a");
  EXPECT_EQ(after->issues[4].key(), "e");
  EXPECT_EQ(thrower->calls, 6);  // OnInit + 5 issues: it was not dropped.
  EXPECT_EQ(lifecycle_failures, 1);
  EXPECT_EQ(plugin.listener_failures(), 6);
  matrix::FlushLogs();
  // Logged once for this listener, with what it threw, not once per issue.
  EXPECT_EQ(logs.Count("listener failed"), 1) << logs.text();
  EXPECT_EQ(logs.Count("PluginListener"), 1) << logs.text();
  EXPECT_THAT(logs.text(), HasSubstr("Trace"));
}

TEST_F(PluginIssueTest, ThrowingListeners_AreLoggedOnceEachAndCaughtWhateverTheyThrow) {
  ScopedLogCapture logs;
  auto first = std::make_shared<ThrowingListener>();
  auto second = std::make_shared<ThrowingListener>(/*non_standard=*/true);
  PluginContext context = ContextWith(first, worker_);
  context.listeners.push_back(second);
  context.listeners.push_back(listener_);
  FakePlugin plugin("Trace");
  ASSERT_TRUE(plugin.Init(context).ok());
  for (int i = 0; i < 3; ++i) plugin.OnDetectIssue(Issue());
  env_->RunUntilIdle();

  EXPECT_THAT(listener_->issues, SizeIs(3));
  EXPECT_EQ(plugin.listener_failures(), 2 * (1 + 3));
  matrix::FlushLogs();
  EXPECT_EQ(logs.Count("PluginListener"), 2) << logs.text();
  EXPECT_EQ(logs.Count("listener failed"), 1) << logs.text();
  EXPECT_EQ(logs.Count("unknown exception"), 1) << logs.text();
}

TEST(PluginListenerFailureTest, ThrowingLifecycleListener_DoesNotStopTheLifecycle) {
  auto thrower = std::make_shared<ThrowingListener>();
  auto recorder = std::make_shared<RecordingListener>();
  PluginContext context = ContextWith(thrower);
  context.listeners.push_back(recorder);
  FakePlugin plugin;
  ASSERT_TRUE(plugin.Init(context).ok());
  ASSERT_TRUE(plugin.Start().ok());
  ASSERT_TRUE(plugin.Stop().ok());
  ASSERT_TRUE(plugin.Destroy().ok());

  EXPECT_EQ(plugin.state(), Plugin::State::kDestroyed);
  EXPECT_THAT(plugin.hooks, ElementsAre("init", "start", "stop", "destroy"));
  EXPECT_THAT(recorder->events,
              ElementsAre("OnInit:Fake", "OnStart:Fake", "OnStop:Fake", "OnDestroy:Fake"));
  EXPECT_EQ(thrower->calls, 4);
  EXPECT_EQ(plugin.listener_failures(), 4);
}

TEST(PluginListenerFailureTest, WithoutWorker_TheReportingThreadSurvives) {
  auto thrower = std::make_shared<ThrowingListener>();
  auto recorder = std::make_shared<RecordingListener>();
  PluginContext context = ContextWith(thrower, /*worker=*/nullptr);
  context.listeners.push_back(recorder);
  FakePlugin plugin;
  ASSERT_TRUE(plugin.Init(context).ok());
  plugin.OnDetectIssue(Issue());  // Delivered here, on this thread.
  EXPECT_THAT(recorder->issues, SizeIs(1));
  EXPECT_EQ(plugin.listener_failures(), 2);  // OnInit and the issue.
}

}  // namespace

// Tests for the Matrix facade: Builder, Init() once, With(), plugin lookup,
// Shutdown(), the *AllPlugins() helpers and foreground forwarding.

#include "matrix/core/matrix.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/looper.h"
#include "matrix/core/plugin.h"
#include "matrix/testing/test_environment.h"

namespace {

namespace mt = ::matrix::testing;
using ::matrix::AppState;
using ::matrix::Issue;
using ::matrix::Looper;
using ::matrix::Matrix;
using ::matrix::Plugin;
using ::matrix::PluginListener;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

class FakePlugin : public Plugin {
 public:
  explicit FakePlugin(std::string tag) : Plugin(std::move(tag)) {}
  std::vector<bool> foreground_changes;
  absl::Status start_status;

 protected:
  absl::Status OnStart() override { return start_status; }
  void OnForegroundChanged(bool foreground) override { foreground_changes.push_back(foreground); }
};

// A plugin whose Init fails (no display, say).
class FailingInitPlugin : public FakePlugin {
 public:
  explicit FailingInitPlugin(std::string tag) : FakePlugin(std::move(tag)) {}

 protected:
  absl::Status OnInit() override { return absl::UnavailableError("no display"); }
};

class OtherPlugin : public FakePlugin {
 public:
  OtherPlugin() : FakePlugin("Other") {}
};

class RecordingListener : public PluginListener {
 public:
  void OnInit(Plugin& p) override { events.push_back("OnInit:" + p.GetTag()); }
  void OnStart(Plugin& p) override { events.push_back("OnStart:" + p.GetTag()); }
  void OnStop(Plugin& p) override { events.push_back("OnStop:" + p.GetTag()); }
  void OnDestroy(Plugin& p) override { events.push_back("OnDestroy:" + p.GetTag()); }
  void OnReportIssue(const Issue& issue) override { issues.push_back(issue); }
  std::vector<std::string> events;
  std::vector<Issue> issues;
};

class MatrixTest : public ::testing::Test {
 protected:
  MatrixTest() {
    AppState::Get()->ResetForTesting();
    watchdog_ = env_.CreateBackgroundLooper("matrix-watchdog");
    worker_ = env_.CreateBackgroundLooper("matrix-worker");
  }
  ~MatrixTest() override {
    Matrix::Shutdown();
    AppState::Get()->ResetForTesting();
  }

  // A builder wired to the test environment's loopers (no real threads).
  Matrix::Builder Builder() {
    Matrix::Builder builder;
    builder.SetClock(env_.clock())
        .SetMainLooper(env_.looper())
        .SetWatchdogLooper(watchdog_)
        .SetWorkerLooper(worker_)
        .SetPluginListener(listener_);
    return builder;
  }

  mt::TestEnvironment env_;
  Looper* watchdog_ = nullptr;
  Looper* worker_ = nullptr;
  std::shared_ptr<RecordingListener> listener_ = std::make_shared<RecordingListener>();
};

TEST_F(MatrixTest, Init_WithPlugins_InitsEachAndInstallsTheInstance) {
  auto a = std::make_unique<FakePlugin>("A");
  auto b = std::make_unique<OtherPlugin>();
  Plugin* a_ptr = a.get();
  Plugin* b_ptr = b.get();
  EXPECT_FALSE(Matrix::IsInstalled());

  ASSERT_TRUE(Matrix::Init(Builder().AddPlugin(std::move(a)).AddPlugin(std::move(b)).Build()).ok());

  EXPECT_TRUE(Matrix::IsInstalled());
  EXPECT_THAT(Matrix::With().plugins(), SizeIs(2));
  EXPECT_EQ(a_ptr->state(), Plugin::State::kInited);
  EXPECT_EQ(b_ptr->state(), Plugin::State::kInited);
  EXPECT_THAT(listener_->events, ElementsAre("OnInit:A", "OnInit:Other"));
  // Plugins get the builder's clock and loopers.
  EXPECT_EQ(a_ptr->context().clock, env_.clock());
  EXPECT_EQ(a_ptr->context().main_looper, env_.looper());
  EXPECT_EQ(a_ptr->context().watchdog_looper, watchdog_);
  EXPECT_EQ(a_ptr->context().worker_looper, worker_);
  EXPECT_EQ(a_ptr->context().app_state, AppState::Get());
  EXPECT_THAT(a_ptr->context().listeners, ElementsAre(listener_));
}

TEST_F(MatrixTest, InitTwice_ReturnsAlreadyExistsAndKeepsTheFirst) {
  auto first = std::make_unique<FakePlugin>("First");
  Plugin* first_ptr = first.get();
  ASSERT_TRUE(Matrix::Init(Builder().AddPlugin(std::move(first)).Build()).ok());
  auto second = std::make_unique<FakePlugin>("Second");
  Plugin* second_ptr = second.get();

  absl::Status status = Matrix::Init(Builder().AddPlugin(std::move(second)).Build());

  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Matrix::With().GetPluginByTag("First"), first_ptr);
  EXPECT_EQ(Matrix::With().GetPluginByTag("Second"), nullptr);
  (void)second_ptr;  // Destroyed with the rejected instance.
  EXPECT_THAT(listener_->events, ElementsAre("OnInit:First"));
}

TEST_F(MatrixTest, DuplicateTags_AreInvalidArgumentAndNothingIsInstalled) {
  absl::Status status = Matrix::Init(Builder()
                                         .AddPlugin(std::make_unique<FakePlugin>("Trace"))
                                         .AddPlugin(std::make_unique<FakePlugin>("Trace"))
                                         .Build());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("Trace"));
  EXPECT_FALSE(Matrix::IsInstalled());
  EXPECT_THAT(listener_->events, IsEmpty());
}

TEST_F(MatrixTest, NullInstanceOrPlugin_IsInvalidArgument) {
  EXPECT_EQ(Matrix::Init(nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Matrix::Init(Builder().AddPlugin(nullptr).Build()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Matrix::IsInstalled());
}

TEST_F(MatrixTest, StartAfterFailedInit_IsAnErrorNamingTheFailure_NotACrash) {
  auto a = std::make_unique<FakePlugin>("A");
  auto b = std::make_unique<FailingInitPlugin>("B");
  auto c = std::make_unique<FakePlugin>("C");
  Plugin* kept[] = {a.get(), b.get(), c.get()};

  absl::Status status = Matrix::Init(
      Builder().AddPlugin(std::move(a)).AddPlugin(std::move(b)).AddPlugin(std::move(c)).Build());

  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(Matrix::IsInstalled());
  // The pointers kept to start the plugins still point at live plugins,
  // destroyed, whose lifecycle calls say why.
  for (Plugin* plugin : kept) {
    EXPECT_EQ(plugin->state(), Plugin::State::kDestroyed) << plugin->GetTag();
    absl::Status start = plugin->Start();
    EXPECT_EQ(start.code(), absl::StatusCode::kFailedPrecondition) << plugin->GetTag();
    EXPECT_THAT(std::string(start.message()), HasSubstr("Matrix::Init failed"));
    EXPECT_THAT(std::string(start.message()), HasSubstr("no display"));
  }
  // A, inited before B failed, and B were destroyed; C never ran.
  EXPECT_THAT(listener_->events, ElementsAre("OnInit:A", "OnDestroy:A", "OnDestroy:B"));
  // Init runs again; Shutdown frees the failed instance too.
  ASSERT_TRUE(Matrix::Init(Builder().AddPlugin(std::make_unique<FakePlugin>("D")).Build()).ok());
  Matrix::Shutdown();
}

TEST_F(MatrixTest, NegativeShutdownDrainTimeout_IsInvalidArgument) {
  absl::Status status = Matrix::Init(Builder()
                                         .AddPlugin(std::make_unique<FakePlugin>("A"))
                                         .SetShutdownDrainTimeout(absl::Milliseconds(-1))
                                         .Build());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("drain timeout"));
  EXPECT_FALSE(Matrix::IsInstalled());
}

TEST_F(MatrixTest, WithBeforeInit_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(Matrix::With(), "you must init Matrix sdk first");
}

TEST_F(MatrixTest, GetPluginByClassAndTag_FindTheRightPlugin) {
  auto fake = std::make_unique<FakePlugin>("Fake");
  auto other = std::make_unique<OtherPlugin>();
  FakePlugin* fake_ptr = fake.get();
  OtherPlugin* other_ptr = other.get();
  ASSERT_TRUE(
      Matrix::Init(Builder().AddPlugin(std::move(fake)).AddPlugin(std::move(other)).Build()).ok());

  EXPECT_EQ(Matrix::With().GetPluginByClass<OtherPlugin>(), other_ptr);
  // The first plugin of (or derived from) the class.
  EXPECT_EQ(Matrix::With().GetPluginByClass<FakePlugin>(), fake_ptr);
  EXPECT_EQ(Matrix::With().GetPluginByTag("Fake"), fake_ptr);
  EXPECT_EQ(Matrix::With().GetPluginByTag("Other"), other_ptr);
  EXPECT_EQ(Matrix::With().GetPluginByTag("Nope"), nullptr);

  class Absent : public FakePlugin {
   public:
    Absent() : FakePlugin("Absent") {}
  };
  EXPECT_EQ(Matrix::With().GetPluginByClass<Absent>(), nullptr);
}

TEST_F(MatrixTest, Shutdown_DestroysPluginsAndLetsInitRunAgain) {
  auto plugin = std::make_unique<FakePlugin>("Fake");
  ASSERT_TRUE(Matrix::Init(Builder().AddPlugin(std::move(plugin)).Build()).ok());
  ASSERT_TRUE(Matrix::With().StartAllPlugins().ok());

  Matrix::Shutdown();
  EXPECT_FALSE(Matrix::IsInstalled());
  EXPECT_THAT(listener_->events,
              ElementsAre("OnInit:Fake", "OnStart:Fake", "OnStop:Fake", "OnDestroy:Fake"));

  ASSERT_TRUE(Matrix::Init(Builder().AddPlugin(std::make_unique<FakePlugin>("Fake")).Build()).ok());
  EXPECT_TRUE(Matrix::IsInstalled());
  EXPECT_NE(Matrix::With().GetPluginByTag("Fake"), nullptr);
}

TEST_F(MatrixTest, ShutdownWhenNotInstalled_IsANoOp) {
  Matrix::Shutdown();
  Matrix::Shutdown();
  EXPECT_FALSE(Matrix::IsInstalled());
}

TEST_F(MatrixTest, AllPluginsHelpers_ReturnTheFirstErrorAndKeepGoing) {
  auto bad = std::make_unique<FakePlugin>("Bad");
  bad->start_status = absl::InternalError("cannot start");
  auto good = std::make_unique<FakePlugin>("Good");
  Plugin* good_ptr = good.get();
  ASSERT_TRUE(Matrix::Init(Builder().AddPlugin(std::move(bad)).AddPlugin(std::move(good)).Build()).ok());

  absl::Status status = Matrix::With().StartAllPlugins();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(good_ptr->state(), Plugin::State::kStarted);

  EXPECT_TRUE(Matrix::With().StopAllPlugins().ok());  // Only started ones are stopped.
  EXPECT_EQ(good_ptr->state(), Plugin::State::kStopped);
  EXPECT_TRUE(Matrix::With().DestroyAllPlugins().ok());
  EXPECT_EQ(good_ptr->state(), Plugin::State::kDestroyed);
  EXPECT_EQ(Matrix::With().GetPluginByTag("Bad")->state(), Plugin::State::kDestroyed);
}

TEST_F(MatrixTest, ForegroundChanges_ReachEveryPluginUntilShutdown) {
  auto a = std::make_unique<FakePlugin>("A");
  auto b = std::make_unique<OtherPlugin>();
  FakePlugin* a_ptr = a.get();
  FakePlugin* b_ptr = b.get();
  ASSERT_TRUE(Matrix::Init(Builder().AddPlugin(std::move(a)).AddPlugin(std::move(b)).Build()).ok());

  AppState::Get()->SetForeground(false);
  AppState::Get()->SetForeground(false);  // No change, no call.
  AppState::Get()->SetForeground(true);
  EXPECT_THAT(a_ptr->foreground_changes, ElementsAre(false, true));
  EXPECT_THAT(b_ptr->foreground_changes, ElementsAre(false, true));
}

TEST_F(MatrixTest, Listeners_DefaultSetAndAdd) {
  // No listener given: the default one (logs issues).
  {
    Matrix::Builder builder;
    builder.SetMainLooper(env_.looper()).SetWatchdogLooper(watchdog_).SetWorkerLooper(worker_);
    ASSERT_TRUE(Matrix::Init(builder.AddPlugin(std::make_unique<FakePlugin>("A")).Build()).ok());
    EXPECT_THAT(Matrix::With().context().listeners, SizeIs(1));
    EXPECT_NE(Matrix::With().context().listeners[0], nullptr);
    Matrix::Shutdown();
  }
  // SetPluginListener replaces, AddPluginListener adds.
  auto extra = std::make_shared<RecordingListener>();
  ASSERT_TRUE(Matrix::Init(Builder()
                               .AddPluginListener(extra)
                               .AddPlugin(std::make_unique<FakePlugin>("A"))
                               .Build())
                  .ok());
  EXPECT_THAT(Matrix::With().context().listeners, ElementsAre(listener_, extra));
  EXPECT_THAT(extra->events, ElementsAre("OnInit:A"));
}

TEST_F(MatrixTest, Issues_ReachTheListenersOnTheWorker) {
  auto plugin = std::make_unique<FakePlugin>("Fake");
  Plugin* ptr = plugin.get();
  ASSERT_TRUE(Matrix::Init(Builder().AddPlugin(std::move(plugin)).Build()).ok());
  ptr->OnDetectIssue(Issue());
  EXPECT_THAT(listener_->issues, IsEmpty());
  env_.RunUntilIdle();
  ASSERT_THAT(listener_->issues, SizeIs(1));
  EXPECT_EQ(listener_->issues[0].tag(), "Fake");
}

TEST_F(MatrixTest, ThrowingListener_IsCountedOnTheFacadeAndOthersKeepHearing) {
  class Throwing : public PluginListener {
   public:
    void OnStart(Plugin&) override { throw std::runtime_error("listener failed"); }
    void OnReportIssue(const Issue&) override { throw std::runtime_error("listener failed"); }
  };
  auto a = std::make_unique<FakePlugin>("A");
  auto b = std::make_unique<OtherPlugin>();
  Plugin* a_ptr = a.get();
  Plugin* b_ptr = b.get();
  ASSERT_TRUE(Matrix::Init(Builder()
                               .SetPluginListener(std::make_shared<Throwing>())
                               .AddPluginListener(listener_)
                               .AddPlugin(std::move(a))
                               .AddPlugin(std::move(b))
                               .Build())
                  .ok());
  EXPECT_EQ(Matrix::With().listener_failures(), 0);
  ASSERT_TRUE(Matrix::With().StartAllPlugins().ok());  // Two failing OnStart.
  a_ptr->OnDetectIssue(Issue());
  a_ptr->OnDetectIssue(Issue());
  b_ptr->OnDetectIssue(Issue());
  env_.RunUntilIdle();

  EXPECT_THAT(listener_->issues, SizeIs(3));
  EXPECT_THAT(listener_->events, ElementsAre("OnInit:A", "OnInit:Other", "OnStart:A",
                                             "OnStart:Other"));
  EXPECT_EQ(a_ptr->listener_failures(), 3);
  EXPECT_EQ(b_ptr->listener_failures(), 2);
  EXPECT_EQ(Matrix::With().listener_failures(), 5);
}

}  // namespace

// AgentConfig::FromEnvironment: the agent's MATRIX_* variables, defaults and
// clear errors for bad values.

#include "agent_config.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shells.h"

namespace matrix::agent {
namespace {

using ::testing::HasSubstr;

std::map<std::string, std::string>* g_env = nullptr;

const char* FakeGetEnv(const char* name) {
  auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

absl::StatusOr<AgentConfig> Parse(std::map<std::string, std::string> env) {
  g_env = &env;
  absl::StatusOr<AgentConfig> config = AgentConfig::FromEnvironment(&FakeGetEnv);
  g_env = nullptr;
  return config;
}

TEST(AgentConfigTest, Defaults) {
  absl::StatusOr<AgentConfig> c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->report_dir, "./matrix-reports");
  EXPECT_EQ(c->anr_threshold, absl::Seconds(5));
  EXPECT_EQ(c->lag_threshold, absl::Seconds(2));
  EXPECT_EQ(c->evil_threshold, absl::Milliseconds(700));
  EXPECT_TRUE(c->frames);
  EXPECT_TRUE(c->symbolize);
  EXPECT_EQ(c->refresh_hz, 60);
  EXPECT_EQ(c->timeline_window, absl::Seconds(5));
  EXPECT_TRUE(c->ShouldMonitor(1234));
}

TEST(AgentConfigTest, ReadsEveryVariable) {
  absl::StatusOr<AgentConfig> c =
      Parse({{"MATRIX_REPORT_DIR", "/tmp/r"}, {"MATRIX_REPORT_NAME", "prog-1"},
             {"MATRIX_ANR_MS", "1000"}, {"MATRIX_LAG_MS", "300"}, {"MATRIX_EVIL_MS", "50"},
             {"MATRIX_FRAMES", "0"}, {"MATRIX_FPS_SLICE_MS", "2000"},
             {"MATRIX_REFRESH_HZ", "144"}, {"MATRIX_AGENT_PID", "42"},
             {"MATRIX_TIMELINE_WINDOW_MS", "8000"}, {"MATRIX_SYMBOLIZE", "0"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->report_dir, "/tmp/r");
  EXPECT_EQ(c->report_name, "prog-1");
  EXPECT_EQ(c->anr_threshold, absl::Seconds(1));
  EXPECT_EQ(c->lag_threshold, absl::Milliseconds(300));
  EXPECT_EQ(c->evil_threshold, absl::Milliseconds(50));
  EXPECT_FALSE(c->frames);
  EXPECT_FALSE(c->symbolize);
  EXPECT_EQ(c->fps_time_slice, absl::Seconds(2));
  EXPECT_EQ(c->refresh_hz, 144);
  EXPECT_EQ(c->timeline_window, absl::Seconds(8));
  EXPECT_TRUE(c->ShouldMonitor(42));
  EXPECT_FALSE(c->ShouldMonitor(43));  // An exec'ed child.
}

TEST(AgentConfigTest, StackKeyModules_CommaSeparated) {
  absl::StatusOr<AgentConfig> c =
      Parse({{"MATRIX_KEY_SKIP", "libvendor, /opt/sdk/"}, {"MATRIX_KEY_PROGRAM", "/usr/lib/app/"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->key_skip_modules, testing::ElementsAre("libvendor", "/opt/sdk/"));
  EXPECT_THAT(c->key_program_modules, testing::ElementsAre("/usr/lib/app/"));
  EXPECT_TRUE(Parse({})->key_skip_modules.empty());
}

TEST(AgentConfigTest, FollowExecAndDisable) {
  EXPECT_TRUE(Parse({{"MATRIX_AGENT_PID", "42"}, {"MATRIX_AGENT_FOLLOW_EXEC", "1"}})
                  ->ShouldMonitor(43));
  EXPECT_FALSE(Parse({{"MATRIX_AGENT_DISABLE", "1"}})->ShouldMonitor(43));
}

TEST(AgentConfigTest, AFollowedChildWritesItsOwnFile) {
  // matrix-run names the launched program's file; a child it execs (with
  // --follow-exec) inherits the variable but not the name.
  absl::StatusOr<AgentConfig> c = Parse({{"MATRIX_AGENT_PID", "42"},
                                         {"MATRIX_AGENT_FOLLOW_EXEC", "1"},
                                         {"MATRIX_REPORT_NAME", "surf-42"},
                                         {"MATRIX_RUN_PROCESSES", "/r/.surf-42.processes"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ReportName(42, "surf"), "surf-42");
  EXPECT_EQ(c->ReportName(57, "WebKitWebProcess"), "WebKitWebProcess-57");
  EXPECT_EQ(c->process_list, "/r/.surf-42.processes");
  // Without matrix-run (no target pid), the name is the user's.
  c = Parse({{"MATRIX_REPORT_NAME", "mine"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ReportName(7, "app"), "mine");
  EXPECT_EQ(Parse({})->ReportName(7, "app"), "app-7");
}

TEST(AgentConfigTest, ShellsAreLaunchersNotLoops) {
  for (const char* shell :
       {"/usr/bin/bash", "/bin/bash", "/usr/bin/dash", "/usr/bin/rbash", "/usr/bin/zsh",
        "/usr/bin/ksh93", "/usr/bin/mksh", "/usr/bin/fish", "/bin/busybox", "sh"}) {
    EXPECT_TRUE(matrix::agent::IsShell(shell)) << shell;
  }
  for (const char* program :
       {"/usr/bin/python3.11", "/usr/bin/node", "/usr/lib/qt6/bin/qml", "/usr/bin/bashtop",
        "/opt/sh/app", "/usr/bin/pcmanfm", "/usr/bin/xsh", ""}) {
    EXPECT_FALSE(matrix::agent::IsShell(program)) << program;
  }
}

TEST(AgentConfigTest, LagDefaultsBelowAShortAnr) {
  absl::StatusOr<AgentConfig> c = Parse({{"MATRIX_ANR_MS", "400"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->lag_threshold, absl::Milliseconds(200));
}

TEST(AgentConfigTest, BadValuesAreClearErrors) {
  EXPECT_THAT(Parse({{"MATRIX_ANR_MS", "soon"}}).status().message(),
              HasSubstr("MATRIX_ANR_MS=soon: expected a positive number of milliseconds"));
  EXPECT_THAT(Parse({{"MATRIX_EVIL_MS", "0"}}).status().message(), HasSubstr("MATRIX_EVIL_MS=0"));
  EXPECT_THAT(Parse({{"MATRIX_FRAMES", "maybe"}}).status().message(),
              HasSubstr("MATRIX_FRAMES=maybe: expected 0 or 1"));
  EXPECT_THAT(Parse({{"MATRIX_SYMBOLIZE", "off"}}).status().message(),
              HasSubstr("MATRIX_SYMBOLIZE=off: expected 0 or 1"));
  EXPECT_THAT(Parse({{"MATRIX_REFRESH_HZ", "0"}}).status().message(),
              HasSubstr("MATRIX_REFRESH_HZ=0"));
  EXPECT_THAT(Parse({{"MATRIX_AGENT_PID", "-3"}}).status().message(),
              HasSubstr("MATRIX_AGENT_PID=-3"));
  EXPECT_THAT(Parse({{"MATRIX_REPORT_NAME", "../x"}}).status().message(),
              HasSubstr("MATRIX_REPORT_NAME=../x"));
  EXPECT_THAT(Parse({{"MATRIX_ANR_MS", "100"}, {"MATRIX_LAG_MS", "200"}}).status().message(),
              HasSubstr("MATRIX_LAG_MS is above MATRIX_ANR_MS"));
}

// Dropped frames are counted against the display's refresh rate when the
// agent can read it, unless MATRIX_REFRESH_HZ overrides it; 60 Hz otherwise.
TEST(AgentConfigTest, RefreshRateComesFromTheDisplayUnlessOverridden) {
  absl::StatusOr<AgentConfig> plain = Parse({});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->RefreshMillihertz(0), 60'000);        // Unknown: 60 Hz.
  EXPECT_EQ(plain->RefreshMillihertz(143'856), 143'856);  // The display's.
  EXPECT_EQ(plain->RefreshMillihertz(500), 60'000);      // 0.5 Hz: not believed.
  EXPECT_EQ(plain->RefreshMillihertz(2'000'000), 60'000);
  absl::StatusOr<AgentConfig> overridden = Parse({{"MATRIX_REFRESH_HZ", "75"}});
  ASSERT_TRUE(overridden.ok()) << overridden.status();
  EXPECT_EQ(overridden->RefreshMillihertz(143'856), 75'000);  // The override wins.
  EXPECT_EQ(overridden->RefreshMillihertz(0), 75'000);
}

}  // namespace
}  // namespace matrix::agent

// Runs the real matrix-demo (about 15 s) in a temporary directory and checks
// that it reports the same groups as the checked-in fixture
// testdata/demo/matrix-reports that docs/matrix-report.md is generated from:
// the same set of (tag, detail, key) in its JSON-lines issue files, and the
// same in its BlockCanary text files. Counts, costs and times depend on the
// machine and are not compared. When the demo changes what it reports,
// re-capture the fixture and regenerate the doc:
//   tools/matrix-report/update_demo_fixture.sh build

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/issue_reader.h"

extern char** environ;

namespace matrix::report {
namespace {

const std::string kDemo = MATRIX_DEMO_BINARY;
const std::string kFixture = std::string(MATRIX_REPORT_TESTDATA) + "/demo/matrix-reports";

// Keys that depend on the machine's speed: the demo's startup slow method is
// keyed by the end of its hot path, and WarmCaches() (400 ms) is close to 30%
// of the startup (~1250 ms; KeyIndex's threshold), so a slower run stops at
// InitApp(). Either is accepted, and nothing else.
struct TimingDependentKey {
  absl::string_view tag_detail;
  std::vector<std::string> keys;
};
const TimingDependentKey kTimingDependentKeys[] = {
    {"Trace_EvilMethod/STARTUP",
     {"(anonymous namespace)::InitApp()", "(anonymous namespace)::WarmCaches()"}},
};

// The fixture comes from a GCC build. Clang 14 has no instrumentation exclude
// list, so an unoptimized clang build (the sanitizer suites) also traces the
// out-of-line Abseil and standard-library helpers the demo calls: its
// slow-method buffer wraps and those keys differ (docs/method-tracing.md).
// There the method-traced keys are compared by tag and detail only.
#ifndef MATRIX_DEMO_TRACED_KEYS_EXACT
#define MATRIX_DEMO_TRACED_KEYS_EXACT 1
#endif
constexpr absl::string_view kMethodTracedKeys[] = {"Trace_EvilMethod/NORMAL",
                                                   "Trace_EvilMethod/STARTUP"};

std::string KeyOf(const IssueRecord& r) {
  if (!MATRIX_DEMO_TRACED_KEYS_EXACT) {
    for (absl::string_view tag_detail : kMethodTracedKeys) {
      if (r.TagDetail() == tag_detail) return "(method-traced key: compared in GCC builds)";
    }
  }
  for (const TimingDependentKey& t : kTimingDependentKeys) {
    if (r.TagDetail() != t.tag_detail) continue;
    for (const std::string& key : t.keys) {
      if (r.key == key) return absl::StrCat("{", absl::StrJoin(t.keys, " or "), "}");
    }
  }
  return r.key;
}

// "tag/detail  key" of every issue read from `input`.
std::set<std::string> Groups(const std::string& input) {
  const ReadResult read =
      ReadIssueInputs({input}, nullptr, {.block_log_time_zone = absl::UTCTimeZone()});
  EXPECT_THAT(read.errors, ::testing::IsEmpty()) << input;
  EXPECT_TRUE(read.malformed.empty()) << input << ": " << read.malformed.size() << " malformed";
  std::set<std::string> groups;
  for (const IssueRecord& r : read.records) {
    groups.insert(absl::StrCat(r.TagDetail(), "  ", KeyOf(r)));
  }
  return groups;
}

// The demo's run in a fresh directory, as update_demo_fixture.sh runs it.
void RunDemo(const std::string& cwd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string log = cwd + "/demo.out";
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<std::string> env = {"TZ=UTC"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "TZ=")) env.push_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>(kDemo.c_str()), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, kDemo.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ASSERT_EQ(spawned, 0) << "cannot run " << kDemo;
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "matrix-demo: status " << status;
}

std::string Lines(const std::set<std::string>& groups) {
  return absl::StrCat("  ", absl::StrJoin(groups, "\n  "), "\n");
}

TEST(MatrixReportDemoTest, ADemoRunReportsTheFixturesGroups) {
  const std::string cwd = absl::StrCat(::testing::TempDir(), "/matrix-report-demo-", getpid());
  std::filesystem::remove_all(cwd);
  std::filesystem::create_directories(cwd);
  ASSERT_NO_FATAL_FAILURE(RunDemo(cwd));
  for (const std::string sub : {"", "/blockcanary"}) {
    SCOPED_TRACE(absl::StrCat("matrix-reports", sub));
    const std::set<std::string> fixture = Groups(kFixture + sub);
    const std::set<std::string> demo = Groups(cwd + "/matrix-reports" + sub);
    EXPECT_FALSE(fixture.empty());
    EXPECT_EQ(demo, fixture)
        << "matrix-demo now reports these groups (tag/detail  key):\n"
        << Lines(demo) << "the fixture " << kFixture << sub << " has:\n"
        << Lines(fixture)
        << "If the demo changed on purpose, re-capture the fixture and regenerate "
           "docs/matrix-report.md:\n  tools/matrix-report/update_demo_fixture.sh build";
  }
  std::filesystem::remove_all(cwd);
}

}  // namespace
}  // namespace matrix::report

// The command line, run in-process: parsing, usage errors (exit 2), missing
// input (exit 1), every command on a scratch directory, filters, --output.

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/cli.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::AnrIssue;
using test_util::EvilMethodIssue;
using test_util::FrameIssue;
using test_util::kBaseTimeMs;
using test_util::Line;
using test_util::ScratchDir;
using test_util::StartupIssue;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const RunEnvironment kEnv = {.now = absl::FromUnixMillis(kBaseTimeMs + 3'600'000),
                             .local_zone = absl::UTCTimeZone()};

using test_util::RunOutput;

RunOutput RunReport(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  return test_util::RunReport(args, stdin_text, kEnv);
}

TEST(ParseCommandLineTest, CommandFiltersAndOptions) {
  absl::StatusOr<CommandLine> cl =
      ParseCommandLine({"group", "--tag=Trace_FPS", "--tag", "Trace_EvilMethod", "--detail=ANR",
                        "--key", "Decode", "--scene=Home", "--process=4242", "--since=2025-11-21",
                        "--until=now", "--utc", "--limit=3", "dir1", "dir2"},
                       kEnv);
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->command, Command::kGroup);
  EXPECT_THAT(cl->filter.tags, ::testing::ElementsAre("Trace_FPS", "Trace_EvilMethod"));
  EXPECT_THAT(cl->filter.details, ::testing::ElementsAre("ANR"));
  EXPECT_THAT(cl->filter.keys, ::testing::ElementsAre("Decode"));
  EXPECT_THAT(cl->filter.scenes, ::testing::ElementsAre("Home"));
  EXPECT_THAT(cl->filter.processes, ::testing::ElementsAre("4242"));
  EXPECT_EQ(cl->filter.since_ms, kBaseTimeMs - 10 * 3'600'000);
  EXPECT_EQ(cl->filter.until_ms, kBaseTimeMs + 3'600'000);
  EXPECT_TRUE(cl->utc);
  EXPECT_EQ(cl->limit, 3);
  EXPECT_THAT(cl->inputs, ::testing::ElementsAre("dir1", "dir2"));
}

TEST(ParseCommandLineTest, DefaultsToSummaryAndACommandNameLaterIsAnInput) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine({"reports", "group"}, kEnv);
  ASSERT_TRUE(cl.ok());
  EXPECT_EQ(cl->command, Command::kSummary);
  EXPECT_THAT(cl->inputs, ::testing::ElementsAre("reports", "group"));
  absl::StatusOr<CommandLine> dashdash = ParseCommandLine({"show", "--", "--odd-name"}, kEnv);
  ASSERT_TRUE(dashdash.ok());
  EXPECT_THAT(dashdash->inputs, ::testing::ElementsAre("--odd-name"));
}

TEST(ParseCommandLineTest, ExportOptions) {
  absl::StatusOr<CommandLine> cl =
      ParseCommandLine({"export", "--format", "json", "--grouped", "-o", "out.json"}, kEnv);
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->format, ExportFormat::kJson);
  EXPECT_TRUE(cl->grouped);
  EXPECT_EQ(cl->output, "out.json");
}

TEST(ParseCommandLineTest, UsageErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {"--bogus"},
      {"--tag"},
      {"--tag="},
      {"--utc=yes"},
      {"--limit=0"},
      {"group", "--limit=many"},
      {"export", "--format=xml"},
      {"--format=csv"},             // Export only.
      {"show", "--grouped"},        // Export only.
      {"group", "--newest-first"},  // Show only.
      {"summary", "--limit=3"},     // Group and show only.
      {"export", "--grouped", "--format=jsonl"},
      {"--since=yesterday"},
      {"--since=2h", "--since=1h"},
      {"--since=1h", "--until=2h"},  // Since after until.
  };
  for (const std::vector<std::string>& args : bad) {
    EXPECT_FALSE(ParseCommandLine(args, kEnv).ok()) << args[0];
    const RunOutput run = RunReport(args);
    EXPECT_EQ(run.code, kExitUsage) << args[0];
    EXPECT_THAT(run.err, StartsWith("matrix-report: ")) << args[0];
    EXPECT_THAT(run.err, HasSubstr("--help"));
    EXPECT_EQ(run.out, "");
  }
}

TEST(RunMatrixReportTest, HelpPrintsUsage) {
  const RunOutput run = RunReport({"--help"});
  EXPECT_EQ(run.code, kExitOk);
  EXPECT_THAT(run.out, StartsWith("Usage: matrix-report"));
  EXPECT_THAT(run.out, HasSubstr("Exit status"));
}

TEST(RunMatrixReportTest, MissingInputExitsOne) {
  ScratchDir dir("missing");
  const RunOutput run = RunReport({dir.path() + "/nothing-here"});
  EXPECT_EQ(run.code, kExitNoInput);
  EXPECT_THAT(run.err, HasSubstr("nothing-here"));
  EXPECT_THAT(run.err, HasSubstr("no input"));
  const RunOutput empty_dir = RunReport({dir.path()});
  EXPECT_EQ(empty_dir.code, kExitNoInput);
  EXPECT_THAT(empty_dir.err, HasSubstr("no *.jsonl"));
}

class RunOnFilesTest : public ::testing::Test {
 protected:
  RunOnFilesTest() : dir_("run") {
    dir_.Write("issues.1.jsonl",
               {Line(StartupIssue(kBaseTimeMs)),
                Line(AnrIssue("app::Decode()", proto::ANR, 5000, kBaseTimeMs + 1000, "Gallery")),
                "{\"tag\": broken"});
    dir_.Write("issues.jsonl",
               {Line(FrameIssue("Gallery", 52.4, kBaseTimeMs + 2000)),
                Line(AnrIssue("app::Decode()", proto::ANR, 7000, kBaseTimeMs + 3000, "Home")),
                Line(EvilMethodIssue("app::Parse()", 800, kBaseTimeMs + 4000, "Home"))});
  }
  ScratchDir dir_;
};

TEST_F(RunOnFilesTest, SummaryIsTheDefaultAndMalformedLinesGoToStderr) {
  const RunOutput run = RunReport({dir_.path()});
  EXPECT_EQ(run.code, kExitOk);
  EXPECT_THAT(run.out, HasSubstr("issues       5 (2 files: "));
  EXPECT_THAT(run.out, HasSubstr("lines        6 read, 1 malformed"));
  EXPECT_THAT(run.out, ::testing::ContainsRegex("Trace_EvilMethod/ANR +2 +1 +7000.0 ms"));
  EXPECT_THAT(run.err, HasSubstr(dir_.path() +
                                 "/issues.1.jsonl: skipped 1 malformed line at line 3: "));
}

TEST_F(RunOnFilesTest, GroupWithFilterAndLimit) {
  RunOutput run = RunReport({"group", "--tag=trace_evilmethod", dir_.path()});
  EXPECT_EQ(run.code, kExitOk);
  EXPECT_THAT(run.out, HasSubstr("2 groups of 3 issues"));
  EXPECT_THAT(run.out, HasSubstr("#1  Trace_EvilMethod/ANR  x2\n"));
  EXPECT_THAT(run.out, HasSubstr("#2  Trace_EvilMethod/NORMAL  x1\n"));
  run = RunReport({"group", "--limit=1", dir_.path()});
  EXPECT_THAT(run.out, HasSubstr("#1  Trace_EvilMethod/ANR  x2\n"));
  EXPECT_THAT(run.out, Not(HasSubstr("#2 ")));
  EXPECT_THAT(run.out, HasSubstr("(3 more groups; drop --limit to see them)"));
}

TEST_F(RunOnFilesTest, ShowOrderLimitAndFilters) {
  RunOutput run = RunReport({"show", "--scene=Home", dir_.path()});
  EXPECT_EQ(run.code, kExitOk);
  const size_t anr = run.out.find("== Trace_EvilMethod/ANR");
  const size_t slow = run.out.find("== Trace_EvilMethod/NORMAL");
  ASSERT_NE(anr, std::string::npos);
  ASSERT_NE(slow, std::string::npos);
  EXPECT_LT(anr, slow);  // Oldest first.
  EXPECT_THAT(run.out, Not(HasSubstr("== Trace_FPS")));
  run = RunReport({"show", "--newest-first", "--limit=1", dir_.path()});
  EXPECT_THAT(run.out, StartsWith("== Trace_EvilMethod/NORMAL"));
  EXPECT_THAT(run.out, HasSubstr("(4 more issues; drop --limit to see them)"));
  run = RunReport({"show", "--key=nothing-matches", dir_.path()});
  EXPECT_EQ(run.code, kExitOk);
  EXPECT_EQ(run.out, "no issues match the filters\n");
}

TEST_F(RunOnFilesTest, SinceUntilAndUtc) {
  // 2025-11-21 10:00:01 to 10:00:03 UTC: the first ANR and the FPS report.
  const RunOutput run = RunReport({"export", "--utc", "--since=2025-11-21 10:00:01",
                                   "--until=2025-11-21T10:00:03Z", dir_.path()});
  EXPECT_EQ(run.code, kExitOk);
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 3) << run.out;
  EXPECT_THAT(run.out, HasSubstr(",ANR,app::Decode(),Gallery,"));
  EXPECT_THAT(run.out, HasSubstr(",Trace_FPS,,Gallery,"));
}

TEST_F(RunOnFilesTest, ExportJsonLinesReadsBackThroughStdin) {
  const RunOutput exported = RunReport({"export", "--format=jsonl", "--detail=ANR", dir_.path()});
  EXPECT_EQ(exported.code, kExitOk);
  const RunOutput again = RunReport({"group", "-"}, exported.out);
  EXPECT_EQ(again.code, kExitOk);
  EXPECT_THAT(again.out, HasSubstr("1 group of 2 issues"));
  EXPECT_THAT(again.out, HasSubstr("worst 7000.0 ms, median 6000.0 ms"));
}

TEST_F(RunOnFilesTest, ExportToAFileAndToAnUnwritablePath) {
  const std::string path = dir_.path() + "/out.csv";
  RunOutput run = RunReport({"export", "-o", path, dir_.path()});
  EXPECT_EQ(run.code, kExitOk);
  EXPECT_EQ(run.out, "");
  EXPECT_THAT(run.err, HasSubstr("wrote 5 issues to " + path));
  std::ifstream file(path);
  std::stringstream buffer;
  buffer << file.rdbuf();
  const std::string content = buffer.str();
  EXPECT_THAT(content, StartsWith("time,time_ms,tag,detail,key,"));
  EXPECT_EQ(std::count(content.begin(), content.end(), '\n'), 6);

  run = RunReport({"export", "--output=" + dir_.path() + "/no/such/dir/out.csv", dir_.path()});
  EXPECT_EQ(run.code, kExitNoInput);
  EXPECT_THAT(run.err, HasSubstr("cannot write"));
}

TEST_F(RunOnFilesTest, AnUnreadableInputIsReportedTheRestUsedAndTheExitIsOne) {
  const RunOutput run = RunReport({"group", dir_.path(), dir_.path() + "/gone.jsonl"});
  EXPECT_EQ(run.code, kExitNoInput);
  EXPECT_THAT(run.err, HasSubstr("gone.jsonl"));
  EXPECT_THAT(run.out, HasSubstr("4 groups of 5 issues"));
}

TEST_F(RunOnFilesTest, ADirectorysFilesThatAreNotRegularAreNamedAndTheExitIsOne) {
  // A FIFO would block the read, a link to /dev/zero never end.
  const std::string fifo = dir_.path() + "/pipe.jsonl";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_symlink("/dev/zero", dir_.path() + "/zero.jsonl");
  const RunOutput run = RunReport({"group", dir_.path()});
  EXPECT_EQ(run.code, kExitNoInput);
  EXPECT_THAT(run.err, HasSubstr("pipe.jsonl: not a regular file (a FIFO); skipped"));
  EXPECT_THAT(run.err, HasSubstr("zero.jsonl: not a regular file"));
  EXPECT_THAT(run.out, HasSubstr("4 groups of 5 issues"));
}

TEST(RunMatrixReportTest, MalformedLinesAreWarnedAboutOncePerFileWithCountAndFirstLine) {
  ScratchDir dir("many-bad");
  std::vector<std::string> lines = {Line(FrameIssue("G", 50, kBaseTimeMs))};
  lines.insert(lines.end(), 25, "garbage");
  lines.push_back(Line(FrameIssue("H", 50, kBaseTimeMs)));
  const std::string file = dir.Write("issues.jsonl", lines);
  const std::string other = dir.Write("other.jsonl", {"{\"tag\":\"X\",\"pid\":", "[]"});
  const RunOutput run = RunReport({file, other});
  EXPECT_EQ(run.code, kExitOk);
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 2) << run.err;
  EXPECT_THAT(run.err, StartsWith("matrix-report: " + file +
                                  ": skipped 25 malformed lines, the first at line 2: not a JSON "
                                  "issue: "));
  EXPECT_THAT(run.err, HasSubstr("\nmatrix-report: " + other +
                                 ": skipped 2 malformed lines, the first at line 1: not a JSON "
                                 "issue: "));
  EXPECT_THAT(run.out, HasSubstr("29 read, 27 malformed (skipped; see stderr)"));
  EXPECT_THAT(run.out, HasSubstr("issues       2 (2 files: "));
}

}  // namespace
}  // namespace matrix::report

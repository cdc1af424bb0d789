// Runs the built matrix-report binary on testdata/reports (and on the
// BlockCanary files of testdata/demo) and checks its output and exit codes.
//
// The fixture is a real `matrix-demo --reports=...` run (14 issues: a cold
// startup, its STARTUP slow method, six FPS reports (one over no frames),
// LAG_IDLE_HANDLER, NORMAL, LAG_TOUCH, ANR, SIGNAL_ANR and a BlockCanary
// block), with the demo's module path replaced by
// /opt/matrix-cpp/bin/matrix-demo and its report directory by
// ./matrix-reports, split the way the sink rotates (issues.2.jsonl oldest,
// issues.jsonl newest), and one line cut short at issues.1.jsonl:3.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kBinary = MATRIX_REPORT_BINARY;
const std::string kReports = std::string(MATRIX_REPORT_TESTDATA) + "/reports";
const std::string kDemoDir = std::string(MATRIX_REPORT_TESTDATA) + "/demo";

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Runs the binary with `args` in `cwd` (the test's cwd when empty), TZ=UTC,
// capturing stdout and stderr through files.
Result RunBinary(const std::vector<std::string>& args, const std::string& cwd = "") {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string base =
      absl::StrCat(::testing::TempDir(), "/matrix-report-e2e-", info->name(), "-", getpid());
  const std::string out_path = base + ".out";
  const std::string err_path = base + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<std::string> env = {"TZ=UTC"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("TZ=", 0) != 0) env.push_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(kBinary.c_str()));
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  Result result;
  const int spawned = posix_spawn(&pid, kBinary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(spawned, 0) << "cannot run " << kBinary;
  if (spawned != 0) return result;
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "status " << status;
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return result;
}

TEST(MatrixReportE2eTest, SummaryOfTheFixtureDirectory) {
  const Result r = RunBinary({"--utc", kReports});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr(absl::StrCat("issues       14 (3 files: ", kReports, "/issues.2.jsonl, ",
                                     kReports, "/issues.1.jsonl, ", kReports, "/issues.jsonl)\n")));
  EXPECT_THAT(r.out, HasSubstr("lines        15 read, 1 malformed (skipped; see stderr)\n"));
  EXPECT_THAT(r.out,
              HasSubstr("time         2026-11-22 01:09:14.029 .. 2026-11-22 01:09:24.735 UTC "
                        "(10.71 s)\n"));
  EXPECT_THAT(r.out, HasSubstr("processes    matrix-demo (pid 25457): 14\n"));
  // Six FPS reports in four scenes; the one over no frames has no FPS.
  EXPECT_THAT(r.out, ContainsRegex("Trace_FPS +6 +4 +50.5 fps +53.6 fps\n"));
  EXPECT_THAT(r.out, ContainsRegex("BlockCanary +1 +1 +2603.0 ms +2603.0 ms\n"));
  EXPECT_THAT(r.out, ContainsRegex("Trace_EvilMethod/ANR +1 +1 +2000.1 ms +2000.1 ms\n"));
  EXPECT_THAT(r.out, ContainsRegex("Trace_EvilMethod/SIGNAL_ANR +1 +1 +2300.5 ms"));
  EXPECT_THAT(r.out, ContainsRegex("Trace_StartUp +1 +1 +1230.9 ms"));
  EXPECT_THAT(r.err, StartsWith(absl::StrCat("matrix-report: ", kReports,
                                             "/issues.1.jsonl: skipped 1 malformed line at line "
                                             "3: not a JSON issue: ")));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(MatrixReportE2eTest, GroupPutsTheRepeatedScenesFirst) {
  const Result r = RunBinary({"group", "--utc", kReports});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("12 groups of 14 issues"));
  EXPECT_THAT(r.out, HasSubstr("#1  Trace_FPS  x2\n"
                               "    key          Settings\n"
                               "    fps          worst 50.5 fps, median 50.6 fps\n"));
  EXPECT_THAT(r.out, HasSubstr("#3  BlockCanary  x1\n"
                               "    key          (anonymous namespace)::WaitForDiskFlush"
                               "(absl::Duration)\n"
                               "    cost         worst 2603.0 ms, median 2603.0 ms\n"));
}

TEST(MatrixReportE2eTest, ShowAnAnrWithItsStackAndCallTree) {
  const Result r = RunBinary({"show", "--utc", "--detail=anr", kReports});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("== Trace_EvilMethod/ANR ="));
  EXPECT_THAT(r.out, HasSubstr("thread       matrix-demo (tid 25457): S (sleeping), priority 20"));
  EXPECT_THAT(r.out, HasSubstr("  #3   (anonymous namespace)::WaitForDiskFlush(absl::Duration)"
                               "+0x29  (matrix-demo)\n"));
  EXPECT_THAT(r.out, HasSubstr("  2000.1        (anonymous namespace)::WaitForDiskFlush"
                               "(absl::Duration) [running]\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("== Trace_FPS")));
}

TEST(MatrixReportE2eTest, ShowABlockWithItsSamplesMerged) {
  const Result r = RunBinary({"show", "--utc", "--tag=BlockCanary", kReports});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("== BlockCanary ="));
  EXPECT_THAT(r.out, HasSubstr("block        2603 ms wall, 2 ms CPU on the looper thread"));
  EXPECT_THAT(r.out,
              HasSubstr("key line     (anonymous namespace)::WaitForDiskFlush(absl::Duration) "
                        "(in 26 of 26 samples)\n"));
  EXPECT_THAT(r.out, HasSubstr("stack samples (26, 1 distinct stack; most frequent first):\n"
                               "  26 samples from +84 ms to +2506 ms:\n"
                               "    #0   clock_nanosleep+0x65  (libc.so.6)\n"));
}

TEST(MatrixReportE2eTest, ExportCsvHasAHeaderAndOneRowPerIssue) {
  const Result r = RunBinary({"export", "--utc", "--tag=Trace_FPS", kReports});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("time,time_ms,tag,detail,key,scene,process,pid,kind,metric,value,"
                                "unit,file,line\n"));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 7) << r.out;
  EXPECT_THAT(r.out, HasSubstr("2026-11-22T01:09:15.996+00:00,1795309755996,Trace_FPS,,Gallery,"
                               "Gallery,matrix-demo,25457,frame,fps,56.033,fps,"));
  // The report over no frames has no FPS.
  EXPECT_THAT(r.out, HasSubstr(",Trace_FPS,,default,default,matrix-demo,25457,frame,,,,"));
}

TEST(MatrixReportE2eTest, UsageErrorExitsTwo) {
  const Result r = RunBinary({"--bogus", kReports});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, StartsWith("matrix-report: unknown option --bogus\n"));
}

TEST(MatrixReportE2eTest, MissingInputExitsOne) {
  const Result r = RunBinary({kReports + "/does-not-exist"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("does-not-exist"));
}

TEST(MatrixReportE2eTest, WithoutArgumentsItReadsMatrixReportsInTheCurrentDirectory) {
  const std::string cwd = absl::StrCat(::testing::TempDir(), "/matrix-report-e2e-cwd-", getpid());
  std::filesystem::create_directories(cwd);
  Result r = RunBinary({}, cwd);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("./matrix-reports"));

  std::filesystem::create_directories(cwd + "/matrix-reports");
  std::filesystem::copy_file(kReports + "/issues.jsonl", cwd + "/matrix-reports/issues.jsonl");
  r = RunBinary({}, cwd);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("issues       6 (1 file: ./matrix-reports/issues.jsonl)"));
  std::filesystem::remove_all(cwd);
}

// A scratch directory under the test temp dir.
std::string ScratchDir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/matrix-report-e2e-", name, "-",
                                       getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(MatrixReportE2eTest, TornLinesAreSkippedWithOneWarningPerFileAndTheRestIsRead) {
  // A copy of the fixture's newest file (6 issues, the last a block with 26
  // samples), as a killed writer and its successor leave it: the block torn
  // half way with the next run's first issue glued on, more issues after it,
  // and a torn last line.
  std::vector<std::string> lines;
  {
    std::ifstream in(kReports + "/issues.jsonl");
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), 6u);
  const std::string block = lines[5];
  ASSERT_THAT(block, StartsWith("{\"tag\":\"BlockCanary\""));
  const std::string torn = block.substr(0, block.size() / 2);
  const std::string dir = ScratchDir("torn");
  {
    std::ofstream out(dir + "/issues.jsonl", std::ios::binary);
    for (size_t i = 0; i < 5; ++i) out << lines[i] << "\n";
    out << torn << lines[0] << "\n" << lines[1] << "\n" << lines[2] << "\n" << torn;
  }
  const Result r = RunBinary({"--utc", dir});
  EXPECT_EQ(r.code, 0) << r.err;
  // 5 + the glued one + 2 after it.
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("issues       8 (1 file: ", dir, "/issues.jsonl)\n")));
  EXPECT_THAT(r.out, HasSubstr("lines        9 read, 2 malformed (skipped; see stderr)\n"));
  EXPECT_THAT(r.err, StartsWith(absl::StrCat("matrix-report: ", dir,
                                             "/issues.jsonl: skipped 2 malformed lines, the first "
                                             "at line 6: not a JSON issue: ")));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  std::filesystem::remove_all(dir);
}

// `show` output without the lines that differ between a block's JSON issue
// and its text file: the report time, the device (read at report time) and
// the source.
std::string BlockView(const std::string& show) {
  std::string kept;
  std::istringstream in(show);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("time ", 0) == 0 || line.rfind("device ", 0) == 0 ||
        line.rfind("source ", 0) == 0) {
      continue;
    }
    kept += line + "\n";
  }
  return kept;
}

TEST(MatrixReportE2eTest, BlockCanaryTextFilesReadAsTheirBlockCanaryIssues) {
  // The demo writes each block twice: as a BlockCanary issue in
  // matrix-reports/issues.jsonl and as BlockCanary's text file in
  // matrix-reports/blockcanary/.
  const Result text = RunBinary({"show", "--utc", "./matrix-reports/blockcanary"}, kDemoDir);
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(text.err, "");
  EXPECT_THAT(text.out, StartsWith("== BlockCanary ="));
  EXPECT_THAT(text.out, HasSubstr("source       ./matrix-reports/blockcanary/looper-"));
  const Result json =
      RunBinary({"show", "--utc", "--tag=BlockCanary", "./matrix-reports"}, kDemoDir);
  EXPECT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(BlockView(text.out), BlockView(json.out));
  EXPECT_THAT(text.out, Not(HasSubstr("uid uid")));

  // A single file, and group and summary on the directory.
  const std::string file =
      std::filesystem::directory_iterator(kDemoDir + "/matrix-reports/blockcanary")->path();
  const Result one = RunBinary({"group", "--utc", file});
  EXPECT_EQ(one.code, 0) << one.err;
  EXPECT_THAT(one.out, StartsWith("1 group of 1 issue"));
  EXPECT_THAT(one.out, HasSubstr("BlockCanary  x1\n"));
  const Result summary = RunBinary({"--utc", "./matrix-reports/blockcanary"}, kDemoDir);
  EXPECT_EQ(summary.code, 0) << summary.err;
  EXPECT_THAT(summary.out, ContainsRegex("BlockCanary +[0-9]+ +[0-9]+ +[0-9.]+ ms"));
}

}  // namespace

// matrix-report's memory does not grow with its input: the built binary runs
// `summary`, `group` and `export` on a ~128 MB issue file as a child process,
// and its peak RSS (wait4's ru_maxrss) must stay far below the file's size.
// The file holds ANRs, slow methods, FPS reports and BlockCanary blocks over
// 76 keys, in time order as the sink writes them; each command's output must
// count them all.
//
// Label `slow`: the file is written in a fraction of a second, but each run
// parses it all, `export` twice (12 to 45 s per run on a shared 2-core
// machine, about 2 min in all). docs/performance.md quotes the numbers it
// prints.

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report_test_util.h"

extern char** environ;

namespace matrix::report {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using test_util::kBaseTimeMs;

// MATRIX_REPORT_MEMORY_TEST_BINARY runs another build instead (to measure an
// older one for docs/performance.md).
const std::string kBinary = std::getenv("MATRIX_REPORT_MEMORY_TEST_BINARY") != nullptr
                                ? std::getenv("MATRIX_REPORT_MEMORY_TEST_BINARY")
                                : MATRIX_REPORT_BINARY;

// The file's size, and the bound on the tool's peak RSS: a quarter of the
// file (the loading reader needed more than the file's size).
constexpr int64_t kFileBytes = int64_t{128} << 20;  // Half the 256 MiB measured in docs/performance.md: CI time.
constexpr int64_t kMaxRssBytes = int64_t{64} << 20;

// Keys per kind: the groups are 37 ANR + 23 slow methods + 5 FPS scenes + 11
// blocks.
constexpr int kAnrKeys = 37;
constexpr int kSlowKeys = 23;
constexpr int kScenes = 5;
constexpr int kBlockKeys = 11;
constexpr int kGroups = kAnrKeys + kSlowKeys + kScenes + kBlockKeys;

// Placeholders in the template lines, replaced per issue.
constexpr char kKeyMark[] = "KEYMARK";
constexpr int64_t kTimeMark = 1111111111111;  // 13 digits, as every time here.

// One serialized issue split at its placeholders: pieces[0], value,
// pieces[1], value, ... The values are the key or the time, in `marks`.
struct Template {
  std::vector<std::string> pieces;
  std::vector<bool> marks_time;  // Per gap: true for the time, false for the key.
};

Template Split(const std::string& line) {
  Template t;
  const std::string time_mark = absl::StrCat(kTimeMark);
  size_t start = 0;
  while (true) {
    const size_t key_at = line.find(kKeyMark, start);
    const size_t time_at = line.find(time_mark, start);
    const size_t at = std::min(key_at, time_at);
    if (at == std::string::npos) break;
    t.pieces.push_back(line.substr(start, at - start));
    t.marks_time.push_back(at == time_at);
    start = at + (at == time_at ? time_mark.size() : std::string(kKeyMark).size());
  }
  t.pieces.push_back(line.substr(start));
  return t;
}

void Append(std::string& out, const Template& t, absl::string_view key, int64_t time_ms) {
  for (size_t i = 0; i < t.marks_time.size(); ++i) {
    out += t.pieces[i];
    if (t.marks_time[i]) {
      absl::StrAppend(&out, time_ms);
    } else {
      out.append(key.data(), key.size());
    }
  }
  out += t.pieces.back();
  out += '\n';
}

struct Written {
  int64_t issues = 0;
  int64_t anr = 0;
  int64_t slow = 0;
  int64_t fps = 0;
  int64_t blocks = 0;
  int64_t bytes = 0;
};

// Writes issues round-robin over the four kinds, 10 ms apart, until the file
// holds `bytes`.
Written WriteIssues(const std::string& path, int64_t bytes) {
  const std::string mark = kKeyMark;
  const Template anr = Split(
      test_util::Line(test_util::AnrIssue(mark, proto::ANR, 5000, kTimeMark)));
  const Template slow = Split(test_util::Line(test_util::EvilMethodIssue(mark, 820, kTimeMark)));
  const Template fps = Split(test_util::Line(test_util::FrameIssue(mark, 50, kTimeMark)));
  const Template block = Split(test_util::Line(test_util::BlockIssue(mark, 2603, kTimeMark)));
  Written w;
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  std::string chunk;
  while (w.bytes < bytes) {
    chunk.clear();
    while (chunk.size() < (size_t{1} << 20)) {
      const int64_t i = w.issues++;
      const int64_t time_ms = kBaseTimeMs + i * 10;
      switch (i % 4) {
        case 0:
          Append(chunk, anr, absl::StrCat("app::Decode", i % kAnrKeys, "()"), time_ms);
          ++w.anr;
          break;
        case 1:
          Append(chunk, slow, absl::StrCat("app::Layout", i % kSlowKeys, "()"), time_ms);
          ++w.slow;
          break;
        case 2:
          Append(chunk, fps, absl::StrCat("Scene", i % kScenes), time_ms);
          ++w.fps;
          break;
        default:
          Append(chunk, block, absl::StrCat("app::Read", i % kBlockKeys, "()"), time_ms);
          ++w.blocks;
          break;
      }
    }
    file << chunk;
    w.bytes += static_cast<int64_t>(chunk.size());
  }
  file.close();
  EXPECT_TRUE(file) << "cannot write " << path;
  return w;
}

struct RunResult {
  int code = -1;
  int64_t max_rss_bytes = 0;
  double seconds = 0;
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Runs the binary with `args` (TZ=UTC), its stdout and stderr to files in
// `dir`, and measures its peak RSS.
RunResult RunBinary(const std::vector<std::string>& args, const std::string& dir) {
  const std::string out_path = dir + "/run.out";
  const std::string err_path = dir + "/run.err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
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
  RunResult run;
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, kBinary.c_str(), &actions, nullptr, argv.data(),
                                  envp.data());
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(spawned, 0) << kBinary;
  if (spawned != 0) return run;
  int status = 0;
  struct rusage usage {};
  EXPECT_EQ(wait4(pid, &status, 0, &usage), pid);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.max_rss_bytes = int64_t{usage.ru_maxrss} * 1024;  // Linux: KiB.
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return run;
}

int64_t CountLines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  int64_t lines = 0;
  std::string line;
  while (std::getline(in, line)) ++lines;
  return lines;
}

// Runs the binary on `file` and checks its exit status and peak RSS.
RunResult RunOnFile(std::vector<std::string> args, const std::string& file,
                    const std::string& dir) {
  args.push_back(file);
  RunResult run = RunBinary(args, dir);
  EXPECT_EQ(run.code, 0) << run.err;
  std::printf("%s: peak RSS %.1f MB, %.1f s\n", absl::StrJoin(args, " ").c_str(),
              static_cast<double>(run.max_rss_bytes) / (1 << 20), run.seconds);
  EXPECT_LT(run.max_rss_bytes, kMaxRssBytes) << absl::StrJoin(args, " ");
  return run;
}

// One test, not one per command: the file is written once (gtest cases are
// separate ctest tests, each its own process).
TEST(MatrixReportMemoryTest, SummaryGroupAndExportStayUnder64MbOnA128MbFile) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                       "/matrix-report-memory-", getpid());
  std::filesystem::create_directories(dir);
  struct statvfs fs {};
  ASSERT_EQ(statvfs(dir.c_str(), &fs), 0);
  // The issue file, its CSV export (far smaller) and room to spare.
  ASSERT_GT(static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize), 2 * kFileBytes)
      << "not enough free space in " << dir;
  const std::string file = dir + "/issues.jsonl";
  const auto start = std::chrono::steady_clock::now();
  const Written w = WriteIssues(file, kFileBytes);
  std::printf("wrote %lld issues, %lld bytes, in %.1f s\n", static_cast<long long>(w.issues),
              static_cast<long long>(w.bytes),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

  {
    SCOPED_TRACE("summary");
    const RunResult run = RunOnFile({"summary", "--utc"}, file, dir);
    EXPECT_THAT(run.out, HasSubstr(absl::StrCat("issues       ", w.issues, " (1 file")));
    EXPECT_THAT(run.out,
                HasSubstr(absl::StrCat("lines        ", w.issues, " read, 0 malformed\n")));
    EXPECT_THAT(run.out, ContainsRegex(absl::StrCat("Trace_EvilMethod/ANR +", w.anr, " +",
                                                    kAnrKeys, " +5000.0 ms +5000.0 ms\n")));
    EXPECT_THAT(run.out,
                ContainsRegex(absl::StrCat("Trace_EvilMethod/NORMAL +", w.slow, " +", kSlowKeys,
                                               " +820.0 ms +820.0 ms\n")));
    EXPECT_THAT(run.out, ContainsRegex(absl::StrCat("Trace_FPS +", w.fps, " +", kScenes,
                                                    " +50.0 fps +50.0 fps\n")));
    EXPECT_THAT(run.out,
                ContainsRegex(absl::StrCat("BlockCanary +", w.blocks, " +", kBlockKeys, " ")));
  }
  {
    SCOPED_TRACE("group");
    const RunResult run = RunOnFile({"group", "--utc"}, file, dir);
    EXPECT_THAT(run.out, HasSubstr(absl::StrCat(kGroups, " groups of ", w.issues, " issues")));
    // The most frequent group: a scene, with a fifth of the FPS reports.
    const int64_t top = (w.fps + kScenes - 1) / kScenes;
    EXPECT_THAT(run.out, HasSubstr(absl::StrCat("#1  Trace_FPS  x", top, "\n")));
  }
  {
    SCOPED_TRACE("export csv");
    const std::string csv = dir + "/issues.csv";
    const RunResult run = RunOnFile({"export", "--format=csv", "-o", csv}, file, dir);
    EXPECT_THAT(run.err, HasSubstr(absl::StrCat("wrote ", w.issues, " issues to")));
    EXPECT_EQ(CountLines(csv), w.issues + 1);  // And the header.
    std::filesystem::remove(csv);
  }
  {
    SCOPED_TRACE("export jsonl");
    const RunResult run = RunOnFile({"export", "--format=jsonl", "-o", "/dev/null"}, file, dir);
    EXPECT_THAT(run.err, HasSubstr(absl::StrCat("wrote ", w.issues, " issues to")));
  }
  {
    SCOPED_TRACE("export grouped");
    const RunResult run = RunOnFile({"export", "--grouped", "--format=csv"}, file, dir);
    EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), kGroups + 1);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace matrix::report

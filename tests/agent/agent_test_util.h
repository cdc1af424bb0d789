// Shared by matrix-run's tests: run a command with its output captured, and
// read the issues of one run with matrix-report's reader.

#ifndef MATRIX_TESTS_AGENT_AGENT_TEST_UTIL_H_
#define MATRIX_TESTS_AGENT_AGENT_TEST_UTIL_H_

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "matrix/report/issue_reader.h"

namespace agent_test {

struct RunResult {
  int status = -1;  // As from waitpid.
  std::string out;
  std::string err;
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `args` (args[0] is a path) with `env` added ("NAME=value"), waits.
inline RunResult Run(const std::vector<std::string>& args,
                     const std::vector<std::string>& env = {}) {
  char dir_template[] = "/tmp/matrix-agent-run-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string out_path = dir + "/out", err_path = dir + "/err";
  RunResult result;
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(err, 2);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  waitpid(pid, &result.status, 0);
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  std::filesystem::remove_all(dir);
  return result;
}

// A fresh report directory under the test's temporary directory.
inline std::string NewReportDir(const std::string& name) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::filesystem::path dir = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") /
                              ("matrix-run-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

// Every issue in `dir` (empty when it does not exist), in the order they
// were reported: each kind has its own file, so file order is not time order.
inline std::vector<matrix::report::IssueRecord> ReadIssues(const std::string& dir) {
  if (!std::filesystem::exists(dir)) return {};
  std::vector<matrix::report::IssueRecord> records =
      matrix::report::ReadIssueInputs({dir}, nullptr).records;
  std::stable_sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
    return a.time_ms() < b.time_ms();
  });
  return records;
}

// The frame rate the FPS reports among `records` give over wall time: the
// frames of every report after the first, over the time from the first
// report to the last (frames up to the first report are before the span).
struct ReportedFrameRate {
  int reports = 0;
  int64_t frames = 0;
  int64_t first_ms = 0;
  int64_t last_ms = 0;
  double per_second() const {
    return last_ms > first_ms ? static_cast<double>(frames) * 1000.0 /
                                    static_cast<double>(last_ms - first_ms)
                              : 0;
  }
};
inline ReportedFrameRate FrameRateOf(const std::vector<matrix::report::IssueRecord>& records) {
  ReportedFrameRate r;
  for (const auto& record : records) {
    if (record.kind != "frame") continue;
    if (++r.reports == 1) {
      r.first_ms = record.time_ms();
      continue;
    }
    r.frames += record.issue.frame().frames();
    r.last_ms = record.time_ms();
  }
  return r;
}

inline std::string StackText(const matrix::report::IssueRecord& record) {
  std::string text;
  for (const auto& frame : record.issue.anr().thread_stack().frames()) {
    text += frame.function() + "\n";
  }
  return text;
}

}  // namespace agent_test

#endif  // MATRIX_TESTS_AGENT_AGENT_TEST_UTIL_H_

// SIGQUIT dumps of a real, hung process: signal_anr_child (a program with
// Matrix, a TracePlugin with the SignalAnrTracer on and a JSON-lines sink)
// hangs its main looper in e2e::HangInUninstrumentedCode; the test sends it
// SIGQUIT and reads the SIGNAL_ANR issue from the file.

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "matrix/proto/issue.pb.h"

#ifndef MATRIX_SIGNAL_ANR_CHILD
#error "MATRIX_SIGNAL_ANR_CHILD must name the signal_anr_child executable"
#endif

namespace {

constexpr absl::Duration kTimeout = absl::Seconds(30);
// Debian's Abseil puts Duration in an inline namespace (absl::debian3::).
constexpr char kHungFunction[] = "e2e::HangInUninstrumentedCode(absl::";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Polls `predicate` every 20 ms (real time) until it holds or `timeout` passes.
template <typename Predicate>
bool WaitUntil(Predicate predicate, absl::Duration timeout = kTimeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!predicate()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// The child process, killed (SIGKILL) and reaped on destruction.
class Child {
 public:
  Child(const std::string& dir, bool own_handler) : dir_(dir) {
    pid_ = fork();
    if (pid_ == 0) {
      // The child's stderr goes to a file the test checks for sanitizer reports.
      const int fd = open((dir + "/stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) dup2(fd, STDERR_FILENO);
      std::vector<const char*> args = {MATRIX_SIGNAL_ANR_CHILD, dir.c_str()};
      if (own_handler) args.push_back("--own-handler");
      args.push_back(nullptr);
      execv(args[0], const_cast<char* const*>(args.data()));
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signo) { ASSERT_EQ(kill(pid_, signo), 0) << errno; }
  // Running, not exited or killed.
  bool Alive() {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      exit_status_ = status;
    }
    return r == 0;
  }
  std::string DescribeExit() const {
    if (!reaped_) return "running";
    if (WIFEXITED(exit_status_)) return "exited with " + std::to_string(WEXITSTATUS(exit_status_));
    if (WIFSIGNALED(exit_status_)) return "killed by signal " + std::to_string(WTERMSIG(exit_status_));
    return "status " + std::to_string(exit_status_);
  }
  std::string Stderr() const { return ReadFile(dir_ + "/stderr"); }

 private:
  const std::string dir_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_status_ = 0;
};

std::vector<matrix::proto::Issue> ReadIssues(const std::string& path) {
  std::vector<matrix::proto::Issue> issues;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    matrix::proto::Issue issue;
    if (google::protobuf::util::JsonStringToMessage(std::string(line), &issue).ok()) {
      issues.push_back(std::move(issue));
    }
  }
  return issues;
}

std::vector<matrix::proto::Issue> SignalAnrIssues(const std::string& dir) {
  std::vector<matrix::proto::Issue> out;
  for (matrix::proto::Issue& issue : ReadIssues(dir + "/issues.jsonl")) {
    if (issue.has_anr() && issue.anr().detail() == matrix::proto::SIGNAL_ANR) {
      out.push_back(std::move(issue));
    }
  }
  return out;
}

bool Names(const matrix::proto::ThreadStack& stack, const std::string& function) {
  for (const auto& frame : stack.frames()) {
    if (absl::StrContains(frame.function(), function)) return true;
  }
  return false;
}

std::string Describe(const matrix::proto::ThreadStack& stack) {
  std::string text = "tid " + std::to_string(stack.tid()) + " " + stack.thread_name() + " " +
                     stack.error() + "\n";
  for (const auto& frame : stack.frames()) text += "  " + frame.function() + "\n";
  return text;
}

class SignalAnrE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/signal-anr-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << errno;
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // No sanitizer report in the child (TSan reports do not stop it).
  static void ExpectCleanStderr(const Child& child) {
    const std::string err = child.Stderr();
    EXPECT_FALSE(absl::StrContains(err, "ThreadSanitizer")) << err;
    EXPECT_FALSE(absl::StrContains(err, "AddressSanitizer")) << err;
    EXPECT_FALSE(absl::StrContains(err, "runtime error")) << err;
  }

  std::string dir_;
};

TEST_F(SignalAnrE2ETest, SigquitToAHungProcess_DumpsTheHungFunctionAndConfirmsTheHang) {
  Child child(dir_, /*own_handler=*/false);
  ASSERT_TRUE(WaitUntil([&] { return Exists(dir_ + "/ready"); }))
      << child.DescribeExit() << child.Stderr();
  // Let the running dispatch become overdue by more than 2 s.
  absl::SleepFor(absl::Seconds(3));
  child.Signal(SIGQUIT);
  ASSERT_TRUE(WaitUntil([&] { return !SignalAnrIssues(dir_).empty(); }))
      << child.DescribeExit() << child.Stderr();

  // SIGQUIT's default action (quit and dump core) did not run.
  EXPECT_TRUE(child.Alive()) << child.DescribeExit();
  const std::vector<matrix::proto::Issue> issues = SignalAnrIssues(dir_);
  ASSERT_EQ(issues.size(), 1u);
  const matrix::proto::Issue& issue = issues[0];
  EXPECT_EQ(issue.tag(), "Trace_EvilMethod");
  EXPECT_EQ(issue.pid(), child.pid());
  const matrix::proto::AnrReport& anr = issue.anr();
  EXPECT_EQ(anr.signal(), SIGQUIT);
  EXPECT_TRUE(anr.confirmed_hang());
  EXPECT_GT(anr.cost_ms(), 2000);  // The running dispatch, at the dump.
  EXPECT_LT(anr.cost_ms(), 60000);

  // The looper thread's stack names the function it hangs in...
  EXPECT_TRUE(Names(anr.thread_stack(), kHungFunction)) << Describe(anr.thread_stack());
  // Captured after the SIGQUIT handler returned, not inside it.
  EXPECT_FALSE(Names(anr.thread_stack(), "OnSignal")) << Describe(anr.thread_stack());
  EXPECT_EQ(anr.thread_stack().tid(), child.pid());  // The main thread.
  EXPECT_TRUE(absl::StrContains(anr.stack_key(), "HangInUninstrumentedCode")) << anr.stack_key();
  EXPECT_EQ(issue.key(), anr.stack_key());
  // ...and so does the looper thread among all threads, next to Matrix's own.
  bool looper_in_all = false;
  bool has_worker = false;
  std::string all;
  for (const auto& thread : anr.all_threads()) {
    all += Describe(thread);
    if (thread.tid() == anr.thread_stack().tid()) looper_in_all = Names(thread, kHungFunction);
    has_worker |= thread.thread_name() == "matrix-worker";
  }
  EXPECT_TRUE(looper_in_all) << all;
  EXPECT_TRUE(has_worker) << all;
  EXPECT_GE(anr.all_threads_size(), 3) << all;

  ExpectCleanStderr(child);
}

TEST_F(SignalAnrE2ETest, EarlierHandler_StillRuns_AndIsRestoredWhenTheTracerStops) {
  Child child(dir_, /*own_handler=*/true);
  ASSERT_TRUE(WaitUntil([&] { return Exists(dir_ + "/ready"); }))
      << child.DescribeExit() << child.Stderr();
  child.Signal(SIGQUIT);
  // Both the dump and the program's own handler.
  ASSERT_TRUE(WaitUntil([&] { return !SignalAnrIssues(dir_).empty(); }))
      << child.DescribeExit() << child.Stderr();
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(dir_ + "/own_handler") == "sigquit\n"; }))
      << ReadFile(dir_ + "/own_handler");
  const std::vector<matrix::proto::Issue> issues = SignalAnrIssues(dir_);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_TRUE(Names(issues[0].anr().thread_stack(), "WaitForRelease"))
      << Describe(issues[0].anr().thread_stack());

  // Stop the tracer (inside the child, on its looper thread): its handler
  // goes and the program's own is back.
  { std::ofstream(dir_ + "/release") << "go\n"; }
  ASSERT_TRUE(WaitUntil([&] { return Exists(dir_ + "/stopped"); }))
      << child.DescribeExit() << child.Stderr();
  EXPECT_EQ(ReadFile(dir_ + "/stopped"), "restored\n");

  // A second SIGQUIT reaches only the program's handler: no new dump.
  child.Signal(SIGQUIT);
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(dir_ + "/own_handler") == "sigquit\nsigquit\n"; }))
      << ReadFile(dir_ + "/own_handler");
  absl::SleepFor(absl::Seconds(1));  // Time for a dump that should not come.
  EXPECT_EQ(SignalAnrIssues(dir_).size(), 1u);
  EXPECT_TRUE(child.Alive()) << child.DescribeExit();

  ExpectCleanStderr(child);
}

}  // namespace

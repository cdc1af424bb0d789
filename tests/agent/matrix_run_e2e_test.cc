// matrix-run on agent_target (a poll-loop program not linked to matrix-cpp):
// ANR with the main thread's native stack, and the agent's safety rules
// (fork without exec, exec of another program, the program's own SIGQUIT and
// SIGPROF handlers, threads started before main, no blocking wait at all,
// bad flags). Real processes and real time: the stalls (1200 ms) are 3x the
// ANR threshold (400 ms).

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent_test_util.h"
#include "cpu_quota_cgroup.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using agent_test::ReadIssues;

using agent_test::RunResult;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kRun[] = MATRIX_RUN_PATH;
constexpr char kTarget[] = AGENT_TARGET_PATH;

std::vector<std::string> MatrixRun(const std::string& dir, std::vector<std::string> program,
                                   std::vector<std::string> flags = {}) {
  std::vector<std::string> args = {kRun, "--report-dir", dir, "--anr", "400", "--lag", "300"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back("--");
  args.push_back(kTarget);
  args.insert(args.end(), program.begin(), program.end());
  return args;
}

// The ANR issues of process `pid` (0: any).
std::vector<matrix::report::IssueRecord> Anrs(const std::string& dir, int pid = 0) {
  std::vector<matrix::report::IssueRecord> anrs;
  for (auto& record : ReadIssues(dir)) {
    if (record.kind == "anr" && record.detail == "ANR" && (pid == 0 || record.pid() == pid)) {
      anrs.push_back(std::move(record));
    }
  }
  return anrs;
}

// The pids the agent logged a line for ("matrix-agent: agent_target (pid N): ...").
std::vector<int> LoggedPids(const std::string& err) {
  std::vector<int> pids;
  for (absl::string_view line : absl::StrSplit(err, '\n')) {
    const size_t at = line.find("(pid ");
    if (!absl::StartsWith(line, "matrix-agent:") || at == line.npos) continue;
    pids.push_back(std::atoi(std::string(line.substr(at + 5)).c_str()));
  }
  return pids;
}

TEST(MatrixRunTest, AnrStackNamesTheStallingFunction) {
  const std::string dir = agent_test::NewReportDir("stall");
  const RunResult run = agent_test::Run(MatrixRun(dir, {"stall", "1200"}));
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  const auto anrs = Anrs(dir);
  ASSERT_EQ(anrs.size(), 1u) << run.err;
  EXPECT_THAT(agent_test::StackText(anrs[0]), HasSubstr("StallInKnownFunction"));
  EXPECT_THAT(agent_test::StackText(anrs[0]), HasSubstr("main"));
  EXPECT_EQ(anrs[0].issue.anr().thread_stack().tid(), anrs[0].pid());  // The main thread.
  // The busy stretch between two waits is named as work, not as a wait.
  EXPECT_EQ(anrs[0].issue.anr().message().callback(), "matrix-run:dispatch");
  // The launcher's summary names the file and counts the ANR.
  EXPECT_THAT(run.err, HasSubstr(absl::StrCat(dir, "/agent_target-")));
  EXPECT_THAT(run.err, HasSubstr("Trace_EvilMethod/ANR"));
}

// A slow dispatch (no LAG or ANR: 5 s) carries the main thread's stack at the
// crossing of the 300 ms threshold and samples until its end, and is keyed
// by the stalling function; --no-slow-stacks turns the sampling off.
TEST(MatrixRunTest, SlowDispatchCarriesTheStallingFunctionsStack) {
  for (const bool stacks : {true, false}) {
    SCOPED_TRACE(stacks ? "sampled" : "--no-slow-stacks");
    const std::string dir = agent_test::NewReportDir("slow-stack");
    std::vector<std::string> args = {kRun, "--report-dir", dir, "--anr", "5000", "--lag",
                                     "4000", "--evil", "300"};
    if (!stacks) args.push_back("--no-slow-stacks");
    args.insert(args.end(), {"--", kTarget, "stall", "1200"});
    const RunResult run = agent_test::Run(args);
    ASSERT_EQ(run.exit_code(), 0) << run.err;
    std::vector<matrix::report::IssueRecord> slow;
    for (auto& record : ReadIssues(dir)) {
      if (record.kind == "evil_method") slow.push_back(std::move(record));
    }
    ASSERT_EQ(slow.size(), 1u) << run.err;
    const auto& report = slow[0].issue.evil_method();
    EXPECT_GE(report.cost_ms(), 1190) << run.err;
    if (!stacks) {
      EXPECT_EQ(report.thread_stack().frames_size(), 0);
      EXPECT_EQ(report.sample_count(), 0);
      EXPECT_EQ(report.stack_key(), "dispatch");
      continue;
    }
    std::string frames;
    for (const auto& frame : report.thread_stack().frames()) frames += frame.function() + "\n";
    EXPECT_THAT(frames, HasSubstr("StallInKnownFunction")) << frames;
    EXPECT_EQ(report.thread_stack().tid(), slow[0].pid());  // The main thread.
    EXPECT_THAT(report.stack_key(), HasSubstr("StallInKnownFunction"));
    EXPECT_EQ(slow[0].issue.key(), report.stack_key());
    // The crossing at 300 ms (generous margins for a loaded machine), then
    // samples every 50 ms over the remaining 900 ms.
    EXPECT_GE(report.thread_stack().captured_at_ms(), 299);
    EXPECT_LE(report.thread_stack().captured_at_ms(), 800);
    EXPECT_GE(report.sample_count(), 5);
    EXPECT_THAT(report.stack_text(), HasSubstr("StallInKnownFunction")) << report.stack_text();
  }
}


// A busy 6 s hang in a process limited to 10 % of a CPU is an ANR: the
// watchdog wakes late because the whole cgroup is throttled, and the
// cgroup's throttled time says that was a wait to run, not a stop.
TEST(MatrixRunTest, BusyHangUnderACpuQuota_IsAnAnr) {
  CpuQuotaCgroup cgroup(10);
  if (cgroup.procs.empty()) GTEST_SKIP() << cgroup.why;
  // A process may be moved into it (cgroup v2 delegation rules allowing).
  const RunResult probe =
      agent_test::Run({"/bin/sh", "-c", absl::StrCat("echo $$ > ", cgroup.procs)});
  if (probe.exit_code() != 0) {
    GTEST_SKIP() << "cannot move a process into " << cgroup.dir << ": " << probe.err;
  }
  const std::string dir = agent_test::NewReportDir("quota");
  const std::string command = absl::StrCat(
      "echo $$ > ", cgroup.procs, " && exec ", kRun, " --report-dir ", dir,
      " --anr 5000 --lag 4000 -- ", kTarget, " stall 6000");
  const RunResult run = agent_test::Run({"/bin/sh", "-c", command});
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  const auto anrs = Anrs(dir);
  ASSERT_EQ(anrs.size(), 1u) << run.err;
  const auto& anr = anrs[0].issue.anr();
  EXPECT_THAT(agent_test::StackText(anrs[0]), HasSubstr("StallInKnownFunction"));
  EXPECT_GE(anr.cost_ms(), 4900);
  EXPECT_GT(anr.throttled_ms(), 1000) << "the quota throttled the hang";
  EXPECT_LT(anr.stopped_ms(), 500);
}

// A SIGSTOP of 4 s in the middle of a busy dispatch is no hang: no LAG
// (2.5 s) or ANR, and the slow dispatch's cost (300 ms threshold) leaves the
// stop out. (The stall ends by the wall clock: it runs about 0.5 s before the
// stop and ends at the continue.)
TEST(MatrixRunTest, ASigstopIsNoHang) {
  const std::string dir = agent_test::NewReportDir("sigstop");
  const std::string command = absl::StrCat(
      kRun, " --report-dir ", dir, " --anr 3000 --lag 2500 --evil 300 -- ", kTarget,
      " stall 2000 & run=$!; sleep 0.8; target=$(cat /proc/$run/task/$run/children); "
      "kill -STOP $target; sleep 4; kill -CONT $target; wait $run");
  const RunResult run = agent_test::Run({"/bin/sh", "-c", command});
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  std::vector<std::string> kinds;
  for (const auto& record : ReadIssues(dir)) {
    if (record.kind == "startup") continue;
    kinds.push_back(record.TagDetail());
    if (record.kind != "evil_method") continue;
    EXPECT_GE(record.issue.evil_method().stopped_ms(), 3500) << run.err;
    EXPECT_LT(record.issue.evil_method().cost_ms(), 2000) << run.err;
  }
  EXPECT_THAT(kinds, ::testing::ElementsAre("Trace_EvilMethod/NORMAL")) << run.err;
}

// The cold start of a program that does not draw lasts from process start to
// its first blocking wait: agent_target sleeps 800 ms before its first poll.
// Tolerance: process start is read in clock ticks (10 ms) and the launch
// (fork, exec, loading the agent) adds well under a second.
TEST(MatrixRunTest, StartupEndsAtTheFirstBlockingWait) {
  const std::string dir = agent_test::NewReportDir("startup");
  const RunResult run = agent_test::Run(MatrixRun(dir, {"startup", "800"}));
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  std::vector<matrix::report::IssueRecord> startups;
  for (auto& record : ReadIssues(dir)) {
    if (record.kind == "startup") startups.push_back(std::move(record));
  }
  ASSERT_EQ(startups.size(), 1u) << run.err;
  const auto& report = startups[0].issue.startup();
  EXPECT_FALSE(report.is_warm_start_up());
  EXPECT_EQ(report.first_scene(), "agent_target");
  EXPECT_GE(report.startup_duration_ms(), 790);
  EXPECT_LE(report.startup_duration_ms(), 1800);
}

TEST(MatrixRunTest, ExitStatusAndSignalArePropagated) {
  const std::string dir = agent_test::NewReportDir("status");
  EXPECT_EQ(agent_test::Run(MatrixRun(dir, {"bogus-mode"})).exit_code(), 2);
  const RunResult killed = agent_test::Run({kRun, "--report-dir", dir, "--", "/bin/sh", "-c", "kill -TERM $$"});
  ASSERT_TRUE(WIFSIGNALED(killed.status)) << killed.err;
  EXPECT_EQ(WTERMSIG(killed.status), SIGTERM);
}

// The last slow dispatch before the program ends is reported, however it
// ends: exit(), _exit(), exec, or a termination signal left at its default
// action; whether the dispatch ended just before (a 1 ms poll) or is the one
// running when the program ends. Slow-method threshold 300 ms, no LAG or
// ANR (5 s) for the 700 ms dispatch.
class LastDispatchTest : public testing::TestWithParam<std::string> {};

TEST_P(LastDispatchTest, LastSlowDispatchIsReported) {
  const std::string dir = agent_test::NewReportDir("last");
  const RunResult run = agent_test::Run(
      {kRun, "--report-dir", dir, "--anr", "5000", "--lag", "4000", "--evil", "300", "--",
       kTarget, "last", "700", GetParam()});
  if (absl::EndsWith(GetParam(), "sigterm")) {
    ASSERT_TRUE(WIFSIGNALED(run.status)) << run.err;
    EXPECT_EQ(WTERMSIG(run.status), SIGTERM);
  } else {
    ASSERT_EQ(run.exit_code(), 0) << run.err;
  }
  std::vector<matrix::report::IssueRecord> slow;
  for (auto& record : ReadIssues(dir)) {
    if (record.kind == "evil_method") slow.push_back(std::move(record));
  }
  ASSERT_EQ(slow.size(), 1u) << run.err;
  EXPECT_GE(slow[0].issue.evil_method().cost_ms(), 690) << run.err;
  EXPECT_LE(slow[0].issue.evil_method().cost_ms(), 3000) << run.err;
}

INSTANTIATE_TEST_SUITE_P(Ends, LastDispatchTest,
                         testing::Values("exit", "_exit", "exec", "sigterm", "inside-exit",
                                         "inside-_exit", "inside-exec", "inside-sigterm"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// One end may come as several signals: timeout(1) signals matrix-run (which
// forwards what is sent to it) and then the whole process group.
// SIGINTs sent to the program and to matrix-run as fast as four shells can,
// from 1.5 s into a busy dispatch (slow-method threshold 300 ms) until the
// program is gone, all on one CPU (the drain thread shares it with the
// shells, as on a loaded machine): the first signal drains (the exit line,
// and the dispatch in progress reported), the others wait for it; the
// program dies of SIGINT.
TEST(MatrixRunTest, RepeatedSignalsWaitForTheDrain) {
  const std::string dir = agent_test::NewReportDir("repeated-signals");
  const std::string out = dir + ".out";
  const std::string command =
      absl::StrCat(kRun, " --report-dir ", dir, " --anr 60000 --lag 50000 --evil 300 -- ", kTarget,
                   " hold 30000 > ", out, " & run=$!; until grep -q stalling ", out,
                   " 2>/dev/null; do kill -0 $run || exit 99; sleep 0.05; done; sleep 1.5; "
                   "target=$(cat /proc/$run/task/$run/children); "
                   "signal() { while kill -INT $target $run 2>/dev/null; do :; done; }; "
                   "signal & signal & signal & signal; wait $run");
  // The run inherits this thread's CPU: the first allowed one alone.
  cpu_set_t allowed, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const RunResult run = agent_test::Run({"/bin/sh", "-c", command});
  ASSERT_EQ(sched_setaffinity(0, sizeof(allowed), &allowed), 0);
  std::filesystem::remove(out);
  EXPECT_EQ(run.exit_code(), 128 + SIGINT) << run.err;
  EXPECT_THAT(run.err, HasSubstr("reports in " + dir)) << "the agent's exit line";
  EXPECT_THAT(run.err, HasSubstr("(at a termination signal)"));
  EXPECT_THAT(run.err, HasSubstr("agent_target killed by signal 2"));
  std::vector<matrix::report::IssueRecord> slow;
  for (auto& record : ReadIssues(dir)) {
    if (record.kind == "evil_method") slow.push_back(std::move(record));
  }
  ASSERT_EQ(slow.size(), 1u) << run.err;
  EXPECT_GE(slow[0].issue.evil_method().cost_ms(), 1490) << run.err;
  EXPECT_THAT(slow[0].issue.evil_method().stack_key(), HasSubstr("StallInKnownFunction"));
}

// The tid of the thread named `name` in process `pid`, or 0.
pid_t ThreadNamed(pid_t pid, const std::string& name) {
  std::error_code error;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), error)) {
    std::string comm = agent_test::ReadFile(task.path().string() + "/comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    if (comm == name) return std::atoi(task.path().filename().c_str());
  }
  return 0;
}

// The kernel gives a process's signal to another thread when the main
// thread has one pending already (a stack sample's, every 50 ms during a
// slow dispatch). A SIGINT sent to the matrix worker thread itself, 1.5 s
// into a busy dispatch: the main thread takes it over, so its dispatch in
// progress is ended and reported, and the exit line is the main thread's.
TEST(MatrixRunTest, ASignalOnAMatrixThreadIsTakenOverByTheMainThread) {
  const std::string dir = agent_test::NewReportDir("signal-on-worker");
  const std::string out = dir + ".out", pid_file = dir + ".pid";
  std::filesystem::remove(out);
  std::filesystem::remove(pid_file);
  std::thread signaller([&] {
    for (int i = 0; i < 1200; ++i) {  // At most 60 s.
      const std::string pid_text = agent_test::ReadFile(pid_file);
      if (absl::StrContains(agent_test::ReadFile(out), "stalling") && !pid_text.empty()) {
        const pid_t run = std::atoi(pid_text.c_str());
        const pid_t target = std::atoi(
            agent_test::ReadFile(absl::StrCat("/proc/", run, "/task/", run, "/children")).c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        const pid_t worker = ThreadNamed(target, "matrix-worker");
        EXPECT_NE(worker, 0) << "no matrix-worker thread in " << target;
        syscall(SYS_tgkill, target, worker != 0 ? worker : target, SIGINT);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const RunResult run = agent_test::Run(
      {"/bin/sh", "-c",
       absl::StrCat(kRun, " --report-dir ", dir, " --anr 60000 --lag 50000 --evil 300 -- ", kTarget,
                    " hold 30000 > ", out, " & echo $! > ", pid_file, "; wait $!")});
  signaller.join();
  std::filesystem::remove(out);
  std::filesystem::remove(pid_file);
  EXPECT_EQ(run.exit_code(), 128 + SIGINT) << run.err;
  EXPECT_THAT(run.err, HasSubstr("(at a termination signal)")) << "the main thread's exit line";
  std::vector<matrix::report::IssueRecord> slow;
  for (auto& record : ReadIssues(dir)) {
    if (record.kind == "evil_method") slow.push_back(std::move(record));
  }
  ASSERT_EQ(slow.size(), 1u) << run.err;
  EXPECT_GE(slow[0].issue.evil_method().cost_ms(), 1490) << run.err;
}

// Where matrix-run sits in a terminal's session: its leader (a terminal
// window or `ssh -t host matrix-run ...` runs it directly), or beside the
// leader in the foreground process group (as under a shell without job
// control; the leader only waits for it).
enum class Seat { kSessionLeader, kBesideTheLeader };

// matrix-run in a new session whose controlling terminal is a
// pseudo-terminal: the terminal's keys and hangup signal its processes as a
// real terminal's do.
struct TerminalRun {
  pid_t leader = -1;   // The session's leader: its pid is the session's and the group's.
  pid_t run = -1;      // matrix-run.
  int master = -1;     // The terminal's other end: what is typed, what is shown.
  std::string screen;  // What the terminal showed so far.

  ~TerminalRun() {
    if (leader > 0) {  // A failed test: the session must not outlive it.
      kill(-leader, SIGKILL);
      waitpid(leader, nullptr, 0);
    }
    if (master >= 0) close(master);
  }

  // Reads what the terminal shows for up to `ms`, or until it shows `text`.
  // False when it did not.
  bool ShowsWithin(const std::string& text, int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!absl::StrContains(screen, text) && std::chrono::steady_clock::now() < end) {
      if (!ReadScreen(50)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return absl::StrContains(screen, text);
  }

  // Waits up to `ms` for the session's leader to end (reading the terminal
  // meanwhile); its status as from waitpid, or -1 when it did not end (the
  // session is killed then).
  int WaitMs(int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    int status = -1;
    while (std::chrono::steady_clock::now() < end) {
      if (waitpid(leader, &status, WNOHANG) == leader) {
        leader = -1;
        ReadScreen(0);
        return status;
      }
      if (!ReadScreen(50)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

 private:
  // False when nothing could be read (none within `ms`, or the other end is
  // closed).
  bool ReadScreen(int ms) {
    if (master < 0) return false;
    struct pollfd pfd = {master, POLLIN, 0};
    if (poll(&pfd, 1, ms) <= 0) return false;
    char buffer[4096];
    const ssize_t n = read(master, buffer, sizeof(buffer));
    if (n <= 0) return false;
    screen.append(buffer, n);
    return true;
  }
};

// Starts `args` in a new session with a new pseudo-terminal, seated as
// `seat`; waits up to 60 s for the terminal to show `ready`.
void StartInTerminal(const std::vector<std::string>& args, Seat seat, const std::string& ready,
                     TerminalRun& t) {
  t.master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(t.master, 0) << strerror(errno);
  ASSERT_EQ(grantpt(t.master), 0);
  ASSERT_EQ(unlockpt(t.master), 0);
  const std::string terminal = ptsname(t.master);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);
  t.leader = fork();
  ASSERT_GE(t.leader, 0);
  if (t.leader == 0) {
    // The session's leader opens the terminal: it becomes the session's
    // controlling terminal, and the leader's group its foreground group.
    setsid();
    const int tty = open(terminal.c_str(), O_RDWR);
    if (tty < 0 || ioctl(tty, TIOCSCTTY, 0) != 0) _exit(126);
    dup2(tty, 0);
    dup2(tty, 1);
    dup2(tty, 2);
    if (tty > 2) close(tty);
    if (seat == Seat::kBesideTheLeader) {
      const pid_t run = fork();
      if (run < 0) _exit(126);
      if (run > 0) {
        // The leader is in the foreground group too: the keys' signals
        // reach it, the hangup's is sent to it alone.
        for (int s : {SIGINT, SIGQUIT, SIGHUP}) signal(s, SIG_IGN);
        int status = 0;
        while (waitpid(run, &status, 0) < 0 && errno == EINTR) {
        }
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
      }
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  ASSERT_TRUE(t.ShowsWithin(ready, 60000)) << t.screen;
  t.run = t.leader;
  if (seat == Seat::kBesideTheLeader) {
    t.run = std::atoi(
        agent_test::ReadFile(absl::StrCat("/proc/", t.leader, "/task/", t.leader, "/children"))
            .c_str());
  }
  ASSERT_GT(t.run, 0);
}

// agent_target's "count" under matrix-run: its own SIGINT, SIGHUP and
// SIGTERM handlers count what arrives from the first signal for 2 s more;
// with `child_counts`, its forked child (in its process group) counts what
// reaches it.
std::vector<std::string> CountingRun(const std::string& dir, const std::string& counts,
                                     const std::string& child_counts = "") {
  std::vector<std::string> args = {kRun,    "--report-dir", dir,    "--",
                                   kTarget, "count",        "2000", counts};
  if (!child_counts.empty()) args.push_back(child_counts);
  return args;
}

// What agent_target's "count" writes when only `signal_number` came, `n` times.
std::string Counts(int signal_number, int n) {
  return absl::StrCat("SIGINT ", signal_number == SIGINT ? n : 0, " SIGHUP ",
                      signal_number == SIGHUP ? n : 0, " SIGTERM ",
                      signal_number == SIGTERM ? n : 0, "\n");
}

// The program on a CPU of its own and what signals it (the terminal's
// session: timeout, matrix-run) on another, while it lives: each copy the
// program is sent is taken at once instead of merging, while pending, with
// one sent microseconds later (on one CPU the senders run first and the
// copies merge, hiding a duplicate). Env() is the program's variable
// (AGENT_TARGET_CPU); empty with one CPU.
class ProgramOnItsOwnCpu {
 public:
  ProgramOnItsOwnCpu() {
    sched_getaffinity(0, sizeof(allowed_), &allowed_);
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &allowed_)) cpus.push_back(cpu);
    }
    if (cpus.size() < 2) return;
    cpu_set_t first;
    CPU_ZERO(&first);
    CPU_SET(cpus.front(), &first);
    if (sched_setaffinity(0, sizeof(first), &first) == 0) {
      env_ = absl::StrCat("AGENT_TARGET_CPU=", cpus.back());
    }
  }
  ~ProgramOnItsOwnCpu() { sched_setaffinity(0, sizeof(allowed_), &allowed_); }

  // `args` run through env(1) with the program's variable.
  std::vector<std::string> Env(std::vector<std::string> args) const {
    if (!env_.empty()) args.insert(args.begin(), env_);
    args.insert(args.begin(), "/usr/bin/env");
    return args;
  }

 private:
  cpu_set_t allowed_;
  std::string env_;
};

// A ^C in a terminal: the terminal's line discipline sends SIGINT to its
// foreground process group (si_code SI_KERNEL), the program and matrix-run
// alike; matrix-run does not send the program a second one. A program that
// handles SIGINT itself (one that asks "really quit?" at the first ^C) sees
// one ^C once, whether matrix-run leads the terminal's session or runs
// beside its leader.
class TerminalInterruptTest : public testing::TestWithParam<Seat> {};

TEST_P(TerminalInterruptTest, OneCtrlCReachesTheProgramOnce) {
  const std::string dir = agent_test::NewReportDir("ctrl-c");
  const std::string counts = dir + ".counts";
  std::filesystem::remove(counts);
  TerminalRun t;
  ASSERT_NO_FATAL_FAILURE(StartInTerminal(CountingRun(dir, counts), GetParam(), "counting", t));
  struct termios modes;
  ASSERT_EQ(tcgetattr(t.master, &modes), 0);
  ASSERT_TRUE(modes.c_lflag & ISIG);
  ASSERT_EQ(write(t.master, &modes.c_cc[VINTR], 1), 1);  // ^C.
  const int status = t.WaitMs(60000);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << t.screen;
  EXPECT_EQ(agent_test::ReadFile(counts), Counts(SIGINT, 1)) << t.screen;
  std::filesystem::remove(counts);
}

INSTANTIATE_TEST_SUITE_P(Seats, TerminalInterruptTest,
                         testing::Values(Seat::kSessionLeader, Seat::kBesideTheLeader),
                         [](const auto& info) {
                           return info.param == Seat::kSessionLeader ? "SessionLeader"
                                                                     : "BesideTheLeader";
                         });

// A ^C 1.5 s into a busy dispatch of a program that leaves SIGINT at its
// default action: the terminal's one SIGINT (matrix-run forwards none) is
// the agent's to drain: the exit line, the dispatch in progress reported,
// then the program dies of SIGINT, and matrix-run with it.
TEST(MatrixRunTest, ACtrlCDrainsTheProgram) {
  const std::string dir = agent_test::NewReportDir("ctrl-c-drain");
  TerminalRun t;
  ASSERT_NO_FATAL_FAILURE(
      StartInTerminal({kRun, "--report-dir", dir, "--anr", "60000", "--lag", "50000", "--evil",
                       "300", "--", kTarget, "hold", "30000"},
                      Seat::kSessionLeader, "stalling", t));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  struct termios modes;
  ASSERT_EQ(tcgetattr(t.master, &modes), 0);
  ASSERT_EQ(write(t.master, &modes.c_cc[VINTR], 1), 1);  // ^C.
  const int status = t.WaitMs(60000);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status << "\n" << t.screen;
  EXPECT_THAT(t.screen, HasSubstr("reports in " + dir)) << "the agent's exit line";
  EXPECT_THAT(t.screen, HasSubstr("(at a termination signal)"));
  EXPECT_THAT(t.screen, HasSubstr("agent_target killed by signal 2"));
  std::vector<matrix::report::IssueRecord> slow;
  for (auto& record : ReadIssues(dir)) {
    if (record.kind == "evil_method") slow.push_back(std::move(record));
  }
  ASSERT_EQ(slow.size(), 1u) << t.screen;
  EXPECT_GE(slow[0].issue.evil_method().cost_ms(), 1490) << t.screen;
  EXPECT_THAT(slow[0].issue.evil_method().stack_key(), HasSubstr("StallInKnownFunction"));
}

// `kill -INT <matrix-run's pid>` (a supervisor, a user in another terminal:
// si_code SI_USER) reaches matrix-run alone, which forwards it: the program
// sees it once.
TEST(MatrixRunTest, ASignalSentToMatrixRunReachesTheProgramOnce) {
  const std::string dir = agent_test::NewReportDir("kill-run");
  const std::string counts = dir + ".counts";
  std::filesystem::remove(counts);
  const std::string child_counts = dir + ".child-counts";
  std::filesystem::remove(counts);
  std::filesystem::remove(child_counts);
  ProgramOnItsOwnCpu cpus;
  TerminalRun t;
  ASSERT_NO_FATAL_FAILURE(StartInTerminal(cpus.Env(CountingRun(dir, counts, child_counts)),
                                          Seat::kSessionLeader, "counting", t));
  ASSERT_EQ(kill(t.run, SIGINT), 0);
  const int status = t.WaitMs(60000);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << t.screen;
  EXPECT_EQ(agent_test::ReadFile(counts), Counts(SIGINT, 1)) << t.screen;
  EXPECT_EQ(agent_test::ReadFile(child_counts), Counts(SIGINT, 0)) << "the program's child";
  std::filesystem::remove(counts);
  std::filesystem::remove(child_counts);
}

// The signal the tests below send (TERM, timeout's default, or INT) by name.
std::string SignalName(int signal_number) { return signal_number == SIGINT ? "INT" : "TERM"; }

// A supervisor's kill(-pgid, ...) of matrix-run's process group (matrix-run
// leads it here) reaches the program, its child and matrix-run, which
// forwards none: the program sees it once, its child too.
class GroupKillTest : public testing::TestWithParam<int> {};

TEST_P(GroupKillTest, ReachesTheProgramAndItsChildOnce) {
  const int signal_number = GetParam();
  const std::string dir = agent_test::NewReportDir("group-kill");
  const std::string counts = dir + ".counts", child_counts = dir + ".child-counts";
  std::filesystem::remove(counts);
  std::filesystem::remove(child_counts);
  ProgramOnItsOwnCpu cpus;
  TerminalRun t;
  ASSERT_NO_FATAL_FAILURE(StartInTerminal(cpus.Env(CountingRun(dir, counts, child_counts)),
                                          Seat::kSessionLeader, "counting", t));
  ASSERT_EQ(getpgid(t.run), t.run);
  ASSERT_EQ(kill(-t.run, signal_number), 0);
  const int status = t.WaitMs(60000);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << t.screen;
  EXPECT_EQ(agent_test::ReadFile(counts), Counts(signal_number, 1)) << t.screen;
  EXPECT_EQ(agent_test::ReadFile(child_counts), Counts(signal_number, 1)) << "the program's child";
  std::filesystem::remove(counts);
  std::filesystem::remove(child_counts);
}

INSTANTIATE_TEST_SUITE_P(Signals, GroupKillTest, testing::Values(SIGTERM, SIGINT),
                         [](const auto& info) { return SignalName(info.param); });

// timeout(1) when its time is up: its signal to matrix-run, then (without
// --foreground) to its whole process group, which the program is in. The
// program sees it once; its child (in the group) sees the group's copy, or
// none with --foreground. timeout leads the terminal's session (its group
// is the foreground one, as when a shell with job control runs it) or runs
// beside the leader (it makes a process group of its own, as in a script).
// Its time is up when the test sends it SIGALRM (its timer's signal): after
// the program counts, whatever the load.
struct TimeoutCase {
  Seat seat;
  int signal_number;
  bool foreground;
  bool long_options = false;  // --kill-after 60 --signal=NAME instead of -s NAME.
};

void PrintTo(const TimeoutCase& c, std::ostream* os) {
  *os << (c.seat == Seat::kSessionLeader ? "timeout leads the session"
                                         : "timeout beside the leader")
      << ", SIG" << SignalName(c.signal_number) << (c.foreground ? ", --foreground" : "")
      << (c.long_options ? ", long options" : "");
}

class TimeoutTest : public testing::TestWithParam<TimeoutCase> {};

TEST_P(TimeoutTest, TheProgramSeesItsSignalOnce) {
  const TimeoutCase c = GetParam();
  if (access("/usr/bin/timeout", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/timeout";
  const std::string dir = agent_test::NewReportDir("timeout");
  const std::string counts = dir + ".counts", child_counts = dir + ".child-counts";
  std::filesystem::remove(counts);
  std::filesystem::remove(child_counts);
  std::vector<std::string> args = {"/usr/bin/timeout"};
  if (c.foreground) args.push_back("--foreground");
  if (c.long_options) {
    args.insert(args.end(), {"--kill-after", "60", "--signal=" + SignalName(c.signal_number)});
  } else {
    args.insert(args.end(), {"-s", SignalName(c.signal_number)});
  }
  args.push_back("600");
  for (const std::string& a : CountingRun(dir, counts, child_counts)) args.push_back(a);
  ProgramOnItsOwnCpu cpus;
  TerminalRun t;
  ASSERT_NO_FATAL_FAILURE(StartInTerminal(cpus.Env(args), c.seat, "counting", t));
  const pid_t timeout = t.run;  // env(1) exec'ed it.
  ASSERT_EQ(kill(timeout, SIGALRM), 0);
  const int status = t.WaitMs(60000);
  if (status == -1) kill(-timeout, SIGKILL);  // Its own group, beside the leader.
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 124) << status << "\n" << t.screen;
  EXPECT_EQ(agent_test::ReadFile(counts), Counts(c.signal_number, 1)) << t.screen;
  EXPECT_EQ(agent_test::ReadFile(child_counts), Counts(c.signal_number, c.foreground ? 0 : 1))
      << "the program's child";
  std::filesystem::remove(counts);
  std::filesystem::remove(child_counts);
}

INSTANTIATE_TEST_SUITE_P(Cases, TimeoutTest,
                         testing::Values(TimeoutCase{Seat::kSessionLeader, SIGTERM, false},
                                         TimeoutCase{Seat::kSessionLeader, SIGINT, false},
                                         TimeoutCase{Seat::kSessionLeader, SIGTERM, true},
                                         TimeoutCase{Seat::kSessionLeader, SIGINT, true},
                                         TimeoutCase{Seat::kBesideTheLeader, SIGTERM, false},
                                         TimeoutCase{Seat::kBesideTheLeader, SIGINT, false},
                                         TimeoutCase{Seat::kBesideTheLeader, SIGTERM, true},
                                         TimeoutCase{Seat::kBesideTheLeader, SIGINT, true},
                                         TimeoutCase{Seat::kBesideTheLeader, SIGTERM, false, true},
                                         TimeoutCase{Seat::kBesideTheLeader, SIGINT, true, true}),
                         [](const auto& info) {
                           return absl::StrCat(
                               info.param.seat == Seat::kSessionLeader ? "SessionLeader" : "Beside",
                               SignalName(info.param.signal_number),
                               info.param.foreground ? "Foreground" : "",
                               info.param.long_options ? "LongOptions" : "");
                         });

// A script that starts matrix-run in the background and kills it
// (`matrix-run ... & kill $!`): the script leads the process group and is
// matrix-run's parent, as timeout is, but signals matrix-run alone; it is
// forwarded: the program sees it once, its child not at all. The program's
// "counting" comes through a FIFO.
TEST(MatrixRunTest, AScriptsKillOfItsBackgroundRunReachesTheProgramOnce) {
  const std::string dir = agent_test::NewReportDir("script-kill");
  const std::string counts = dir + ".counts", child_counts = dir + ".child-counts";
  const std::string fifo = dir + ".fifo";
  std::filesystem::remove(counts);
  std::filesystem::remove(child_counts);
  std::filesystem::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << strerror(errno);
  std::string run;
  for (const std::string& a : CountingRun(dir, counts, child_counts)) run += a + " ";
  ProgramOnItsOwnCpu cpus;
  TerminalRun t;
  ASSERT_NO_FATAL_FAILURE(StartInTerminal(
      cpus.Env({"/bin/sh", "-c",
                absl::StrCat(run, "> ", fifo, " & exec 3< ", fifo,
                             "; read line <&3; echo script-killing; kill $!; wait $!")}),
      Seat::kSessionLeader, "script-killing", t));
  const int status = t.WaitMs(60000);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << t.screen;
  EXPECT_EQ(agent_test::ReadFile(counts), Counts(SIGTERM, 1)) << t.screen;
  EXPECT_EQ(agent_test::ReadFile(child_counts), Counts(SIGTERM, 0)) << "the program's child";
  std::filesystem::remove(counts);
  std::filesystem::remove(child_counts);
  std::filesystem::remove(fifo);
}

// A terminal that hangs up (its window closed, the ssh connection lost)
// sends SIGHUP, with si_code SI_KERNEL too, to the session's leader alone:
// matrix-run leading the session forwards it, and the program sees it once.
TEST(MatrixRunTest, AHangupReachesTheProgramThroughTheSessionLeader) {
  const std::string dir = agent_test::NewReportDir("hangup");
  const std::string counts = dir + ".counts";
  std::filesystem::remove(counts);
  TerminalRun t;
  ASSERT_NO_FATAL_FAILURE(
      StartInTerminal(CountingRun(dir, counts), Seat::kSessionLeader, "counting", t));
  close(t.master);  // The hangup.
  t.master = -1;
  const int status = t.WaitMs(60000);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << t.screen;
  EXPECT_EQ(agent_test::ReadFile(counts), Counts(SIGHUP, 1)) << t.screen;
  std::filesystem::remove(counts);
}

TEST(MatrixRunTest, BadFlagsAndMissingProgramAreClearErrors) {
  const RunResult unknown = agent_test::Run({kRun, "--frobnicate", "--", kTarget, "nowait"});
  EXPECT_EQ(unknown.exit_code(), 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown option --frobnicate"));
  const RunResult bad_anr = agent_test::Run({kRun, "--anr", "-5", "--", kTarget, "nowait"});
  EXPECT_EQ(bad_anr.exit_code(), 2);
  EXPECT_THAT(bad_anr.err, HasSubstr("--anr -5: expected a positive number of milliseconds"));
  const RunResult tiny_slice =
      agent_test::Run({kRun, "--fps-slice", "16", "--", kTarget, "nowait"});
  EXPECT_EQ(tiny_slice.exit_code(), 2);
  EXPECT_THAT(tiny_slice.err, HasSubstr("--fps-slice 16: expected at least 500 ms"));
  const RunResult missing = agent_test::Run({kRun, "--", "/nonexistent/program"});
  EXPECT_EQ(missing.exit_code(), 2);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/program: no such executable program"));
  const RunResult none = agent_test::Run({kRun, "--anr", "100"});
  EXPECT_EQ(none.exit_code(), 2);
  EXPECT_THAT(none.err, HasSubstr("no program to run"));
  const RunResult no_value = agent_test::Run({kRun, "--report-dir"});
  EXPECT_EQ(no_value.exit_code(), 2);
  EXPECT_THAT(no_value.err, HasSubstr("--report-dir needs a value"));
  const RunResult valued_switch = agent_test::Run({kRun, "--quiet=1", "--", kTarget, "nowait"});
  EXPECT_EQ(valued_switch.exit_code(), 2);
  EXPECT_THAT(valued_switch.err, HasSubstr("--quiet takes no value"));
  const RunResult bad_symbolize =
      agent_test::Run({kRun, "--symbolize=maybe", "--", kTarget, "nowait"});
  EXPECT_EQ(bad_symbolize.exit_code(), 2);
  EXPECT_THAT(bad_symbolize.err,
              HasSubstr("--symbolize=maybe: expected --symbolize=off or --symbolize=on"));
}

// A flag's value may also be joined to it with '=' (as in matrix-report):
// the thresholds and the report directory given so take effect.
TEST(MatrixRunTest, FlagValuesMayFollowAnEqualsSign) {
  const std::string dir = agent_test::NewReportDir("equals");
  const RunResult bad_anr = agent_test::Run({kRun, "--anr=-5", "--", kTarget, "nowait"});
  EXPECT_EQ(bad_anr.exit_code(), 2);
  EXPECT_THAT(bad_anr.err, HasSubstr("--anr -5: expected a positive number of milliseconds"));
  const RunResult run = agent_test::Run({kRun, "--report-dir=" + dir, "--anr=400", "--lag=300",
                                         "--", kTarget, "stall", "1200"});
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  ASSERT_EQ(Anrs(dir).size(), 1u) << run.err;
  EXPECT_THAT(run.err, HasSubstr(absl::StrCat(dir, "/agent_target-")));
}

// A forked child without exec has no matrix threads: it must neither report
// nor hang at exit; the parent is still monitored. (The parent's wait for the
// child, in waitpid on its main thread, is a hang of its own: an ANR whose
// stack is waitpid's, not StallInKnownFunction.)
TEST(MatrixRunTest, ForkedChildWithoutExecDoesNothing) {
  // Forked after the agent started, and before (the child would start its own).
  for (const std::string mode : {"fork", "fork-early"}) {
    SCOPED_TRACE(mode);
    const std::string dir = agent_test::NewReportDir(mode);
    const RunResult run = agent_test::Run(MatrixRun(dir, {mode, "1200"}));
    ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
    const int child = std::atoi(run.out.substr(run.out.find("child ") + 6).c_str());
    ASSERT_GT(child, 0) << run.out;
    int stalls = 0;
    for (const auto& anr : Anrs(dir)) {
      EXPECT_NE(anr.pid(), child);
      if (absl::StrContains(agent_test::StackText(anr), "StallInKnownFunction")) ++stalls;
    }
    EXPECT_EQ(stalls, 1) << run.err;  // The parent's stall only.
    EXPECT_THAT(LoggedPids(run.err), Not(::testing::Contains(child))) << run.err;
  }
}

// A child that execs another program inherits LD_PRELOAD but is not the
// target: dormant, unless --follow-exec.
TEST(MatrixRunTest, ExecedChildIsDormantUnlessAsked) {
  const std::string dir = agent_test::NewReportDir("exec");
  const RunResult run = agent_test::Run(MatrixRun(dir, {"exec", "1200"}));
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
  EXPECT_TRUE(Anrs(dir).empty()) << run.err;

  const std::string followed = agent_test::NewReportDir("exec-follow");
  const RunResult follow = agent_test::Run(MatrixRun(followed, {"exec", "1200"}, {"--follow-exec"}));
  ASSERT_EQ(follow.exit_code(), 0) << follow.out << follow.err;
  const int child = std::atoi(follow.out.substr(follow.out.find("exec child ") + 11).c_str());
  const auto anrs = Anrs(followed);
  ASSERT_EQ(anrs.size(), 1u) << follow.err;
  EXPECT_EQ(anrs[0].pid(), child);
}

// A followed child reports in its own name: its own file, its own line in
// matrix-run's exit summary (it used to write into the parent's file, and
// the summary, which counts the parent's pid only, left it out).
TEST(MatrixRunTest, FollowedChildReportsInItsOwnName) {
  const std::string dir = agent_test::NewReportDir("exec-own");
  const RunResult run = agent_test::Run(MatrixRun(dir, {"exec", "1200"}, {"--follow-exec"}));
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
  const int child = std::atoi(run.out.substr(run.out.find("exec child ") + 11).c_str());
  ASSERT_GT(child, 0) << run.out;
  const std::string name = absl::StrCat("agent_target-", child);
  const auto anrs = Anrs(dir);
  ASSERT_EQ(anrs.size(), 1u) << run.err;
  EXPECT_EQ(anrs[0].pid(), child);
  EXPECT_TRUE(absl::EndsWith(anrs[0].source.file, absl::StrCat("/", name, ".jsonl")))
      << anrs[0].source.file;
  // Its ANR and its startup.
  EXPECT_THAT(run.err, HasSubstr(absl::StrCat("matrix-run: child ", name, ": 2 issue(s) in ", dir,
                                              "/", name, ".jsonl")));
  EXPECT_THAT(run.err, HasSubstr("Trace_EvilMethod/ANR"));
  // The run's process list is gone.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_FALSE(absl::EndsWith(entry.path().string(), ".processes")) << entry.path();
  }
  // Keyed by the child's own function, the same on a second run.
  EXPECT_EQ(anrs[0].issue.key(), "StallInKnownFunction") << agent_test::StackText(anrs[0]);
  const std::string again_dir = agent_test::NewReportDir("exec-own-again");
  const RunResult again =
      agent_test::Run(MatrixRun(again_dir, {"exec", "1200"}, {"--follow-exec"}));
  ASSERT_EQ(again.exit_code(), 0) << again.out << again.err;
  const auto again_anrs = Anrs(again_dir);
  ASSERT_EQ(again_anrs.size(), 1u) << again.err;
  EXPECT_EQ(again_anrs[0].issue.key(), anrs[0].issue.key());
}

// A launcher script (a wrapper, a pyenv shim) runs in a shell that execs the
// program: the shell is dormant and the program it execs, the same pid, is
// monitored. The shell's reads of command substitutions blocked often enough
// to be learned as a loop wait; Matrix started in the shell, and its wait
// for `sleep` (in waitpid, work) was an ANR of its own, keyed in the shell
// (bash's `wait_for`, `dash+0xbc40`), beside a cold startup of the shell.
TEST(MatrixRunTest, AShellThatExecsTheProgramIsNotMonitored) {
  for (const std::string shell : {"/bin/bash", "/bin/sh"}) {
    SCOPED_TRACE(shell);
    const std::string dir = agent_test::NewReportDir("shell");
    const std::string script = dir + ".sh";
    {
      std::ofstream out(script);
      out << "#!" << shell << "\n"
          << "for i in 1 2 3 4 5 6 7 8; do x=$(sleep 0.05; echo $i); done\n"
          << "sleep 1.5\n"
          << "exec " << kTarget << " stall 1200\n";
    }
    ASSERT_EQ(chmod(script.c_str(), 0700), 0);
    const RunResult run =
        agent_test::Run({kRun, "--report-dir", dir, "--anr", "400", "--lag", "300", "--", script});
    std::filesystem::remove(script);
    ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
    const auto records = ReadIssues(dir);
    int anrs = 0, startups = 0;
    for (const auto& record : records) {
      EXPECT_EQ(record.issue.process(), "agent_target") << record.kind << " " << record.key;
      if (record.kind == "anr" && record.detail == "ANR") {
        ++anrs;
        EXPECT_EQ(record.key, "StallInKnownFunction") << agent_test::StackText(record);
      }
      if (record.kind == "startup") ++startups;
    }
    EXPECT_EQ(anrs, 1) << run.err;
    EXPECT_EQ(startups, 1) << run.err;
    // One agent line, the program's: none from the shell.
    EXPECT_EQ(LoggedPids(run.err).size(), 1u) << run.err;
    EXPECT_THAT(run.err, HasSubstr("matrix-agent: agent_target (pid ")) << run.err;
  }
}

// A wrapper script that runs the program as a child (no exec): the shell is
// not monitored and says so in matrix-run's summary; with --follow-exec the
// child reports in its own name.
TEST(MatrixRunTest, AShellScriptsChildIsMonitoredWithFollowExec) {
  const std::string dir = agent_test::NewReportDir("shell-child");
  const std::string script = dir + "-wrapper";
  {
    std::ofstream out(script);
    out << "#!/usr/bin/env sh\n"
        << "for i in 1 2 3 4 5 6 7 8; do x=$(sleep 0.05; echo $i); done\n"
        << kTarget << " stall 1200\n";
  }
  ASSERT_EQ(chmod(script.c_str(), 0700), 0);
  const RunResult run =
      agent_test::Run({kRun, "--report-dir", dir, "--anr", "400", "--lag", "300", "--", script});
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
  EXPECT_TRUE(ReadIssues(dir).empty()) << run.err;
  const std::string name = script.substr(script.rfind('/') + 1);
  EXPECT_THAT(run.err, HasSubstr(absl::StrCat("matrix-run: ", name,
                                              " is a sh script: the shell is not monitored")))
      << run.err;

  const std::string followed = agent_test::NewReportDir("shell-child-follow");
  const RunResult follow = agent_test::Run({kRun, "--report-dir", followed, "--anr", "400", "--lag",
                                            "300", "--follow-exec", "--", script});
  std::filesystem::remove(script);
  ASSERT_EQ(follow.exit_code(), 0) << follow.out << follow.err;
  const auto anrs = Anrs(followed);
  ASSERT_EQ(anrs.size(), 1u) << follow.err;
  EXPECT_EQ(anrs[0].issue.process(), "agent_target");
  EXPECT_EQ(anrs[0].issue.key(), "StallInKnownFunction");
  for (const auto& record : ReadIssues(followed)) {
    EXPECT_EQ(record.issue.process(), "agent_target") << record.kind << " " << record.key;
  }
  EXPECT_THAT(follow.err, HasSubstr("matrix-run: child agent_target-")) << follow.err;
}

// The program's own SIGQUIT and SIGPROF handlers keep working, and the ANR
// stack is still taken (stack capture uses a real-time signal).
TEST(MatrixRunTest, ProgramsOwnSigquitAndSigprofHandlersAreTolerated) {
  const std::string dir = agent_test::NewReportDir("signals");
  const RunResult run = agent_test::Run(MatrixRun(dir, {"signals", "1200"}));
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("own handlers ran"));
  const auto anrs = Anrs(dir);
  ASSERT_EQ(anrs.size(), 1u) << run.err;
  EXPECT_THAT(agent_test::StackText(anrs[0]), HasSubstr("StallInKnownFunction"));
  // The program's own raise(SIGQUIT) is its business, not a dump request
  // (besides the ANR, only the startup report).
  for (const auto& record : ReadIssues(dir)) {
    if (record.kind == "startup") continue;
    EXPECT_EQ(record.TagDetail(), "Trace_EvilMethod/ANR") << run.err;
  }
}

// A thread started before main() polls too (and stalls in its own work): its
// waits are not the main thread's dispatches.
TEST(MatrixRunTest, ThreadsStartedBeforeMainAreNotTheLoop) {
  const std::string dir = agent_test::NewReportDir("threads");
  const RunResult run = agent_test::Run(MatrixRun(dir, {"threads", "1200"}), {"AGENT_TARGET_EARLY_THREAD=1"});
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
  const auto anrs = Anrs(dir);
  ASSERT_EQ(anrs.size(), 1u) << run.err;
  EXPECT_THAT(agent_test::StackText(anrs[0]), HasSubstr("StallInKnownFunction"));
  EXPECT_THAT(agent_test::StackText(anrs[0]), Not(HasSubstr("OtherThreadStall")));
}

// No blocking wait on the main thread: the program runs unchanged (same
// output, same status) with one line from the agent at exit, and no reports.
TEST(MatrixRunTest, ProgramWithoutBlockingWaitRunsUnchangedWithOneLine) {
  const std::string dir = agent_test::NewReportDir("nowait");
  const RunResult plain = agent_test::Run({kTarget, "nowait"});
  const RunResult run = agent_test::Run(MatrixRun(dir, {"nowait"}, {"--quiet"}));
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  EXPECT_EQ(run.out, plain.out);
  const std::vector<std::string> lines =
      absl::StrSplit(run.err, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u) << run.err;
  EXPECT_THAT(lines[0], HasSubstr("no blocking wait or buffer swap on the main thread"));
  EXPECT_TRUE(ReadIssues(dir).empty());
}

// Loops that wait without poll: agent_target's "wait"
// mode waits in a condition variable, a semaphore, an eventfd read, or paces
// itself with nanosleep. It polls once first (a toolkit's round trip), so the
// agent is monitoring while the loop sits idle. Thresholds: LAG 700 ms, ANR
// 1500 ms. The loop idles 2.5 s (over the ANR threshold: taken as busy, that
// alone is an ANR), then handles a 1 s busy event (a LAG: its whole cost, as
// the LAG is reported at the dispatch's end), a 2 s busy event (an ANR 1.5 s
// in) and a 2 s nanosleep in a handler (a wait from another call site: work,
// an ANR). The eventfd loop also does a blocking read of a pipe in a handler
// for 2 s (a read of a wake fd from another site: work, an ANR). Margins: the costs are wall time measured by the program itself;
// the reports may come up to 1 s late on a loaded machine.
class LoopWaitTest : public ::testing::TestWithParam<const char*> {};

// "start NAME EPOCH_MS" lines of agent_target's output.
int64_t StartOf(const std::string& out, const std::string& name) {
  const size_t at = out.find("start " + name + " ");
  if (at == std::string::npos) return -1;
  return std::atoll(out.c_str() + at + 7 + name.size());
}

TEST_P(LoopWaitTest, IdleLoopIsNotAHangAndHandlersStillAre) {
  const std::string kind = GetParam();
  const std::string dir = agent_test::NewReportDir(std::string("wait-") + kind);
  std::vector<std::string> args = {kRun,   "--report-dir", dir,    "--anr", "1500", "--lag",
                                   "700",  "--",           kTarget, "wait",  kind,   "2500",
                                   "1000", "2000",         "2000"};
  const bool read_in_handler = kind == "eventfd";
  if (read_in_handler) args.push_back("2000");
  const RunResult run = agent_test::Run(args);
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("loop wait sites learned: 1")) << run.err;
  const int64_t lag_start = StartOf(run.out, "lag");
  const int64_t anr_start = StartOf(run.out, "anr");
  const int64_t sleep_start = StartOf(run.out, "sleep");
  ASSERT_GT(sleep_start, 0) << run.out;
  std::vector<matrix::report::IssueRecord> lags, anrs;
  for (auto& record : ReadIssues(dir)) {
    if (record.kind == "startup") continue;
    if (record.TagDetail() == "Trace_EvilMethod/LAG") {
      lags.push_back(std::move(record));
    } else if (record.TagDetail() == "Trace_EvilMethod/ANR") {
      anrs.push_back(std::move(record));
    } else {
      ADD_FAILURE() << "unexpected " << record.TagDetail() << "\n" << run.err;
    }
  }
  // The idle loop gave nothing: one LAG, two ANRs, each for its event.
  ASSERT_EQ(lags.size(), 1u) << run.err;
  ASSERT_EQ(anrs.size(), read_in_handler ? 3u : 2u) << run.err;
  const auto& lag = lags[0].issue.anr();
  // An issue's time is when it was published, after its stack was captured
  // and symbolized: on a loaded 2-core machine that has come 2.3 s after the
  // threshold (a sleep's ANR 3,833 ms after it began), so the upper bounds
  // on report times are generous; the cost and the stack say where it was
  // caught.
  constexpr int64_t kLatestReportMs = 6000;
  EXPECT_THAT(agent_test::StackText(lags[0]), HasSubstr("StallInKnownFunction"));
  // The busy event, not the idle before it (its ms clock truncates: 990).
  EXPECT_GE(lag.cost_ms(), 990);
  EXPECT_LT(lag.cost_ms(), 1400);
  EXPECT_GE(lags[0].time_ms() - lag_start, 1000);  // Reported at its end.
  EXPECT_LT(lags[0].time_ms() - lag_start, kLatestReportMs);
  // Caught at the threshold of the busy event, 1.5 s into it.
  EXPECT_THAT(agent_test::StackText(anrs[0]), HasSubstr("StallInKnownFunction"));
  EXPECT_GE(anrs[0].issue.anr().cost_ms(), 1500);
  EXPECT_LT(anrs[0].issue.anr().cost_ms(), 2000);
  EXPECT_GE(anrs[0].time_ms() - anr_start, 1500);
  EXPECT_LT(anrs[0].time_ms() - anr_start, kLatestReportMs);
  // The sleep in a handler is work: its ANR names it.
  EXPECT_THAT(agent_test::StackText(anrs[1]), HasSubstr("SleepInHandler"));
  EXPECT_GE(anrs[1].time_ms() - sleep_start, 1500);
  EXPECT_LT(anrs[1].time_ms() - sleep_start, kLatestReportMs);
  if (read_in_handler) {
    // The blocking read in a handler is work too.
    EXPECT_THAT(agent_test::StackText(anrs[2]), HasSubstr("ReadInHandler"));
    const int64_t read_start = StartOf(run.out, "read");
    EXPECT_GE(anrs[2].time_ms() - read_start, 1500);
    EXPECT_LT(anrs[2].time_ms() - read_start, kLatestReportMs);
  }
}

// A sleep in a handler of a poll loop that a signal cuts short and that the
// handler resumes (`agent_target sleep`: SleepInHandler loops on EINTR, as
// std::this_thread::sleep_for and Python's time.sleep do), with the slow
// threshold (300 ms) under the LAG threshold: the agent's own samples, 50 ms
// apart from 300 ms, interrupt it. A poll loop has no learned loop wait, so
// were the cut-short waits counted, the sleep's site would be learned as the
// loop's wait after three samples and the dispatch would end at about 400 ms,
// without LAG or ANR; it is work, an ANR naming SleepInHandler.
TEST(MatrixRunTest, SleepInHandlerResumedAfterSamplesIsAnAnr) {
  const std::string dir = agent_test::NewReportDir("sleep-sampled");
  const RunResult run = agent_test::Run({kRun, "--report-dir", dir, "--evil", "300", "--lag",
                                         "1000", "--anr", "1500", "--", kTarget, "sleep", "2500"});
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
  std::vector<matrix::report::IssueRecord> anrs;
  for (auto& record : ReadIssues(dir)) {
    if (record.TagDetail() == "Trace_EvilMethod/ANR") anrs.push_back(std::move(record));
  }
  ASSERT_EQ(anrs.size(), 1u) << run.err;
  EXPECT_THAT(agent_test::StackText(anrs[0]), HasSubstr("SleepInHandler"));
  EXPECT_GE(anrs[0].issue.anr().cost_ms(), 1500);
}

// A loop that never polls: the agent starts Matrix at the first wait from
// the learned site (the fourth wait of the loop), where the startup ends.
TEST(MatrixRunTest, LoopWithoutPollIsMonitoredFromItsLearnedWait) {
  const std::string dir = agent_test::NewReportDir("wait-no-poll");
  const RunResult run = agent_test::Run(
      {kRun, "--report-dir", dir, "--anr", "1500", "--lag", "700", "--", kTarget, "wait", "cond",
       "2500", "1000", "2000", "2000"},
      {"AGENT_TARGET_NO_POLL=1"});
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
  std::vector<std::string> kinds;
  for (const auto& record : ReadIssues(dir)) {
    kinds.push_back(record.kind == "startup" ? "startup" : record.TagDetail());
  }
  EXPECT_THAT(kinds, ::testing::ElementsAre("startup", "Trace_EvilMethod/LAG",
                                            "Trace_EvilMethod/ANR", "Trace_EvilMethod/ANR"))
      << run.err;
}

INSTANTIATE_TEST_SUITE_P(Kinds, LoopWaitTest,
                         ::testing::Values("cond", "sem", "eventfd", "futex", "pace"),
                         [](const auto& info) { return std::string(info.param); });

// A bad variable given to the agent directly: one line, the program runs
// normally and unmonitored.
TEST(MatrixRunTest, BadAgentVariableLeavesTheProgramAlone) {
  const std::string dir = agent_test::NewReportDir("badenv");
  const RunResult plain = agent_test::Run({kTarget, "nowait"});
  const RunResult run = agent_test::Run(
      {kTarget, "nowait"},
      {std::string("LD_PRELOAD=") + AGENT_PATH, "MATRIX_ANR_MS=soon", "MATRIX_REPORT_DIR=" + dir});
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  EXPECT_EQ(run.out, plain.out);
  EXPECT_EQ(run.err.find("matrix-agent: agent_target (pid "), 0u) << run.err;
  EXPECT_THAT(run.err, HasSubstr("not monitoring: MATRIX_ANR_MS=soon: expected a positive number"));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// The agent writes only its own lines into the program's stderr. node's
// stripped executable made absl::Symbolize (the symbolizer's fallback) print
// "[symbolize_elf.inc : 1324] RAW: /usr/bin/node: too many executable LOAD
// segments" at every stack capture.
TEST(MatrixRunTest, NodeStackCaptureWritesNothingIntoTheProgramsStderr) {
#ifndef NODE_PATH
  FAIL() << "node not found at configure time: make deps (nodejs)";
#else
  const std::string dir = agent_test::NewReportDir("node");
  // The busy callback runs after the first epoll_wait (the agent has started).
  const RunResult run = agent_test::Run(
      {kRun, "--report-dir", dir, "--anr", "400", "--lag", "300", "--quiet", "--", NODE_PATH,
       "-e", "setTimeout(() => { const end = Date.now() + 1200; while (Date.now() < end) {} }, 100)"});
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  ASSERT_EQ(Anrs(dir).size(), 1u) << run.err;  // A stack was captured and symbolized.
  for (absl::string_view line : absl::StrSplit(run.err, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "matrix-agent: node (pid ")) << run.err;
  }
  EXPECT_THAT(run.err, Not(HasSubstr("RAW:")));
#endif
}

}  // namespace

// matrix-run: watches an unmodified program with matrix-cpp (docs/matrix-run.md).
//
//   matrix-run [--report-dir D] [--anr MS] [--lag MS] [--evil MS] [--no-slow-stacks]
//              [--no-frames] [--symbolize=off]
//              [--fps-slice MS] [--timeline-window MS] [--refresh-hz HZ] [--follow-exec]
//              [--key-skip M]... [--key-program M]... [--perf-map]
//              [--app-version V] [--hostname] [--quiet] -- PROGRAM [ARGS...]
//
// Forks; the child puts libmatrix-agent.so (found beside this binary, or in
// ../lib*/ of an install tree) in LD_PRELOAD, sets the MATRIX_* variables the
// agent reads and its own pid as MATRIX_AGENT_PID, and execs PROGRAM. The
// parent forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT to the child (except those
// that reached the child too: see Forwarder::Route), waits, prints
// where the reports went and one line per issue kind of this run, and exits
// with the child's status (or dies of the child's signal).

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "agent/shells.h"
#include "internal/option_split.h"
#include "matrix/core/file_path.h"
#include "matrix/report/issue_reader.h"

namespace {

constexpr char kUsage[] =
    "usage: matrix-run [options] -- PROGRAM [ARGS...]\n"
    "Runs PROGRAM with libmatrix-agent.so preloaded: hangs (ANR, LAG), slow dispatches\n"
    "and frame rates of its main thread are reported as JSON lines, readable by\n"
    "matrix-report.\n"
    "  --report-dir DIR   where reports go (default $MATRIX_REPORT_DIR or ./matrix-reports)\n"
    "  --anr MS           ANR threshold (default 5000)\n"
    "  --lag MS           LAG threshold (default 2000, at most the ANR threshold)\n"
    "  --evil MS          slow dispatch threshold (default 700)\n"
    "  --no-slow-stacks   slow dispatches without stacks (by default the main thread's\n"
    "                     stack is sampled from the threshold to the dispatch's end)\n"
    "  --no-frames        no frame (FPS) reports from buffer swaps\n"
    "  --fps-slice MS     wall time covered by one FPS report (default 10000)\n"
    "  --timeline-window MS  how far a hang's timeline reaches back before the hang\n"
    "                     began (default 5000)\n"
    "  --refresh-hz HZ    display refresh rate for dropped frames (default: display's or 60)\n"
    "  --symbolize=off    frames recorded raw (module, build id, ELF address), named off\n"
    "                     the host by matrix-report symbolize; keys are module+0xADDR\n"
    "  --follow-exec      also monitor programs the program's children exec\n"
    "  --perf-map         JavaScript function names in node's stacks: runs node with\n"
    "                     --perf-basic-prof --interpreted-frames-native-stack (on its\n"
    "                     command line, else through NODE_OPTIONS); node writes\n"
    "                     /tmp/perf-PID.map, removed at exit\n"
    "  --key-skip M       frames of module M never key a report (repeatable; M is a\n"
    "                     directory \"/opt/vendor/\" or a file name prefix \"libvendor\")\n"
    "  --key-program M    module M is the program's own, even under /usr/lib (repeatable)\n"
    "  --app-version V    the version reports carry (default $MATRIX_APP_VERSION; docs/fleet.md)\n"
    "  --hostname         reports also carry the host name (MATRIX_REPORT_HOSTNAME=1)\n"
    "  --quiet            no summary at exit\n"
    "A value follows its flag or an '=' (--anr 2000, --anr=2000).\n";

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "matrix-run: %s\n%s", message.c_str(), kUsage);
  std::exit(2);
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// libmatrix-agent.so beside this binary (build tree) or in ../lib*/ (install).
std::string FindAgent() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  std::string dir(self);
  dir.resize(dir.rfind('/'));
  for (const std::string& candidate :
       {absl::StrCat(dir, "/libmatrix-agent.so"),
        absl::StrCat(dir, "/../", MATRIX_RUN_INSTALL_LIBDIR, "/libmatrix-agent.so"),
        absl::StrCat(dir, "/../lib/libmatrix-agent.so")}) {
    if (IsFile(candidate)) {
      char real[PATH_MAX];
      if (realpath(candidate.c_str(), real) != nullptr) return real;
    }
  }
  return "";
}

// What the command line asks for.
struct Options {
  std::string report_dir;
  std::vector<std::pair<std::string, std::string>> env;  // MATRIX_* for the child.
  std::vector<std::string> key_skip;                     // --key-skip.
  std::vector<std::string> key_program;                  // --key-program.
  bool quiet = false;
  bool perf_map = false;
  bool help = false;
  int program = 0;  // argv's index of the program (argc when there is none).
};

absl::Status Error(const std::string& message) { return absl::InvalidArgumentError(message); }

// A positive millisecond count for `flag`, at least `min_ms`: the child's
// variable `name`.
absl::Status SetMs(Options& o, const char* name, const char* flag, const std::string& value,
                   int64_t min_ms = 1) {
  int64_t ms = 0;
  if (!absl::SimpleAtoi(value, &ms) || ms <= 0) {
    return Error(absl::StrCat(flag, " ", value, ": expected a positive number of milliseconds"));
  }
  if (ms < min_ms) {
    return Error(absl::StrCat(flag, " ", value, ": expected at least ", min_ms, " ms"));
  }
  o.env.emplace_back(name, absl::StrCat(ms));
  return absl::OkStatus();
}

// Sets the child's variable `name` to `value`.
absl::Status SetEnv(Options& o, const char* name, const std::string& value) {
  o.env.emplace_back(name, value);
  return absl::OkStatus();
}

absl::Status SetRefreshHz(Options& o, const std::string& value) {
  double hz = 0;
  if (!absl::SimpleAtod(value, &hz) || !(hz >= 1 && hz <= 1000)) {
    return Error("--refresh-hz needs a rate in [1, 1000]");
  }
  return SetEnv(o, "MATRIX_REFRESH_HZ", value);
}

// StackKeyRule's patterns: a directory ("/opt/app/") or a file name prefix
// ("libfoo"); the agent checks them again.
absl::Status AddKeyModule(std::vector<std::string>& modules, const char* flag,
                          const std::string& pattern) {
  const bool directory = pattern.size() > 1 && pattern.front() == '/' && pattern.back() == '/';
  if (pattern.find(',') != std::string::npos ||
      (pattern.find('/') != std::string::npos && !directory)) {
    return Error(absl::StrCat(flag, " needs a directory (\"/opt/app/\", with both slashes) or a "
                                    "file name prefix (\"libfoo\")"));
  }
  modules.push_back(pattern);
  return absl::OkStatus();
}

absl::Status SetSymbolize(Options& o, const std::string& value) {
  if (value != "off" && value != "on") {
    return Error(
        absl::StrCat("--symbolize=", value, ": expected --symbolize=off or --symbolize=on"));
  }
  return SetEnv(o, "MATRIX_SYMBOLIZE", value == "on" ? "1" : "0");
}

// matrix-run's options (the value of one that takes a value is never empty).
using RunFlag = matrix::report::internal::OptionFlag<Options>;

constexpr RunFlag kRunFlags[] = {
    {"--report-dir", true,
     [](Options& o, const std::string& v) {
       o.report_dir = v;
       return absl::OkStatus();
     }},
    {"--anr", true,
     [](Options& o, const std::string& v) { return SetMs(o, "MATRIX_ANR_MS", "--anr", v); }},
    {"--lag", true,
     [](Options& o, const std::string& v) { return SetMs(o, "MATRIX_LAG_MS", "--lag", v); }},
    {"--evil", true,
     [](Options& o, const std::string& v) { return SetMs(o, "MATRIX_EVIL_MS", "--evil", v); }},
    // TraceConfig::kMinFpsTimeSlice: shorter slices flood the reports.
    {"--fps-slice", true,
     [](Options& o, const std::string& v) {
       return SetMs(o, "MATRIX_FPS_SLICE_MS", "--fps-slice", v, 500);
     }},
    {"--timeline-window", true,
     [](Options& o, const std::string& v) {
       return SetMs(o, "MATRIX_TIMELINE_WINDOW_MS", "--timeline-window", v);
     }},
    {"--refresh-hz", true, [](Options& o, const std::string& v) { return SetRefreshHz(o, v); }},
    {"--key-skip", true,
     [](Options& o, const std::string& v) { return AddKeyModule(o.key_skip, "--key-skip", v); }},
    {"--key-program", true,
     [](Options& o, const std::string& v) {
       return AddKeyModule(o.key_program, "--key-program", v);
     }},
    {"--no-slow-stacks", false,
     [](Options& o, const std::string&) { return SetEnv(o, "MATRIX_SLOW_STACKS", "0"); }},
    {"--no-frames", false,
     [](Options& o, const std::string&) { return SetEnv(o, "MATRIX_FRAMES", "0"); }},
    {"--symbolize", true, [](Options& o, const std::string& v) { return SetSymbolize(o, v); }},
    {"--follow-exec", false,
     [](Options& o, const std::string&) { return SetEnv(o, "MATRIX_AGENT_FOLLOW_EXEC", "1"); }},
    {"--perf-map", false,
     [](Options& o, const std::string&) {
       o.perf_map = true;
       return absl::OkStatus();
     }},
    {"--quiet", false,
     [](Options& o, const std::string&) {
       o.quiet = true;
       return absl::OkStatus();
     }},
    {"--app-version", true,
     [](Options& o, const std::string& v) { return SetEnv(o, "MATRIX_APP_VERSION", v); }},
    {"--hostname", false,
     [](Options& o, const std::string&) { return SetEnv(o, "MATRIX_REPORT_HOSTNAME", "1"); }},
    {"--help", false,
     [](Options& o, const std::string&) {
       o.help = true;
       return absl::OkStatus();
     }},
    {"-h", false,
     [](Options& o, const std::string&) {
       o.help = true;
       return absl::OkStatus();
     }},
};

// The options before the program (which follows "--", or is the first
// argument that is not an option), up to --help.
absl::StatusOr<Options> ParseOptions(int argc, char** argv) {
  Options o;
  const char* dir = std::getenv("MATRIX_REPORT_DIR");
  o.report_dir = dir != nullptr && *dir != '\0' ? dir : "./matrix-reports";
  int i = 1;
  for (; i < argc && !o.help; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() <= 1 || arg[0] != '-') break;  // The program, without "--".
    auto [name, value] = matrix::report::internal::SplitOptionArgument(arg);
    const RunFlag* flag = matrix::report::internal::FindOptionFlag(kRunFlags, name);
    if (flag == nullptr) return Error(absl::StrCat("unknown option ", name));
    if (flag->takes_value && !value.has_value()) {
      if (i + 1 >= argc) return Error(absl::StrCat(name, " needs a value"));
      value = argv[++i];
    }
    if (flag->takes_value && value->empty()) {
      return Error(absl::StrCat(name, " needs a non-empty value"));
    }
    if (!flag->takes_value && value.has_value()) {
      return Error(absl::StrCat(name, " takes no value"));
    }
    if (absl::Status s = flag->set(o, value.value_or("")); !s.ok()) return s;
  }
  o.program = i;
  if (!o.key_skip.empty()) o.env.emplace_back("MATRIX_KEY_SKIP", absl::StrJoin(o.key_skip, ","));
  if (!o.key_program.empty()) {
    o.env.emplace_back("MATRIX_KEY_PROGRAM", absl::StrJoin(o.key_program, ","));
  }
  return o;
}

// The file execvp would run for `program`, or "" when there is none.
std::string ExecutablePath(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    return access(program.c_str(), X_OK) == 0 ? program : std::string();
  }
  const char* path = std::getenv("PATH");
  std::string paths = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= paths.size()) {
    size_t end = paths.find(':', start);
    if (end == std::string::npos) end = paths.size();
    std::string dir = paths.substr(start, end - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = absl::StrCat(dir, "/", program);
    if (IsFile(candidate) && access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return std::string();
}

// Whether `program` can be executed as execvp would find it.
bool Executable(const std::string& program) { return !ExecutablePath(program).empty(); }

// The shell that runs `program` when it is a shell script ("#!/bin/sh",
// "#!/usr/bin/env bash"), else "". The agent is dormant in a shell
// (agent/shells.h).
std::string ScriptShell(const std::string& program) {
  const std::string path = ExecutablePath(program);
  if (path.empty()) return std::string();
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line.rfind("#!", 0) != 0) return std::string();
  std::vector<std::string> words =
      absl::StrSplit(line.substr(2), absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (words.empty()) return std::string();
  std::string interpreter = words[0];
  if (matrix::BaseName(interpreter) == "env") {
    interpreter.clear();
    for (size_t i = 1; i < words.size() && interpreter.empty(); ++i) {
      if (words[i][0] != '-') interpreter = words[i];
    }
  }
  return matrix::agent::IsShell(interpreter) ? std::string(matrix::BaseName(interpreter))
                                             : std::string();
}

// The signals matrix-run forwards to the child.
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// How long matrix-run waits for the group's copy of a signal that
// timeout(1) sent it (timeout sends it microseconds later); one that does
// not come is forwarded then.
constexpr int kGroupCopyWaitMs = 2000;

// A process in matrix-run's process group that holds the forwarded signals
// blocked and takes none: a signal sent to the group (kill(-pgid, ...),
// kill(0, ...), a terminal's keys) stays pending there, one sent to
// matrix-run alone does not. siginfo cannot tell the two apart (both are
// SI_USER with the sender's pid). The kernel signals a group's processes
// newest first, so the witness (forked after matrix-run joined its group)
// has its copy before matrix-run has its own. Forked through an
// intermediate process that exits at once: it is not matrix-run's child (the
// program is its only one). It ends when matrix-run's end of its request
// pipe closes. Used by matrix-run's main thread only.
class GroupWitness {
 public:
  GroupWitness() = default;
  GroupWitness(const GroupWitness&) = delete;
  GroupWitness& operator=(const GroupWitness&) = delete;
  ~GroupWitness() {
    if (request_ >= 0) close(request_);
    if (reply_ >= 0) close(reply_);
  }

  // Starts the witness in the caller's process group, with the caller's
  // signal mask (which must block kForwardedSignals). False when it cannot
  // (then Took is always false).
  bool Start() {
    int request[2], reply[2];
    if (pipe2(request, O_CLOEXEC) != 0) return false;
    if (pipe2(reply, O_CLOEXEC) != 0) {
      close(request[0]);
      close(request[1]);
      return false;
    }
    std::fflush(nullptr);
    const pid_t middle = fork();
    if (middle == 0) {
      if (fork() == 0) Serve(request[0], reply[1]);
      _exit(0);
    }
    close(request[0]);
    close(reply[1]);
    int status = 0;
    if (middle < 0 || waitpid(middle, &status, 0) != middle || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      close(request[1]);
      close(reply[0]);
      return false;
    }
    request_ = request[1];
    reply_ = reply[0];
    return true;
  }

  // Whether `signal_number` reached the witness since the last call for it
  // (it takes it, so the next copy counts anew); with `wait`, the witness
  // waits up to kGroupCopyWaitMs for it.
  bool Took(int signal_number, bool wait = false) {
    if (request_ < 0) return false;
    const unsigned char request =
        static_cast<unsigned char>(signal_number) | (wait ? kWaitFlag : 0);
    unsigned char took = 0;
    if (write(request_, &request, 1) != 1 || !ReadByte(reply_, &took)) {
      close(request_);
      close(reply_);
      request_ = reply_ = -1;
      return false;
    }
    return took != 0;
  }

 private:
  // A request's bit beside the signal number (below 65): wait for it.
  static constexpr unsigned char kWaitFlag = 0x80;

  static bool ReadByte(int fd, unsigned char* byte) {
    ssize_t n;
    while ((n = read(fd, byte, 1)) < 0 && errno == EINTR) {
    }
    return n == 1;
  }

  // The witness: answers each request (a signal number, and whether to
  // wait for it) with whether that signal is pending, taking it. No terminal, no files but its
  // pipes; job control signals leave it running.
  [[noreturn]] static void Serve(int request, int reply) {
    prctl(PR_SET_NAME, "matrix-witness");
    for (int s : {SIGTSTP, SIGTTIN, SIGTTOU}) signal(s, SIG_IGN);
    // Its pipes at 3 and 4 (by way of descriptors above any of theirs).
    const int high_request = fcntl(request, F_DUPFD, 10);
    const int high_reply = fcntl(reply, F_DUPFD, 10);
    if (high_request < 0 || high_reply < 0 || dup2(high_request, 3) != 3 ||
        dup2(high_reply, 4) != 4) {
      _exit(1);
    }
    request = 3;
    reply = 4;
    close_range(5, ~0U, 0);
    const int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd <= 2 && null >= 0; ++fd) dup2(null, fd);
    if (null > 4) close(null);
    unsigned char asked = 0;
    while (ReadByte(request, &asked)) {
      const int signal_number = asked & ~kWaitFlag;
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, signal_number);
      const struct timespec wait = {
          (asked & kWaitFlag) != 0 ? kGroupCopyWaitMs / 1000 : 0,
          (asked & kWaitFlag) != 0 ? (kGroupCopyWaitMs % 1000) * 1000000L : 0};
      int taken;
      while ((taken = sigtimedwait(&one, nullptr, &wait)) < 0 && errno == EINTR) {
      }
      const unsigned char took = taken == signal_number ? 1 : 0;
      if (write(reply, &took, 1) != 1) break;
    }
    _exit(0);
  }

  int request_ = -1;  // matrix-run's ends of the witness's pipes.
  int reply_ = -1;
};

// Whether the process `pid` is GNU coreutils' timeout(1) without
// --foreground: when its time is up (or a signal reaches it) it signals
// its command (matrix-run) and then its whole process group, which it
// leads. Read from /proc: its executable's name and its options (those
// before the first operand, as its getopt_long("+k:s:v") takes them).
bool SignalsItsGroupToo(pid_t pid) {
  if (pid <= 0 || getpgid(pid) != pid) return false;
  char exe[PATH_MAX];
  const ssize_t n = readlink(absl::StrCat("/proc/", pid, "/exe").c_str(), exe, sizeof(exe) - 1);
  if (n <= 0) return false;
  exe[n] = '\0';
  if (matrix::BaseName(exe) != "timeout") return false;
  std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"));
  std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args = absl::StrSplit(cmdline, '\0');
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" || arg.size() < 2 || arg[0] != '-') return true;  // The duration.
    if (arg[1] == '-') {
      const std::string name = arg.substr(0, arg.find('='));
      if (name.size() >= 3 && absl::StartsWith("--foreground", name)) return false;
      const bool takes_value = name.size() >= 3 && (absl::StartsWith("--kill-after", name) ||
                                                    absl::StartsWith("--signal", name));
      if (takes_value && arg.find('=') == std::string::npos) ++i;
      continue;
    }
    for (size_t c = 1; c < arg.size(); ++c) {
      if (arg[c] == 'f') return false;
      if (arg[c] == 'k' || arg[c] == 's') {
        if (c + 1 == arg.size()) ++i;  // Its value is the next argument.
        break;
      }
    }
  }
  return false;
}

// Sends the forwarded signals on to the child unless it has (or is about to
// get) its own copy. Used by matrix-run's main thread only.
class Forwarder {
 public:
  Forwarder(pid_t child, GroupWitness& witness) : child_(child), witness_(witness) {}

  // `signal_number`, as `info` describes it:
  // - A terminal's keys (^C SIGINT, ^\ SIGQUIT) signal its foreground
  //   process group, and at a hangup SIGHUP to that group when its session's
  //   leader exits, with si_code SI_KERNEL; a hangup's first SIGHUP, though,
  //   goes to the session's leader alone: when matrix-run leads its session,
  //   it is forwarded. SIGTERM, which no terminal sends, is never taken as a
  //   terminal's.
  // - Every copy from timeout(1) that signals the group too (see
  //   SignalsItsGroupToo): its signal to matrix-run and the group's, taken
  //   one at a time or merged into one. The group's copy reaches the child:
  //   none is forwarded. The first waits for the group's copy at the witness
  //   (and is forwarded if none comes); once it came, the rest of that
  //   signal's copies from it are the same end.
  // - A signal sent to the process group (the witness has a copy: a
  //   supervisor's kill(-pgid, ...)) reached the child too.
  // - A signal sent to matrix-run alone is forwarded.
  // The last three while the child is in matrix-run's process group (it is
  // unless it left with setpgid or setsid); otherwise every one is forwarded.
  void Route(int signal_number, const siginfo_t& info) {
    const bool group_copy = witness_.Took(signal_number);
    const bool child_in_group = getpgid(child_) == getpgrp();
    const uint64_t bit = uint64_t{1} << signal_number;
    if (info.si_code == SI_KERNEL && signal_number != SIGTERM) {
      const bool to_leader_alone = signal_number == SIGHUP && getsid(0) == getpid();
      if (!to_leader_alone && child_in_group) return;
    } else if (child_in_group && getpgid(info.si_pid) == getpgrp() &&
               SignalsItsGroupToo(info.si_pid)) {
      if (group_copy || (timeout_signals_ & bit) != 0 ||
          witness_.Took(signal_number, /*wait=*/true)) {
        timeout_signals_ |= bit;
        return;
      }
    } else if (group_copy && child_in_group) {
      return;
    }
    kill(child_, signal_number);
  }

 private:
  const pid_t child_;
  GroupWitness& witness_;
  uint64_t timeout_signals_ = 0;  // Those whose group copy from timeout came.
};

// The file the agents of one run list their processes in (the agent's
// MATRIX_RUN_PROCESSES): hidden in the report directory, removed at exit.
std::string ProcessListPath(const std::string& report_dir, const std::string& base, pid_t pid) {
  return absl::StrCat(report_dir, "/.", base, "-", pid, ".processes");
}

// Prints the exit summary of one process: its issues by kind, from its file
// and the files of other kinds beside it (<name>.fps.jsonl, ...: docs/reports.md,
// "Retention"), rotated files included. `launched`: the program matrix-run
// started (else a child it exec'ed).
// `shell`: the shell that runs the launched program when it is a shell script.
void Summarize(const std::string& report_dir, const std::string& name, pid_t pid, bool launched,
               const std::string& shell) {
  const std::string file = absl::StrCat(report_dir, "/", name, ".jsonl");
  const std::string who = launched ? "" : absl::StrCat("child ", name, ": ");
  if (!IsFile(file)) {
    std::fprintf(stderr, "matrix-run: %sno reports (%s was not written)\n", who.c_str(),
                 file.c_str());
    if (launched && !shell.empty()) {
      std::fprintf(stderr,
                   "matrix-run: %s is a %s script: the shell is not monitored, the program it "
                   "execs is; programs it starts as children are with --follow-exec\n",
                   name.substr(0, name.rfind('-')).c_str(), shell.c_str());
    }
    return;
  }
  matrix::report::ReadResult result;
  std::vector<std::string> run_files;
  absl::StatusOr<std::vector<std::string>> files = matrix::report::ExpandInput(report_dir);
  for (const std::string& f : files.ok() ? *files : std::vector<std::string>{}) {
    if (f.find(absl::StrCat("/", name, ".")) == std::string::npos) continue;
    run_files.push_back(f);
    std::ifstream in(f);
    matrix::report::ReadIssueStream(in, f, result);
  }
  std::map<std::string, int> counts;
  int64_t total = 0;
  for (const auto& record : result.records) {
    if (record.pid() != 0 && record.pid() != pid) continue;
    ++counts[record.TagDetail()];
    ++total;
  }
  std::fprintf(stderr, "matrix-run: %s%lld issue(s) in %s (read them: matrix-report %s)\n",
               who.c_str(), static_cast<long long>(total), file.c_str(),
               absl::StrJoin(run_files, " ").c_str());
  for (const auto& [kind, count] : counts) {
    std::fprintf(stderr, "matrix-run:   %-28s %d\n", kind.c_str(), count);
  }
}

// Relative report directories are the caller's: made absolute so a program
// that changes directory still writes there.
std::string AbsoluteDir(const std::string& dir) {
  if (dir[0] == '/') return dir;
  char cwd[PATH_MAX];
  return getcwd(cwd, sizeof(cwd)) != nullptr ? absl::StrCat(cwd, "/", dir) : dir;
}

// The run: what the child execs, and where its reports go.
struct Launch {
  std::string program;     // As given (execvp looks it up in PATH).
  std::string base;        // Its file name: the reports' name.
  std::string agent;       // libmatrix-agent.so.
  std::string report_dir;  // Absolute.
};

// node's perf map (--perf-map), into the child's `program_argv` or
// NODE_OPTIONS. --perf-basic-prof: node writes /tmp/perf-PID.map, names for
// its JIT code. --interpreted-frames-native-stack: each interpreted function
// gets its own copy of the interpreter's entry, so interpreted frames are
// named too. --perf-basic-prof also makes V8 write a log
// (isolate-0x...-PID-v8.log) into the working directory; on node's command
// line --logfile=/dev/null stops that, but NODE_OPTIONS does not allow
// --logfile (docs/matrix-run.md, "JavaScript names"). Child, before exec.
void AddNodePerfMap(const std::string& base, std::vector<char*>& program_argv) {
  constexpr char kNodeFlags[] = "--perf-basic-prof --interpreted-frames-native-stack";
  if (base == "node" || base == "nodejs") {
    static char perf_basic_prof[] = "--perf-basic-prof";
    static char interpreted[] = "--interpreted-frames-native-stack";
    static char no_log[] = "--logfile=/dev/null";
    program_argv.insert(program_argv.begin() + 1, {perf_basic_prof, interpreted, no_log});
    return;
  }
  // A script or launcher that starts node: only node reads NODE_OPTIONS
  // (every node the program starts).
  const char* options = std::getenv("NODE_OPTIONS");
  const std::string node_options =
      options != nullptr && *options != '\0' ? absl::StrCat(options, " ", kNodeFlags) : kNodeFlags;
  setenv("NODE_OPTIONS", node_options.c_str(), 1);
}

// The forked child: preloads the agent, sets its variables and execs the
// program (argv[o.program...]) with `initial_mask`, matrix-run's signal mask
// at its start. Returns only through _exit.
[[noreturn]] void ExecProgram(const Options& o, const Launch& run, const sigset_t& initial_mask,
                              char** argv, int argc) {
  // The forwarded signals at their default action, then the mask matrix-run
  // started with (main() blocked them and SIGCHLD across fork): one that
  // came meanwhile ends the child now.
  for (int s : kForwardedSignals) signal(s, SIG_DFL);
  sigprocmask(SIG_SETMASK, &initial_mask, nullptr);
  const char* preload = std::getenv("LD_PRELOAD");
  const std::string preloads = preload != nullptr && *preload != '\0'
                                   ? absl::StrCat(run.agent, ":", preload)
                                   : run.agent;
  setenv("LD_PRELOAD", preloads.c_str(), 1);
  setenv("MATRIX_REPORT_DIR", run.report_dir.c_str(), 1);
  setenv("MATRIX_REPORT_NAME", absl::StrCat(run.base, "-", getpid()).c_str(), 1);
  setenv("MATRIX_AGENT_PID", absl::StrCat(getpid()).c_str(), 1);
  setenv("MATRIX_RUN_PROCESSES", ProcessListPath(run.report_dir, run.base, getpid()).c_str(), 1);
  for (const auto& [name, value] : o.env) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> program_argv(argv + o.program, argv + argc);
  program_argv.push_back(nullptr);
  if (o.perf_map) AddNodePerfMap(run.base, program_argv);
  execvp(run.program.c_str(), program_argv.data());
  std::fprintf(stderr, "matrix-run: %s: %s\n", run.program.c_str(), strerror(errno));
  _exit(127);
}

// Waits for `child`, routing the forwarded signals to it meanwhile (see
// Forwarder::Route). main() blocked them, and SIGCHLD, before fork: they are taken
// here, one at a time, never in a handler. False when waitpid fails.
bool WaitForChild(pid_t child, GroupWitness& witness, int* status) {
  sigset_t waited;
  sigemptyset(&waited);
  for (int s : kForwardedSignals) sigaddset(&waited, s);
  sigaddset(&waited, SIGCHLD);
  Forwarder forwarder(child, witness);
  for (;;) {
    const pid_t done = waitpid(child, status, WNOHANG);
    if (done == child) return true;
    if (done < 0 && errno != EINTR) {
      std::fprintf(stderr, "matrix-run: waitpid: %s\n", strerror(errno));
      return false;
    }
    siginfo_t info;
    const int signal_number = sigwaitinfo(&waited, &info);
    if (signal_number > 0 && signal_number != SIGCHLD) forwarder.Route(signal_number, info);
  }
}

// Every monitored process of the run, the launched program first, each with
// its own summary (a followed child writes its own file); then the run's
// process list goes.
void SummarizeRun(const Options& o, const Launch& run, pid_t child) {
  const std::string list = ProcessListPath(run.report_dir, run.base, child);
  if (!o.quiet) {
    std::vector<std::pair<std::string, pid_t>> processes = {
        {absl::StrCat(run.base, "-", child), child}};
    std::ifstream in(list);
    std::string name;
    pid_t pid = 0;
    while (in >> name >> pid) {
      if (pid != child) processes.emplace_back(name, pid);
    }
    const std::string shell = ScriptShell(run.program);
    for (const auto& [report_name, process] : processes) {
      Summarize(run.report_dir, report_name, process, process == child, shell);
    }
  }
  unlink(list.c_str());
}

// Exits as the child did: with its status, or by its signal.
int ExitLikeChild(const std::string& program, int status) {
  if (WIFSIGNALED(status)) {
    const int signal_number = WTERMSIG(status);
    std::fprintf(stderr, "matrix-run: %s killed by signal %d (%s)\n", program.c_str(),
                 signal_number, strsignal(signal_number));
    std::fflush(nullptr);
    signal(signal_number, SIG_DFL);
    kill(getpid(), signal_number);
    return 128 + signal_number;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<Options> parsed = ParseOptions(argc, argv);
  if (!parsed.ok()) Fail(std::string(parsed.status().message()));
  const Options& o = *parsed;
  if (o.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (o.program >= argc) Fail("no program to run");
  Launch run;
  run.program = argv[o.program];
  if (!Executable(run.program)) Fail(absl::StrCat(run.program, ": no such executable program"));
  run.agent = FindAgent();
  if (run.agent.empty()) {
    std::fprintf(stderr, "matrix-run: libmatrix-agent.so not found beside %s or in ../lib\n",
                 argv[0]);
    return 2;
  }
  run.report_dir = AbsoluteDir(o.report_dir);
  run.base = std::string(matrix::BaseName(run.program));

  // The launcher forwards termination signals to the child while it waits
  // (WaitForChild). Blocked from here on, with SIGCHLD, so that none is lost
  // before the child is known (or in the child before its exec).
  sigset_t taken, initial_mask;
  sigemptyset(&taken);
  for (int s : kForwardedSignals) sigaddset(&taken, s);
  sigaddset(&taken, SIGCHLD);
  sigprocmask(SIG_BLOCK, &taken, &initial_mask);
  GroupWitness witness;
  if (!witness.Start()) {
    std::fprintf(stderr,
                 "matrix-run: no group witness (%s): signals sent to the process group "
                 "may reach the program twice\n",
                 strerror(errno));
  }

  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "matrix-run: fork: %s\n", strerror(errno));
    return 2;
  }
  if (child == 0) ExecProgram(o, run, initial_mask, argv, argc);
  int status = 0;
  if (!WaitForChild(child, witness, &status)) return 2;
  // Those that come now are absorbed (ExitLikeChild may raise the child's).
  for (int s : kForwardedSignals) signal(s, SIG_IGN);
  sigprocmask(SIG_SETMASK, &initial_mask, nullptr);
  // node never removes its perf map; /tmp would fill up run after run. (The
  // program's own node children keep theirs.)
  if (o.perf_map) unlink(absl::StrCat("/tmp/perf-", child, ".map").c_str());
  SummarizeRun(o, run, child);
  return ExitLikeChild(run.program, status);
}

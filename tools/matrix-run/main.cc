// matrix-run: watches an unmodified program with matrix-cpp (docs/matrix-run.md).
//
//   matrix-run [--report-dir D] [--anr MS] [--lag MS] [--evil MS] [--no-slow-stacks]
//              [--no-frames] [--symbolize=off]
//              [--fps-slice MS] [--timeline-window MS] [--refresh-hz HZ] [--follow-exec]
//              [--key-skip M]... [--key-program M]... [--perf-map]
//              [--app-version V] [--hostname] -- PROGRAM [ARGS...]
//
// Forks; the child puts libmatrix-agent.so (found beside this binary, or in
// ../lib*/ of an install tree) in LD_PRELOAD, sets the MATRIX_* variables the
// agent reads and its own pid as MATRIX_AGENT_PID, and execs PROGRAM. The
// parent forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT to the child, waits, prints
// where the reports went and one line per issue kind of this run, and exits
// with the child's status (or dies of the child's signal).

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
    "  --quiet            no summary at exit\n";

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

// A positive millisecond count for `flag`.
std::string PositiveMs(const std::string& flag, const char* value, int64_t min_ms = 1) {
  int64_t ms = 0;
  if (value == nullptr) Fail(absl::StrCat(flag, " needs a value"));
  if (!absl::SimpleAtoi(value, &ms) || ms <= 0) {
    Fail(absl::StrCat(flag, " ", value, ": expected a positive number of milliseconds"));
  }
  if (ms < min_ms) Fail(absl::StrCat(flag, " ", value, ": expected at least ", min_ms, " ms"));
  return absl::StrCat(ms);
}

// Whether `program` can be executed as execvp would find it.
bool Executable(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string paths = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= paths.size()) {
    size_t end = paths.find(':', start);
    if (end == std::string::npos) end = paths.size();
    std::string dir = paths.substr(start, end - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = absl::StrCat(dir, "/", program);
    if (IsFile(candidate) && access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

pid_t g_child = 0;

void Forward(int signal_number) {
  if (g_child > 0) kill(g_child, signal_number);
}

// The file the agents of one run list their processes in (the agent's
// MATRIX_RUN_PROCESSES): hidden in the report directory, removed at exit.
std::string ProcessListPath(const std::string& report_dir, const std::string& base, pid_t pid) {
  return absl::StrCat(report_dir, "/.", base, "-", pid, ".processes");
}

// Prints the exit summary of one process: its issues by kind, from its file
// and the files of other kinds beside it (<name>.fps.jsonl, ...: docs/reports.md,
// "Retention"), rotated files included. `launched`: the program matrix-run
// started (else a child it exec'ed).
void Summarize(const std::string& report_dir, const std::string& name, pid_t pid, bool launched) {
  const std::string file = absl::StrCat(report_dir, "/", name, ".jsonl");
  const std::string who = launched ? "" : absl::StrCat("child ", name, ": ");
  if (!IsFile(file)) {
    std::fprintf(stderr, "matrix-run: %sno reports (%s was not written)\n", who.c_str(),
                 file.c_str());
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

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> env;  // MATRIX_* for the child.
  std::string report_dir;
  if (const char* d = std::getenv("MATRIX_REPORT_DIR"); d != nullptr && *d != '\0') {
    report_dir = d;
  } else {
    report_dir = "./matrix-reports";
  }
  bool quiet = false;
  bool perf_map = false;
  std::vector<std::string> key_skip, key_program;  // --key-skip, --key-program.
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--") {
      ++i;
      break;
    } else if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--report-dir") {
      if (value == nullptr || *value == '\0') Fail("--report-dir needs a directory");
      report_dir = value;
      ++i;
    } else if (arg == "--anr") {
      env.emplace_back("MATRIX_ANR_MS", PositiveMs(arg, value));
      ++i;
    } else if (arg == "--lag") {
      env.emplace_back("MATRIX_LAG_MS", PositiveMs(arg, value));
      ++i;
    } else if (arg == "--evil") {
      env.emplace_back("MATRIX_EVIL_MS", PositiveMs(arg, value));
      ++i;
    } else if (arg == "--fps-slice") {
      // TraceConfig::kMinFpsTimeSlice: shorter slices flood the reports.
      env.emplace_back("MATRIX_FPS_SLICE_MS", PositiveMs(arg, value, 500));
      ++i;
    } else if (arg == "--timeline-window") {
      env.emplace_back("MATRIX_TIMELINE_WINDOW_MS", PositiveMs(arg, value));
      ++i;
    } else if (arg == "--refresh-hz") {
      double hz = 0;
      if (value == nullptr || !absl::SimpleAtod(value, &hz) || !(hz >= 1 && hz <= 1000)) {
        Fail("--refresh-hz needs a rate in [1, 1000]");
      }
      env.emplace_back("MATRIX_REFRESH_HZ", value);
      ++i;
    } else if (arg == "--key-skip" || arg == "--key-program") {
      // StackKeyRule's patterns: a directory ("/opt/app/") or a file name
      // prefix ("libfoo"); the agent checks them again.
      const std::string_view pattern = value != nullptr ? value : "";
      const bool directory = pattern.size() > 1 && pattern.front() == '/' && pattern.back() == '/';
      if (pattern.empty() || pattern.find(',') != std::string_view::npos ||
          (pattern.find('/') != std::string_view::npos && !directory)) {
        Fail(absl::StrCat(arg, " needs a directory (\"/opt/app/\", with both slashes) or a "
                          "file name prefix (\"libfoo\")"));
      }
      (arg == "--key-skip" ? key_skip : key_program).emplace_back(pattern);
      ++i;
    } else if (arg == "--no-slow-stacks") {
      env.emplace_back("MATRIX_SLOW_STACKS", "0");
    } else if (arg == "--no-frames") {
      env.emplace_back("MATRIX_FRAMES", "0");
    } else if (arg == "--symbolize=off" || arg == "--symbolize=on") {
      env.emplace_back("MATRIX_SYMBOLIZE", arg == "--symbolize=on" ? "1" : "0");
    } else if (arg.starts_with("--symbolize")) {
      Fail(absl::StrCat(arg, ": expected --symbolize=off or --symbolize=on"));
    } else if (arg == "--follow-exec") {
      env.emplace_back("MATRIX_AGENT_FOLLOW_EXEC", "1");
    } else if (arg == "--perf-map") {
      perf_map = true;
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (arg == "--app-version") {
      if (value == nullptr || *value == '\0') Fail("--app-version needs a version");
      env.emplace_back("MATRIX_APP_VERSION", value);
      ++i;
    } else if (arg == "--hostname") {
      env.emplace_back("MATRIX_REPORT_HOSTNAME", "1");
    } else if (arg.size() > 1 && arg[0] == '-') {
      Fail(absl::StrCat("unknown option ", arg));
    } else {
      break;  // The program, without "--".
    }
  }
  if (!key_skip.empty()) env.emplace_back("MATRIX_KEY_SKIP", absl::StrJoin(key_skip, ","));
  if (!key_program.empty()) {
    env.emplace_back("MATRIX_KEY_PROGRAM", absl::StrJoin(key_program, ","));
  }
  if (i >= argc) Fail("no program to run");
  const std::string program = argv[i];
  if (!Executable(program)) Fail(absl::StrCat(program, ": no such executable program"));
  const std::string agent = FindAgent();
  if (agent.empty()) {
    std::fprintf(stderr, "matrix-run: libmatrix-agent.so not found beside %s or in ../lib\n",
                 argv[0]);
    return 2;
  }
  // Relative report directories are the caller's: make it absolute so a
  // program that changes directory still writes there.
  if (report_dir[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) report_dir = absl::StrCat(cwd, "/", report_dir);
  }
  std::string base = program.substr(program.rfind('/') + 1);

  // The launcher forwards termination signals to the child while it waits.
  struct sigaction forward = {};
  forward.sa_handler = &Forward;
  sigemptyset(&forward.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(s, &forward, nullptr);

  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "matrix-run: fork: %s\n", strerror(errno));
    return 2;
  }
  if (child == 0) {
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) signal(s, SIG_DFL);
    const char* preload = std::getenv("LD_PRELOAD");
    const std::string preloads =
        preload != nullptr && *preload != '\0' ? absl::StrCat(agent, ":", preload) : agent;
    setenv("LD_PRELOAD", preloads.c_str(), 1);
    setenv("MATRIX_REPORT_DIR", report_dir.c_str(), 1);
    setenv("MATRIX_REPORT_NAME", absl::StrCat(base, "-", getpid()).c_str(), 1);
    setenv("MATRIX_AGENT_PID", absl::StrCat(getpid()).c_str(), 1);
    setenv("MATRIX_RUN_PROCESSES", ProcessListPath(report_dir, base, getpid()).c_str(), 1);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> program_argv(argv + i, argv + argc);
    program_argv.push_back(nullptr);
    if (perf_map) {
      // --perf-basic-prof: node writes /tmp/perf-PID.map, names for its JIT
      // code. --interpreted-frames-native-stack: each interpreted function
      // gets its own copy of the interpreter's entry, so interpreted frames
      // are named too. --perf-basic-prof also makes V8 write a log
      // (isolate-0x...-PID-v8.log) into the working directory; on node's
      // command line --logfile=/dev/null stops that, but NODE_OPTIONS does
      // not allow --logfile (docs/matrix-run.md, "JavaScript names").
      constexpr char kNodeFlags[] = "--perf-basic-prof --interpreted-frames-native-stack";
      if (base == "node" || base == "nodejs") {
        static char perf_basic_prof[] = "--perf-basic-prof";
        static char interpreted[] = "--interpreted-frames-native-stack";
        static char no_log[] = "--logfile=/dev/null";
        program_argv.insert(program_argv.begin() + 1, {perf_basic_prof, interpreted, no_log});
      } else {
        // A script or launcher that starts node: only node reads NODE_OPTIONS
        // (every node the program starts).
        const char* options = std::getenv("NODE_OPTIONS");
        const std::string node_options = options != nullptr && *options != '\0'
                                             ? absl::StrCat(options, " ", kNodeFlags)
                                             : kNodeFlags;
        setenv("NODE_OPTIONS", node_options.c_str(), 1);
      }
    }
    execvp(program.c_str(), program_argv.data());
    std::fprintf(stderr, "matrix-run: %s: %s\n", program.c_str(), strerror(errno));
    _exit(127);
  }
  g_child = child;
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      std::fprintf(stderr, "matrix-run: waitpid: %s\n", strerror(errno));
      return 2;
    }
  }
  g_child = 0;
  // node never removes its perf map; /tmp would fill up run after run. (The
  // program's own node children keep theirs.)
  if (perf_map) unlink(absl::StrCat("/tmp/perf-", child, ".map").c_str());

  // Every monitored process of the run, the launched program first, each
  // with its own summary (a followed child writes its own file).
  const std::string list = ProcessListPath(report_dir, base, child);
  if (!quiet) {
    std::vector<std::pair<std::string, pid_t>> processes = {
        {absl::StrCat(base, "-", child), child}};
    std::ifstream in(list);
    std::string name;
    pid_t pid = 0;
    while (in >> name >> pid) {
      if (pid != child) processes.emplace_back(name, pid);
    }
    for (const auto& [report_name, process] : processes) {
      Summarize(report_dir, report_name, process, process == child);
    }
  }
  unlink(list.c_str());
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

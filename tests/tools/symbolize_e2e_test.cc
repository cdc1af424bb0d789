// Frames named off the host: a stripped program of ours (symbolize_target,
// its debug file kept apart) hangs 6 s in ComputeLayoutForever under
// matrix-run. On the host its frame has no name: the hang is keyed by
// module+0xaddress, and the frame carries its build id and ELF address.
// matrix-report symbolize names it from a real debuginfod server on
// loopback (Debian's debuginfod over a directory holding only the debug
// file), from a .build-id directory, and says clearly when no server
// answers (frames left raw, nothing lost). matrix-run --symbolize=off
// records every frame raw, named off the host the same way. push
// --debuginfod stores the issue named, into a real clickhouse-server; fleet
// show --debug-dir names a raw one.

#include <curl/curl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent_test_util.h"
#include "clickhouse_test_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/issue_record.h"
#include "matrix/trace/stack_key.h"
#include "matrix/trace/symbolizer.h"

namespace matrix::report {
namespace {

using agent_test::RunResult;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kTarget = SYMBOLIZE_TARGET_STRIPPED;
const std::string kDebugFile = SYMBOLIZE_TARGET_DEBUG;

std::string TempDir(const std::string& name) {
  const std::string dir = agent_test::NewReportDir(absl::StrCat("symbolize-", name));
  std::filesystem::create_directories(dir);
  return dir;
}

std::string BuildIdOf(const std::string& path) {
  std::optional<internal::ElfFileInfo> info = internal::ElfFileInfo::Read(path);
  return info.has_value() ? info->build_id : "";
}

// The line of symbolize_target.c marked "spin-line": where the hang spins.
int SpinLine() {
  std::ifstream in(SYMBOLIZE_TARGET_SOURCE);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (absl::StrContains(line, "spin-line")) return n;
  }
  return -1;
}

// matrix-report with a private debuginfod cache and no servers but ours.
RunResult Report(const std::vector<std::string>& args, const std::string& cache) {
  std::vector<std::string> argv = {MATRIX_REPORT_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return agent_test::Run(argv, {"DEBUGINFOD_CACHE_PATH=" + cache, "DEBUGINFOD_URLS="});
}

// The ANR report of one run of the target (6 s of CPU time spinning).
IssueRecord RunTarget(const std::string& dir, const std::vector<std::string>& flags = {}) {
  std::vector<std::string> args = {MATRIX_RUN_PATH, "--report-dir", dir, "--anr", "5000",
                                   "--quiet"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"--", kTarget, "6000"});
  const RunResult run = agent_test::Run(args);
  EXPECT_EQ(run.exit_code(), 0) << run.err;
  for (IssueRecord& record : agent_test::ReadIssues(dir)) {
    if (record.issue.has_anr()) return record;
  }
  ADD_FAILURE() << "no ANR report in " << dir << "\n" << run.err;
  return {};
}

// ComputeLayoutForever's start in the ELF file, from the debug file's
// symbols; 0 when nm cannot tell.
uint64_t StartOfComputeLayout() {
  FILE* pipe = popen(("nm " + kDebugFile + " | grep ' ComputeLayoutForever$'").c_str(), "r");
  uint64_t address = 0;
  if (pipe != nullptr) {
    char line[256] = {};
    if (fgets(line, sizeof(line), pipe) != nullptr) address = strtoull(line, nullptr, 16);
    pclose(pipe);
  }
  return address;
}

const proto::StackFrame* TargetFrame(const proto::Issue& issue) {
  for (const proto::StackFrame& frame : issue.anr().thread_stack().frames()) {
    if (frame.module() == kTarget) return &frame;
  }
  return nullptr;
}

// The innermost frame of the target is ComputeLayoutForever, at the spin
// line, and the report is keyed by it.
// (Every hang report of the run: the LAG at 2 s and the ANR at 5 s.)
void ExpectNamed(const std::string& dir) {
  int hangs = 0;
  for (const IssueRecord& record : agent_test::ReadIssues(dir)) {
    if (!record.issue.has_anr()) continue;
    ++hangs;
    const proto::StackFrame* frame = TargetFrame(record.issue);
    ASSERT_NE(frame, nullptr);
    EXPECT_EQ(frame->function(), "ComputeLayoutForever");
    EXPECT_THAT(frame->file(), EndsWith("symbolize_target.c"));
    EXPECT_EQ(static_cast<int>(frame->line()), SpinLine());
    EXPECT_EQ(record.issue.anr().stack_key(), "ComputeLayoutForever");
    EXPECT_EQ(record.issue.key(), "ComputeLayoutForever");
  }
  EXPECT_GE(hangs, 1) << dir;
}

// Debian's debuginfod over `dir`, on a free loopback port, until destroyed.
class DebuginfodServer {
 public:
  DebuginfodServer(const std::string& dir, const std::string& work) {
    port_ = test_util::FreePort();
    pid_ = fork();
    if (pid_ == 0) {
      const std::string log = work + "/debuginfod.log";
      freopen(log.c_str(), "w", stdout);
      freopen(log.c_str(), "a", stderr);
      const std::string port = absl::StrCat(port_), db = work + "/debuginfod.sqlite";
      execl(MATRIX_DEBUGINFOD, "debuginfod", "-F", "-p", port.c_str(), "-d", db.c_str(), "-c",
            "1", "-g", "0", dir.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~DebuginfodServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_); }

  // Polls the build id's URL (its first scan takes a while) until it serves.
  bool WaitServes(const std::string& build_id) {
    const absl::Time deadline = absl::Now() + absl::Seconds(90);
    const std::string probe = absl::StrCat(url(), "/buildid/", build_id, "/debuginfo");
    while (absl::Now() < deadline) {
      if (HttpStatus(probe) == 200) return true;
      absl::SleepFor(absl::Milliseconds(200));
    }
    return false;
  }

 private:
  static size_t Discard(char*, size_t size, size_t count, void*) { return size * count; }
  static long HttpStatus(const std::string& url) {
    CURL* curl = curl_easy_init();
    if (curl == nullptr) return 0;
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
    long status = 0;
    if (curl_easy_perform(curl) == CURLE_OK) {
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    }
    curl_easy_cleanup(curl);
    return status;
  }

  int port_ = 0;
  pid_t pid_ = -1;
};

TEST(SymbolizeE2ETest, AStrippedHang_KeyedByModuleOffset_IsNamedOffTheHost) {
  const std::string work = TempDir("stripped");
  const std::string reports = work + "/reports";
  const IssueRecord anr = RunTarget(reports);
  ASSERT_TRUE(anr.issue.has_anr());
  // On the host: no name, the build id and ELF address, keyed by them.
  const proto::StackFrame* frame = TargetFrame(anr.issue);
  ASSERT_NE(frame, nullptr) << anr.issue.anr().stack_text();
  EXPECT_EQ(frame->function(), "");
  const std::string build_id = BuildIdOf(kDebugFile);
  ASSERT_FALSE(build_id.empty());
  EXPECT_EQ(frame->build_id(), build_id);
  EXPECT_FALSE(frame->no_build_id());
  EXPECT_NE(frame->elf_address(), 0u);
  // Keyed by the function's start, which the unwind info gives even
  // stripped: the same wherever in ComputeLayoutForever the captures landed.
  ASSERT_NE(StartOfComputeLayout(), 0u);
  EXPECT_EQ(frame->elf_address() - frame->offset(), StartOfComputeLayout());
  EXPECT_EQ(anr.issue.anr().stack_key(), UnnamedFrameKey(kTarget, StartOfComputeLayout()));
  EXPECT_EQ(anr.issue.key(), anr.issue.anr().stack_key());

  // A real debuginfod server holding only the debug file.
  const std::string served = work + "/served";
  std::filesystem::create_directories(served);
  std::filesystem::copy_file(kDebugFile, served + "/symbolize_target.debug");
  DebuginfodServer server(served, work);
  ASSERT_TRUE(server.WaitServes(build_id))
      << agent_test::ReadFile(work + "/debuginfod.log");
  RunResult run = Report({"symbolize", "--debuginfod", server.url(), "-o", work + "/named",
                          reports}, work + "/cache");
  EXPECT_EQ(run.exit_code(), 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("computed again")) << run.err;
  ExpectNamed(work + "/named");

  // Offline: a .build-id directory.
  const std::string ids = absl::StrCat(work, "/ids/.build-id/", build_id.substr(0, 2));
  std::filesystem::create_directories(ids);
  std::filesystem::copy_file(kDebugFile, absl::StrCat(ids, "/", build_id.substr(2), ".debug"));
  run = Report({"symbolize", "--debug-dir", work + "/ids", "-o", work + "/offline", reports},
               work + "/cache2");
  EXPECT_EQ(run.exit_code(), 0) << run.err;
  ExpectNamed(work + "/offline");

  // No server answers: a clear error, the frames left raw, every line kept.
  const std::string nobody = absl::StrCat("http://127.0.0.1:", test_util::FreePort());
  run = Report({"symbolize", "--debuginfod", nobody, "-o", work + "/raw", reports},
               work + "/cache3");
  EXPECT_EQ(run.exit_code(), 1);
  EXPECT_THAT(run.err, HasSubstr(absl::StrCat("(build id ", build_id, ") left raw")));
  EXPECT_THAT(run.err, HasSubstr(absl::StrCat("debuginfod ", nobody, ": ")));
  EXPECT_THAT(run.err, HasSubstr("error: a debuginfod server could not be asked"));
  // A server given with credentials is named without its password.
  const std::string host_port = absl::StrCat("127.0.0.1:", test_util::FreePort());
  RunResult hidden = Report({"symbolize", "--debuginfod",
                             absl::StrCat("http://reader:secret@", host_port, "/?password=secret"),
                             "-o", work + "/raw2", reports},
                            work + "/cache4");
  EXPECT_EQ(hidden.exit_code(), 1);
  EXPECT_THAT(hidden.err, HasSubstr(absl::StrCat("debuginfod http://reader:***@", host_port,
                                                 "/?password=***: ")));
  EXPECT_THAT(hidden.out + hidden.err, Not(HasSubstr("secret")));
  for (const auto& entry : std::filesystem::directory_iterator(reports)) {
    if (entry.path().extension() != ".jsonl") continue;
    const std::string copy = work + "/raw/" + entry.path().filename().string();
    EXPECT_EQ(agent_test::ReadFile(copy), agent_test::ReadFile(entry.path())) << copy;
  }
}

TEST(SymbolizeE2ETest, SymbolizeOff_RecordsEveryFrameRaw_NamedOffTheHost) {
  const std::string work = TempDir("off");
  const std::string reports = work + "/reports";
  const IssueRecord anr = RunTarget(reports, {"--symbolize=off"});
  ASSERT_TRUE(anr.issue.has_anr());
  int elf_frames = 0;
  for (const proto::StackFrame& frame : anr.issue.anr().thread_stack().frames()) {
    if (frame.module().empty() || frame.module()[0] != '/') continue;
    ++elf_frames;
    EXPECT_EQ(frame.function(), "") << frame.module();
    EXPECT_EQ(frame.file(), "") << frame.module();
    EXPECT_TRUE(!frame.build_id().empty() || frame.no_build_id()) << frame.module();
  }
  EXPECT_GE(elf_frames, 3);
  ASSERT_NE(StartOfComputeLayout(), 0u);
  EXPECT_EQ(anr.issue.anr().stack_key(), UnnamedFrameKey(kTarget, StartOfComputeLayout()));

  const std::string build_id = BuildIdOf(kDebugFile);
  const std::string ids = absl::StrCat(work, "/ids/.build-id/", build_id.substr(0, 2));
  std::filesystem::create_directories(ids);
  std::filesystem::copy_file(kDebugFile, absl::StrCat(ids, "/", build_id.substr(2), ".debug"));
  const RunResult run = Report(
      {"symbolize", "--debug-dir", work + "/ids", "-o", work + "/named", reports}, work + "/cache");
  EXPECT_EQ(run.exit_code(), 0) << run.err;
  ExpectNamed(work + "/named");
  // GLib's frames are named too, from this host's own copy of the library.
  std::string functions;
  for (const IssueRecord& record : agent_test::ReadIssues(work + "/named")) {
    if (!record.issue.has_anr()) continue;
    for (const auto& frame : record.issue.anr().thread_stack().frames()) {
      functions += frame.function() + "\n";
    }
  }
  EXPECT_THAT(functions, HasSubstr("g_main_context_dispatch")) << functions;
}

// A raw ANR issue of the stripped target, as the host writes it.
std::string RawIssueLine(int64_t time_ms, uint64_t elf_address) {
  proto::Issue issue;
  issue.set_tag("Trace_EvilMethod");
  issue.set_time_ms(time_ms);
  issue.set_process("symbolize_target");
  issue.set_pid(4242);
  issue.mutable_app()->set_host_id("5c1f0e7d2a9b4c31");
  proto::AnrReport* anr = issue.mutable_anr();
  anr->set_detail(proto::ANR);
  anr->set_cost_ms(6000);
  proto::StackFrame* frame = anr->mutable_thread_stack()->add_frames();
  frame->set_module(kTarget);
  frame->set_build_id(BuildIdOf(kDebugFile));
  frame->set_elf_address(elf_address);
  frame->set_offset(elf_address);
  proto::StackFrame* glib = anr->mutable_thread_stack()->add_frames();
  glib->set_module("/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0");
  glib->set_function("g_main_context_dispatch");
  anr->set_stack_key(UnnamedFrameKey(kTarget, elf_address));
  issue.set_key(anr->stack_key());
  return RecordToJson(RecordFromIssue(issue, {}));
}

// An address inside ComputeLayoutForever, from the debug file's symbols.
uint64_t AddressInComputeLayout() {
  const uint64_t start = StartOfComputeLayout();
  return start == 0 ? 0 : start + 4;
}

TEST(SymbolizeE2ETest, PushStoresTheIssueNamed_FleetShowNamesARawOne) {
  const std::string work = TempDir("push");
  const std::string build_id = BuildIdOf(kDebugFile);
  const std::string ids = absl::StrCat(work, "/ids/.build-id/", build_id.substr(0, 2));
  std::filesystem::create_directories(ids);
  std::filesystem::copy_file(kDebugFile, absl::StrCat(ids, "/", build_id.substr(2), ".debug"));
  const uint64_t address = AddressInComputeLayout();
  ASSERT_NE(address, 0u);
  std::filesystem::create_directories(work + "/named-push");
  std::filesystem::create_directories(work + "/raw-push");
  std::ofstream(work + "/named-push/app.jsonl") << RawIssueLine(1764300000000, address) << "\n";
  std::ofstream(work + "/raw-push/app.jsonl") << RawIssueLine(1764300005000, address + 2) << "\n";

  // Named by a real debuginfod server on loopback before it is stored.
  const std::string served = work + "/served";
  std::filesystem::create_directories(served);
  std::filesystem::copy_file(kDebugFile, served + "/symbolize_target.debug");
  DebuginfodServer debuginfod(served, work);
  ASSERT_TRUE(debuginfod.WaitServes(build_id)) << agent_test::ReadFile(work + "/debuginfod.log");
  test_util::ClickHouseTestServer server;
  ASSERT_TRUE(server.Start().ok());
  RunResult run = Report({"push", "--clickhouse", server.url(), "--debuginfod", debuginfod.url(),
                          work + "/named-push"}, work + "/cache");
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  run = Report({"fleet", "--clickhouse", server.url(), "top"}, work + "/cache");
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("ComputeLayoutForever")) << run.out;

  // Pushed raw, shown named.
  run = Report({"push", "--clickhouse", server.url(), work + "/raw-push"}, work + "/cache");
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  const std::string raw_key = UnnamedFrameKey(kTarget, address + 2);
  run = Report({"fleet", "--clickhouse", server.url(), "top"}, work + "/cache");
  EXPECT_THAT(run.out, HasSubstr(raw_key)) << run.out;
  run = Report({"fleet", "--clickhouse", server.url(), "--debug-dir", work + "/ids", "show",
                raw_key}, work + "/cache");
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("ComputeLayoutForever")) << run.out;
  EXPECT_THAT(run.out, HasSubstr("symbolize_target.c:")) << run.out;
}

}  // namespace
}  // namespace matrix::report

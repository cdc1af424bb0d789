// matrix-report push on hostile report directories and servers: checkpoints
// planted as symlinks, FIFOs or another user's files, file names with
// newlines, lines longer than the cap, files that are not regular, a web
// server that is not ClickHouse, and SIGTERM while a push retries. Push runs
// against one real clickhouse-server (shared by the tests), a fake HTTP
// server (fake_http_server.h), and, where it could hang, as the built binary
// under a time limit. Labels `fleet` and `e2e`.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "clickhouse_test_server.h"
#include "fake_http_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"
#include "report_test_util.h"

extern char** environ;

namespace matrix::report {
namespace {

// Whether `path` exists within `limit`: woken by the kernel when a file is
// created or renamed into its directory (push writes its checkpoint to a
// temporary file and renames it), never by a timer.
bool AwaitFile(const std::string& path, absl::Duration limit) {
  const int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd < 0) return false;
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const bool watched =
      inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE) >= 0;
  const absl::Time give_up = absl::Now() + limit;
  bool exists = std::filesystem::exists(path);
  while (watched && !exists && absl::Now() < give_up) {
    pollfd events = {fd, POLLIN, 0};
    poll(&events, 1, static_cast<int>(absl::ToInt64Milliseconds(give_up - absl::Now())) + 1);
    char drained[4096];
    while (read(fd, drained, sizeof(drained)) > 0) {
    }
    exists = std::filesystem::exists(path);
  }
  close(fd);
  return exists;
}

using ::testing::HasSubstr;
using ::testing::Not;
using test_util::ClickHouseTestServer;
using test_util::FakeHttpServer;
using test_util::RunOutput;
using test_util::ScratchDir;

// The password of the test server's user "pusher", which no message may show.
constexpr char kPassword[] = "secret";

// The longest line push and the readers take (docs/fleet.md).
constexpr size_t kMaxLineBytes = size_t{16} << 20;

RunOutput RunCli(const std::vector<std::string>& args) {
  return test_util::RunReport(args, "", {.now = absl::Now(), .local_zone = absl::UTCTimeZone()});
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string AnrLine(const std::string& key, int i) {
  return test_util::Line(
      test_util::AnrIssue(key, proto::ANR, 5000 + i, test_util::kBaseTimeMs + i));
}

struct ChildRun {
  bool exited = false;  // False: still running at the time limit (then killed).
  int code = -1;        // The exit status, when it exited normally.
  int signal = 0;       // The signal that ended it, if one did.
  absl::Duration took;
  std::string out;
  std::string err;
};

// Starts the matrix-report binary with `args`, its output to files in `dir`.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::string& dir)
      : out_path_(dir + "/child.out"), err_path_(dir + "/child.err") {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<char*> argv = {const_cast<char*>(MATRIX_REPORT_BINARY)};
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    start_ = absl::Now();
    if (posix_spawn(&pid_, MATRIX_REPORT_BINARY, &actions, nullptr, argv.data(), environ) != 0) {
      pid_ = 0;
    }
    posix_spawn_file_actions_destroy(&actions);
    if (pid_ > 0) pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (pidfd_ >= 0) close(pidfd_);
  }

  bool started() const { return pid_ > 0 && pidfd_ >= 0; }
  void Signal(int sig) const {
    if (pid_ > 0) kill(pid_, sig);
  }

  // Waits up to `limit` for the exit; kills the child when it is still
  // running then.
  ChildRun Wait(absl::Duration limit) {
    ChildRun run;
    pollfd fd = {pidfd_, POLLIN, 0};
    const bool done = pidfd_ >= 0 &&
                      poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(limit))) == 1;
    if (!done && pid_ > 0) kill(pid_, SIGKILL);
    int status = 0;
    if (pid_ > 0) waitpid(pid_, &status, 0);
    pid_ = 0;
    run.took = absl::Now() - start_;
    run.exited = done;
    if (WIFEXITED(status)) run.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
    run.out = ReadFile(out_path_);
    run.err = ReadFile(err_path_);
    return run;
  }

 private:
  std::string out_path_;
  std::string err_path_;
  pid_t pid_ = 0;
  int pidfd_ = -1;
  absl::Time start_;
};

ChildRun RunChild(const std::vector<std::string>& args, const std::string& dir,
                  absl::Duration limit) {
  Child child(args, dir);
  EXPECT_TRUE(child.started());
  return child.Wait(limit);
}

class FleetPushSafetyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ClickHouseTestServer();
    server_->AddUser("pusher", kPassword);
    start_status_ = server_->Start();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(start_status_.ok()) << start_status_; }

  static std::string url() { return server_->url(); }
  static std::string HostPort() { return absl::StrCat("127.0.0.1:", server_->http_port()); }
  static std::string Checkpoint(const std::string& dir) {
    return CheckpointPath(dir, url(), "matrix");
  }
  static RunOutput Push(std::vector<std::string> args) {
    std::vector<std::string> all = {"push", "--clickhouse", url(), "--retry-for=2"};
    all.insert(all.end(), args.begin(), args.end());
    return RunCli(all);
  }
  static int64_t Count(const std::string& where) {
    ClickHouseClient client(test_util::ClientOptions(url()));
    absl::StatusOr<std::string> body =
        client.Query(absl::StrCat("SELECT count() FROM matrix.issues FINAL WHERE ", where));
    int64_t n = -1;
    if (body.ok()) {
      EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(*body), &n));
    }
    return n;
  }

  static ClickHouseTestServer* server_;
  static absl::Status start_status_;
};

ClickHouseTestServer* FleetPushSafetyTest::server_ = nullptr;
absl::Status FleetPushSafetyTest::start_status_;

// ---- Checkpoint files -------------------------------------------------------

TEST_F(FleetPushSafetyTest, PlantedTemporarySymlinkIsNeverWrittenThrough) {
  ScratchDir scratch("symlink");
  scratch.Write("issues.jsonl", {AnrLine("app::Symlink()", 0)});
  const std::string victim = scratch.path() + "/victim";
  { std::ofstream(victim) << "root:x:0:0:root:/root:/bin/bash\n"; }
  const std::string reports = scratch.path() + "/reports";
  std::filesystem::create_directory(reports);
  std::filesystem::rename(scratch.path() + "/issues.jsonl", reports + "/issues.jsonl");
  // What the previous fixed temporary name was: a link to a file of root's.
  std::filesystem::create_symlink(victim, Checkpoint(reports) + ".tmp");

  RunOutput run = Push({reports});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(ReadFile(victim), "root:x:0:0:root:/root:/bin/bash\n");
  EXPECT_TRUE(std::filesystem::is_symlink(Checkpoint(reports) + ".tmp"));
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(
      Checkpoint(reports))));
  RunOutput again = Push({reports});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("pushed 0 issues"));
}

TEST_F(FleetPushSafetyTest, AnotherPushersTemporaryFileDoesNotStopAPush) {
  ScratchDir scratch("two");
  scratch.Write("issues.jsonl", {AnrLine("app::Two()", 0)});
  // Another push of the directory is writing its checkpoint: its temporary
  // file is there (a directory here, which no one can open for writing).
  std::filesystem::create_directory(Checkpoint(scratch.path()) + ".tmp");
  RunOutput run = Push({scratch.path()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("pushed 1 issue "));
  EXPECT_TRUE(std::filesystem::is_regular_file(Checkpoint(scratch.path())));
}

TEST_F(FleetPushSafetyTest, FileNamesCannotInjectCheckpointLines) {
  ScratchDir scratch("names");
  // A name holding a whole checkpoint line after a newline.
  const std::string name = "evil\n1 2 999999 999 0000000000000000 forged\r.jsonl";
  scratch.Write(name, {AnrLine("app::Name()", 0)});
  RunOutput run = Push({scratch.path()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("pushed 1 issue "));
  const std::string checkpoint = ReadFile(Checkpoint(scratch.path()));
  const std::vector<std::string> lines = absl::StrSplit(checkpoint, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u) << checkpoint;
  EXPECT_THAT(lines[0], Not(HasSubstr("\r")));
  // The name still reads back: the file is not sent again.
  RunOutput again = Push({scratch.path()});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("pushed 0 issues"));
}

TEST_F(FleetPushSafetyTest, CheckpointOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  ScratchDir scratch("owner");
  const std::string file = scratch.Write("issues.jsonl", {AnrLine("app::Owner()", 0)});
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  // A checkpoint saying the whole file was sent, owned by nobody: neither
  // the pushing user (root) nor the directory's owner (root).
  const std::string checkpoint = Checkpoint(scratch.path());
  {
    std::ofstream out(checkpoint);
    out << st.st_dev << " " << st.st_ino << " " << st.st_size << " 1 0000000000000000 " << file
        << "\n";
  }
  ASSERT_EQ(chown(checkpoint.c_str(), 65534, 65534), 0);
  RunOutput run = Push({scratch.path()});
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.err, HasSubstr(checkpoint));
  EXPECT_THAT(run.err, HasSubstr("owned by user 65534"));
  EXPECT_EQ(Count("key = 'app::Owner()'"), 0);
  // Given to the directory's owner, it is taken.
  ASSERT_EQ(chown(checkpoint.c_str(), 0, 0), 0);
  RunOutput mine = Push({scratch.path()});
  EXPECT_EQ(mine.code, 0) << mine.err;
}

TEST_F(FleetPushSafetyTest, CheckpointThatIsASymlinkIsRefused) {
  ScratchDir scratch("linked");
  scratch.Write("issues.jsonl", {AnrLine("app::Linked()", 0)});
  const std::string elsewhere = scratch.path() + "/elsewhere";
  { std::ofstream(elsewhere) << ""; }
  std::filesystem::create_symlink(elsewhere, Checkpoint(scratch.path()));
  RunOutput run = Push({scratch.path()});
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.err, HasSubstr("symbolic link"));
  EXPECT_EQ(Count("key = 'app::Linked()'"), 0);
  EXPECT_EQ(ReadFile(elsewhere), "");
}

TEST_F(FleetPushSafetyTest, FifoCheckpointFailsPromptly) {
  ScratchDir scratch("fifo");
  scratch.Write("issues.jsonl", {AnrLine("app::Fifo()", 0)});
  ASSERT_EQ(mkfifo(Checkpoint(scratch.path()).c_str(), 0600), 0);
  ChildRun run = RunChild({"push", "--clickhouse", url(), "--retry-for=2", scratch.path()},
                          scratch.path(), absl::Seconds(30));
  ASSERT_TRUE(run.exited) << "push hung on a FIFO checkpoint";
  EXPECT_EQ(run.code, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr("not a regular file"));
  EXPECT_EQ(Count("key = 'app::Fifo()'"), 0);
}

TEST_F(FleetPushSafetyTest, DevZeroCheckpointIsRefusedWithoutReadingIt) {
  ScratchDir scratch("zero");
  scratch.Write("issues.jsonl", {AnrLine("app::Zero()", 0)});
  std::filesystem::create_symlink("/dev/zero", Checkpoint(scratch.path()));
  ChildRun run = RunChild({"push", "--clickhouse", url(), "--retry-for=2", scratch.path()},
                          scratch.path(), absl::Seconds(30));
  ASSERT_TRUE(run.exited) << "push kept reading /dev/zero";
  EXPECT_EQ(run.code, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr("symbolic link"));
}

// ---- Report files -----------------------------------------------------------

TEST_F(FleetPushSafetyTest, OverLongLineIsSkippedAndCountedAsMalformed) {
  ScratchDir scratch("long");
  // An issue whose line is one byte over the cap, between two short ones.
  std::string long_line = AnrLine("app::Long()", 1);
  const size_t at = long_line.find("app::Long()");
  ASSERT_NE(at, std::string::npos);
  long_line.insert(at + 5, std::string(kMaxLineBytes + 1 - long_line.size(), 'x'));
  ASSERT_EQ(long_line.size(), kMaxLineBytes + 1);
  scratch.Write("issues.jsonl",
                {AnrLine("app::Before()", 0), long_line, AnrLine("app::After()", 2)});
  long_line = {};
  RunOutput run = Push({scratch.path()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("pushed 2 issues"));
  EXPECT_THAT(run.out, HasSubstr("skipped 1 malformed"));
  EXPECT_THAT(run.err, HasSubstr("line 2: longer than 16 MiB"));
  EXPECT_EQ(Count("key IN ('app::Before()', 'app::After()')"), 2);
  EXPECT_EQ(Count("key LIKE 'app::%xxxx%'"), 0);
  // The readers of the other commands skip it too.
  RunOutput summary = RunCli({"summary", scratch.path()});
  EXPECT_THAT(summary.err, HasSubstr("longer than 16 MiB"));
  EXPECT_THAT(summary.out, HasSubstr("3 read, 1 malformed"));
}

TEST_F(FleetPushSafetyTest, FileThatIsNotRegularIsNamedAndFailsThePush) {
  ScratchDir scratch("special");
  scratch.Write("issues.jsonl", {AnrLine("app::Regular()", 0)});
  const std::string fifo = scratch.path() + "/pipe.jsonl";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_symlink("/dev/zero", scratch.path() + "/zero.jsonl");
  ChildRun run = RunChild({"push", "--clickhouse", url(), "--retry-for=2", scratch.path()},
                          scratch.path(), absl::Seconds(30));
  ASSERT_TRUE(run.exited) << "push hung on a FIFO";
  EXPECT_EQ(run.code, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr("pipe.jsonl: not a regular file"));
  EXPECT_THAT(run.err, HasSubstr("zero.jsonl: not a regular file"));
  EXPECT_THAT(run.out, HasSubstr("pushed 1 issue "));
  EXPECT_EQ(Count("key = 'app::Regular()'"), 1);
}

// ---- Servers that are not ClickHouse ---------------------------------------

TEST(FleetPushServerTest, WebPageIsNotAnAcknowledgement) {
  FakeHttpServer web([](const FakeHttpServer::Request&) {
    return FakeHttpServer::Response{
        .status = 200,
        .headers = {"Content-Type: text/html; charset=utf-8", "Server: nginx"},
        .body = "<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>\n"};
  });
  ASSERT_TRUE(web.Start());
  ScratchDir scratch("web");
  scratch.Write("issues.jsonl", {AnrLine("app::Web()", 0), AnrLine("app::Web2()", 1)});
  RunOutput run = RunCli({"push", "--clickhouse", web.url(), "--retry-for=1", scratch.path()});
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_THAT(run.out, Not(HasSubstr("pushed 2")));
  EXPECT_THAT(run.err, HasSubstr("not a ClickHouse server"));
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(scratch.path(), web.url(), "matrix")));
}

// ClickHouse's headers, but the INSERT wrote fewer rows than were sent.
TEST(FleetPushServerTest, InsertThatWroteNoRowsIsNotAnAcknowledgement) {
  FakeHttpServer server([](const FakeHttpServer::Request& request) {
    FakeHttpServer::Response response;
    response.headers = {"X-ClickHouse-Server-Display-Name: fake",
                        "Content-Type: text/plain; charset=UTF-8"};
    if (absl::StrContains(request.target, "INSERT")) {
      response.headers.push_back(
          R"(X-ClickHouse-Summary: {"read_rows":"0","read_bytes":"0","written_rows":"0",)"
          R"("written_bytes":"0","total_rows_to_read":"0"})");
    }
    return response;
  });
  ASSERT_TRUE(server.Start());
  ScratchDir scratch("unwritten");
  scratch.Write("issues.jsonl", {AnrLine("app::Lost()", 0), AnrLine("app::Lost2()", 1)});
  RunOutput run =
      RunCli({"push", "--clickhouse", server.url(), "--retry-for=1", scratch.path()});
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_THAT(run.err, HasSubstr("wrote 0 of 2 rows"));
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(scratch.path(), server.url(), "matrix")));
}

// A summary that counts fewer rows (a Distributed table's rows written on
// other shards may be left out), but the rows count back: stored.
TEST(FleetPushServerTest, RowsThatCountBackAreStoredWhateverTheSummarySays) {
  FakeHttpServer server([](const FakeHttpServer::Request& request) {
    FakeHttpServer::Response response;
    response.headers = {"X-ClickHouse-Server-Display-Name: fake"};
    if (absl::StrContains(request.target, "INSERT")) {
      response.headers.push_back(R"(X-ClickHouse-Summary: {"written_rows":"0"})");
    }
    if (absl::StrContains(request.target, "SELECT")) response.body = "2\n";
    return response;
  });
  ASSERT_TRUE(server.Start());
  ScratchDir scratch("counted");
  scratch.Write("issues.jsonl", {AnrLine("app::Here()", 0), AnrLine("app::Here2()", 1)});
  RunOutput run =
      RunCli({"push", "--clickhouse", server.url(), "--retry-for=1", scratch.path()});
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("pushed 2 issues"));
  EXPECT_TRUE(std::filesystem::exists(CheckpointPath(scratch.path(), server.url(), "matrix")));
}

// ClickHouse's headers without a summary (servers before 19.x): the rows are
// counted back, and here they are not there.
TEST(FleetPushServerTest, InsertWhoseRowsCannotBeCountedBackIsNotAnAcknowledgement) {
  FakeHttpServer server([](const FakeHttpServer::Request& request) {
    FakeHttpServer::Response response;
    response.headers = {"X-ClickHouse-Server-Display-Name: fake"};
    if (absl::StrContains(request.target, "SELECT")) response.body = "0\n";
    return response;
  });
  ASSERT_TRUE(server.Start());
  ScratchDir scratch("uncounted");
  scratch.Write("issues.jsonl", {AnrLine("app::Gone()", 0)});
  RunOutput run =
      RunCli({"push", "--clickhouse", server.url(), "--retry-for=1", scratch.path()});
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_THAT(run.err, HasSubstr("not found after the INSERT"));
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(scratch.path(), server.url(), "matrix")));
}

TEST(FleetPushServerTest, FollowStopsAtOnceOnSigtermWhileRetrying) {
  // Schema statements succeed; every INSERT is refused as by an overloaded
  // server (503, retried with backoff).
  FakeHttpServer server([](const FakeHttpServer::Request& request) {
    FakeHttpServer::Response response;
    response.headers = {"X-ClickHouse-Server-Display-Name: fake"};
    if (absl::StrContains(request.target, "INSERT")) {
      response.status = 503;
      response.body = "Code: 202, e.displayText() = DB::Exception: Too many simultaneous queries";
    }
    return response;
  });
  ASSERT_TRUE(server.Start());
  ScratchDir scratch("sigterm");
  scratch.Write("issues.jsonl", {AnrLine("app::Busy()", 0)});
  Child child({"push", "--clickhouse", server.url(), "--follow", "--retry-for=600",
               scratch.path()},
              scratch.path());
  ASSERT_TRUE(child.started());
  // Two refused INSERTs: the push is in its retry loop, waiting.
  auto inserts = [](const std::vector<FakeHttpServer::Request>& requests) {
    int n = 0;
    for (const auto& r : requests) n += absl::StrContains(r.target, "INSERT") ? 1 : 0;
    return n >= 2;
  };
  ASSERT_TRUE(server.AwaitRequests(inserts, absl::Seconds(30)));
  child.Signal(SIGTERM);
  const absl::Time sent = absl::Now();
  ChildRun run = child.Wait(absl::Seconds(10));
  ASSERT_TRUE(run.exited) << "push --follow ignored SIGTERM while retrying: " << run.err;
  EXPECT_LT(absl::Now() - sent, absl::Seconds(3));
  EXPECT_EQ(run.signal, 0);
  EXPECT_EQ(run.code, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr("stopped"));
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(scratch.path(), server.url(), "matrix")));
}

TEST(FleetPushServerTest, FollowSendsWhatWasWrittenOnSigtermWhileWaiting) {
  // A ClickHouse that stores everything: its summary counts the rows sent
  // (RowBinary rows, one report with one "tag" each).
  FakeHttpServer server([](const FakeHttpServer::Request& request) {
    FakeHttpServer::Response response;
    response.headers = {"X-ClickHouse-Server-Display-Name: fake"};
    if (absl::StrContains(request.target, "INSERT")) {
      int64_t rows = 0;
      for (size_t at = request.body.find("\"tag\":"); at != std::string::npos;
           at = request.body.find("\"tag\":", at + 1)) {
        ++rows;
      }
      response.headers.push_back(
          absl::StrCat(R"(X-ClickHouse-Summary: {"written_rows":")", rows, R"("})"));
    }
    return response;
  });
  ASSERT_TRUE(server.Start());
  ScratchDir scratch("last-look");
  const std::string file = scratch.Write("issues.jsonl", {AnrLine("app::First()", 0)});
  Child child({"push", "--clickhouse", server.url(), "--follow", "--poll-ms=600000",
               scratch.path()},
              scratch.path());
  ASSERT_TRUE(child.started());
  auto inserts = [](int n) {
    return [n](const std::vector<FakeHttpServer::Request>& requests) {
      int seen = 0;
      for (const auto& r : requests) seen += absl::StrContains(r.target, "INSERT") ? 1 : 0;
      return seen >= n;
    };
  };
  ASSERT_TRUE(server.AwaitRequests(inserts(1), absl::Seconds(30)));
  // The first look is over once its checkpoint is written (a signal during
  // its request would abandon it).
  const std::string checkpoint = CheckpointPath(scratch.path(), server.url(), "matrix");
  ASSERT_TRUE(AwaitFile(checkpoint, absl::Seconds(30)));
  // Written while push waits for its next look (ten minutes away).
  { std::ofstream(file, std::ios::app) << AnrLine("app::Second()", 1) << "\n"; }
  child.Signal(SIGTERM);
  ChildRun run = child.Wait(absl::Seconds(10));
  ASSERT_TRUE(run.exited) << run.err;
  EXPECT_EQ(run.code, 0) << run.err;
  // The server notes a request after answering it.
  ASSERT_TRUE(server.AwaitRequests(inserts(2), absl::Seconds(10)));
  std::vector<FakeHttpServer::Request> requests = server.requests();
  EXPECT_THAT(requests.back().body, HasSubstr("app::Second()"));
  EXPECT_THAT(requests.back().body, Not(HasSubstr("app::First()")));
}

// ---- Credentials in messages -----------------------------------------------

// Everything push and fleet print of a server given with credentials: the
// server by host and port, the password nowhere (docs/fleet.md).
TEST(FleetCredentialsTest, ClosedPortErrorsNameTheServerWithoutItsPassword) {
  ScratchDir scratch("closed");
  scratch.Write("issues.jsonl", {AnrLine("app::Closed()", 0)});
  const std::string host_port = absl::StrCat("127.0.0.1:", test_util::FreePort());
  const std::string url =
      absl::StrCat("http://pusher:", kPassword, "@", host_port, "/?password=", kPassword);
  const std::string shown = absl::StrCat("http://pusher:***@", host_port, "/?password=***");
  // Retried (a refused connection may be a server restarting): the retry
  // lines show the URL too.
  ChildRun push = RunChild({"push", "--clickhouse", url, "--retry-for=0.5", scratch.path()},
                           scratch.path(), absl::Seconds(60));
  ASSERT_TRUE(push.exited) << push.err;
  EXPECT_EQ(push.code, 1) << push.err;
  EXPECT_THAT(push.err, HasSubstr(absl::StrCat(shown, ": ")));
  EXPECT_THAT(push.err, HasSubstr("retrying in"));
  EXPECT_THAT(push.err, HasSubstr("gave up after"));
  EXPECT_THAT(push.out + push.err, Not(HasSubstr(kPassword)));

  ChildRun fleet = RunChild({"fleet", "--clickhouse", url, "--retry-for=0.5", "top"},
                            scratch.path(), absl::Seconds(60));
  ASSERT_TRUE(fleet.exited) << fleet.err;
  EXPECT_EQ(fleet.code, 1) << fleet.err;
  EXPECT_THAT(fleet.err, HasSubstr(absl::StrCat("fleet top: ", shown, ": ")));
  EXPECT_THAT(fleet.out + fleet.err, Not(HasSubstr(kPassword)));

  // A URL push refuses on the command line is not echoed with its password.
  RunOutput usage = RunCli(
      {"push", "--clickhouse", absl::StrCat("pusher:", kPassword, "@h:8123"), scratch.path()});
  EXPECT_EQ(usage.code, 2) << usage.err;
  EXPECT_THAT(usage.err, HasSubstr("not \"pusher:***@h:8123\""));
  EXPECT_THAT(usage.err, Not(HasSubstr(kPassword)));
}

TEST_F(FleetPushSafetyTest, WrongPasswordIsNamedWithoutThePassword) {
  ScratchDir scratch("wrong-password");
  scratch.Write("issues.jsonl", {AnrLine("app::Refused()", 0)});
  const std::string url = absl::StrCat("http://default:", kPassword, "@", HostPort());
  ChildRun push = RunChild({"push", "--clickhouse", url, "--retry-for=1", scratch.path()},
                           scratch.path(), absl::Seconds(60));
  ASSERT_TRUE(push.exited) << push.err;
  EXPECT_EQ(push.code, 1) << push.err;
  EXPECT_THAT(push.err, HasSubstr(absl::StrCat("http://default:***@", HostPort(), ": HTTP ")));
  EXPECT_THAT(push.err, HasSubstr("for user default"));
  EXPECT_THAT(push.out + push.err, Not(HasSubstr(kPassword)));
  EXPECT_NE(Count("key = 'app::Refused()'"), 1);  // -1: no table was made either.
}

// The right password: the summary line and the stored issue's source name
// the server without it.
TEST_F(FleetPushSafetyTest, PushAndFleetWithAPasswordShowItNowhere) {
  ScratchDir scratch("password");
  scratch.Write("issues.jsonl", {AnrLine("app::Guarded()", 0)});
  const std::string url = absl::StrCat("http://pusher:", kPassword, "@", HostPort(), "/");
  const std::string shown = absl::StrCat("http://pusher:***@", HostPort(), "/");
  ChildRun push = RunChild({"push", "--clickhouse", url, "--retry-for=2", scratch.path()},
                           scratch.path(), absl::Seconds(60));
  ASSERT_TRUE(push.exited) << push.err;
  EXPECT_EQ(push.code, 0) << push.err;
  EXPECT_THAT(push.out, HasSubstr(absl::StrCat("pushed 1 issue from 1 file in 1 batch to ", shown,
                                               " matrix.issues")));
  EXPECT_EQ(Count("key = 'app::Guarded()'"), 1);
  ChildRun show = RunChild({"fleet", "--clickhouse", url, "show", "app::Guarded()"}, scratch.path(),
                           absl::Seconds(60));
  ASSERT_TRUE(show.exited) << show.err;
  EXPECT_EQ(show.code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("app::Guarded()"));
  EXPECT_THAT(show.out, HasSubstr(absl::StrCat("matrix.issues@", shown)));
  const std::string page = scratch.path() + "/fleet.html";
  ChildRun html =
      RunChild({"html", "--clickhouse", url, "-o", page}, scratch.path(), absl::Seconds(60));
  ASSERT_TRUE(html.exited) << html.err;
  EXPECT_EQ(html.code, 0) << html.err;
  EXPECT_THAT(ReadFile(page), HasSubstr(absl::StrCat("matrix.issues@", shown)));
  EXPECT_THAT(ReadFile(page), Not(HasSubstr(kPassword)));
  for (const ChildRun* run : {&push, &show, &html}) {
    EXPECT_THAT(run->out + run->err, Not(HasSubstr(kPassword)));
  }
}

}  // namespace
}  // namespace matrix::report

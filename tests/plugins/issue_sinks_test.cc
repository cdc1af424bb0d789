// Tests for the issue sinks: LogIssueSink's summary lines and
// JsonLinesIssueSink's files (permissions, one JSON object per line,
// rotation, appending, errors).

#include "matrix/plugins/issue_sinks.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "matrix/core/issue.h"
#include "matrix/core/logging.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/spdlog.h"

namespace {

using ::matrix::Issue;
using ::matrix::JsonLinesIssueSink;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// --- LogIssueSink ------------------------------------------------------------------

class CapturingSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::pair<spdlog::level::level_enum, std::string>> lines;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines.emplace_back(msg.level, std::string(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override {}
};

class ScopedCapture {
 public:
  ScopedCapture() : sink_(std::make_shared<CapturingSink>()) {
    matrix::SetLogger(std::make_shared<spdlog::logger>("capture", sink_));
  }
  ~ScopedCapture() { matrix::SetLogger(nullptr); }
  CapturingSink& sink() { return *sink_; }

 private:
  std::shared_ptr<CapturingSink> sink_;
};

Issue FpsIssue() {
  Issue issue;
  issue.mutable_proto()->set_tag(matrix::kTagFps);
  issue.mutable_proto()->set_key("Gallery");
  matrix::proto::FrameReport& f = *issue.mutable_proto()->mutable_frame();
  f.set_scene("Gallery");
  f.set_fps(52.4);
  f.set_frames(2620);
  f.set_dropped_frames(238);
  f.mutable_drop_level()->set_best(2600);
  f.mutable_drop_level()->set_normal(14);
  f.mutable_drop_level()->set_middle(5);
  f.mutable_drop_level()->set_high(1);
  f.set_window_ms(50000);
  f.set_worst_dropped_percent(41.7);
  return issue;
}

TEST(LogIssueSinkTest, OnReportIssue_LogsOneSummaryLinePerIssue) {
  ScopedCapture capture;
  matrix::LogIssueSink sink;

  sink.OnReportIssue(FpsIssue());

  Issue evil;
  evil.mutable_proto()->set_tag(matrix::kTagEvilMethod);
  evil.mutable_proto()->mutable_evil_method()->set_detail(matrix::proto::NORMAL);
  evil.mutable_proto()->mutable_evil_method()->set_cost_ms(812.2);
  evil.mutable_proto()->mutable_evil_method()->set_scene("Gallery");
  evil.mutable_proto()->mutable_evil_method()->set_stack_key("app::C()");
  sink.OnReportIssue(evil);

  Issue anr;
  anr.mutable_proto()->set_tag(matrix::kTagEvilMethod);
  anr.mutable_proto()->set_key("app::Decode(Image const&)");
  anr.mutable_proto()->mutable_anr()->set_detail(matrix::proto::ANR);
  anr.mutable_proto()->mutable_anr()->set_cost_ms(5012.4);
  anr.mutable_proto()->mutable_anr()->set_scene("Gallery");
  sink.OnReportIssue(anr);

  Issue startup;
  startup.mutable_proto()->set_tag(matrix::kTagStartup);
  startup.mutable_proto()->mutable_startup()->set_startup_duration_ms(2988.1);
  startup.mutable_proto()->mutable_startup()->set_first_scene("Splash");
  sink.OnReportIssue(startup);

  Issue other;
  other.mutable_proto()->set_tag(matrix::kTagBlockCanary);
  other.mutable_proto()->set_key("k1");
  sink.OnReportIssue(other);

  const auto& lines = capture.sink().lines;
  ASSERT_THAT(lines, SizeIs(5));
  for (const auto& [level, text] : lines) EXPECT_EQ(level, spdlog::level::warn);
  EXPECT_EQ(lines[0].second,
            "Trace_FPS scene=Gallery fps=52.4 frames=2620 dropped=238 "
            "levels(best/normal/middle/high/frozen)=2600/14/5/1/0 worst1s=41.7%");
  EXPECT_EQ(lines[1].second, "Trace_EvilMethod NORMAL 812ms scene=Gallery key=app::C()");
  // No stack key: the issue's key.
  EXPECT_EQ(lines[2].second,
            "Trace_EvilMethod ANR 5012ms scene=Gallery key=app::Decode(Image const&)");
  EXPECT_EQ(lines[3].second, "Trace_StartUp cold 2988ms first_scene=Splash");
  EXPECT_EQ(lines[4].second, "BlockCanary key=k1");
}

// --- JsonLinesIssueSink ---------------------------------------------------------------

class JsonLinesIssueSinkTest : public ::testing::Test {
 protected:
  JsonLinesIssueSinkTest() {
    std::string pattern = ::testing::TempDir() + "/matrix_sink_XXXXXX";
    char* dir = mkdtemp(pattern.data());
    EXPECT_NE(dir, nullptr);
    base_ = pattern;
  }
  ~JsonLinesIssueSinkTest() override {
    std::system(("rm -rf '" + base_ + "'").c_str());
  }

  static mode_t ModeOf(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return 0xFFFF;
    return st.st_mode & 07777;
  }
  static bool Exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
  }
  static std::vector<std::string> Lines(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string content = ss.str();
    EXPECT_TRUE(content.empty() || content.back() == '\n') << path << " ends mid-line";
    std::vector<std::string> lines;
    for (absl::string_view line : absl::StrSplit(content, '\n', absl::SkipEmpty())) {
      lines.emplace_back(line);
    }
    return lines;
  }
  static int64_t SizeOf(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
  }
  // A hang (kept in <name>.jsonl), numbered by its pid.
  static Issue Numbered(int i) {
    Issue issue;
    issue.mutable_proto()->set_tag(matrix::kTagEvilMethod);
    issue.mutable_proto()->set_key(absl::StrCat("issue-", i));
    issue.mutable_proto()->set_pid(i);
    matrix::proto::AnrReport& anr = *issue.mutable_proto()->mutable_anr();
    anr.set_detail(matrix::proto::ANR);
    anr.set_cost_ms(5012.4);
    return issue;
  }
  // A Trace_FPS issue numbered by its pid.
  static Issue NumberedFps(int i) {
    Issue issue = FpsIssue();
    issue.mutable_proto()->set_key(absl::StrCat("fps-", i));
    issue.mutable_proto()->set_pid(i);
    return issue;
  }
  static int NumberOf(const std::string& line) {
    matrix::proto::Issue parsed;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &parsed).ok()) << line;
    return parsed.pid();
  }

  std::string base_;
};

class UmaskScope {
 public:
  explicit UmaskScope(mode_t mask) : old_(umask(mask)) {}
  ~UmaskScope() { umask(old_); }

 private:
  mode_t old_;
};

TEST_F(JsonLinesIssueSinkTest, Create_MakesPrivateDirectoriesAndFileWhateverTheUmask) {
  for (mode_t mask : {mode_t{0}, mode_t{022}, mode_t{077}}) {
    UmaskScope scope(mask);
    const std::string top = absl::StrCat(base_, "/umask", mask);
    const std::string dir = top + "/nested/reports";
    auto sink = JsonLinesIssueSink::Create({.directory = dir});
    ASSERT_TRUE(sink.ok()) << sink.status();
    EXPECT_EQ((*sink)->path(), dir + "/issues.jsonl");
    // 0700 and 0600: the umask can only take bits away, never add them.
    EXPECT_EQ(ModeOf(top), 0700u & ~mask) << "umask " << mask;
    EXPECT_EQ(ModeOf(top + "/nested"), 0700u & ~mask) << "umask " << mask;
    EXPECT_EQ(ModeOf(dir), 0700u & ~mask) << "umask " << mask;
    EXPECT_EQ(ModeOf((*sink)->path()), 0600u & ~mask) << "umask " << mask;
  }
}

TEST_F(JsonLinesIssueSinkTest, Append_WritesOneCompleteJsonObjectPerLineThatRoundTrips) {
  auto sink = JsonLinesIssueSink::Create({.directory = base_ + "/r"});
  ASSERT_TRUE(sink.ok()) << sink.status();
  std::vector<Issue> issues = {FpsIssue(), Numbered(1)};
  Issue anr;
  anr.mutable_proto()->set_tag(matrix::kTagEvilMethod);
  anr.mutable_proto()->mutable_anr()->set_detail(matrix::proto::ANR);
  anr.mutable_proto()->mutable_anr()->set_stack_text("line1\nline2\n");  // Newlines inside.
  issues.push_back(anr);
  for (const Issue& issue : issues) (*sink)->OnReportIssue(issue);
  EXPECT_EQ((*sink)->failed_writes(), 0);

  // Hangs in issues.jsonl, Trace_FPS in issues.fps.jsonl.
  std::vector<std::string> lines = Lines((*sink)->path(JsonLinesIssueSink::Kind::kFps));
  EXPECT_EQ((*sink)->path(JsonLinesIssueSink::Kind::kFps), base_ + "/r/issues.fps.jsonl");
  for (const std::string& line : Lines((*sink)->path())) lines.push_back(line);
  ASSERT_THAT(lines, SizeIs(3));
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].front(), '{');
    EXPECT_EQ(lines[i].back(), '}');
    matrix::proto::Issue parsed;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[i], &parsed).ok()) << lines[i];
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, issues[i].proto()))
        << lines[i];
    EXPECT_EQ(lines[i], issues[i].ToJson());
  }
}

TEST_F(JsonLinesIssueSinkTest, Append_RotatesBySizeKeepingMaxFiles) {
  JsonLinesIssueSink::Options options;
  options.directory = base_ + "/rot";
  options.max_file_bytes = 1024;
  options.max_files = 3;
  auto sink = JsonLinesIssueSink::Create(options);
  ASSERT_TRUE(sink.ok()) << sink.status();
  const int64_t line_size = static_cast<int64_t>(Numbered(10).ToJson().size() + 1);
  ASSERT_LT(line_size * 2, 1024);
  ASSERT_GT(line_size * 4, 1024);  // So 50 issues rotate many times.

  for (int i = 0; i < 50; ++i) ASSERT_TRUE((*sink)->Append(Numbered(i)).ok());

  const std::string current = options.directory + "/issues.jsonl";
  const std::string one = options.directory + "/issues.1.jsonl";
  const std::string two = options.directory + "/issues.2.jsonl";
  ASSERT_TRUE(Exists(current));
  ASSERT_TRUE(Exists(one));
  ASSERT_TRUE(Exists(two));
  EXPECT_FALSE(Exists(options.directory + "/issues.3.jsonl"));
  // Oldest to newest, the kept lines are the last ones written, in order.
  std::vector<int> numbers;
  for (const std::string& path : {two, one, current}) {
    EXPECT_LE(SizeOf(path), 1024) << path;
    EXPECT_GT(SizeOf(path), 0) << path;
    EXPECT_EQ(ModeOf(path), 0600u) << path;
    for (const std::string& line : Lines(path)) numbers.push_back(NumberOf(line));
  }
  ASSERT_FALSE(numbers.empty());
  EXPECT_EQ(numbers.back(), 49);
  for (size_t i = 1; i < numbers.size(); ++i) EXPECT_EQ(numbers[i], numbers[i - 1] + 1);
  // Three files of whole lines that would not fit in fewer.
  EXPECT_GE(numbers.size(), static_cast<size_t>(2 * (1024 / line_size)) + 1);
}

TEST_F(JsonLinesIssueSinkTest, Append_WithOneFile_RotatesByTruncating) {
  JsonLinesIssueSink::Options options;
  options.directory = base_ + "/one";
  options.max_file_bytes = 1024;
  options.max_files = 1;
  auto sink = JsonLinesIssueSink::Create(options);
  ASSERT_TRUE(sink.ok()) << sink.status();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE((*sink)->Append(Numbered(i)).ok());
  EXPECT_FALSE(Exists(options.directory + "/issues.1.jsonl"));
  EXPECT_LE(SizeOf((*sink)->path()), 1024);
  const std::vector<std::string> lines = Lines((*sink)->path());
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(NumberOf(lines.back()), 19);
}

TEST_F(JsonLinesIssueSinkTest, Create_OnAnExistingFile_Appends) {
  const std::string dir = base_ + "/append";
  {
    auto sink = JsonLinesIssueSink::Create({.directory = dir});
    ASSERT_TRUE(sink.ok()) << sink.status();
    ASSERT_TRUE((*sink)->Append(Numbered(1)).ok());
    ASSERT_TRUE((*sink)->Append(Numbered(2)).ok());
  }
  auto sink = JsonLinesIssueSink::Create({.directory = dir});
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->Append(Numbered(3)).ok());
  const std::vector<std::string> lines = Lines((*sink)->path());
  ASSERT_THAT(lines, SizeIs(3));
  EXPECT_EQ(NumberOf(lines[0]), 1);
  EXPECT_EQ(NumberOf(lines[2]), 3);
}

TEST_F(JsonLinesIssueSinkTest, AppendToExistingFile_CountsItsSizeForRotation) {
  JsonLinesIssueSink::Options options;
  options.directory = base_ + "/existing";
  options.max_file_bytes = 1024;
  options.max_files = 2;
  {
    auto sink = JsonLinesIssueSink::Create(options);
    ASSERT_TRUE(sink.ok());
    // Fill close to the limit without rotating.
    while (SizeOf((*sink)->path()) + 2 * static_cast<int64_t>(Numbered(0).ToJson().size() + 1) <=
           1024) {
      ASSERT_TRUE((*sink)->Append(Numbered(0)).ok());
    }
  }
  auto sink = JsonLinesIssueSink::Create(options);
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Append(Numbered(1)).ok());
  EXPECT_FALSE(Exists(options.directory + "/issues.1.jsonl"));
  ASSERT_TRUE((*sink)->Append(Numbered(2)).ok());  // Would pass 1024: rotates.
  EXPECT_TRUE(Exists(options.directory + "/issues.1.jsonl"));
  EXPECT_THAT(Lines((*sink)->path()), SizeIs(1));
}

TEST_F(JsonLinesIssueSinkTest, Create_WhenTheDirectoryIsAFile_FailsClearly) {
  const std::string file = base_ + "/plain";
  std::ofstream(file) << "x";
  auto sink = JsonLinesIssueSink::Create({.directory = file});
  ASSERT_FALSE(sink.ok());
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr(file));
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr("not a directory"));
}

TEST_F(JsonLinesIssueSinkTest, Create_UnderAFile_FailsNamingThePath) {
  const std::string file = base_ + "/plain";
  std::ofstream(file) << "x";
  auto sink = JsonLinesIssueSink::Create({.directory = file + "/reports"});
  ASSERT_FALSE(sink.ok());
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr(file));
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr("is not a directory"));
}

TEST_F(JsonLinesIssueSinkTest, Create_WhereNoDirectoryCanBeMade_Fails) {
  // Even root cannot create directories in /proc.
  auto sink = JsonLinesIssueSink::Create({.directory = "/proc/self/matrix-reports"});
  ASSERT_FALSE(sink.ok());
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr("/proc/self/matrix-reports"));
}

TEST_F(JsonLinesIssueSinkTest, Create_RejectsBadOptions) {
  EXPECT_EQ(JsonLinesIssueSink::Create({.directory = base_, .name = "a/b"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(JsonLinesIssueSink::Create({.directory = base_, .name = ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      JsonLinesIssueSink::Create({.directory = base_, .max_file_bytes = 100}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(JsonLinesIssueSink::Create({.directory = base_, .max_files = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// --- File safety: symbolic links ---------------------------------------------------

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int CountLogged(const CapturingSink& sink, spdlog::level::level_enum level,
                absl::string_view needle) {
  int n = 0;
  for (const auto& [l, text] : sink.lines) n += l == level && absl::StrContains(text, needle);
  return n;
}

TEST_F(JsonLinesIssueSinkTest, Create_WhenTheFileIsASymlink_FailsAndNeverWritesThroughIt) {
  const std::string dir = base_ + "/r";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string victim = base_ + "/victim";
  std::ofstream(victim) << "precious\n";
  ASSERT_EQ(symlink(victim.c_str(), (dir + "/issues.jsonl").c_str()), 0);

  auto sink = JsonLinesIssueSink::Create({.directory = dir});
  ASSERT_FALSE(sink.ok());
  EXPECT_EQ(sink.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr(dir + "/issues.jsonl"));
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr("symbolic link"));
  EXPECT_EQ(ReadAll(victim), "precious\n");
}

TEST_F(JsonLinesIssueSinkTest, Create_WhenTheFileHasAnotherHardLink_FailsAndNeverWritesIt) {
  const std::string dir = base_ + "/r";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string victim = base_ + "/victim";
  std::ofstream(victim) << "precious\n";
  ASSERT_EQ(chmod(victim.c_str(), 0644), 0);
  ASSERT_EQ(link(victim.c_str(), (dir + "/issues.jsonl").c_str()), 0);

  auto sink = JsonLinesIssueSink::Create({.directory = dir});
  ASSERT_FALSE(sink.ok());
  EXPECT_EQ(sink.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr("2 hard links"));
  EXPECT_EQ(ReadAll(victim), "precious\n");
  EXPECT_EQ(ModeOf(victim), 0644u);
}

TEST_F(JsonLinesIssueSinkTest, Create_OnAFileOfAnotherUser_FailsAndNeverWritesIt) {
  const std::string dir = base_ + "/r";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string file = dir + "/issues.jsonl";
  std::ofstream(file) << "theirs\n";
  ASSERT_EQ(chmod(file.c_str(), 0666), 0);
  if (chown(file.c_str(), 65534, 65534) != 0) {
    GTEST_SKIP() << "cannot give a file to another user (not root): " << std::strerror(errno);
  }

  auto sink = JsonLinesIssueSink::Create({.directory = dir});
  ASSERT_FALSE(sink.ok());
  EXPECT_EQ(sink.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr("owned by uid 65534"));
  EXPECT_EQ(ReadAll(file), "theirs\n");
}

TEST_F(JsonLinesIssueSinkTest, Create_OnAnExistingWorldWritableFile_MakesIt0600) {
  const std::string dir = base_ + "/r";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string file = dir + "/issues.jsonl";
  std::ofstream(file) << "";
  ASSERT_EQ(chmod(file.c_str(), 0666), 0);

  auto sink = JsonLinesIssueSink::Create({.directory = dir});
  ASSERT_TRUE(sink.ok()) << sink.status();
  EXPECT_EQ(ModeOf(file), 0600u);
}

TEST_F(JsonLinesIssueSinkTest, Create_WhenTheReportDirectoryIsASymlink_FailsNamingIt) {
  const std::string elsewhere = base_ + "/elsewhere";
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0700), 0);
  const std::string dir = base_ + "/reports";
  ASSERT_EQ(symlink(elsewhere.c_str(), dir.c_str()), 0);

  auto sink = JsonLinesIssueSink::Create({.directory = dir});
  ASSERT_FALSE(sink.ok());
  EXPECT_EQ(sink.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr(dir));
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr("symbolic link"));
  EXPECT_FALSE(Exists(elsewhere + "/issues.jsonl"));
}

TEST_F(JsonLinesIssueSinkTest, Create_BelowALinkInTheConfiguredPath_IsAllowed) {
  // Leading components that already exist are the user's path: followed.
  const std::string real = base_ + "/real";
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(symlink(real.c_str(), (base_ + "/link").c_str()), 0);
  auto sink = JsonLinesIssueSink::Create({.directory = base_ + "/link/reports"});
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->Append(Numbered(1)).ok());
  EXPECT_THAT(Lines(real + "/reports/issues.jsonl"), SizeIs(1));
}

TEST_F(JsonLinesIssueSinkTest, Rotation_OverPlantedSymlinks_NeverWritesThroughThem) {
  JsonLinesIssueSink::Options options;
  options.directory = base_ + "/rot";
  options.max_file_bytes = 1024;
  options.max_files = 3;
  auto sink = JsonLinesIssueSink::Create(options);
  ASSERT_TRUE(sink.ok()) << sink.status();
  const std::string victim = base_ + "/victim";
  std::ofstream(victim) << "precious\n";
  ASSERT_EQ(symlink(victim.c_str(), (options.directory + "/issues.1.jsonl").c_str()), 0);
  ASSERT_EQ(symlink(victim.c_str(), (options.directory + "/issues.2.jsonl").c_str()), 0);
  for (int i = 0; i < 30; ++i) ASSERT_TRUE((*sink)->Append(Numbered(i)).ok());
  EXPECT_EQ(ReadAll(victim), "precious\n");
  EXPECT_EQ(NumberOf(Lines((*sink)->path()).back()), 29);
}

TEST_F(JsonLinesIssueSinkTest, Append_WhenTheFileWasReplacedByASymlink_RefusesLogsAndCounts) {
  ScopedCapture capture;
  auto sink = JsonLinesIssueSink::Create({.directory = base_ + "/r"});
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->Append(Numbered(0)).ok());
  const std::string victim = base_ + "/victim";
  std::ofstream(victim) << "precious\n";
  ASSERT_EQ(unlink((*sink)->path().c_str()), 0);
  ASSERT_EQ(symlink(victim.c_str(), (*sink)->path().c_str()), 0);

  (*sink)->OnReportIssue(Numbered(1));
  (*sink)->OnReportIssue(Numbered(2));

  EXPECT_EQ(ReadAll(victim), "precious\n");
  EXPECT_EQ((*sink)->failed_writes(), 2);
  EXPECT_EQ(CountLogged(capture.sink(), spdlog::level::err, (*sink)->path()), 2);
  EXPECT_GE(CountLogged(capture.sink(), spdlog::level::err, "symbolic link"), 1);
}

// --- File safety: the directory or file removed while running (defect 4) ---------------

TEST_F(JsonLinesIssueSinkTest, DirectoryRemoved_IsRecreatedWithOneWarningAndNothingIsLost) {
  ScopedCapture capture;
  JsonLinesIssueSink::Options options;
  options.directory = base_ + "/gone";
  auto sink = JsonLinesIssueSink::Create(options);
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Append(Numbered(0)).ok());
  std::system(("rm -rf '" + options.directory + "'").c_str());

  for (int i = 1; i <= 3; ++i) (*sink)->OnReportIssue(Numbered(i));

  EXPECT_EQ((*sink)->failed_writes(), 0);
  EXPECT_EQ(ModeOf(options.directory), 0700u);
  EXPECT_EQ(ModeOf((*sink)->path()), 0600u);
  const std::vector<std::string> lines = Lines((*sink)->path());
  ASSERT_THAT(lines, SizeIs(3));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(NumberOf(lines[i]), i + 1);
  EXPECT_EQ(CountLogged(capture.sink(), spdlog::level::warn, (*sink)->path()), 1);
}

TEST_F(JsonLinesIssueSinkTest, FileRemoved_IsRecreatedWithOneWarning) {
  ScopedCapture capture;
  auto sink = JsonLinesIssueSink::Create({.directory = base_ + "/r"});
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Append(Numbered(0)).ok());
  ASSERT_EQ(unlink((*sink)->path().c_str()), 0);

  ASSERT_TRUE((*sink)->Append(Numbered(1)).ok());
  ASSERT_TRUE((*sink)->Append(Numbered(2)).ok());

  const std::vector<std::string> lines = Lines((*sink)->path());
  ASSERT_THAT(lines, SizeIs(2));
  EXPECT_EQ(NumberOf(lines[0]), 1);
  EXPECT_EQ(CountLogged(capture.sink(), spdlog::level::warn, (*sink)->path()), 1);
}

TEST_F(JsonLinesIssueSinkTest, DirectoryCannotBeRecreated_LostIssuesAreCountedAndLoggedThenRecovered) {
  ScopedCapture capture;
  JsonLinesIssueSink::Options options;
  options.directory = base_ + "/gone";
  auto sink = JsonLinesIssueSink::Create(options);
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Append(Numbered(0)).ok());
  std::system(("rm -rf '" + options.directory + "'").c_str());
  std::ofstream(options.directory) << "a file where the directory was";

  for (int i = 1; i <= 3; ++i) (*sink)->OnReportIssue(Numbered(i));

  EXPECT_EQ((*sink)->failed_writes(), 3);
  EXPECT_EQ(CountLogged(capture.sink(), spdlog::level::warn, (*sink)->path()), 1);
  EXPECT_EQ(CountLogged(capture.sink(), spdlog::level::err, options.directory), 3);
  EXPECT_GE(CountLogged(capture.sink(), spdlog::level::err, "not a directory"), 1);

  // Once the path is usable again, writing resumes.
  ASSERT_EQ(unlink(options.directory.c_str()), 0);
  (*sink)->OnReportIssue(Numbered(99));
  EXPECT_EQ((*sink)->failed_writes(), 3);
  const std::vector<std::string> lines = Lines((*sink)->path());
  ASSERT_THAT(lines, SizeIs(1));
  EXPECT_EQ(NumberOf(lines[0]), 99);
}

// --- Torn lines (defect 5, writer side) ------------------------------------------------

TEST_F(JsonLinesIssueSinkTest, Create_OnAFileEndingInATornLine_StartsOnAFreshLine) {
  const std::string dir = base_ + "/torn";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string fragment = Numbered(7).ToJson().substr(0, 40);  // A killed writer's rest.
  std::ofstream(dir + "/issues.jsonl", std::ios::binary) << Numbered(6).ToJson() << "\n"
                                                          << fragment;

  auto sink = JsonLinesIssueSink::Create({.directory = dir});
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->Append(Numbered(1)).ok());
  ASSERT_TRUE((*sink)->Append(Numbered(2)).ok());

  const std::vector<std::string> lines = Lines((*sink)->path());
  ASSERT_THAT(lines, SizeIs(4));
  EXPECT_EQ(NumberOf(lines[0]), 6);
  EXPECT_EQ(lines[1], fragment);  // On its own line: the reader skips just it.
  EXPECT_EQ(NumberOf(lines[2]), 1);
  EXPECT_EQ(NumberOf(lines[3]), 2);
}

TEST_F(JsonLinesIssueSinkTest, Create_OnAFileEndingInANewline_AddsNothing) {
  const std::string dir = base_ + "/whole";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  std::ofstream(dir + "/issues.jsonl", std::ios::binary) << Numbered(6).ToJson() << "\n";
  auto sink = JsonLinesIssueSink::Create({.directory = dir});
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->Append(Numbered(1)).ok());
  EXPECT_EQ(ReadAll((*sink)->path()), Numbered(6).ToJson() + "\n" + Numbered(1).ToJson() + "\n");
}

// --- Retention by value ----------------------------------------------------------------

using Kind = JsonLinesIssueSink::Kind;

TEST(JsonLinesIssueSinkKindTest, KindOf_KeepsEachKindOfReportApart) {
  auto with = [](auto fill) {
    Issue issue;
    fill(*issue.mutable_proto());
    return JsonLinesIssueSink::KindOf(issue.proto());
  };
  EXPECT_EQ(JsonLinesIssueSink::KindOf(FpsIssue().proto()), Kind::kFps);
  for (matrix::proto::Detail detail : {matrix::proto::ANR, matrix::proto::LAG,
                                       matrix::proto::LAG_IDLE_HANDLER, matrix::proto::LAG_TOUCH,
                                       matrix::proto::SIGNAL_ANR}) {
    EXPECT_EQ(with([&](matrix::proto::Issue& p) { p.mutable_anr()->set_detail(detail); }),
              Kind::kHang)
        << matrix::proto::Detail_Name(detail);
  }
  EXPECT_EQ(with([](matrix::proto::Issue& p) {
              p.mutable_evil_method()->set_detail(matrix::proto::NORMAL);
            }),
            Kind::kSlowMethod);
  EXPECT_EQ(with([](matrix::proto::Issue& p) {
              p.mutable_evil_method()->set_detail(matrix::proto::STARTUP);
            }),
            Kind::kStartup);
  EXPECT_EQ(with([](matrix::proto::Issue& p) { p.mutable_startup(); }), Kind::kStartup);
  EXPECT_EQ(with([](matrix::proto::Issue& p) { p.mutable_block(); }), Kind::kBlock);
  EXPECT_EQ(with([](matrix::proto::Issue& p) { p.set_tag(matrix::kTagBlockCanary); }),
            Kind::kBlock);
  EXPECT_EQ(with([](matrix::proto::Issue& p) { p.set_tag("Custom"); }), Kind::kOther);
  EXPECT_EQ(JsonLinesIssueSink::KindName(Kind::kSlowMethod), "slow_method");
}

Issue SlowMethod(int i) {
  Issue issue;
  issue.mutable_proto()->set_tag(matrix::kTagEvilMethod);
  issue.mutable_proto()->set_pid(i);
  issue.mutable_proto()->mutable_evil_method()->set_detail(matrix::proto::NORMAL);
  issue.mutable_proto()->mutable_evil_method()->set_cost_ms(812.2);
  return issue;
}

Issue Startup(int i) {
  Issue issue;
  issue.mutable_proto()->set_tag(matrix::kTagStartup);
  issue.mutable_proto()->set_pid(i);
  issue.mutable_proto()->mutable_startup()->set_startup_duration_ms(2988.1);
  return issue;
}

TEST_F(JsonLinesIssueSinkTest, FpsFlood_KeepsTheHangAndDropsOnlyTheOldestFps) {
  JsonLinesIssueSink::Options options;
  options.directory = base_ + "/flood";
  options.max_file_bytes = 4096;
  options.max_files = 2;
  auto sink = JsonLinesIssueSink::Create(options);
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->Append(Numbered(1)).ok());
  ASSERT_TRUE((*sink)->Append(SlowMethod(2)).ok());
  ASSERT_TRUE((*sink)->Append(Startup(3)).ok());
  for (int i = 0; i < 300; ++i) ASSERT_TRUE((*sink)->Append(NumberedFps(i)).ok());

  // The other kinds are untouched.
  ASSERT_THAT(Lines((*sink)->path()), SizeIs(1));
  EXPECT_EQ(NumberOf(Lines((*sink)->path())[0]), 1);
  EXPECT_THAT(Lines((*sink)->path(Kind::kSlowMethod)), SizeIs(1));
  EXPECT_THAT(Lines((*sink)->path(Kind::kStartup)), SizeIs(1));
  // Trace_FPS kept its newest issues, in order, within its two files.
  const std::string older = options.directory + "/issues.fps.1.jsonl";
  std::vector<int> kept;
  for (const std::string& path : {older, (*sink)->path(Kind::kFps)}) {
    EXPECT_LE(SizeOf(path), 4096) << path;
    EXPECT_EQ(ModeOf(path), 0600u) << path;
    for (const std::string& line : Lines(path)) kept.push_back(NumberOf(line));
  }
  EXPECT_FALSE(Exists(options.directory + "/issues.fps.2.jsonl"));
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(kept.back(), 299);
  for (size_t i = 1; i < kept.size(); ++i) EXPECT_EQ(kept[i], kept[i - 1] + 1);
  // What is not kept was dropped, and counted.
  const matrix::proto::SinkDrops dropped = (*sink)->dropped();
  EXPECT_EQ(dropped.fps(), 300 - static_cast<int64_t>(kept.size()));
  EXPECT_EQ(kept.front(), dropped.fps());
  EXPECT_EQ(dropped.hang() + dropped.slow_method() + dropped.startup() + dropped.block() +
                dropped.other(),
            0);

  // The issue appended next after a drop (any kind) says so: after the
  // last drop, a kept FPS issue or the next hang carries the final count.
  ASSERT_TRUE((*sink)->Append(Numbered(4)).ok());
  const std::vector<std::string> hangs = Lines((*sink)->path());
  ASSERT_THAT(hangs, SizeIs(2));
  int64_t reported = 0;
  std::vector<std::string> lines = hangs;
  for (const std::string& path : {older, (*sink)->path(Kind::kFps)}) {
    for (const std::string& line : Lines(path)) lines.push_back(line);
  }
  for (const std::string& line : lines) {
    matrix::proto::Issue parsed;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &parsed).ok());
    EXPECT_EQ(parsed.sink_dropped().hang(), 0);
    reported = std::max(reported, parsed.sink_dropped().fps());
  }
  EXPECT_EQ(reported, dropped.fps());
  // Lines written before anything was dropped do not carry the counts.
  EXPECT_EQ(hangs[0], Numbered(1).ToJson());
}

TEST_F(JsonLinesIssueSinkTest, SlowMethodFlood_KeepsHangsStartupsAndFps) {
  JsonLinesIssueSink::Options options;
  options.directory = base_ + "/slow";
  options.max_file_bytes = 2048;
  options.max_files = 1;
  auto sink = JsonLinesIssueSink::Create(options);
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->Append(Numbered(1)).ok());
  ASSERT_TRUE((*sink)->Append(Startup(2)).ok());
  ASSERT_TRUE((*sink)->Append(NumberedFps(3)).ok());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE((*sink)->Append(SlowMethod(i)).ok());
  EXPECT_THAT(Lines((*sink)->path()), SizeIs(1));
  EXPECT_THAT(Lines((*sink)->path(Kind::kStartup)), SizeIs(1));
  EXPECT_THAT(Lines((*sink)->path(Kind::kFps)), SizeIs(1));
  const std::vector<std::string> slow = Lines((*sink)->path(Kind::kSlowMethod));
  ASSERT_FALSE(slow.empty());
  EXPECT_EQ(NumberOf(slow.back()), 99);
  EXPECT_EQ((*sink)->dropped().slow_method(), 100 - static_cast<int64_t>(slow.size()));
  EXPECT_EQ((*sink)->dropped().fps(), 0);
}

TEST_F(JsonLinesIssueSinkTest, HangsRotate_DroppingTheOldestHangsOnly) {
  JsonLinesIssueSink::Options options;
  options.directory = base_ + "/hangs";
  options.max_file_bytes = 1024;
  options.max_files = 2;
  auto sink = JsonLinesIssueSink::Create(options);
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->Append(NumberedFps(100)).ok());
  for (int i = 0; i < 40; ++i) ASSERT_TRUE((*sink)->Append(Numbered(i)).ok());
  std::vector<int> kept;
  for (const std::string& path : {options.directory + "/issues.1.jsonl", (*sink)->path()}) {
    for (const std::string& line : Lines(path)) kept.push_back(NumberOf(line));
  }
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(kept.back(), 39);
  EXPECT_EQ((*sink)->dropped().hang(), kept.front());
  EXPECT_EQ((*sink)->dropped().fps(), 0);
  ASSERT_THAT(Lines((*sink)->path(Kind::kFps)), SizeIs(1));
  EXPECT_EQ(NumberOf(Lines((*sink)->path(Kind::kFps))[0]), 100);
}

TEST_F(JsonLinesIssueSinkTest, KindFile_RefusesAPlantedHardLinkLikeTheMainFile) {
  const std::string dir = base_ + "/kindlink";
  auto sink = JsonLinesIssueSink::Create({.directory = dir});
  ASSERT_TRUE(sink.ok()) << sink.status();
  const std::string victim = base_ + "/victim-fps";
  std::ofstream(victim) << "precious\n";
  ASSERT_EQ(link(victim.c_str(), (dir + "/issues.fps.jsonl").c_str()), 0);
  ScopedCapture capture;
  (*sink)->OnReportIssue(FpsIssue());
  EXPECT_EQ((*sink)->failed_writes(), 1);
  EXPECT_EQ(ReadAll(victim), "precious\n");
  // The other kinds are written as usual.
  ASSERT_TRUE((*sink)->Append(Numbered(1)).ok());
  EXPECT_THAT(Lines((*sink)->path()), SizeIs(1));
}

}  // namespace

// Tests for the issue sinks: LogIssueSink's summary lines and
// JsonLinesIssueSink's files (permissions, one JSON object per line,
// rotation, appending, errors).

#include "matrix/plugins/issue_sinks.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
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
  static Issue Numbered(int i) {
    Issue issue = FpsIssue();
    issue.mutable_proto()->set_key(absl::StrCat("issue-", i));
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

  const std::vector<std::string> lines = Lines((*sink)->path());
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
  EXPECT_THAT(std::string(sink.status().message()), HasSubstr("Not a directory"));
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

TEST_F(JsonLinesIssueSinkTest, DirectoryRemovedUnderTheSink_FailuresAreCountedThenRecovered) {
  ScopedCapture capture;
  JsonLinesIssueSink::Options options;
  options.directory = base_ + "/gone";
  options.max_file_bytes = 1024;
  options.max_files = 2;
  auto sink = JsonLinesIssueSink::Create(options);
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Append(Numbered(0)).ok());
  std::system(("rm -rf '" + options.directory + "'").c_str());

  // The next rotation cannot reopen the file.
  for (int i = 1; i < 10; ++i) (*sink)->OnReportIssue(Numbered(i));
  EXPECT_GE((*sink)->failed_writes(), 1);
  bool logged = false;
  for (const auto& [level, text] : capture.sink().lines) {
    logged |= level == spdlog::level::err && absl::StrContains(text, options.directory);
  }
  EXPECT_TRUE(logged);

  // Once the directory is back, writing resumes.
  ASSERT_EQ(mkdir(options.directory.c_str(), 0700), 0);
  const int64_t failed = (*sink)->failed_writes();
  (*sink)->OnReportIssue(Numbered(99));
  EXPECT_EQ((*sink)->failed_writes(), failed);
  const std::vector<std::string> lines = Lines((*sink)->path());
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(NumberOf(lines.back()), 99);
}

}  // namespace

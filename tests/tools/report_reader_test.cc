// Reading issue files: rotated files oldest first, directories, malformed
// lines reported with file and line and skipped, unreadable inputs.

#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/issue_reader.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::AnrIssue;
using test_util::FrameIssue;
using test_util::kBaseTimeMs;
using test_util::Line;
using test_util::ScratchDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(OrderIssueFilesTest, RotatedFilesComeOldestFirstThenTheCurrentFile) {
  EXPECT_THAT(
      OrderIssueFiles(
          {"d/issues.jsonl", "d/issues.1.jsonl", "d/issues.10.jsonl", "d/issues.2.jsonl"}),
      ElementsAre("d/issues.10.jsonl", "d/issues.2.jsonl", "d/issues.1.jsonl", "d/issues.jsonl"));
}

TEST(OrderIssueFilesTest, SinksAreOrderedByNameAndKeptApart) {
  EXPECT_THAT(
      OrderIssueFiles({"d/b.jsonl", "d/a.jsonl", "d/b.1.jsonl", "d/a.1.jsonl", "d/a.v2.jsonl"}),
      ElementsAre("d/a.1.jsonl", "d/a.jsonl", "d/a.v2.jsonl", "d/b.1.jsonl", "d/b.jsonl"));
}

TEST(ExpandInputTest, DirectoryMeansItsJsonlFilesInRotationOrder) {
  ScratchDir dir("expand");
  dir.Write("issues.jsonl", {});
  dir.Write("issues.1.jsonl", {});
  dir.Write("issues.2.jsonl", {});
  dir.Write("notes.txt", {});
  dir.Write("looper-2025-11-21.log", {});
  absl::StatusOr<std::vector<std::string>> files = ExpandInput(dir.path());
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(dir.path() + "/issues.2.jsonl", dir.path() + "/issues.1.jsonl",
                                  dir.path() + "/issues.jsonl"));
}

TEST(ExpandInputTest, MissingPathAndEmptyDirectoryAreErrors) {
  ScratchDir dir("empty");
  absl::StatusOr<std::vector<std::string>> missing = ExpandInput(dir.path() + "/nope");
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("nope"));
  absl::StatusOr<std::vector<std::string>> empty = ExpandInput(dir.path());
  EXPECT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("no *.jsonl"));
}

TEST(ReadIssueInputsTest, ReadsRotatedFilesOldestFirstAndNumbersRecordsInReadOrder) {
  ScratchDir dir("rotated");
  // The sink writes to issues.jsonl and renames it to issues.1.jsonl, the
  // old .1 to .2: .2 holds the oldest issues.
  dir.Write("issues.jsonl", {Line(FrameIssue("C", 50, kBaseTimeMs + 3000))});
  dir.Write("issues.1.jsonl", {Line(FrameIssue("B", 50, kBaseTimeMs + 2000))});
  dir.Write("issues.2.jsonl", {Line(FrameIssue("A1", 50, kBaseTimeMs)),
                               Line(FrameIssue("A2", 50, kBaseTimeMs + 1000))});
  ReadResult result = ReadIssueInputs({dir.path()}, nullptr);
  EXPECT_TRUE(result.errors.empty());
  EXPECT_TRUE(result.malformed.empty());
  EXPECT_EQ(result.lines, 4);
  ASSERT_EQ(result.records.size(), 4u);
  std::vector<std::string> keys;
  for (const IssueRecord& r : result.records) keys.push_back(r.key);
  EXPECT_THAT(keys, ElementsAre("A1", "A2", "B", "C"));
  for (size_t i = 0; i < result.records.size(); ++i) EXPECT_EQ(result.records[i].sequence, i);
  EXPECT_EQ(result.records[0].source.file, dir.path() + "/issues.2.jsonl");
  EXPECT_EQ(result.records[1].source.line, 2);
  EXPECT_THAT(result.files,
              ElementsAre(dir.path() + "/issues.2.jsonl", dir.path() + "/issues.1.jsonl",
                          dir.path() + "/issues.jsonl"));
}

TEST(ReadIssueInputsTest, MalformedLinesAreListedWithFileAndLineAndTheRestIsRead) {
  ScratchDir dir("malformed");
  const std::string good = Line(AnrIssue("app::A()", proto::ANR, 5000, kBaseTimeMs));
  const std::string file = dir.Write(
      "issues.jsonl", {good, good.substr(0, 40), "", "   ", "garbage", good + "\r", "{}", good});
  ReadResult result = ReadIssueInputs({file}, nullptr);
  EXPECT_TRUE(result.errors.empty());
  EXPECT_EQ(result.records.size(), 3u);
  EXPECT_EQ(result.lines, 6);  // Blank lines are not counted.
  ASSERT_EQ(result.malformed.size(), 3u);
  EXPECT_EQ(result.malformed[0].where.file, file);
  EXPECT_EQ(result.malformed[0].where.line, 2);
  EXPECT_EQ(result.malformed[1].where.line, 5);
  EXPECT_EQ(result.malformed[2].where.line, 7);
  EXPECT_THAT(result.malformed[2].reason, HasSubstr("tag"));
  // A CRLF line end is accepted.
  EXPECT_EQ(result.records[1].source.line, 6);
}

TEST(ReadIssueInputsTest, UnreadableInputsAreErrorsAndTheOthersAreStillRead) {
  ScratchDir dir("errors");
  const std::string file = dir.Write("issues.jsonl", {Line(FrameIssue("A", 50, kBaseTimeMs))});
  ReadResult result = ReadIssueInputs({dir.path() + "/missing.jsonl", file}, nullptr);
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_THAT(result.errors[0], HasSubstr("missing.jsonl"));
  EXPECT_EQ(result.records.size(), 1u);
}

TEST(ReadIssueInputsTest, AFileNamedTwiceIsReadOnce) {
  ScratchDir dir("twice");
  const std::string file = dir.Write("issues.jsonl", {Line(FrameIssue("A", 50, kBaseTimeMs))});
  ReadResult result = ReadIssueInputs({dir.path(), file, dir.path() + "/./issues.jsonl"}, nullptr);
  EXPECT_EQ(result.records.size(), 1u);
  EXPECT_EQ(result.files.size(), 1u);
}

TEST(ReadIssueInputsTest, NonRegularFilesAreReadAsFiles) {
  // Pipes such as <(zcat old.jsonl.gz) are not regular files either.
  ReadResult result = ReadIssueInputs({"/dev/null"}, nullptr);
  EXPECT_TRUE(result.errors.empty());
  EXPECT_THAT(result.files, ElementsAre("/dev/null"));
  EXPECT_TRUE(result.records.empty());
}

TEST(ReadIssueInputsTest, DashReadsStandardInput) {
  std::istringstream in(Line(FrameIssue("A", 50, kBaseTimeMs)) + "\n" +
                        Line(FrameIssue("B", 50, kBaseTimeMs)) + "\n");
  ReadResult result = ReadIssueInputs({"-"}, &in);
  ASSERT_EQ(result.records.size(), 2u);
  EXPECT_EQ(result.records[1].source.file, kStdinName);
  EXPECT_EQ(result.records[1].source.line, 2);
  ReadResult no_stdin = ReadIssueInputs({"-"}, nullptr);
  EXPECT_EQ(no_stdin.errors.size(), 1u);
}

}  // namespace
}  // namespace matrix::report

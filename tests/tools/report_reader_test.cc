// Reading issue files: rotated files oldest first, directories, malformed
// lines reported with file and line and skipped, torn lines, BlockCanary
// text files, unreadable inputs.

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "matrix/core/issue.h"
#include "matrix/plugins/block_canary_info.h"
#include "matrix/report/issue_filter.h"
#include "matrix/report/issue_reader.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::AddFrame;
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

// A large hang (a deep native stack), as a line the sink writes.
std::string LargeAnrLine(const std::string& key, int64_t time_ms) {
  proto::Issue issue = AnrIssue(key, proto::ANR, 5000, time_ms);
  for (int i = 0; i < 2000; ++i) {
    AddFrame(issue.mutable_anr()->mutable_thread_stack(), absl::StrCat("app::Frame", i, "()"),
             "/usr/bin/gallery", static_cast<uint64_t>(i));
  }
  return Line(issue);
}

TEST(ReadIssueInputsTest, ATornLineIsSkippedAndAnIssueGluedAfterItIsStillRead) {
  // A writer killed while writing a large line leaves it torn, without its
  // line end; the next writer's first line is then appended to it.
  ScratchDir dir("torn");
  const std::string large = LargeAnrLine("app::Big()", kBaseTimeMs + 1000);
  ASSERT_GT(large.size(), 100000u);
  const std::string torn = large.substr(0, large.size() / 2);
  const std::string file = dir.Write(
      "issues.jsonl", {Line(FrameIssue("Before", 50, kBaseTimeMs)),
                       torn + Line(FrameIssue("Glued", 50, kBaseTimeMs + 2000)),
                       Line(FrameIssue("After1", 50, kBaseTimeMs + 3000)), torn.substr(0, 7),
                       Line(FrameIssue("After2", 50, kBaseTimeMs + 4000)), torn});
  ReadResult result = ReadIssueInputs({file}, nullptr);
  EXPECT_TRUE(result.errors.empty());
  std::vector<std::string> keys;
  for (const IssueRecord& r : result.records) keys.push_back(r.key);
  EXPECT_THAT(keys, ElementsAre("Before", "Glued", "After1", "After2"));
  ASSERT_EQ(result.records.size(), 4u);
  EXPECT_EQ(result.records[1].source.line, 2);
  EXPECT_EQ(result.records[3].source.line, 5);
  EXPECT_EQ(result.lines, 6);
  ASSERT_EQ(result.malformed.size(), 3u);
  EXPECT_EQ(result.malformed[0].where.line, 2);
  EXPECT_EQ(result.malformed[1].where.line, 4);
  EXPECT_EQ(result.malformed[2].where.line, 6);
  // The reason is one short line, not the large input.
  EXPECT_LT(result.malformed[0].reason.size(), 200u);
}

TEST(ReadIssueInputsTest, ATornLastLineWithoutItsLineEndIsSkipped) {
  ScratchDir dir("torn-end");
  const std::string large = LargeAnrLine("app::Big()", kBaseTimeMs);
  const std::string file = dir.Write("issues.jsonl", {Line(FrameIssue("A", 50, kBaseTimeMs))});
  std::ofstream(file, std::ios::binary | std::ios::app) << large.substr(0, large.size() - 1);
  ReadResult result = ReadIssueInputs({file}, nullptr);
  ASSERT_EQ(result.records.size(), 1u);
  ASSERT_EQ(result.malformed.size(), 1u);
  EXPECT_EQ(result.malformed[0].where.line, 2);
}

// A block as BlockCanaryPlugin records it (times at millisecond precision).
BlockInfo SampleBlock(int64_t end_ms, const std::string& busy_function) {
  BlockInfo info;
  info.qualifier = "gallery-1.4.2";
  info.version_name = "1.4.2";
  info.version_code = 142;
  info.uid = "uid";
  info.network = "unknown";
  info.model = "AMD EPYC";
  info.api_level = "Linux 6.1.0 x86_64";
  info.machine = "HIGH";
  info.cpu_cores = 8;
  info.process = "gallery";
  info.pid = 4242;
  info.free_memory_kb = 3145728;
  info.total_memory_kb = 8388608;
  info.vm_rss_kb = 90112;
  info.time_cost_ms = 1500;
  info.thread_time_ms = 1400;
  info.time_end = absl::FromUnixMillis(end_ms);
  info.time_start = info.time_end - absl::Milliseconds(1500);
  info.message = ">>>>> Dispatching to Handler (app::Ui) {55d0} null: 0";
  info.scene = "Gallery";
  info.cpu_busy = true;
  info.block_cpu = BlockCpuRate{absl::Time(), 91, 25, 80, 11, 0};
  info.cpu_rate = {BlockCpuRate{info.time_start + absl::Milliseconds(200), 90, 24, 80, 10, 0}};
  for (int i = 0; i < 3; ++i) {
    info.samples.push_back(BlockStackSample{
        info.time_start + absl::Milliseconds(100 + 400 * i),
        {BlockFrame{"clock_nanosleep", 0x65, "libc.so.6"},
         BlockFrame{i == 0 ? "app::Parse()" : busy_function, 0x29, "gallery"},
         BlockFrame{"app::Load()", 0x11, "gallery"}}});
  }
  return info;
}

// The BlockCanary JSON issue BlockCanaryPlugin reports for `info` (without
// the device's app CPU, which the text file does not hold).
proto::Issue PluginIssue(BlockInfo info, const std::string& log_file) {
  int key_count = 0;
  info.key = KeyStackLine(info, {}, &key_count);
  info.log_file = log_file;
  proto::Issue issue;
  issue.set_tag(kTagBlockCanary);
  issue.set_key(info.key);
  issue.set_plugin("BlockCanary");
  issue.set_process(info.process);
  issue.set_pid(info.pid);
  issue.set_time_ms(absl::ToUnixMillis(info.time_end));
  issue.mutable_device()->set_machine(proto::DeviceInfo::HIGH);
  issue.mutable_device()->set_cpu_cores(info.cpu_cores);
  issue.mutable_device()->set_mem(info.total_memory_kb * 1024);
  issue.mutable_device()->set_mem_free(info.free_memory_kb);
  *issue.mutable_block() = ToBlockReport(info);
  issue.mutable_block()->set_key_sample_count(key_count);
  return issue;
}

TEST(ReadIssueInputsTest, ADirectoryOfBlockCanaryTextFilesGivesTheirBlockCanaryIssues) {
  ScratchDir dir("blockcanary");
  const absl::TimeZone zone = absl::LocalTimeZone();
  const BlockInfo first = SampleBlock(kBaseTimeMs, "app::Decode()");
  const BlockInfo second = SampleBlock(kBaseTimeMs + 60000, "app::Save()");
  // BlockLogWriter's names and layout; the newer file sorts last.
  const std::string first_file = dir.Write(
      "looper-2025-11-21_10-00-00.000.log", {FormatBlockLog(first, first.time_end, zone)});
  const std::string second_file = dir.Write(
      "looper-2025-11-21_10-01-00.000.log", {FormatBlockLog(second, second.time_end, zone)});
  // Not BlockLogWriter's names: its temporary files, other logs.
  dir.Write(".looper-2025-11-21_10-02-00.000.log.tmp", {"not listed"});
  dir.Write("looper-2025-11-21.log", {"not listed"});

  ReadResult result = ReadIssueInputs({dir.path()}, nullptr);
  EXPECT_THAT(result.errors, ::testing::IsEmpty());
  EXPECT_TRUE(result.malformed.empty());
  EXPECT_THAT(result.files, ElementsAre(first_file, second_file));
  EXPECT_EQ(result.lines, 2);
  ASSERT_EQ(result.records.size(), 2u);

  const IssueRecord expected = RecordFromIssue(PluginIssue(first, first_file));
  const IssueRecord& got = result.records[0];
  EXPECT_EQ(got.tag(), "BlockCanary");
  EXPECT_EQ(got.kind, "block");
  EXPECT_EQ(got.key, "app::Decode()");
  EXPECT_EQ(got.scene, "Gallery");
  EXPECT_EQ(got.metric.name, "cost_ms");
  EXPECT_EQ(got.metric.value, 1500);
  EXPECT_EQ(got.source.file, first_file);
  EXPECT_EQ(got.issue.block().key_sample_count(), 2);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got.issue, expected.issue))
      << "got:      " << got.issue.ShortDebugString()
      << "\nexpected: " << expected.issue.ShortDebugString();
  EXPECT_EQ(result.records[1].key, "app::Save()");
  EXPECT_EQ(result.records[1].sequence, 1);
}

TEST(ReadIssueInputsTest, ASingleBlockCanaryFileAndABrokenOneBesideIssueFiles) {
  ScratchDir dir("blockcanary-file");
  const BlockInfo block = SampleBlock(kBaseTimeMs, "app::Decode()");
  const std::string file = dir.Write("looper-2025-11-21_10-00-00.000.log",
                                     {FormatBlockLog(block, block.time_end, absl::LocalTimeZone())});
  const std::string broken =
      dir.Write("looper-2025-11-21_10-00-01.000.log", {"\r\n**********************\r\nbroken"});
  dir.Write("issues.jsonl", {Line(FrameIssue("A", 50, kBaseTimeMs))});

  ReadResult single = ReadIssueInputs({file}, nullptr);
  ASSERT_EQ(single.records.size(), 1u);
  EXPECT_EQ(single.records[0].key, "app::Decode()");

  // The directory: issue files first, then the block files.
  ReadResult all = ReadIssueInputs({dir.path()}, nullptr);
  ASSERT_EQ(all.records.size(), 2u);
  EXPECT_EQ(all.records[0].tag(), "Trace_FPS");
  EXPECT_EQ(all.records[1].tag(), "BlockCanary");
  ASSERT_EQ(all.malformed.size(), 1u);
  EXPECT_EQ(all.malformed[0].where.file, broken);
  EXPECT_THAT(all.malformed[0].reason, HasSubstr("not a BlockCanary block file"));
}

TEST(ReadIssueInputsTest, ABlockInBothAnIssueFileAndItsBlockCanaryFileIsReadOnce) {
  ScratchDir dir("both");
  const absl::TimeZone zone = absl::LocalTimeZone();
  const BlockInfo first = SampleBlock(kBaseTimeMs, "app::Decode()");
  const BlockInfo second = SampleBlock(kBaseTimeMs + 60000, "app::Save()");
  const std::string first_log = dir.path() + "/looper-2025-11-21_10-00-00.000.log";
  // The sink holds the first block only (the second came after a rotation,
  // say); the BlockCanary files hold both.
  dir.Write("issues.jsonl", {Line(PluginIssue(first, first_log))});
  dir.Write("looper-2025-11-21_10-00-00.000.log", {FormatBlockLog(first, first.time_end, zone)});
  dir.Write("looper-2025-11-21_10-01-00.000.log", {FormatBlockLog(second, second.time_end, zone)});

  ReadResult result = ReadIssueInputs({dir.path()}, nullptr);
  EXPECT_THAT(result.errors, ::testing::IsEmpty());
  ASSERT_EQ(result.records.size(), 2u);
  EXPECT_EQ(result.records[0].key, "app::Decode()");
  EXPECT_EQ(result.records[0].source.line, 1);  // The JSON issue is kept.
  EXPECT_EQ(result.records[1].key, "app::Save()");
  EXPECT_EQ(result.records[1].sequence, 1);
  EXPECT_EQ(result.duplicate_blocks, 1);

  // Another process's block at the same times is another block.
  BlockInfo other = first;
  other.pid = first.pid + 1;
  ScratchDir other_dir("other-pid");
  other_dir.Write("issues.jsonl", {Line(PluginIssue(other, first_log))});
  other_dir.Write("looper-2025-11-21_10-00-00.000.log",
                  {FormatBlockLog(first, first.time_end, zone)});
  ReadResult both = ReadIssueInputs({other_dir.path()}, nullptr);
  EXPECT_EQ(both.records.size(), 2u);
  EXPECT_EQ(both.duplicate_blocks, 0);
}

TEST(ReadIssueInputsTest, ABlockCanaryFileReadBeforeItsIssueFileIsStillLeftOut) {
  // matrix-report blockcanary/ . names the text file first: the issue files
  // are scanned for its block before the read.
  ScratchDir dir("text-first");
  const absl::TimeZone zone = absl::LocalTimeZone();
  const BlockInfo block = SampleBlock(kBaseTimeMs, "app::Decode()");
  const std::string log = dir.Write("looper-2025-11-21_10-00-00.000.log",
                                    {FormatBlockLog(block, block.time_end, zone)});
  const std::string issues = dir.Write(
      "issues.jsonl", {Line(FrameIssue("A", 50, kBaseTimeMs)), Line(PluginIssue(block, log))});
  ReadResult result = ReadIssueInputs({log, issues}, nullptr);
  ASSERT_EQ(result.records.size(), 2u);
  EXPECT_EQ(result.records[0].key, "A");
  EXPECT_EQ(result.records[0].sequence, 0);
  EXPECT_EQ(result.records[1].source.line, 2);
  EXPECT_EQ(result.duplicate_blocks, 1);
}

TEST(ForEachIssueTest, StreamsWhatReadIssueInputsKeeps) {
  ScratchDir dir("stream");
  const std::string good = Line(AnrIssue("app::A()", proto::ANR, 5000, kBaseTimeMs));
  dir.Write("issues.1.jsonl", {good, "garbage", "{}", good});
  dir.Write("issues.jsonl", {good, good.substr(0, 30)});
  std::vector<std::string> malformed;
  using SequenceAndLine = std::pair<int64_t, int64_t>;
  std::vector<SequenceAndLine> read;
  const ReadStats stats = ForEachIssue(
      {dir.path(), dir.path() + "/missing.jsonl"}, nullptr, {},
      [&](IssueRecord& r) { read.emplace_back(r.sequence, r.source.line); },
      [&](const MalformedLine& bad) { malformed.push_back(absl::StrCat(bad.where.line)); });
  EXPECT_THAT(read,
              ElementsAre(SequenceAndLine{0, 1}, SequenceAndLine{1, 4}, SequenceAndLine{2, 1}));
  EXPECT_THAT(malformed, ElementsAre("2", "3", "2"));
  EXPECT_EQ(stats.lines, 6);
  EXPECT_EQ(stats.malformed_lines, 3);
  // One entry per file: the count and the first.
  ASSERT_EQ(stats.malformed_files.size(), 2u);
  EXPECT_EQ(stats.malformed_files[0].count, 2);
  EXPECT_EQ(stats.malformed_files[0].first.where.line, 2);
  EXPECT_EQ(stats.malformed_files[1].count, 1);
  EXPECT_EQ(stats.malformed_files[1].first.where.file, dir.path() + "/issues.jsonl");
  ASSERT_EQ(stats.errors.size(), 1u);
  EXPECT_THAT(stats.errors[0], HasSubstr("missing.jsonl"));
}

// The keys IssuesByTime gives, in order.
std::vector<std::string> KeysByTime(const std::vector<std::string>& inputs, std::istream* in,
                                    const IssueFilter& filter = {}) {
  IssuesByTime issues = IssuesByTime::Scan(inputs, in, {}, filter);
  std::vector<std::string> keys;
  int64_t sequence = 0;
  issues.ForEach([&](const IssueRecord& r) {
    EXPECT_EQ(r.sequence, sequence++);
    keys.push_back(r.key);
  });
  EXPECT_EQ(static_cast<int64_t>(keys.size()), issues.selected());
  return keys;
}

TEST(IssuesByTimeTest, MergesFilesInTimeOrderAsSelectIssuesSortsThem) {
  ScratchDir dir("merge");
  // Each sink file in time order; equal times keep read order.
  const std::string a = dir.Write("a.jsonl", {Line(FrameIssue("a1", 50, kBaseTimeMs)),
                                              Line(FrameIssue("a2", 50, kBaseTimeMs + 20)),
                                              Line(FrameIssue("a3", 50, kBaseTimeMs + 40))});
  const std::string b = dir.Write("b.jsonl", {Line(FrameIssue("b1", 50, kBaseTimeMs + 20)),
                                              "garbage",
                                              Line(FrameIssue("b2", 50, kBaseTimeMs + 30))});
  // The clock went back: this file is sorted in memory.
  const std::string c = dir.Write("c.jsonl", {Line(FrameIssue("c1", 50, kBaseTimeMs + 50)),
                                              Line(FrameIssue("c2", 50, kBaseTimeMs + 10)),
                                              Line(FrameIssue("c3", 50, kBaseTimeMs + 20))});
  std::istringstream in(Line(FrameIssue("s1", 50, kBaseTimeMs + 35)) + "\n" +
                        Line(FrameIssue("s0", 50, kBaseTimeMs + 5)) + "\n");
  const std::vector<std::string> keys = KeysByTime({a, "-", b, c}, &in);
  EXPECT_THAT(keys, ElementsAre("a1", "s0", "c2", "a2", "b1", "c3", "b2", "s1", "a3", "c1"));

  ReadResult all = ReadIssueInputs({a, b, c}, nullptr);
  std::vector<std::string> selected;
  for (const IssueRecord* r : SelectIssues(all.records, {})) selected.push_back(r->key);
  EXPECT_EQ(KeysByTime({a, b, c}, nullptr), selected);

  IssueFilter filter;
  filter.since_ms = kBaseTimeMs + 20;
  EXPECT_THAT(KeysByTime({a, b, c}, nullptr, filter),
              ElementsAre("a2", "b1", "c3", "b2", "a3", "c1"));
}

TEST(IssuesByTimeTest, StopsAtWhatTheScanCountedShouldAFileGrow) {
  ScratchDir dir("grow");
  const std::string a = dir.Write("a.jsonl", {Line(FrameIssue("a1", 50, kBaseTimeMs))});
  IssuesByTime issues = IssuesByTime::Scan({a}, nullptr, {}, {});
  std::ofstream(a, std::ios::app) << Line(FrameIssue("a2", 50, kBaseTimeMs + 1)) << "\n";
  std::vector<std::string> keys;
  issues.ForEach([&](const IssueRecord& r) { keys.push_back(r.key); });
  EXPECT_THAT(keys, ElementsAre("a1"));
}

TEST(IssuesByTimeTest, AFileHeldBeforeItIsOverwrittenIsStillWritten) {
  ScratchDir dir("hold");
  const std::string a = dir.Write("a.jsonl", {Line(FrameIssue("a1", 50, kBaseTimeMs)),
                                              Line(FrameIssue("a2", 50, kBaseTimeMs + 2))});
  const std::string b = dir.Write("b.jsonl", {Line(FrameIssue("b1", 50, kBaseTimeMs + 1))});
  IssuesByTime issues = IssuesByTime::Scan({dir.path()}, nullptr, {}, {});
  issues.HoldFile(dir.path() + "/./a.jsonl");
  std::ofstream(a, std::ios::trunc) << "";  // As export -o a.jsonl does.
  std::vector<std::string> keys;
  issues.ForEach([&](const IssueRecord& r) { keys.push_back(r.key); });
  EXPECT_THAT(keys, ElementsAre("a1", "b1", "a2"));
}

}  // namespace
}  // namespace matrix::report

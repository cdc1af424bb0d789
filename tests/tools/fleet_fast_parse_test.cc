// push's fast path (tools/matrix-report/src/internal/fleet_fast_parse.h)
// against the strict path it stands in for: every line it takes must be one
// ParseIssueLine accepts, giving the same fleet row, column for column; the
// lines it cannot decide (unknown fields, null, numbers it cannot read
// exactly, escapes the two parsers may read differently, invalid JSON) are
// left to the strict path. No server.

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "fleet_test_data.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_format.h"
#include "internal/fleet_checkpoint.h"
#include "internal/fleet_fast_parse.h"
#include "internal/fleet_row_view.h"
#include "matrix/report/fleet.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using internal::FastIssueParser;
using internal::FleetRowView;
using test_util::Line;
using test_util::ScratchDir;

const std::string kTestData = MATRIX_REPORT_TESTDATA;

// The row as TabSeparated: every column the table stores.
std::string RowOf(const IssueRecord& record, absl::string_view line) {
  std::string tsv;
  AppendFleetRowTsv(MakeFleetRow(record, line, "fallback-host"), tsv);
  return tsv;
}

// What the fast path does with `line`: kTaken when it decides it (and then
// its row must be the strict path's, as TabSeparated and byte for byte as
// RowBinary), kLeft when it leaves it (to the strict path, which then
// decides it as it always did).
enum class Fast { kTaken, kLeft };
Fast Check(FastIssueParser& parser, const std::string& line) {
  FleetRowView fast;
  const bool taken = parser.ParseRow(line, "fallback-host", fast);
  absl::StatusOr<IssueRecord> strict = ParseIssueLine(line, {"issues.jsonl", 7});
  if (!taken) return Fast::kLeft;
  EXPECT_TRUE(strict.ok()) << "taken, but the strict parse refuses it: " << line;
  if (!strict.ok()) return Fast::kTaken;
  EXPECT_FALSE(strict->has_unknown_fields) << line;
  std::string fast_tsv;
  AppendFleetRowTsv(internal::ToFleetRow(fast), fast_tsv);
  EXPECT_EQ(fast_tsv, RowOf(*strict, line)) << line;
  std::string fast_binary;
  std::string strict_binary;
  internal::AppendFleetRowBinary(fast, fast_binary);
  AppendFleetRowBinary(MakeFleetRow(*strict, line, "fallback-host"), strict_binary);
  EXPECT_EQ(fast_binary, strict_binary) << line;
  return Fast::kTaken;
}

std::vector<std::string> LinesOf(const std::filesystem::path& file) {
  std::vector<std::string> lines;
  std::ifstream in(file, std::ios::binary);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// Every JSON line the tests and the fuzz corpus hold, each also cut short in
// ten places (then left to the strict path): the rows match wherever the
// fast path decides, and it decides every line the sink wrote.
TEST(FleetFastParseTest, EveryLineItTakesGivesTheStrictPathsRow) {
  ScratchDir scratch("fast");
  test_util::WriteFleetDataSet(scratch.path());
  FastIssueParser parser;
  int lines = 0;
  // Per input: the lines taken, and the lines the strict parse accepts
  // without unknown fields.
  auto check_all = [&](const std::string& root, int& taken, int& strict_known) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      if (entry.path().extension() != ".jsonl") continue;
      for (const std::string& line : LinesOf(entry.path())) {
        ++lines;
        absl::StatusOr<IssueRecord> strict = ParseIssueLine(line, {});
        if (strict.ok() && !strict->has_unknown_fields) ++strict_known;
        if (Check(parser, line) == Fast::kTaken) ++taken;
        for (int cut = 1; cut <= 10; ++cut) {
          EXPECT_EQ(Check(parser, line.substr(0, line.size() * cut / 11)), Fast::kLeft);
        }
      }
    }
  };
  // Lines the sink wrote (the fleet data set, the demo's recorded run): all
  // taken.
  for (const std::string& root : {scratch.path(), kTestData + "/demo"}) {
    int taken = 0;
    int strict_known = 0;
    check_all(root, taken, strict_known);
    EXPECT_GT(taken, 10) << root;
    EXPECT_EQ(taken, strict_known) << root;
  }
  // Hand-made and fuzz-corpus lines (extreme values, hostile bytes): the
  // rows match wherever the fast path decides.
  int taken = 0;
  int strict_known = 0;
  check_all(kTestData + "/reports", taken, strict_known);
  check_all(MATRIX_REPORT_FUZZ_CORPUS, taken, strict_known);
  EXPECT_GT(lines, 100);
  EXPECT_GT(taken, 0);
}

// Each kind of line the sink writes, and the same with the edges of JSON a
// hand-edited or foreign writer may use.
TEST(FleetFastParseTest, EdgesItDecidesGiveTheStrictPathsRow) {
  FastIssueParser parser;
  proto::Issue anr = test_util::AnrIssue("ns::F<std::vector<int>>(\"q\" \\ /)", proto::ANR, 5000,
                                         test_util::kBaseTimeMs);
  anr.mutable_app()->set_host_id("h\t1");
  anr.mutable_app()->set_version("2.0 \xD0\xA1\xD1\x86\xD0\xB5\xD0\xBD\xD0\xB0 \xF0\x9F\x98\x80");
  const std::string anr_line = Line(anr);
  EXPECT_EQ(Check(parser, anr_line), Fast::kTaken);
  // The printer escapes < and > as \u003c and \u003e; other escapes too.
  EXPECT_THAT(anr_line, ::testing::HasSubstr("\\u003c"));
  const std::string escaped = absl::StrReplaceAll(anr_line, {{"\"ANR\"", "\"\\u0041NR\""}});
  EXPECT_EQ(Check(parser, escaped), Fast::kTaken);
  for (const proto::Issue& issue :
       {test_util::FrameIssue("Gallery", 57.5, test_util::kBaseTimeMs),
        test_util::StartupIssue(test_util::kBaseTimeMs),
        test_util::BlockIssue("app::Flush()", 2000, test_util::kBaseTimeMs),
        test_util::EvilMethodIssue("app::Parse()", 900, test_util::kBaseTimeMs)}) {
    EXPECT_EQ(Check(parser, Line(issue)), Fast::kTaken) << Line(issue);
  }
  const std::string base = R"({"tag":"Trace_EvilMethod","time_ms":"1763719200000","pid":42,)"
                           R"("app":{"host_id":"h1","version":"1.0"},)";
  auto with = [&](absl::string_view tail) { return absl::StrCat(base, tail); };
  // Numbers as strings where protobuf's JSON form writes them (64-bit
  // integers) and where it also reads them (32-bit integers); JSON names.
  EXPECT_EQ(Check(parser, with(R"("key":"k","anr":{"detail":"LAG","cost_ms":1e3}})")),
            Fast::kTaken);
  EXPECT_EQ(Check(parser, R"({"tag":"t","pid":"42","timeMs":1763719200000})"), Fast::kTaken);
  EXPECT_EQ(Check(parser, with(R"("block":{}})")), Fast::kTaken);
  EXPECT_EQ(Check(parser, with(R"("anr":{"detail":"ANR","cost_ms":-0.0,"scene":""}})")),
            Fast::kTaken);
  EXPECT_EQ(Check(parser, R"(  {"tag":"t"}  )"), Fast::kLeft);  // Push trims; Parse does not.
}

TEST(FleetFastParseTest, LinesItCannotDecideAreLeftToTheStrictPath) {
  FastIssueParser parser;
  const std::string base = R"({"tag":"Trace_EvilMethod","time_ms":"1763719200000",)";
  const std::vector<std::string> tails = {
      R"("newkind":{"cost_ms":5}})",                      // An unknown report kind.
      R"("anr":{"cost_ms":5,"future":1}})",               // An unknown nested field.
      R"("anr":{"cost_ms":"5000"}})",                     // A double as a string.
      R"("anr":{"cost_ms":"NaN"}})",                      // NaN, as protobuf writes it.
      R"("pid":3000000000})",                             // Out of int32's range.
      R"("pid":1.5})",                                    // Not an integer.
      R"("pid":"042"})",                                  // Not protobuf's decimal form.
      R"("time_ms":"99999999999999999999"})",             // Out of int64's range.
      R"("pid":null})",                                   // null.
      R"("key":"a","key":"b"})",                          // A duplicate key.
      R"("key":"a","anr":{},"block":{}})",                // Two reports of one oneof.
      R"("anr":{"detail":"WHATEVER"}})",                  // An enum name this build lacks.
      R"("anr":{"detail":2}})",                           // An enum by number.
      R"("key":"a\u0000b"})",                             // An escaped NUL.
      R"("key":"\ud83d\ude00"})",                         // An escaped surrogate pair.
      R"("key":"\udc00"})",                               // A lone surrogate.
      "\"key\":\"a\tb\"}",                                // A raw control character.
      R"("key":"a"} {"tag":"glued"})",                    // Two objects on one line.
      R"("key":"a"})" "\xff",                             // Not UTF-8 after the object.
      R"("key":"a")",                                     // Cut short.
      R"("key":["a"]})",                                  // An array for a string.
      R"("anr":{"thread_stack":{"frames":{}}}})",         // An object for a repeated field.
  };
  for (const std::string& tail : tails) {
    EXPECT_EQ(Check(parser, absl::StrCat(base, tail)), Fast::kLeft) << tail;
  }
  EXPECT_EQ(Check(parser, R"({"time_ms":"1"})"), Fast::kLeft);  // No tag.
  EXPECT_EQ(Check(parser, R"([{"tag":"t"}])"), Fast::kLeft);
  EXPECT_EQ(Check(parser, "not json at all"), Fast::kLeft);
}

// A table of tricky lines, each taken by the fast path with the strict
// path's row, or left to the strict path, as the table says: the columns
// come straight from simdjson's values, so each rule of the strict parse
// the row depends on (types, ranges, int64 as strings and numbers, enum
// names, escapes, defaults, the derived kind, detail, key, scene and metric,
// the ids) has a line here.
TEST(FleetFastParseTest, TrickyLinesGiveTheStrictPathsRowOrAreLeftToIt) {
  struct Case {
    const char* why;
    std::string line;
    Fast expected;
  };
  const std::string t = R"({"tag":"Trace_EvilMethod",)";
  const std::vector<Case> cases = {
      {"no app: the fallback host", t + R"("time_ms":"5","pid":7})", Fast::kTaken},
      {"no report: no kind, key as written", t + R"("key":"k"})", Fast::kTaken},
      {"nothing but a tag", R"({"tag":"t"})", Fast::kTaken},
      {"int64 as a number", t + R"("time_ms":1763719200000})", Fast::kTaken},
      {"int64 as a string", t + R"("time_ms":"-1763719200000"})", Fast::kTaken},
      {"int64 at its limits", t + R"("time_ms":"-9223372036854775808"})", Fast::kTaken},
      {"int64 past its limits", t + R"("time_ms":9223372036854775808})", Fast::kLeft},
      {"int32 as a string", t + R"("pid":"-2147483648"})", Fast::kTaken},
      {"int32 with an exponent", t + R"("pid":1e2})", Fast::kLeft},
      {"a number for a string", t + R"("process":5})", Fast::kLeft},
      {"a string for a bool", t + R"("anr":{"confirmed_hang":"true"}})", Fast::kLeft},
      {"a bool", t + R"("anr":{"confirmed_hang":true,"cost_ms":3}})", Fast::kTaken},
      {"an array for a message", t + R"("app":[]})", Fast::kLeft},
      {"an object for a number", t + R"("pid":{}})", Fast::kLeft},
      {"a negative uint32", t + R"("anr":{"thread_stack":{"frames":[{"line":-1}]}}})",
       Fast::kLeft},
      {"uint64 as a string", t + R"("anr":{"thread_stack":{"frames":[{"offset":)"
                                 R"("18446744073709551615"}]}}})",
       Fast::kTaken},
      {"JSON names", R"({"tag":"t","timeMs":"9","app":{"hostId":"h","buildId":"b"}})",
       Fast::kTaken},
      {"a proto and a JSON name of one field", R"({"tag":"t","time_ms":1,"timeMs":2})",
       Fast::kLeft},
      {"a duplicate key in a message", t + R"("app":{"host_id":"a","host_id":"b"}})",
       Fast::kLeft},
      {"an unknown nested field", t + R"("app":{"host_id":"a","future":1}})", Fast::kLeft},
      {"an unknown report kind", t + R"("newkind":{"cost_ms":1}})", Fast::kLeft},
      {"enum by name", t + R"("evil_method":{"detail":"LAG_TOUCH","cost_ms":250}})",
       Fast::kTaken},
      {"enum value 0: no detail", t + R"("evil_method":{"detail":"DETAIL_UNSPECIFIED"}})",
       Fast::kTaken},
      {"enum by number", t + R"("evil_method":{"detail":3}})", Fast::kLeft},
      {"a nested enum", t + R"("device":{"machine":"HIGH","mem":"17179869184"}})", Fast::kTaken},
      {"escapes", t + R"("key":"a\"b\\c\/d\n\r\t\b\f","process":"\u00e9\u4e2d"})", Fast::kTaken},
      {"raw UTF-8", t + "\"process\":\"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"}", Fast::kTaken},
      {"invalid UTF-8", t + "\"process\":\"\xc3\x28\"}", Fast::kLeft},
      {"trailing garbage", t + R"("pid":1} x)", Fast::kLeft},
      {"a trailing comma", t + R"("pid":1,})", Fast::kLeft},
      {"key from stack_key", t + R"("anr":{"detail":"ANR","stack_key":"s","scene":"c"}})",
       Fast::kTaken},
      {"key from scene", t + R"("anr":{"detail":"ANR","scene":"c","cost_ms":"NaN"}})",
       Fast::kLeft},
      {"key from scene, cost as an integer", t + R"("anr":{"scene":"c","cost_ms":7}})",
       Fast::kTaken},
      {"key as written wins", t + R"("key":"k","anr":{"stack_key":"s","scene":"c"}})",
       Fast::kTaken},
      {"a startup's first scene and duration",
       R"({"tag":"Trace_StartUp","startup":{"first_scene":"Main","startup_duration_ms":812.5,)"
       R"("scenes":["Main","Next"]}})",
       Fast::kTaken},
      {"a block's integer cost and its id by times",
       R"({"tag":"BlockCanary","pid":3,"app":{"host_id":"h"},"block":{"cost_ms":"1200",)"
       R"("time_start_ms":"100","time_end_ms":"1300","scene":"s"}})",
       Fast::kTaken},
      {"an empty block", R"({"tag":"BlockCanary","block":{}})", Fast::kTaken},
      {"a frame with its rate",
       R"({"tag":"Trace_FPS","frame":{"scene":"G","fps":57.5,"frames":"120",)"
       R"("dropped_frames":"3","drop_level":{"best":"100","normal":"10","middle":"5",)"
       R"("high":"3","frozen":"2"},"drop_sum":{"best":"1"},"window_ms":2000}})",
       Fast::kTaken},
      {"a frame over too few frames", R"({"tag":"Trace_FPS","frame":{"fps":30,"frames":"9",)"
                                       R"("window_ms":2000}})",
       Fast::kTaken},
      {"a frame over too short a window",
       R"({"tag":"Trace_FPS","frame":{"fps":30,"frames":"90","window_ms":100}})", Fast::kTaken},
      {"a frame too short for a rate", R"({"tag":"Trace_FPS","frame":{"fps":30,"frames":"90",)"
                                       R"("window_ms":2000,"too_short_for_rate":true}})",
       Fast::kTaken},
      {"a double out of range", t + R"("anr":{"cost_ms":1e400}})", Fast::kLeft},
      {"a negative zero", t + R"("anr":{"cost_ms":-0.0}})", Fast::kTaken},
      {"two reports", t + R"("anr":{},"evil_method":{}})", Fast::kLeft},
      {"an empty tag", R"({"tag":"","pid":1})", Fast::kLeft},
      {"null for a message", t + R"("app":null})", Fast::kLeft},
  };
  FastIssueParser parser;
  for (const Case& c : cases) {
    EXPECT_EQ(Check(parser, c.line), c.expected) << c.why << ": " << c.line;
  }
  // One parser, many lines: nothing of one line's row stays in the next.
  FleetRowView row;
  ASSERT_TRUE(parser.ParseRow(cases[0].line, "fallback-host", row));
  EXPECT_EQ(row.host_id, "fallback-host");
  EXPECT_EQ(row.kind, "");
  EXPECT_EQ(row.fps, 0);
  EXPECT_EQ(row.drop_level[4], 0);
}

// The scan of the raw line for what only the strict path decides (sixteen
// bytes at a time, then eight, then one) finds a raw control character, an
// escaped NUL or surrogate wherever it is, passes other escapes, and ends
// cleanly at every length.
TEST(FleetFastParseTest, WhatTheStrictPathDecidesIsFoundAtEveryOffset) {
  FastIssueParser parser;
  for (size_t pad = 0; pad < 40; ++pad) {
    const std::string head = absl::StrCat(R"({"tag":"t","key":")", std::string(pad, 'k'));
    EXPECT_EQ(Check(parser, absl::StrCat(head, R"("})")), Fast::kTaken) << pad;
    EXPECT_EQ(Check(parser, absl::StrCat(head, R"(\n\u00e9"})")), Fast::kTaken) << pad;
    EXPECT_EQ(Check(parser, absl::StrCat(head, R"(\u0000"})")), Fast::kLeft) << pad;
    EXPECT_EQ(Check(parser, absl::StrCat(head, R"(\ud800"})")), Fast::kLeft) << pad;
    EXPECT_EQ(Check(parser, absl::StrCat(head, "\x01\"}")), Fast::kLeft) << pad;
    EXPECT_EQ(Check(parser, absl::StrCat(head, "\x1f\"}")), Fast::kLeft) << pad;
  }
}

// An issue's id is what it always was (stores made before keep collapsing
// repeats): both FNV-1a hashes of host, newline and report.
TEST(FleetFastParseTest, IssueIdsStayWhatTheyWere) {
  const std::string line =
      Line(test_util::AnrIssue("app::A()", proto::ANR, 5000, test_util::kBaseTimeMs));
  const FleetRow row = MakeFleetRow(test_util::Parsed(test_util::AnrIssue(
                                        "app::A()", proto::ANR, 5000, test_util::kBaseTimeMs)),
                                    line, "fallback-host");
  const std::string text = absl::StrCat("fallback-host\n", line);
  EXPECT_EQ(row.issue_id,
            absl::StrFormat("%016x%016x", internal::Fnv1a(text, 0xcbf29ce484222325ULL),
                            internal::Fnv1a(text, 0x84222325cbf29ce4ULL)));
}

// Ids computed several side by side (what push does with the fast path's
// rows) are the ids of IssueIdInto one by one: 0 to 9 jobs (whole groups
// and the rest), reports of different lengths (the shortest sets the common
// run) including empty ones, hosts of different lengths.
TEST(FleetFastParseTest, IdsSideBySideAreTheIdsOneByOne) {
  std::vector<std::string> reports;
  std::vector<std::string> hosts;
  for (int i = 0; i < 9; ++i) {
    reports.push_back(i == 3 ? std::string() : std::string(static_cast<size_t>(37 * i * i), 'x'));
    reports.back() += absl::StrCat("{\"tag\":\"t", i, "\"}\xff\x80");
    hosts.push_back(std::string(static_cast<size_t>(i), static_cast<char>('a' + i)));
  }
  reports[5].clear();
  for (size_t count = 0; count <= reports.size(); ++count) {
    std::vector<std::string> out(count, std::string(32, '?'));
    std::vector<internal::IssueIdJob> jobs;
    for (size_t i = 0; i < count; ++i) {
      jobs.push_back({.host_id = hosts[i], .report = reports[i], .out = out[i].data()});
    }
    internal::IssueIdsInto(jobs);
    for (size_t i = 0; i < count; ++i) {
      std::string one;
      internal::IssueIdInto(hosts[i], reports[i], one);
      EXPECT_EQ(out[i], one) << count << " jobs, job " << i;
    }
  }
}

}  // namespace
}  // namespace matrix::report

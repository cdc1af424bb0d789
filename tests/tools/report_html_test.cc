// matrix-report html: the page's sections, escaping of user strings in HTML
// and in the script's data, the numbers it shows, and the trace events of an
// issue (IssueTraceEventsJson). The page's script is run in a real browser by
// tools_matrix_report_html_browser_test.

#include "matrix/report/html_report.h"

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "matrix/report/cli.h"
#include "matrix/report/issue_filter.h"
#include "matrix/report/timeline_export.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using test_util::AnrIssue;
using test_util::BlockIssue;
using test_util::EvilMethodIssue;
using test_util::FrameIssue;
using test_util::kBaseTimeMs;
using test_util::Parsed;
using test_util::StartupIssue;

// A name with every character that matters to HTML and to script.
constexpr char kNastyKey[] =
    "app::Less<a&b>::operator<(\"x\", 'y')</script><script>alert(1)</script>";

struct Page {
  ReadResult read;
  std::vector<const IssueRecord*> selected;
  std::string html;
};

Page Render(const std::vector<proto::Issue>& issues) {
  Page page;
  page.read.files = {"issues.jsonl"};
  for (size_t i = 0; i < issues.size(); ++i) {
    page.read.records.push_back(Parsed(issues[i], "issues.jsonl", static_cast<int64_t>(i + 1)));
    page.read.records.back().sequence = static_cast<int64_t>(i);
  }
  page.read.lines = static_cast<int64_t>(issues.size());
  page.selected = SelectIssues(page.read.records, IssueFilter{});
  page.html = RenderHtmlReport(page.read, page.selected, false, {});
  return page;
}

// The JSON inside <script type="application/json" id="matrix-data">.
std::string DataJson(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"matrix-data\">";
  const size_t begin = html.find(open);
  if (begin == std::string::npos) return "";
  const size_t start = begin + open.size();
  const size_t end = html.find("</script>", start);
  return end == std::string::npos ? "" : html.substr(start, end - start);
}

google::protobuf::Value ParseJson(const std::string& json) {
  google::protobuf::Value value;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &value);
  EXPECT_TRUE(status.ok()) << status << "\n" << json.substr(0, 400);
  return value;
}

int CountOf(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

std::vector<proto::Issue> AllKinds() {
  return {
      StartupIssue(kBaseTimeMs),
      FrameIssue("Gallery", 52.4, kBaseTimeMs + 10'000),
      FrameIssue("Gallery", 48.5, kBaseTimeMs + 20'000),
      FrameIssue("Settings", 58.0, kBaseTimeMs + 30'000),
      AnrIssue("app::Decode(Image const&)", proto::ANR, 5000.4, kBaseTimeMs + 40'000),
      AnrIssue("app::Decode(Image const&)", proto::ANR, 6200.0, kBaseTimeMs + 50'000),
      EvilMethodIssue("app::DecodeImage()", 812.0, kBaseTimeMs + 60'000),
      BlockIssue("app::Flush()", 1500, kBaseTimeMs + 70'000),
  };
}

TEST(HtmlEscapeTest, EscapesTheFiveCharacters) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(HtmlEscape("plain ascii"), "plain ascii");
}

TEST(ScriptJsonTest, KeepsTheValueButNoMarkup) {
  const std::string json = R"({"name":"</script><b>&amp;"})";
  const std::string safe = ScriptJson(json);
  EXPECT_THAT(safe, Not(HasSubstr("<")));
  EXPECT_THAT(safe, Not(HasSubstr(">")));
  EXPECT_THAT(safe, Not(HasSubstr("&")));
  EXPECT_EQ(ParseJson(safe).struct_value().fields().at("name").string_value(),
            "</script><b>&amp;");
}

TEST(HtmlReportTest, HasEverySectionAndIsSelfContained) {
  const Page page = Render(AllKinds());
  const std::string& html = page.html;
  EXPECT_THAT(html, testing::StartsWith("<!DOCTYPE html>"));
  for (const char* id : {"summary", "frames", "groups", "hangs", "timeline", "fps-plots",
                         "timeline-issue", "timeline-view", "render-errors", "matrix-data"}) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("id=\"", id, "\""))) << id;
  }
  // The style and script are inline: nothing is loaded from elsewhere.
  EXPECT_THAT(html, HasSubstr("<style>"));
  EXPECT_THAT(html, HasSubstr("data-render-ok"));
  // (The only URL is the SVG namespace name, which is never fetched.)
  EXPECT_EQ(CountOf(html, "http"), 1);
  EXPECT_EQ(CountOf(html, "http://www.w3.org/2000/svg"), 1);
  EXPECT_EQ(CountOf(html, " src="), 0);
  EXPECT_EQ(CountOf(html, "<link"), 0);
  EXPECT_EQ(CountOf(html, "url("), 0);
  EXPECT_EQ(CountOf(html, "@import"), 0);
  EXPECT_TRUE(absl::EndsWith(html, "</html>\n"));
}

TEST(HtmlReportTest, SummaryGroupsAndNumbers) {
  const Page page = Render(AllKinds());
  const std::string& html = page.html;
  EXPECT_THAT(html, HasSubstr("<span id=\"issue-count\">8</span>"));
  EXPECT_THAT(html, HasSubstr("2025-11-21 10:00:00.000 .. 2025-11-21 10:01:10.000 UTC"));
  // Per tag/detail: issues, groups, worst, median (FPS: lowest is worst).
  EXPECT_THAT(html, HasSubstr("<tr><td>Trace_FPS</td><td class=\"num\">3</td>"
                              "<td class=\"num\">2</td><td class=\"num\">48.5 fps</td>"
                              "<td class=\"num\">52.4 fps</td></tr>"));
  EXPECT_THAT(html, HasSubstr("<tr><td>Trace_EvilMethod/ANR</td><td class=\"num\">2</td>"
                              "<td class=\"num\">1</td><td class=\"num\">6200.0 ms</td>"
                              "<td class=\"num\">5600.2 ms</td></tr>"));
  EXPECT_THAT(html, HasSubstr("gallery (pid 4242) <b>8</b>"));
  // Groups: one <details> each, the ANR group with count 2, worst and median
  // as GroupIssues computes them, and its two issues.
  EXPECT_EQ(CountOf(html, "<details class=\"group\""), 6);
  EXPECT_THAT(html, HasSubstr("<span class=\"count\">x2</span> <span class=\"td\">"
                              "Trace_EvilMethod/ANR</span> <span class=\"key\">"
                              "app::Decode(Image const&amp;)</span> <span class=\"metric\">"
                              "worst 6200.0 ms, median 5600.2 ms</span>"));
  // Hangs: the ANR's stack and call tree, the worst issue first and open.
  EXPECT_THAT(html, HasSubstr("<details class=\"hang-issue\" open><summary>worst: "
                              "2025-11-21 10:00:50.000 &middot; Gallery &middot; 6200.0 ms"));
  EXPECT_THAT(html, HasSubstr("<li><span class=\"fn\">clock_nanosleep</span><span "
                              "class=\"off\">+0x65</span> <span class=\"mod\">libc.so.6</span>"));
  EXPECT_THAT(html, HasSubstr("<td class=\"num\">6198.0</td>"));
  EXPECT_THAT(html, HasSubstr("<span class=\"tagx\">x3</span>"));
  // The block's merged samples: 3 of 5 in one stack.
  EXPECT_THAT(html, HasSubstr("3 stack samples of 5"));
  // FPS data for the plots: per scene, each report, the summed drop levels.
  const google::protobuf::Value data = ParseJson(DataJson(html));
  const auto& scenes = data.struct_value().fields().at("scenes").list_value().values();
  ASSERT_EQ(scenes.size(), 2);
  const auto& gallery = scenes[0].struct_value().fields();
  EXPECT_EQ(gallery.at("name").string_value(), "Gallery");
  ASSERT_EQ(gallery.at("reports").list_value().values_size(), 2);
  const auto& report = gallery.at("reports").list_value().values(1).struct_value().fields();
  EXPECT_EQ(report.at("t").number_value(), kBaseTimeMs + 20'000);
  EXPECT_EQ(report.at("fps").number_value(), 48.5);
  EXPECT_EQ(report.at("dropped").number_value(), 238);
  const auto& levels = gallery.at("levels").list_value().values();
  ASSERT_EQ(levels.size(), 5);
  EXPECT_EQ(levels[0].number_value(), 5200);  // 2 reports x 2600 BEST.
  EXPECT_EQ(levels[1].number_value(), 28);
  EXPECT_EQ(levels[3].number_value(), 2);
  EXPECT_EQ(gallery.at("refresh").number_value(), 60);
  // Traces: startup, 2 ANRs, slow method, block; the default is the worst
  // issue of the first hang group (the 6200 ms ANR).
  EXPECT_EQ(data.struct_value().fields().at("traces").list_value().values_size(), 5);
  EXPECT_EQ(data.struct_value().fields().at("default_issue").number_value(), 5);
}

TEST(HtmlReportTest, UserStringsCannotBreakThePage) {
  proto::Issue anr = AnrIssue(kNastyKey, proto::ANR, 3000, kBaseTimeMs);
  anr.mutable_anr()->set_scene("<img src=x onerror=alert(2)>");
  anr.mutable_anr()->mutable_message()->set_callback("cb</script>'\"&");
  proto::Issue frame = FrameIssue("Scene\"<'&>", 50, kBaseTimeMs + 1000);
  const Page page = Render({anr, frame, EvilMethodIssue(kNastyKey, 900, kBaseTimeMs + 2000)});
  const std::string& html = page.html;
  // No raw markup from the issues anywhere: one data script, one page script.
  EXPECT_EQ(CountOf(html, "<script>alert"), 0);
  EXPECT_EQ(CountOf(html, "<img"), 0);
  EXPECT_EQ(CountOf(html, "cb</script>"), 0);
  EXPECT_EQ(CountOf(html, "<script"), 2);
  EXPECT_EQ(CountOf(html, "</script>"), 2);
  EXPECT_GE(CountOf(html, "app::Less&lt;a&amp;b&gt;::operator&lt;(&quot;x&quot;, &#39;y&#39;)"
                          "&lt;/script&gt;"),
            1);
  // The data still holds the exact strings once parsed.
  const google::protobuf::Value data = ParseJson(DataJson(html));
  const auto& fields = data.struct_value().fields();
  EXPECT_EQ(fields.at("scenes").list_value().values(0).struct_value().fields().at("name")
                .string_value(),
            "Scene\"<'&>");
  const auto& trace = fields.at("traces").list_value().values(0).struct_value().fields();
  EXPECT_THAT(trace.at("label").string_value(), HasSubstr(kNastyKey));
  bool found_key = false;
  for (const auto& e :
       trace.at("trace").struct_value().fields().at("traceEvents").list_value().values()) {
    const auto& ev = e.struct_value().fields();
    if (ev.contains("args") && ev.at("args").struct_value().fields().contains("key")) {
      found_key |= ev.at("args").struct_value().fields().at("key").string_value() == kNastyKey;
    }
  }
  EXPECT_TRUE(found_key);
}

// The trace events of a hang: the dispatch (here the call tree's root) ends
// at the report, calls nest in call order, the stack capture and detection
// are instants, the looper's lane is named.
TEST(IssueTraceEventsJsonTest, HangDispatchCallTreeAndInstants) {
  const IssueRecord record =
      Parsed(AnrIssue("app::Decode()", proto::ANR, 5000, kBaseTimeMs + 10'000));
  const std::optional<std::string> json = IssueTraceEventsJson(record);
  ASSERT_TRUE(json.has_value());
  const google::protobuf::Value trace = ParseJson(*json);
  const auto& events = trace.struct_value().fields().at("traceEvents").list_value().values();
  const double end_us = (kBaseTimeMs + 10'000) * 1000.0;
  int x = 0;
  int instants = 0;
  bool named = false;
  for (const auto& e : events) {
    const auto& f = e.struct_value().fields();
    EXPECT_EQ(f.at("pid").number_value(), 4242);
    EXPECT_EQ(f.at("tid").number_value(), 4242);
    const std::string ph = f.at("ph").string_value();
    const std::string name = f.at("name").string_value();
    if (ph == "M") {
      named = name == "thread_name" &&
              f.at("args").struct_value().fields().at("name").string_value() == "gallery (looper)";
    } else if (ph == "X") {
      ++x;
      const double ts = f.at("ts").number_value();
      const double dur = f.at("dur").number_value();
      if (name == "dispatch") {
        EXPECT_EQ(ts, end_us - 5000e3);
        EXPECT_EQ(dur, 5000e3);
      } else if (name == "app::Load()") {
        EXPECT_EQ(ts, end_us - 5000e3);  // The first child starts with its parent.
        EXPECT_EQ(dur, 4999e3);
      } else {
        EXPECT_EQ(name, "app::Decode()");
        EXPECT_EQ(dur, 4998e3);
      }
    } else {
      EXPECT_EQ(ph, "i");
      ++instants;
      EXPECT_THAT(name, testing::AnyOf("ANR detected", "stack captured"));
      EXPECT_EQ(f.at("ts").number_value(), end_us) << name;
    }
  }
  EXPECT_TRUE(named);
  EXPECT_EQ(x, 3);  // The call tree's dispatch root stands for the dispatch.
  EXPECT_EQ(instants, 2);
}

TEST(IssueTraceEventsJsonTest, BlockStartupAndFrames) {
  const std::optional<std::string> block =
      IssueTraceEventsJson(Parsed(BlockIssue("app::Flush()", 1500, kBaseTimeMs)));
  ASSERT_TRUE(block.has_value());
  EXPECT_THAT(*block, HasSubstr(absl::StrCat("\"name\":\"block\",\"cat\":\"dispatch\",\"pid\":4242,"
                                             "\"tid\":4242,\"ts\":",
                                             (kBaseTimeMs - 1500) * 1000, ",\"dur\":1500000")));
  EXPECT_EQ(CountOf(*block, "\"name\":\"stack sample\""), 5);
  const std::optional<std::string> startup = IssueTraceEventsJson(Parsed(StartupIssue(kBaseTimeMs)));
  ASSERT_TRUE(startup.has_value());
  // Process start = report time - startup duration; application create from
  // its begin mark to its end.
  EXPECT_THAT(*startup, HasSubstr(absl::StrCat("\"name\":\"application create\",\"cat\":\"startup\","
                                               "\"pid\":4242,\"tid\":4242,\"ts\":",
                                               kBaseTimeMs * 1000 - 2988100 + 52500,
                                               ",\"dur\":1777700")));
  EXPECT_THAT(*startup, HasSubstr("\"name\":\"first scene shown\""));
  EXPECT_FALSE(IssueTraceEventsJson(Parsed(FrameIssue("Gallery", 50, kBaseTimeMs))).has_value());
}

// An issue that carries the flight recorder's timeline is drawn from it (the
// same JSON as `matrix-report timeline`), not from the events derived from
// the report; a frozen-frame FPS report with a timeline gets one too.
TEST(IssueTraceEventsJsonTest, RecordedTimelineIsPreferredToDerivedEvents) {
  proto::Issue issue = AnrIssue("app::Decode()", proto::ANR, 5000, kBaseTimeMs + 10'000);
  proto::Timeline* t = issue.mutable_timeline();
  t->set_window_us(5'000'000);
  t->set_detected_at_us(4'900'000);
  t->set_detected_by("ANR watchdog");
  proto::TimelineSlice* d = t->add_dispatches();
  d->set_name("Reload@net.cc:42");
  d->set_ts_us(50'000);
  d->set_dur_us(4'950'000);
  const IssueRecord record = Parsed(issue);
  const std::optional<std::string> json = IssueTraceEventsJson(record);
  ASSERT_TRUE(json.has_value());
  EXPECT_EQ(*json, TimelineTraceEvents(record));
  EXPECT_THAT(*json, HasSubstr("Reload@net.cc:42"));
  EXPECT_THAT(*json, Not(HasSubstr("\"name\":\"stack captured\"")));

  proto::Issue frames = FrameIssue("Gallery", 50, kBaseTimeMs);
  frames.mutable_timeline()->add_frames()->set_name("frame 7");
  const std::optional<std::string> frame_json = IssueTraceEventsJson(Parsed(frames));
  ASSERT_TRUE(frame_json.has_value());
  EXPECT_THAT(*frame_json, HasSubstr("frame 7"));
}

TEST(HtmlReportTest, EmptyInputStillMakesAPage) {
  const Page page = Render({});
  EXPECT_THAT(page.html, HasSubstr("No hangs or slow methods."));
  const google::protobuf::Value data = ParseJson(DataJson(page.html));
  EXPECT_EQ(data.struct_value().fields().at("traces").list_value().values_size(), 0);
}

TEST(HtmlCommandTest, WritesTheFileAndAcceptsFilters) {
  test_util::ScratchDir dir("html");
  const std::string input =
      dir.Write("issues.jsonl", {test_util::Line(AnrIssue("app::A()", proto::ANR, 3000, kBaseTimeMs)),
                                 test_util::Line(FrameIssue("Gallery", 50, kBaseTimeMs + 1))});
  const std::string output = dir.path() + "/report.html";
  std::istringstream in;
  std::ostringstream out;
  std::ostringstream err;
  const RunEnvironment env{.now = absl::FromUnixMillis(kBaseTimeMs + 3'600'000)};
  ASSERT_EQ(RunMatrixReport({"html", "--utc", "--tag=Trace_FPS", "-o", output, input}, in, out,
                            err, env),
            kExitOk)
      << err.str();
  EXPECT_EQ(out.str(), "");
  EXPECT_THAT(err.str(), HasSubstr("wrote an HTML report of 1 issue to " + output));
  std::ifstream file(output);
  std::stringstream html;
  html << file.rdbuf();
  EXPECT_THAT(html.str(), HasSubstr("1 of 2 match the filters"));
  // Without -o the page goes to stdout; --format stays export-only.
  std::ostringstream out2;
  EXPECT_EQ(RunMatrixReport({"html", input}, in, out2, err, env), kExitOk);
  EXPECT_THAT(out2.str(), testing::StartsWith("<!DOCTYPE html>"));
  EXPECT_FALSE(ParseCommandLine({"html", "--format=csv"}, env).ok());
  EXPECT_FALSE(ParseCommandLine({"group", "-o", "x.html"}, env).ok());
}

}  // namespace
}  // namespace matrix::report

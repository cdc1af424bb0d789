// matrix-report html in a real browser: the built matrix-report writes the
// report of the demo fixture (testdata/demo, a real demo run) and of issues
// with hostile names; headless Chromium (Debian `chromium`) loads each from
// file:// with a throw-away profile and no network, and
//   - the DOM it dumps after the page's script ran holds the plots the
//     script builds (FPS lines, histogram bars, timeline events), the
//     script's success mark (data-render-ok="true") and no script error;
//   - its screenshot is a real PNG of the window size, not a blank page.
// Label `browser`; each Chromium start takes a few seconds.

#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/issue_reader.h"
#include "matrix/report/timeline_export.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Quote(const std::string& s) { return absl::StrCat("'", s, "'"); }

// Runs `command` with /bin/sh; returns its exit status.
int RunShell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int CountOf(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

class HtmlBrowserTest : public ::testing::Test {
 protected:
  HtmlBrowserTest() : dir_("browser") {}

  // Writes the report of `inputs` to dir/report.html; returns its path.
  std::string WriteReport(const std::string& inputs) {
    const std::string html = dir_.path() + "/report.html";
    // Run where the doc's examples run, so the page names ./matrix-reports.
    const std::string command = absl::StrCat(
        "cd ", Quote(std::string(MATRIX_REPORT_TESTDATA) + "/demo"), " && TZ=UTC ",
        Quote(MATRIX_REPORT_BINARY), " html --utc -o ", Quote(html), " ", inputs, " 2>",
        Quote(dir_.path() + "/report.err"));
    EXPECT_EQ(RunShell(command), 0) << command << "\n" << ReadFile(dir_.path() + "/report.err");
    return html;
  }

  // Chromium, headless, with its own profile and HOME, no network. `what`:
  // "--dump-dom" (the DOM goes to stdout) or "--screenshot=FILE ...".
  int Chromium(const std::string& what, const std::string& page, const std::string& out,
               const std::string& log) {
    const std::string profile = dir_.path() + "/profile";
    const std::string command = absl::StrCat(
        "HOME=", Quote(dir_.path()), " timeout 150 ", Quote(MATRIX_CHROMIUM),
        " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run",
        " --no-default-browser-check --disable-extensions --disable-sync",
        " --disable-background-networking --disable-component-update",
        " --host-resolver-rules='MAP * ~NOTFOUND' --enable-logging=stderr --v=0",
        " --user-data-dir=", Quote(profile), " --virtual-time-budget=3000 ", what, " ",
        Quote("file://" + page), " >", Quote(out), " 2>", Quote(log));
    return RunShell(command);
  }

  std::string DumpDom(const std::string& page) {
    const std::string dom = dir_.path() + "/dom.html";
    const std::string log = dir_.path() + "/chromium-dom.log";
    EXPECT_EQ(Chromium("--dump-dom", page, dom, log), 0) << ReadFile(log);
    const std::string text = ReadFile(dom);
    const std::string messages = ReadFile(log);
    EXPECT_THAT(messages, Not(HasSubstr("Uncaught"))) << messages;
    return text;
  }

  test_util::ScratchDir dir_;
};

TEST_F(HtmlBrowserTest, DemoReportRendersItsPlotsWithoutScriptErrors) {
  const std::string page = WriteReport("./matrix-reports");
  const std::string dom = DumpDom(page);
  ASSERT_TRUE(absl::StrContains(dom, "<body data-render-ok=\"true\">")) << dom.substr(0, 2000);
  EXPECT_EQ(CountOf(dom, "class=\"render-error\""), 0);
  EXPECT_EQ(CountOf(dom, "data-render-errors=\""), 0);
  // The demo's 5 FPS reports cover Gallery (2), Settings (2) and Splash (1):
  // one FPS plot and one histogram (5 levels) each, drawn by the script.
  EXPECT_EQ(CountOf(dom, "class=\"fps-plot\""), 3);
  EXPECT_EQ(CountOf(dom, "class=\"histogram\""), 3);
  EXPECT_EQ(CountOf(dom, "class=\"hist-bar level-"), 15);
  EXPECT_EQ(CountOf(dom, "class=\"fps-point\""), 5);
  EXPECT_THAT(dom, HasSubstr("class=\"fps-line\""));
  EXPECT_THAT(dom, HasSubstr("class=\"drop-bar\""));
  // The timeline of the default issue (the demo's ANR) is its flight
  // recorder's timeline: the page must draw every X and i event of
  // `matrix-report timeline` for that issue, one lane per track.
  const ReadResult read = ReadIssueInputs(
      {std::string(MATRIX_REPORT_TESTDATA) + "/demo/matrix-reports"}, nullptr);
  const IssueRecord* anr = nullptr;
  for (const IssueRecord& r : read.records) {
    if (r.issue.has_anr() && r.issue.anr().detail() == proto::ANR) anr = &r;
  }
  ASSERT_NE(anr, nullptr);
  ASSERT_TRUE(anr->issue.has_timeline()) << "re-capture the fixture: update_demo_fixture.sh";
  const std::string trace = TimelineTraceEvents(*anr);
  const int spans = CountOf(trace, R"({"ph":"X")");
  const int instants = CountOf(trace, R"({"ph":"i")");
  ASSERT_GT(spans, 10);  // Dispatches, idle gaps, frames, phases, calls.
  ASSERT_EQ(instants, 1);  // The watchdog's detection.
  // One lane per named track (M thread_name).
  EXPECT_EQ(CountOf(dom, "class=\"trace-lane\""), CountOf(trace, R"("name":"thread_name")"));
  EXPECT_EQ(CountOf(dom, "class=\"trace-event\""), spans);
  EXPECT_EQ(CountOf(dom, "class=\"trace-instant\""), instants);
  EXPECT_EQ(CountOf(dom, "<option value="), 8);
  EXPECT_THAT(dom, HasSubstr(absl::StrCat("Drawn: 3 scenes of frame plots, ", spans + instants,
                                          " timeline events")));

  // The screenshot: a PNG of the window's size, with content (a blank
  // 1280x2000 page compresses to a few KiB).
  const std::string png = dir_.path() + "/report.png";
  const std::string log = dir_.path() + "/chromium-shot.log";
  ASSERT_EQ(Chromium(absl::StrCat("--screenshot=", Quote(png), " --window-size=1280,2000"), page,
                     dir_.path() + "/shot.out", log),
            0)
      << ReadFile(log);
  const std::string bytes = ReadFile(png);
  ASSERT_GE(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const auto be32 = [&](size_t at) {
    return (uint32_t{static_cast<uint8_t>(bytes[at])} << 24) |
           (uint32_t{static_cast<uint8_t>(bytes[at + 1])} << 16) |
           (uint32_t{static_cast<uint8_t>(bytes[at + 2])} << 8) |
           uint32_t{static_cast<uint8_t>(bytes[at + 3])};
  };
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(be32(16), 1280u);
  EXPECT_EQ(be32(20), 2000u);
  EXPECT_GT(bytes.size(), 60'000u);
  if (const char* keep = std::getenv("MATRIX_REPORT_SCREENSHOT"); keep != nullptr) {
    std::filesystem::copy_file(png, keep, std::filesystem::copy_options::overwrite_existing);
  }
}

TEST_F(HtmlBrowserTest, HostileNamesNeitherBreakNorInjectIntoThePage) {
  const std::string key = "app::F<a&b>(\"x\", 'y')</script><script>document.title='pwned'</script>";
  proto::Issue anr = test_util::AnrIssue(key, proto::ANR, 3000, test_util::kBaseTimeMs);
  anr.mutable_anr()->set_scene("<img src=x onerror=\"document.title='pwned'\">");
  const std::string input = dir_.Write(
      "issues.jsonl",
      {test_util::Line(anr),
       test_util::Line(test_util::FrameIssue("<b>Scene</b>'\"&", 50, test_util::kBaseTimeMs + 1)),
       test_util::Line(test_util::EvilMethodIssue(key, 900, test_util::kBaseTimeMs + 2))});
  const std::string dom = DumpDom(WriteReport(Quote(input)));
  ASSERT_TRUE(absl::StrContains(dom, "<body data-render-ok=\"true\">")) << dom.substr(0, 2000);
  EXPECT_EQ(CountOf(dom, "class=\"render-error\""), 0);
  EXPECT_THAT(dom, Not(HasSubstr("pwned</title>")));
  EXPECT_THAT(dom, Not(HasSubstr("<img src=\"x\"")));
  EXPECT_THAT(dom, Not(HasSubstr("<b>Scene</b>")));
  EXPECT_EQ(CountOf(dom, "class=\"fps-plot\""), 1);
  EXPECT_GE(CountOf(dom, "class=\"trace-event\""), 3);
  // The names are shown as text.
  EXPECT_THAT(dom, HasSubstr("app::F&lt;a&amp;b&gt;(\"x\", 'y')&lt;/script&gt;"));
}

// The timeline view draws any trace-event JSON (what the flight recorder's
// exporter writes, too): the demo page with its data replaced by a trace with
// B/E pairs, X, i, M thread_name on two threads, relative (monotonic) times,
// and a counter event it does not draw.
TEST_F(HtmlBrowserTest, TimelineDrawsBeginEndPairsAndNamesLanes) {
  const std::string page = WriteReport("./matrix-reports");
  std::string html = ReadFile(page);
  const std::string open = "<script type=\"application/json\" id=\"matrix-data\">";
  const size_t begin = html.find(open);
  ASSERT_NE(begin, std::string::npos);
  const size_t start = begin + open.size();
  const size_t end = html.find("</script>", start);
  ASSERT_NE(end, std::string::npos);
  html.replace(start, end - start, R"({"zone":"UTC","zone_offset_ms":0,"scenes":[],
    "traces":[{"issue":0,"label":"recorded","trace":{"traceEvents":[
      {"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"looper-lane"}},
      {"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"watchdog-lane"}},
      {"ph":"B","name":"dispatch","pid":1,"tid":1,"ts":1000},
      {"ph":"B","name":"Decode","pid":1,"tid":1,"ts":2000},
      {"ph":"E","pid":1,"tid":1,"ts":9000},
      {"ph":"E","pid":1,"tid":1,"ts":10000},
      {"ph":"X","name":"frame","pid":1,"tid":1,"ts":11000,"dur":5000},
      {"ph":"i","s":"t","name":"hang detected","pid":1,"tid":2,"ts":8000},
      {"ph":"C","name":"cpu","pid":1,"ts":1000,"args":{"v":3}}]}}],
    "default_issue":0})");
  const std::string edited = dir_.path() + "/edited.html";
  std::ofstream(edited, std::ios::binary | std::ios::trunc) << html;
  const std::string dom = DumpDom(edited);
  ASSERT_TRUE(absl::StrContains(dom, "<body data-render-ok=\"true\">")) << dom.substr(0, 2000);
  EXPECT_EQ(CountOf(dom, "class=\"trace-lane\""), 2);
  EXPECT_THAT(dom, HasSubstr("data-lane=\"looper-lane\""));
  EXPECT_THAT(dom, HasSubstr("data-lane=\"watchdog-lane\""));
  EXPECT_EQ(CountOf(dom, "class=\"trace-event\""), 3);
  EXPECT_EQ(CountOf(dom, "class=\"trace-instant\""), 1);
  EXPECT_THAT(dom, HasSubstr("1 events of other phases not drawn."));
  EXPECT_THAT(dom, HasSubstr("<title>Decode — 7 ms</title>"));
}

}  // namespace
}  // namespace matrix::report

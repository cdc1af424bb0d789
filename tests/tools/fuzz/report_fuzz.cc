// Fuzz target: an issue file, as matrix-report reads it (JSON lines, or a
// BlockCanary text file when its first non-blank character is '*'), through
// every view: summary, group, show, html, export (CSV, JSON) and timeline.
// Besides the sanitizers' checks (the clang build: address, undefined), the
// text views must hold no control character but LF (TextEscape).
//
// Built with libFuzzer when the compiler is clang, and always as a replay of
// a corpus (report_fuzz_replay.cc); tests/tools/fuzz/CMakeLists.txt.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "matrix/report/export.h"
#include "matrix/report/html_report.h"
#include "matrix/report/issue_filter.h"
#include "matrix/report/issue_groups.h"
#include "matrix/report/issue_reader.h"
#include "matrix/report/text_render.h"
#include "matrix/report/timeline_export.h"

namespace {

// The file name tells the reader which format a stream is in.
constexpr char kIssueFile[] = "fuzz.jsonl";
constexpr char kBlockLogFile[] = "looper-2026-11-25_02-58-46.207.log";

// Aborts (a finding) when a text view holds a control character but LF.
void CheckTerminalSafe(absl::string_view view, const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const bool c1 = c == 0xc2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) < 0xa0;
    if ((c < 0x20 && c != '\n') || c == 0x7f || c1) {
      std::fprintf(stderr, "report_fuzz: %.*s prints control byte 0x%02x at %zu\n",
                   static_cast<int>(view.size()), view.data(), c, i);
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace matrix::report;  // NOLINT: a test's entry point.
  const std::string input(reinterpret_cast<const char*>(data), size);
  const absl::string_view start = absl::StripLeadingAsciiWhitespace(input);
  const bool block_log = !start.empty() && start.front() == '*';
  std::istringstream in(input);
  ReadResult read;
  ReadIssueStream(in, block_log ? kBlockLogFile : kIssueFile, read,
                  {.block_log_time_zone = absl::UTCTimeZone()});
  const std::vector<const IssueRecord*> selected = SelectIssues(read.records, IssueFilter{});
  const RenderOptions options{.time_zone = absl::UTCTimeZone(), .full_paths = false};

  CheckTerminalSafe("summary", RenderSummary(read, selected, false, options));
  const std::vector<IssueGroup> groups = GroupIssues(selected);
  CheckTerminalSafe("group", RenderGroups(groups, options));
  for (const IssueRecord* record : selected) {
    CheckTerminalSafe("show", RenderIssue(*record, options));
    (void)TimelineTraceEvents(*record);
  }
  (void)RenderHtmlReport(read, selected, false,
                         {.time_zone = absl::UTCTimeZone(), .full_paths = false});
  (void)ExportCsv(selected, absl::UTCTimeZone());
  (void)ExportJson(selected);
  (void)ExportGroupsCsv(groups, absl::UTCTimeZone());
  (void)ExportGroupsJson(groups, absl::UTCTimeZone());
  return 0;
}

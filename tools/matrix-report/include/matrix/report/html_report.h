// File: matrix/report/html_report.h
//
// `matrix-report html`: one self-contained HTML page (inline CSS, inline
// script, SVG drawn by the script; no network, no external fonts) with
//
//   - the summary: counts per tag/detail, time range, processes, scenes
//   - the issue groups (as GroupIssues makes them) with count, worst and
//     median, each expandable (<details>) to its issues
//   - per scene, an FPS and dropped-frame timeline over report time and a
//     frame-time histogram built from the FPS reports' drop levels
//   - hang and slow-method groups with their stacks and call trees
//   - a timeline of a selected issue, drawn from Chrome trace-event JSON
//     (IssueTraceEventsJson) as one lane per thread
//
//   matrix::report::HtmlReportOptions options{.time_zone = absl::UTCTimeZone()};
//   std::string page = matrix::report::RenderHtmlReport(read, selected, filtered, options);
//
// Every string that comes from an issue is escaped for its context: HTML
// text and attributes with HtmlEscape, data for the script as JSON inside
// <script type="application/json"> with '<', '>' and '&' written as \u003c,
// \u003e, \u0026 (ScriptJson), so no name can close the element. The script
// puts strings into the page with textContent only.
//
// Thread safety: pure functions; thread-safe for distinct arguments.

#ifndef MATRIX_REPORT_HTML_REPORT_H_
#define MATRIX_REPORT_HTML_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "matrix/report/issue_reader.h"
#include "matrix/report/issue_record.h"

namespace matrix::report {

struct HtmlReportOptions {
  // Times are shown in this zone.
  absl::TimeZone time_zone = absl::UTCTimeZone();
  // Stack frames show the module's full path instead of its file name.
  bool full_paths = false;
};

// The page. `read` tells what was read; `selected` are the issues left after
// the filters (all of `read.records` when `filtered` is false).
std::string RenderHtmlReport(const ReadResult& read,
                             const std::vector<const IssueRecord*>& selected, bool filtered,
                             const HtmlReportOptions& options);

// The Chrome trace-event JSON ({"traceEvents":[...],"displayTimeUnit":"ms"})
// of what happened around `record`, or nullopt when nothing can be placed in
// time (frame reports without a timeline, unknown kinds).
//
// An issue that carries the flight recorder's timeline (Issue.timeline) gets
// exactly TimelineTraceEvents(record) (timeline_export.h): times in
// microseconds from the start of its window. Otherwise the events (ts and dur
// in microseconds since the Unix epoch) are derived from the issue itself (see
// docs/matrix-report.md, "html"): a hang's or slow method's dispatch as an X
// event ending at the report, its call tree as nested X events laid out in
// call order (the tree has no start times), the stack capture and the
// watchdog's detection as instants; a BlockCanary block from its start to
// its end with an instant per stack sample; a startup's phases from the
// process start. Thread lanes are named with M thread_name events.
std::optional<std::string> IssueTraceEventsJson(const IssueRecord& record);

// `s` with &, <, >, " and ' replaced by entities: safe in HTML text and in
// quoted attribute values.
std::string HtmlEscape(absl::string_view s);

// A JSON text made safe inside <script type="application/json">: '<', '>'
// and '&' (which valid JSON holds only inside strings) become \u003c,
// \u003e and \u0026; the value JSON.parse gives is unchanged.
std::string ScriptJson(absl::string_view json);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_HTML_REPORT_H_

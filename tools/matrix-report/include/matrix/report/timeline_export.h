// File: matrix/report/timeline_export.h
//
// An issue's timeline (Issue.timeline, docs/timeline.md) as Chrome
// trace-event JSON, which Perfetto UI (ui.perfetto.dev), chrome://tracing and
// speedscope open. One process (the issue's pid) with one track (tid) each:
//
//   1 main thread   dispatches ("X", cat "dispatch") and idle gaps ("X",
//                   cat "idle")
//   2 frames        frames ("X", cat "frame": number, dropped frames)
//   3 frame phases  input / animation / traversal / commit of each frame
//   4 method calls  traced calls, nested as they ran (method tracing on)
//   5 watchdog      the detection instant ("i")
//
// Times are microseconds from the start of the window ("ts" and "dur", as
// the format wants); "M" events name the process and the tracks.
//
//   std::string json = matrix::report::TimelineTraceEvents(record);
//
// Thread safety: pure functions; thread-safe for distinct arguments.

#ifndef MATRIX_REPORT_TIMELINE_EXPORT_H_
#define MATRIX_REPORT_TIMELINE_EXPORT_H_

#include <iosfwd>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "matrix/report/issue_record.h"

namespace matrix::report {

// Track ids.
inline constexpr int kTimelineDispatchTid = 1;
inline constexpr int kTimelineFrameTid = 2;
inline constexpr int kTimelinePhaseTid = 3;
inline constexpr int kTimelineCallTid = 4;
inline constexpr int kTimelineWatchdogTid = 5;

// The record's timeline as a trace-event JSON object ({"traceEvents": [...],
// "displayTimeUnit": "ms", "otherData": {...}}). The record must have one
// (record.issue.has_timeline()).
std::string TimelineTraceEvents(const IssueRecord& record);

// PickTimelineIssue()
//
// The newest of `selected` (oldest first) that carries a timeline, or
// NotFound saying how many were selected and that none had one.
absl::StatusOr<const IssueRecord*> PickTimelineIssue(
    const std::vector<const IssueRecord*>& selected);

// RunTimelineCommand()
//
// `matrix-report timeline`: writes the picked issue's trace-event JSON to
// `output` (a file) or, when empty, to `out`; says on `err` which issue it
// wrote. Returns `status` (the readers' exit status so far) on success,
// kExitNoInput when no selected issue has a timeline or the file cannot be
// written.
int RunTimelineCommand(const std::vector<const IssueRecord*>& selected, const std::string& output,
                       std::ostream& out, std::ostream& err, int status);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_TIMELINE_EXPORT_H_

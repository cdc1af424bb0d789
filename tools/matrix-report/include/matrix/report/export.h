// File: matrix/report/export.h
//
// Machine-readable exports of matrix-report:
//
//   ExportCsv        one row per issue: the common columns and the main
//                    metric of its kind (cost in ms for hangs and slow
//                    methods, duration for startups, FPS for frame reports)
//   ExportGroupsCsv  one row per group (count, first/last seen, worst and
//                    median, scenes)
//   ExportJson       the issues as a JSON array, each exactly as the sink
//                    writes it (fields unknown to this build kept)
//   ExportJsonLines  the same, one issue per line: a file matrix-report and
//                    anything reading the sink's files can read again
//   ExportGroupsJson the groups as a JSON array
//
//   std::string csv = matrix::report::ExportCsv(selected, absl::UTCTimeZone());
//
// CSV follows RFC 4180 (CRLF line ends are not used: lines end in "\n";
// fields with commas, quotes or line breaks are quoted). Times are RFC 3339
// in the given zone, next to the raw ms since the epoch.
//
// Thread safety: pure functions; thread-safe for distinct arguments.

#ifndef MATRIX_REPORT_EXPORT_H_
#define MATRIX_REPORT_EXPORT_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "matrix/report/issue_groups.h"
#include "matrix/report/issue_record.h"

namespace matrix::report {

// Columns: time,time_ms,tag,detail,key,scene,process,pid,kind,metric,value,
// unit,file,line.
std::string ExportCsv(const std::vector<const IssueRecord*>& records, absl::TimeZone tz);

// Columns: tag,detail,key,kind,count,first_seen,last_seen,first_seen_ms,
// last_seen_ms,metric,unit,worst,median,scenes,processes. `scenes` and
// `processes` read "Settings 7; Gallery 2".
std::string ExportGroupsCsv(const std::vector<IssueGroup>& groups, absl::TimeZone tz);

std::string ExportJson(const std::vector<const IssueRecord*>& records);
std::string ExportJsonLines(const std::vector<const IssueRecord*>& records);

// Each group: {"tag","detail","key","kind","count","first_seen_ms",
// "last_seen_ms","first_seen","last_seen","metric":{"name","unit",
// "higher_is_worse","count","worst","median"} or null,"scenes":[{"name",
// "count"}],"processes":[...],"sources":["file:line",...]}.
std::string ExportGroupsJson(const std::vector<IssueGroup>& groups, absl::TimeZone tz);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_EXPORT_H_

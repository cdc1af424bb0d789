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
// ExportWriter writes the same issue exports one issue at a time, as they are
// read, so an export of any size holds one issue at a time:
//
//   ExportWriter writer(ExportFormat::kCsv, absl::UTCTimeZone(), std::cout);
//   issues.ForEach([&](const IssueRecord& r) { writer.Add(r); });
//   writer.Finish();
//
// CSV follows RFC 4180 (CRLF line ends are not used: lines end in "\n";
// fields with commas, quotes or line breaks are quoted). Times are RFC 3339
// in the given zone, next to the raw ms since the epoch.
//
// Thread safety: pure functions; thread-safe for distinct arguments.

#ifndef MATRIX_REPORT_EXPORT_H_
#define MATRIX_REPORT_EXPORT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "matrix/report/issue_groups.h"
#include "matrix/report/issue_record.h"

namespace matrix::report {

enum class ExportFormat { kCsv, kJson, kJsonLines };

// ExportWriter
//
// Writes issues to `out` as they are added: CSV rows (the header first),
// elements of a JSON array, or JSON lines. `out` must outlive the writer.
class ExportWriter {
 public:
  ExportWriter(ExportFormat format, absl::TimeZone tz, std::ostream& out);

  void Add(const IssueRecord& record);
  // Ends the output (closes the JSON array). Call once, after the last Add().
  void Finish();

  int64_t written() const { return written_; }

 private:
  const ExportFormat format_;
  const absl::TimeZone tz_;
  std::ostream& out_;
  int64_t written_ = 0;
};

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

#include "matrix/report/export.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "matrix/report/format_util.h"

namespace matrix::report {
namespace {

// Metric values keep microsecond (or 1/1000 FPS) resolution.
constexpr int kValuePrecision = 3;

void AppendCsvRow(std::string& out, const std::vector<std::string>& fields) {
  bool first = true;
  for (const std::string& field : fields) {
    if (!first) out += ',';
    out += CsvField(field);
    first = false;
  }
  out += '\n';
}

std::string NameCounts(const std::vector<NameCount>& counts) {
  std::vector<std::string> parts;
  for (const NameCount& c : counts) parts.push_back(absl::StrCat(c.name, " ", c.count));
  return absl::StrJoin(parts, "; ");
}

std::string JsonNameCounts(const std::vector<NameCount>& counts) {
  std::vector<std::string> parts;
  for (const NameCount& c : counts) {
    parts.push_back(absl::StrCat("{\"name\":", JsonQuote(c.name), ",\"count\":", c.count, "}"));
  }
  return absl::StrCat("[", absl::StrJoin(parts, ","), "]");
}

}  // namespace

ExportWriter::ExportWriter(ExportFormat format, absl::TimeZone tz, std::ostream& out)
    : format_(format), tz_(tz), out_(out) {
  if (format_ != ExportFormat::kCsv) return;
  std::string header;
  AppendCsvRow(header, {"time", "time_ms", "tag", "detail", "key", "scene", "process", "pid",
                        "kind", "metric", "value", "unit", "file", "line"});
  out_ << header;
}

void ExportWriter::Add(const IssueRecord& r) {
  std::string text;
  switch (format_) {
    case ExportFormat::kCsv: {
      const bool has_metric = r.metric.present();
      AppendCsvRow(text, {FormatTimeMsRfc3339(r.time_ms(), tz_), absl::StrCat(r.time_ms()),
                          r.tag(), r.detail, r.key, r.scene, r.process(), absl::StrCat(r.pid()),
                          r.kind, r.metric.name,
                          has_metric ? FormatNumber(r.metric.value, kValuePrecision) : "",
                          r.metric.unit, r.source.file,
                          r.source.line > 0 ? absl::StrCat(r.source.line) : ""});
      break;
    }
    case ExportFormat::kJson:
      text = absl::StrCat(written_ == 0 ? "[\n" : ",\n", RecordToJson(r));
      break;
    case ExportFormat::kJsonLines:
      text = absl::StrCat(RecordToJson(r), "\n");
      break;
  }
  out_ << text;
  ++written_;
}

void ExportWriter::Finish() {
  if (format_ == ExportFormat::kJson) out_ << (written_ == 0 ? "[]\n" : "\n]\n");
}

namespace {

std::string Export(ExportFormat format, const std::vector<const IssueRecord*>& records,
                   absl::TimeZone tz) {
  std::ostringstream out;
  ExportWriter writer(format, tz, out);
  for (const IssueRecord* r : records) writer.Add(*r);
  writer.Finish();
  return std::move(out).str();
}

}  // namespace

std::string ExportCsv(const std::vector<const IssueRecord*>& records, absl::TimeZone tz) {
  return Export(ExportFormat::kCsv, records, tz);
}

std::string ExportGroupsCsv(const std::vector<IssueGroup>& groups, absl::TimeZone tz) {
  std::string out;
  AppendCsvRow(out,
               {"tag", "detail", "key", "kind", "count", "first_seen", "last_seen", "first_seen_ms",
                "last_seen_ms", "metric", "unit", "worst", "median", "scenes", "processes"});
  for (const IssueGroup& g : groups) {
    const bool has_metric = g.metric_count > 0;
    AppendCsvRow(out,
                 {g.tag, g.detail, g.key, g.kind, absl::StrCat(g.count),
                  FormatTimeMsRfc3339(g.first_seen_ms, tz), FormatTimeMsRfc3339(g.last_seen_ms, tz),
                  absl::StrCat(g.first_seen_ms), absl::StrCat(g.last_seen_ms),
                  has_metric ? g.metric.name : "", has_metric ? g.metric.unit : "",
                  has_metric ? FormatNumber(g.worst, kValuePrecision) : "",
                  has_metric ? FormatNumber(g.median, kValuePrecision) : "", NameCounts(g.scenes),
                  NameCounts(g.processes)});
  }
  return out;
}

std::string ExportJson(const std::vector<const IssueRecord*>& records) {
  return Export(ExportFormat::kJson, records, absl::UTCTimeZone());
}

std::string ExportJsonLines(const std::vector<const IssueRecord*>& records) {
  return Export(ExportFormat::kJsonLines, records, absl::UTCTimeZone());
}

std::string ExportGroupsJson(const std::vector<IssueGroup>& groups, absl::TimeZone tz) {
  if (groups.empty()) return "[]\n";
  std::string out = "[\n";
  bool first = true;
  for (const IssueGroup& g : groups) {
    std::string metric = "null";
    if (g.metric_count > 0) {
      metric = absl::StrCat(
          "{\"name\":", JsonQuote(g.metric.name), ",\"unit\":", JsonQuote(g.metric.unit),
          ",\"higher_is_worse\":", g.metric.higher_is_worse ? "true" : "false",
          ",\"count\":", g.metric_count, ",\"worst\":", FormatNumber(g.worst, kValuePrecision),
          ",\"median\":", FormatNumber(g.median, kValuePrecision), "}");
    }
    std::vector<std::string> sources;
    sources.reserve(g.sources.size());
    for (const IssueSource& s : g.sources) {
      sources.push_back(
          JsonQuote(s.line > 0 ? absl::StrCat(*s.file, ":", s.line) : std::string(*s.file)));
    }
    absl::StrAppend(&out, first ? "" : ",\n", "{\"tag\":", JsonQuote(g.tag),
                    ",\"detail\":", JsonQuote(g.detail), ",\"key\":", JsonQuote(g.key),
                    ",\"kind\":", JsonQuote(g.kind), ",\"count\":", g.count,
                    ",\"first_seen_ms\":", g.first_seen_ms, ",\"last_seen_ms\":", g.last_seen_ms,
                    ",\"first_seen\":", JsonQuote(FormatTimeMsRfc3339(g.first_seen_ms, tz)),
                    ",\"last_seen\":", JsonQuote(FormatTimeMsRfc3339(g.last_seen_ms, tz)),
                    ",\"metric\":", metric, ",\"scenes\":", JsonNameCounts(g.scenes),
                    ",\"processes\":", JsonNameCounts(g.processes), ",\"sources\":[",
                    absl::StrJoin(sources, ","), "]}");
    first = false;
  }
  out += "\n]\n";
  return out;
}

}  // namespace matrix::report

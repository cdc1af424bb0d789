// File: matrix/report/issue_record.h
//
// One issue read back from a JSON-lines issue file (what JsonLinesIssueSink
// writes: protobuf's JSON form of matrix::proto::Issue, proto field names,
// one issue per line), with the fields every matrix-report command needs
// already extracted: the report kind, detail, grouping key, scene and the
// kind's main metric.
//
// The extraction is generic: it walks the Issue's `report` oneof with
// protobuf reflection and looks for the fields report kinds share by name
// (`detail`, `cost_ms`, `scene`, `stack_key`), so a report kind added to
// issue.proto later is summarized, grouped and exported without changes
// here. Lines written by a newer matrix-cpp, whose report kind this build
// does not know at all, still parse: the unknown top-level fields are kept as
// JSON values (`unknown_fields`) and the same names are looked up there.
//
//   absl::StatusOr<matrix::report::IssueRecord> record =
//       matrix::report::ParseIssueLine(line, {.file = "issues.jsonl", .line = 7});
//   if (!record.ok()) { ...record.status().message()... }
//   std::cout << record->tag() << " " << record->detail << " " << record->key;
//
// Thread safety: value types and pure functions; thread-compatible.

#ifndef MATRIX_REPORT_ISSUE_RECORD_H_
#define MATRIX_REPORT_ISSUE_RECORD_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "google/protobuf/struct.pb.h"
#include "matrix/proto/issue.pb.h"

namespace matrix::report {

// Where a record came from: a file (or "<stdin>") and a 1-based line number.
struct SourceLocation {
  std::string file;
  int64_t line = 0;
};

// The number a report kind is judged by: a hang's or slow method's cost, a
// startup's duration, a frame report's FPS. Absent when the report has no
// such field, its value is not finite, or (FPS) the report covers no frames.
struct Metric {
  // The report field it comes from ("cost_ms", "startup_duration_ms",
  // "fps"); empty when the report has none.
  std::string name;
  // "ms" or "fps".
  std::string unit;
  double value = 0;
  // False for FPS: the lowest value is the worst.
  bool higher_is_worse = true;

  bool present() const { return !name.empty(); }
  // True when `a` is worse than `b` by this metric's direction.
  bool Worse(double a, double b) const { return higher_is_worse ? a > b : a < b; }
};

struct IssueRecord {
  // The issue as parsed (report kinds this build does not know are absent
  // from it; see `unknown_fields`).
  proto::Issue issue;
  // Top-level fields of the line this build does not know, sorted by name,
  // e.g. {"block", {...}} from a newer matrix-cpp.
  std::vector<std::pair<std::string, google::protobuf::Value>> unknown_fields;
  // True when the line had fields this build does not know anywhere in it
  // (nested ones are dropped; top-level ones are in `unknown_fields`).
  bool has_unknown_fields = false;

  // The report kind: the proto name of the set `report` field ("frame",
  // "evil_method", "anr", "startup", ...), else the first object-valued
  // unknown top-level field, else empty.
  std::string kind;
  // True when `kind` names a field this build does not know.
  bool kind_unknown_to_build = false;
  // The report's `detail` enum as its name ("ANR", "NORMAL"); empty for
  // kinds without one (frame, startup).
  std::string detail;
  // The de-duplication key: Issue.key, or when that is empty the report's
  // `stack_key`, else its scene.
  std::string key;
  // The report's `scene` (`first_scene` for startup); may be empty.
  std::string scene;
  Metric metric;

  SourceLocation source;
  // Position in read order (0, 1, ...), to keep sorts stable across files.
  int64_t sequence = 0;

  const std::string& tag() const { return issue.tag(); }
  int64_t time_ms() const { return issue.time_ms(); }
  const std::string& process() const { return issue.process(); }
  int32_t pid() const { return issue.pid(); }
  // "Trace_EvilMethod/ANR", or just the tag when there is no detail.
  std::string TagDetail() const;
  // "matrix-demo (pid 4242)", "matrix-demo", "pid 4242" or "".
  std::string ProcessLabel() const;
  // The report kind and detail for prose: "evil_method NORMAL", "ANR" (not
  // "anr ANR"), or the kind alone when there is no detail.
  std::string KindDetail() const;
  // The set report message, or null (no report, or an unknown kind).
  const google::protobuf::Message* report() const;
  // The unknown top-level field named `kind` when `kind_unknown_to_build`.
  const google::protobuf::Value* unknown_report() const;
};

// Parses one line. Errors (not JSON, not an Issue, no tag) say why, without
// the location; the caller adds it.
absl::StatusOr<IssueRecord> ParseIssueLine(absl::string_view line, SourceLocation source);

// Fills `kind`, `detail`, `key`, `scene` and `metric` from `issue` and
// `unknown_fields`. ParseIssueLine calls it; tests that build records from
// protos call it too.
void DeriveFields(IssueRecord& record);

// An IssueRecord from an in-memory issue (tests, tools that hold protos).
IssueRecord RecordFromIssue(proto::Issue issue, SourceLocation source = {});

// The issue back as one line of JSON in the sink's form (proto field names,
// default-valued fields printed), unknown top-level fields included as read.
std::string RecordToJson(const IssueRecord& record);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_ISSUE_RECORD_H_

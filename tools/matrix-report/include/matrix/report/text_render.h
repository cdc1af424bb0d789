// File: matrix/report/text_render.h
//
// The human-readable views of matrix-report:
//
//   RenderSummary  counts per tag/detail, time range, processes, scenes
//   RenderGroups   one block per group (count, worst/median, first/last
//                  seen, scenes), as grouped by GroupIssues
//   RenderIssue    one issue: a header (tag/detail, key, time, process,
//                  scene, metric, device, source line), then the evidence of
//                  its kind: for hangs the native stack (one frame a line:
//                  function+offset and module), the call tree indented with
//                  costs, queue costs, thread state and memory; for frame
//                  reports FPS, the drop-level table, per-phase costs,
//                  smoothness and input latency; for startups the timeline;
//                  for BlockCanary blocks the CPU, machine and key line, and
//                  the stack samples with identical stacks merged; for any
//                  other kind a dump of its fields (with stacks and call
//                  trees still drawn as such)
//
//   RenderOptions options{.time_zone = absl::LocalTimeZone()};
//   std::cout << matrix::report::RenderIssue(*selected[0], options);
//
// Every function returns text ending in a newline.
//
// Thread safety: pure functions; thread-safe for distinct arguments.

#ifndef MATRIX_REPORT_TEXT_RENDER_H_
#define MATRIX_REPORT_TEXT_RENDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "google/protobuf/struct.pb.h"
#include "matrix/proto/common.pb.h"
#include "matrix/proto/issue.pb.h"
#include "matrix/report/issue_groups.h"
#include "matrix/report/issue_reader.h"
#include "matrix/report/issue_record.h"

namespace matrix::report {

struct RenderOptions {
  // Times are shown in this zone.
  absl::TimeZone time_zone = absl::UTCTimeZone();
  // Stack frames show the module's full path instead of its file name.
  bool full_paths = false;
};

// IssueSummary
//
// The summary, folded one issue at a time: it keeps counts (per tag/detail
// row its distinct keys and metric values; processes, scenes), not the
// issues, so a streaming read summarizes a file of any size.
//
//   IssueSummary summary;
//   ReadStats stats = ForEachIssue(inputs, &std::cin, {}, [&](IssueRecord& r) {
//     summary.AddRead(r);
//     if (filter.Matches(r)) summary.AddSelected(r, {r.time_ms(), r.sequence});
//   });
//   std::cout << summary.Render(stats, !filter.empty(), options);
class IssueSummary {
 public:
  IssueSummary();
  ~IssueSummary();
  IssueSummary(const IssueSummary&) = delete;
  IssueSummary& operator=(const IssueSummary&) = delete;

  // Every issue read: the total, and what the sinks dropped (`sink_dropped`).
  void AddRead(const IssueRecord& record);
  // An issue the filters selected, at `order` (which issue's metric a row
  // takes, as in IssueGrouper).
  void AddSelected(const IssueRecord& record, IssueOrder order);

  // `stats` tells what was read (files, lines, malformed, errors);
  // `filtered` whether the selected issues are not all of them.
  std::string Render(const ReadStats& stats, bool filtered, const RenderOptions& options) const;

 private:
  struct Row;

  int64_t total_ = 0;
  int64_t selected_ = 0;
  int64_t first_ms_ = 0;
  int64_t last_ms_ = 0;
  int64_t with_unknown_ = 0;
  NameCounter unknown_kinds_;
  NameCounter processes_;
  NameCounter scenes_;
  absl::flat_hash_map<std::string, proto::SinkDrops> drops_by_process_;
  std::vector<std::unique_ptr<Row>> rows_;
  absl::flat_hash_map<std::string, size_t> row_index_;
};

// The summary of a whole read (IssueSummary over its records): `read` tells
// what was read (files, lines, malformed, errors); `selected` are the issues
// left after the filters (all of `read.records` when `filtered` is false),
// in order.
std::string RenderSummary(const ReadResult& read, const std::vector<const IssueRecord*>& selected,
                          bool filtered, const RenderOptions& options);

std::string RenderGroups(const std::vector<IssueGroup>& groups, const RenderOptions& options);

std::string RenderIssue(const IssueRecord& record, const RenderOptions& options);

// The pieces RenderIssue uses, for other tools and tests. `indent` is the
// number of spaces before each line.
//
// A native stack, innermost frame first: "#3  app::Decode()+0x1c  (app)".
std::string RenderStackFrames(const google::protobuf::RepeatedPtrField<proto::StackFrame>& frames,
                              int indent, const RenderOptions& options);
// A pre-order call tree: cost column, then the name indented by depth;
// "x3" for merged calls, "[running]" for unfinished ones.
std::string RenderCallTree(const google::protobuf::RepeatedPtrField<proto::MethodCall>& calls,
                           int indent);
// Every non-default field of `message`, one per line, nested messages
// indented, enums by name; StackFrame lists, ThreadStacks and MethodCall
// lists drawn as stacks and call trees.
std::string RenderMessageFields(const google::protobuf::Message& message, int indent,
                                const RenderOptions& options);
// A JSON value (a report kind this build does not know), same layout.
std::string RenderJsonValue(const google::protobuf::Value& value, int indent);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_TEXT_RENDER_H_

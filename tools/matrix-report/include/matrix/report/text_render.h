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

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "google/protobuf/struct.pb.h"
#include "matrix/proto/common.pb.h"
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

// `read` tells what was read (files, lines, malformed, errors); `selected`
// are the issues left after the filters (all of `read.records` when
// `filtered` is false).
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

// File: tools/matrix-report/src/internal/text_render_util.h
//
// matrix-report's text renderer, shared pieces (internal to matrix_report_lib):
// the field layout, number and name formats, stacks and call trees as text,
// and one Render<Kind>() per report kind (text_render_reports.cc). The
// generic message renderer, issues, groups and the summary are in
// text_render.cc; the pieces here are in text_render_util.cc.
//
// Every string that comes from a report (or a file name) goes through
// TextEscape (format_util.h) before it is laid out: the layout's own LFs are
// the only control characters the text views print.
//
// Thread safety: thread-safe (pure functions).

#ifndef MATRIX_REPORT_SRC_INTERNAL_TEXT_RENDER_UTIL_H_
#define MATRIX_REPORT_SRC_INTERNAL_TEXT_RENDER_UTIL_H_

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "matrix/proto/issue.pb.h"
#include "matrix/report/format_util.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "matrix/report/issue_groups.h"
#include "matrix/report/text_render.h"

namespace matrix::report::internal {

constexpr int kLabelWidth = 12;
// Deeper call-tree nodes are drawn at this depth (the value comes from a
// file and only sets indentation).
constexpr int kMaxDrawnDepth = 64;
// Names shown inline before "and N more".
constexpr size_t kMaxListed = 4;
// BlockCanaryContext's default uid (BlockCanary's provideUid()): no uid given.
constexpr absl::string_view kPlaceholderUid = "uid";

std::string Pad(int indent);

// "label      value" with continuation lines of `value` aligned under it.
void AddField(std::string& out, absl::string_view label, absl::string_view value, int indent = 0);
std::string Ms(double ms);
std::string MetricValue(const Metric& metric, double value);
// The metric's last word: "cost_ms" -> "cost", "startup_duration_ms" ->
// "duration", "fps" -> "fps".
std::string MetricLabel(const Metric& metric);
std::string YesNo(bool b);
std::string Percent(double p);
std::string GiB(double bytes);
std::string ZoneName(int64_t time_ms, absl::TimeZone tz);
// "a: 3, b: 2, c: 1 and 4 more" (names escaped).
std::string CountList(const std::vector<NameCount>& counts, size_t max_listed = kMaxListed);
std::string ThreadStackTitle(const proto::ThreadStack& stack);
void AddThreadStack(std::string& out, absl::string_view label, const proto::ThreadStack& stack,
                    int indent, const RenderOptions& options);
void AddCallTree(std::string& out, const google::protobuf::RepeatedPtrField<proto::MethodCall>& calls,
                 bool truncated);
std::string QueueCostsText(const proto::QueueCosts& q);
std::string MessageText(const proto::MessageInfo& m);
std::string CpuUsageText(double usage);

template <typename Frames>
std::string StackFramesText(const Frames& frames, int indent, const RenderOptions& options) {
  std::string out;
  const int digits = static_cast<int>(
      absl::StrCat(std::max<int64_t>(static_cast<int64_t>(frames.size()) - 1, 0)).size());
  int i = 0;
  for (const proto::StackFrame& frame : frames) {
    std::string where;
    if (!frame.function().empty()) {
      where = TextEscape(frame.function());
      if (frame.offset() != 0) absl::StrAppendFormat(&where, "+0x%x", frame.offset());
    } else {
      where = frame.pc().empty() ? "??" : TextEscape(frame.pc());
    }
    const std::string module = TextEscape(options.full_paths ? absl::string_view(frame.module())
                                                             : Basename(frame.module()));
    absl::StrAppendFormat(&out, "%s#%-*d  %s", Pad(indent), digits, i++, where);
    if (!module.empty()) {
      absl::StrAppend(&out, "  (", module);
      // An unnamed frame: its address in the module's ELF file, what
      // addr2line takes (reports of older versions: the offset).
      const uint64_t address = frame.elf_address() != 0 ? frame.elf_address() : frame.offset();
      if (frame.function().empty() && address != 0) absl::StrAppendFormat(&out, "+0x%x", address);
      out += ")";
    }
    out += "\n";
    // Source lines (from DWARF): the inlined frames innermost first, then
    // the line in the frame's own function.
    for (const proto::InlinedFrame& inlined : frame.inlined()) {
      absl::StrAppend(&out, Pad(indent + 4), "inlined ",
                      inlined.function().empty() ? "??" : TextEscape(inlined.function()));
      if (!inlined.file().empty()) {
        absl::StrAppend(&out, " at ", TextEscape(inlined.file()), ":", inlined.line());
      }
      out += "\n";
    }
    if (!frame.file().empty()) {
      absl::StrAppend(&out, Pad(indent + 4), "at ", TextEscape(frame.file()), ":", frame.line(),
                      "\n");
    }
  }
  return out;
}

template <typename Calls>
std::string CallTreeText(const Calls& calls, int indent) {
  size_t width = 0;
  for (const auto& call : calls)
    width = std::max(width, FormatFixed(call.cost_ms(), 1).size());
  std::string out;
  for (const auto& call : calls) {
    const int depth = std::clamp(call.depth(), 0, kMaxDrawnDepth);
    absl::StrAppendFormat(&out, "%s%*s  %s%s", Pad(indent), static_cast<int>(width),
                          FormatFixed(call.cost_ms(), 1), Pad(2 * depth),
                          call.name().empty() ? "??" : TextEscape(call.name()));
    if (call.count() > 1) absl::StrAppend(&out, " x", call.count());
    if (call.unfinished()) out += " [running]";
    if (!call.file().empty()) {
      absl::StrAppend(&out, "  at ", TextEscape(call.file()), ":", call.line());
    }
    out += "\n";
  }
  return out;
}

// One section per report kind (text_render_reports.cc).
void RenderHeader(std::string& out, const IssueRecord& r, const RenderOptions& options);
void RenderAnr(std::string& out, const proto::AnrReport& a, const RenderOptions& options);
void RenderEvilMethod(std::string& out, const proto::EvilMethodReport& e,
                      const RenderOptions& options);
void RenderFrame(std::string& out, const proto::FrameReport& f);
void RenderStartup(std::string& out, const proto::StartupReport& s);
void RenderBlock(std::string& out, const proto::BlockReport& b, const RenderOptions& options);

}  // namespace matrix::report::internal

#endif  // MATRIX_REPORT_SRC_INTERNAL_TEXT_RENDER_UTIL_H_

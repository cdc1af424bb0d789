#include "matrix/report/html_report.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "matrix/proto/issue.pb.h"
#include "matrix/report/format_util.h"
#include "matrix/trace/frame_stats.h"
#include "matrix/report/html_report_assets.h"  // Generated: kHtmlReportCss, kHtmlReportJs.
#include "matrix/report/issue_groups.h"
#include "matrix/report/text_render.h"
#include "matrix/report/timeline_export.h"

namespace matrix::report {
namespace {

// Frames shown per stack in the page (the full report text has them all).
constexpr int kMaxFramesShown = 64;

std::string H(absl::string_view s) { return HtmlEscape(s); }

std::string MetricText(const Metric& metric, double value) {
  if (metric.unit == "ms") return absl::StrCat(FormatFixed(value, 1), " ms");
  return absl::StrCat(FormatFixed(value, 1), metric.unit.empty() ? "" : " ", metric.unit);
}

std::string TimeText(int64_t ms, absl::TimeZone tz) { return FormatTimeMs(ms, tz); }

std::string ZoneName(int64_t ms, absl::TimeZone tz) {
  return absl::FormatTime("%Z", absl::FromUnixMillis(ms), tz);
}

std::vector<NameCount> Count(const std::vector<std::string>& names) {
  absl::flat_hash_map<std::string, int64_t> counts;
  for (const std::string& name : names) {
    if (!name.empty()) ++counts[name];
  }
  std::vector<NameCount> out;
  for (const auto& [name, count] : counts) out.push_back({name, count});
  std::sort(out.begin(), out.end(), [](const NameCount& a, const NameCount& b) {
    return a.count != b.count ? a.count > b.count : a.name < b.name;
  });
  return out;
}

std::string CountListHtml(const std::vector<NameCount>& counts) {
  std::vector<std::string> parts;
  for (const NameCount& c : counts) {
    parts.push_back(
        absl::StrCat("<span class=\"chip\">", H(c.name), " <b>", c.count, "</b></span>"));
  }
  return absl::StrJoin(parts, " ");
}

// A number for JSON: finite, at most 3 decimals.
// ---------------------------------------------------------------------------
// HTML pieces.

std::string StackHtml(const google::protobuf::RepeatedPtrField<proto::StackFrame>& frames,
                      const HtmlReportOptions& options) {
  std::string out = "<ol class=\"stack\" start=\"0\">";
  int i = 0;
  for (const proto::StackFrame& f : frames) {
    if (i++ == kMaxFramesShown) {
      absl::StrAppend(&out, "<li class=\"more\">", frames.size() - kMaxFramesShown,
                      " more frames (see the full report)</li>");
      break;
    }
    std::string where = f.function().empty() ? (f.pc().empty() ? "??" : f.pc()) : f.function();
    std::string offset =
        !f.function().empty() && f.offset() != 0 ? absl::StrFormat("+0x%x", f.offset()) : "";
    const absl::string_view module = options.full_paths ? absl::string_view(f.module())
                                                        : Basename(f.module());
    absl::StrAppend(&out, "<li><span class=\"fn\">", H(where), "</span><span class=\"off\">",
                    offset, "</span>");
    if (!module.empty()) absl::StrAppend(&out, " <span class=\"mod\">", H(module), "</span>");
    out += "</li>";
  }
  out += "</ol>";
  return out;
}

std::string CallTreeHtml(const google::protobuf::RepeatedPtrField<proto::MethodCall>& calls) {
  double total = 0;
  for (const proto::MethodCall& c : calls) {
    if (c.depth() == 0) total = std::max(total, c.cost_ms());
  }
  std::string out =
      "<table class=\"calltree\"><thead><tr><th>ms</th><th>call</th></tr></thead><tbody>";
  for (const proto::MethodCall& c : calls) {
    const int depth = std::clamp(c.depth(), 0, 64);
    const double share = total > 0 ? std::clamp(c.cost_ms() / total, 0.0, 1.0) : 0;
    absl::StrAppendFormat(
        &out,
        "<tr><td class=\"num\">%s</td><td style=\"padding-left:%.1fem\"><span class=\"bar\" "
        "style=\"width:%.1f%%\"></span><span class=\"fn\">%s</span>%s%s</td></tr>",
        FormatFixed(c.cost_ms(), 1), 0.3 + 1.2 * depth, share * 100,
        H(c.name().empty() ? "??" : c.name()),
        c.count() > 1 ? absl::StrCat(" <span class=\"tagx\">x", c.count(), "</span>") : "",
        c.unfinished() ? " <span class=\"running\">running</span>" : "");
  }
  out += "</tbody></table>";
  return out;
}

// The evidence of a hang, slow method or block: stacks and call tree.
std::string EvidenceHtml(const IssueRecord& r, const HtmlReportOptions& options) {
  std::string out;
  const auto tree = [&](const google::protobuf::RepeatedPtrField<proto::MethodCall>& calls,
                        bool truncated) {
    if (calls.empty()) return;
    absl::StrAppend(&out, "<details class=\"evidence\" open><summary>call tree (", calls.size(),
                    calls.size() == 1 ? " call" : " calls",
                    truncated ? "; the trace buffer had wrapped" : "", ")</summary>",
                    CallTreeHtml(calls), "</details>");
  };
  const auto stack = [&](const proto::ThreadStack& t) {
    absl::StrAppend(&out, "<details class=\"evidence\" open><summary>native stack of tid ",
                    t.tid(), " ", H(t.thread_name()), ", captured at ",
                    FormatFixed(t.captured_at_ms(), 1), " ms</summary>",
                    StackHtml(t.frames(), options), "</details>");
  };
  if (r.issue.has_anr()) {
    const proto::AnrReport& a = r.issue.anr();
    if (a.has_thread_stack()) stack(a.thread_stack());
    tree(a.stack(), a.stack_truncated());
    for (const proto::ThreadStack& t : a.all_threads()) {
      absl::StrAppend(&out, "<details class=\"evidence\"><summary>thread ", t.tid(), " ",
                      H(t.thread_name()), "</summary>", StackHtml(t.frames(), options),
                      "</details>");
    }
  } else if (r.issue.has_evil_method()) {
    const proto::EvilMethodReport& e = r.issue.evil_method();
    if (e.has_thread_stack()) stack(e.thread_stack());
    tree(e.stack(), e.stack_truncated());
  } else if (r.issue.has_block()) {
    // Samples with the same frames merged, most frequent first.
    const proto::BlockReport& b = r.issue.block();
    struct Merged {
      const proto::BlockStackSample* sample;
      int count;
    };
    std::vector<Merged> merged;
    absl::flat_hash_map<std::string, size_t> index;
    for (const proto::BlockStackSample& s : b.samples()) {
      std::string signature;
      for (const proto::StackFrame& f : s.frames()) {
        absl::StrAppend(&signature, f.function().empty() ? f.pc() : f.function(), "\x1f",
                        f.module(), "\x1e");
      }
      auto [it, inserted] = index.try_emplace(signature, merged.size());
      if (inserted) merged.push_back({&s, 0});
      ++merged[it->second].count;
    }
    std::stable_sort(merged.begin(), merged.end(),
                     [](const Merged& a, const Merged& b) { return a.count > b.count; });
    for (size_t i = 0; i < merged.size(); ++i) {
      absl::StrAppend(&out, "<details class=\"evidence\"", i == 0 ? " open" : "", "><summary>",
                      merged[i].count, merged[i].count == 1 ? " stack sample" : " stack samples",
                      " of ", b.samples_size(), "</summary>",
                      StackHtml(merged[i].sample->frames(), options), "</details>");
    }
  }
  return out;
}

bool IsHangOrSlow(const IssueGroup& g) {
  return g.kind == "anr" || g.kind == "evil_method" || g.kind == "block";
}

// The sort key for "worst issue of a group": its metric in the group's
// direction.
const IssueRecord* WorstIssue(const IssueGroup& g) {
  const IssueRecord* worst = g.issues.empty() ? nullptr : g.issues.front();
  for (const IssueRecord* r : g.issues) {
    if (r->metric.present() && (!worst->metric.present() ||
                                r->metric.Worse(r->metric.value, worst->metric.value))) {
      worst = r;
    }
  }
  return worst;
}

std::string GroupTitle(const IssueGroup& g) {
  std::string metric;
  if (g.metric_count > 0) {
    metric = absl::StrCat("worst ", MetricText(g.metric, g.worst), ", median ",
                          MetricText(g.metric, g.median));
  }
  return absl::StrCat("<span class=\"count\">x", g.count, "</span> <span class=\"td\">",
                      H(g.TagDetail()), "</span> <span class=\"key\">",
                      H(g.key.empty() ? "(no key)" : g.key), "</span> <span class=\"metric\">",
                      H(metric), "</span>");
}

}  // namespace

std::string HtmlEscape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string ScriptJson(absl::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// Where each selected issue is in the selection (the page's issue numbers).
using IssueIndex = absl::flat_hash_map<const IssueRecord*, size_t>;

// The earliest and the latest report time of `selected` (not empty).
std::pair<int64_t, int64_t> TimeSpan(const std::vector<const IssueRecord*>& selected) {
  int64_t first = 0;
  int64_t last = 0;
  for (const IssueRecord* r : selected) {
    first = r == selected.front() ? r->time_ms() : std::min(first, r->time_ms());
    last = r == selected.front() ? r->time_ms() : std::max(last, r->time_ms());
  }
  return {first, last};
}

// The document's head, the navigation and the script's status line.
void AppendHead(size_t issues, std::string& out) {
  absl::StrAppend(&out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
                  "<title>matrix-report: ", issues, issues == 1 ? " issue" : " issues",
                  "</title>\n<style>\n", kHtmlReportCss,
                  "</style>\n</head>\n<body data-render-ok=\"false\">\n");
  absl::StrAppend(&out, "<header><h1>matrix-report</h1><nav><a href=\"#summary\">Summary</a> ",
                  "<a href=\"#frames\">Frames</a> <a href=\"#timeline\">Timeline</a> ",
                  "<a href=\"#groups\">Groups</a> <a href=\"#hangs\">Hangs and slow methods</a>",
                  "</nav></header>\n");
  out +=
      "<div id=\"render-status\" class=\"status\">The plots are drawn by the page's script; "
      "enable JavaScript to see them.</div>\n<ul id=\"render-errors\"></ul>\n";
}

// The summary's table: issues, files, lines, time span, processes, scenes.
void AppendSummaryTable(const ReadResult& read, const std::vector<const IssueRecord*>& selected,
                        bool filtered, absl::TimeZone tz, std::string& out) {
  out += "<table class=\"kv\">";
  const auto kv = [&](absl::string_view k, absl::string_view v_html) {
    absl::StrAppend(&out, "<tr><th>", k, "</th><td>", v_html, "</td></tr>");
  };
  std::string issues_text =
      filtered ? absl::StrCat(selected.size(), " of ", read.records.size(), " match the filters")
               : absl::StrCat(selected.size());
  kv("issues", absl::StrCat("<span id=\"issue-count\">", issues_text, "</span>"));
  std::vector<std::string> files;
  for (const std::string& f : read.files) files.push_back(H(f));
  kv("files", absl::StrJoin(files, ", "));
  kv("lines", absl::StrCat(read.lines, " read, ", read.malformed.size(), " malformed"));
  if (!selected.empty()) {
    std::vector<std::string> processes;
    std::vector<std::string> scenes;
    for (const IssueRecord* r : selected) {
      processes.push_back(r->ProcessLabel());
      scenes.push_back(r->scene);
    }
    const auto [first, last] = TimeSpan(selected);
    kv("time", H(absl::StrCat(TimeText(first, tz), " .. ", TimeText(last, tz), " ",
                              ZoneName(last, tz), " (",
                              FormatDurationMs(DifferenceMs(last, first)), ")")));
    kv("processes", CountListHtml(Count(processes)));
    kv("scenes", CountListHtml(Count(scenes)));
  }
  out += "</table>\n";
}

// Per tag/detail: issues, groups, worst, median.
void AppendTagCounts(const std::vector<const IssueRecord*>& selected,
                     const std::vector<IssueGroup>& groups, std::string& out) {
  struct Row {
    std::string name;
    int64_t issues = 0;
    int64_t groups = 0;
    Metric metric;
    std::vector<double> values;
    double worst = 0;
  };
  std::vector<Row> rows;
  absl::flat_hash_map<std::string, size_t> row_index;
  const auto row_for = [&](const std::string& name) -> Row& {
    auto [it, inserted] = row_index.try_emplace(name, rows.size());
    if (inserted) {
      rows.emplace_back();
      rows.back().name = name;
    }
    return rows[it->second];
  };
  for (const IssueRecord* r : selected) {
    Row& row = row_for(r->TagDetail());
    ++row.issues;
    if (!r->metric.present()) continue;
    if (row.metric.present() && row.metric.name != r->metric.name) continue;
    if (row.values.empty() || r->metric.Worse(r->metric.value, row.worst)) {
      row.worst = r->metric.value;
    }
    row.metric = r->metric;
    row.values.push_back(r->metric.value);
  }
  for (const IssueGroup& g : groups) ++row_for(g.TagDetail()).groups;
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.issues > b.issues; });
  out +=
      "<table class=\"grid\" id=\"tag-counts\"><thead><tr><th>tag/detail</th><th>issues</th>"
      "<th>groups</th><th>worst</th><th>median</th></tr></thead><tbody>";
  for (Row& row : rows) {
    const bool has = !row.values.empty();
    const double median = has ? Median(row.values) : 0;
    absl::StrAppend(&out, "<tr><td>", H(row.name), "</td><td class=\"num\">", row.issues,
                    "</td><td class=\"num\">", row.groups, "</td><td class=\"num\">",
                    has ? H(MetricText(row.metric, row.worst)) : "", "</td><td class=\"num\">",
                    has ? H(MetricText(row.metric, median)) : "", "</td></tr>");
  }
  out += "</tbody></table>";
}

// The frame plots' and the timeline's sections: filled by the script.
void AppendScriptSections(std::string& out) {
  out +=
      "<section id=\"frames\"><h2>Frame rate and dropped frames per scene</h2>\n"
      "<p class=\"note\">Each point is one FPS report (<code>Trace_FPS</code>), at its report "
      "time: the line is its FPS, the bars its dropped frames. The histogram counts the frames "
      "of the scene's reports per drop level (frame time in vsync intervals at the default "
      "levels), on a log scale.</p>\n<div id=\"fps-plots\"></div></section>\n";
  out +=
      "<section id=\"timeline\"><h2>Timeline of an issue</h2>\n<p class=\"note\">Chrome "
      "trace events of the selected issue, one lane per thread. Hover an event for its "
      "details. Call-tree events are placed in call order: the call tree has durations, not "
      "start times.</p>\n<label>issue <select id=\"timeline-issue\"></select></label>\n"
      "<div id=\"timeline-view\"></div><pre id=\"timeline-detail\"></pre></section>\n";
}

// Group `gi`: its title, when it was seen, and a row per issue.
void AppendGroup(const IssueGroup& g, size_t gi, const IssueIndex& issue_index,
                 absl::TimeZone tz, std::string& out) {
  absl::StrAppend(&out, "<details class=\"group\" id=\"group-", gi, "\"><summary>",
                  GroupTitle(g), "</summary>\n<div class=\"group-body\"><p>first seen ",
                  H(TimeText(g.first_seen_ms, tz)), ", last seen ",
                  H(TimeText(g.last_seen_ms, tz)), " ", H(ZoneName(g.last_seen_ms, tz)));
  if (!g.scenes.empty()) absl::StrAppend(&out, "; scenes ", CountListHtml(g.scenes));
  out +=
      "</p><table class=\"grid issues\"><thead><tr><th>time</th><th>scene</th>"
      "<th>process</th><th>metric</th><th>source</th><th></th></tr></thead><tbody>";
  for (const IssueRecord* r : g.issues) {
    const size_t idx = issue_index.at(r);
    absl::StrAppend(&out, "<tr id=\"issue-", idx, "\"><td>", H(TimeText(r->time_ms(), tz)),
                    "</td><td>", H(r->scene), "</td><td>", H(r->ProcessLabel()),
                    "</td><td class=\"num\">",
                    r->metric.present() ? H(MetricText(r->metric, r->metric.value)) : "",
                    "</td><td>",
                    H(r->source.line > 0 ? absl::StrCat(Basename(r->source.file), ":",
                                                        r->source.line)
                                         : std::string(Basename(r->source.file))),
                    "</td><td>");
    if (IssueTraceEventsJson(*r).has_value()) {
      absl::StrAppend(&out, "<button class=\"show-timeline\" data-issue=\"", idx,
                      "\">timeline</button>");
    }
    out += "</td></tr>";
  }
  out += "</tbody></table></div></details>\n";
}

void AppendGroups(const std::vector<IssueGroup>& groups, const IssueIndex& issue_index,
                  absl::TimeZone tz, std::string& out) {
  absl::StrAppend(&out, "<section id=\"groups\"><h2>Issue groups (", groups.size(),
                  ")</h2>\n<p class=\"note\">By tag, detail and key; most frequent first, then "
                  "worst. Open a group for its issues.</p>\n");
  for (size_t gi = 0; gi < groups.size(); ++gi) AppendGroup(groups[gi], gi, issue_index, tz, out);
  out += "</section>\n";
}

// A hang group: its worst issue first (open), then the others, each with its
// evidence and full report. `open`: the group starts open.
void AppendHangGroup(const IssueGroup& g, bool open, const IssueIndex& issue_index,
                     const HtmlReportOptions& options, std::string& out) {
  const absl::TimeZone tz = options.time_zone;
  const RenderOptions text_options{.time_zone = tz, .full_paths = options.full_paths};
  const IssueRecord* worst = WorstIssue(g);
  std::vector<const IssueRecord*> ordered = {worst};
  for (const IssueRecord* r : g.issues) {
    if (r != worst) ordered.push_back(r);
  }
  absl::StrAppend(&out, "<details class=\"hang-group\"", open ? " open" : "", "><summary>",
                  GroupTitle(g), "</summary>\n");
  for (size_t i = 0; i < ordered.size(); ++i) {
    const IssueRecord* r = ordered[i];
    absl::StrAppend(&out, "<details class=\"hang-issue\"", i == 0 ? " open" : "",
                    "><summary>", i == 0 ? "worst: " : "",
                    H(TimeText(r->time_ms(), tz)), " &middot; ", H(r->scene), " &middot; ",
                    r->metric.present() ? H(MetricText(r->metric, r->metric.value)) : "",
                    "</summary>\n");
    if (IssueTraceEventsJson(*r).has_value()) {
      absl::StrAppend(&out, "<button class=\"show-timeline\" data-issue=\"", issue_index.at(r),
                      "\">show timeline</button>");
    }
    absl::StrAppend(&out, EvidenceHtml(*r, options),
                    "<details class=\"evidence\"><summary>full report</summary><pre>",
                    H(RenderIssue(*r, text_options)), "</pre></details></details>\n");
  }
  out += "</details>\n";
}

void AppendHangs(const std::vector<IssueGroup>& groups, const IssueIndex& issue_index,
                 const HtmlReportOptions& options, std::string& out) {
  out +=
      "<section id=\"hangs\"><h2>Hangs and slow methods</h2>\n<p class=\"note\">ANR, LAG, "
      "slow dispatches (NORMAL), slow startups and BlockCanary blocks: each group's worst "
      "issue first, with its native stack (innermost frame first) and method-trace call "
      "tree.</p>\n";
  int hang_groups = 0;
  for (const IssueGroup& g : groups) {
    if (!IsHangOrSlow(g)) continue;
    ++hang_groups;
    AppendHangGroup(g, hang_groups <= 3, issue_index, options, out);
  }
  if (hang_groups == 0) out += "<p>No hangs or slow methods.</p>\n";
  out += "</section>\n";
}

// One scene's FPS reports (in report time order) for the script, with their
// drop levels and refresh rate over all of them.
void AppendSceneJson(const std::string& scene, const std::vector<const IssueRecord*>& reports,
                     const IssueIndex& issue_index, std::string& data) {
  absl::StrAppend(&data, "{\"name\":", JsonQuote(scene), ",\"reports\":[");
  int64_t levels[5] = {0, 0, 0, 0, 0};
  int64_t drops[5] = {0, 0, 0, 0, 0};
  // The refresh rate weighted by frames, in double: no sum to overflow.
  double weighted_rate = 0;
  double frames = 0;
  for (size_t i = 0; i < reports.size(); ++i) {
    const proto::FrameReport& f = reports[i]->issue.frame();
    absl::StrAppend(&data, i == 0 ? "" : ",", "{\"t\":", reports[i]->time_ms(),
                    ",\"fps\":", HasFrameRate(f) ? JsonNumber(f.fps()) : "null",
                    ",\"frames\":", f.frames(),
                    ",\"dropped\":", f.dropped_frames(),
                    ",\"window_ms\":", JsonNumber(f.window_ms()),
                    ",\"refresh\":", JsonNumber(f.refresh_rate()),
                    ",\"issue\":", issue_index.at(reports[i]), "}");
    const proto::DropLevels& l = f.drop_level();
    const proto::DropLevels& d = f.drop_sum();
    const int64_t lv[5] = {l.best(), l.normal(), l.middle(), l.high(), l.frozen()};
    const int64_t dv[5] = {d.best(), d.normal(), d.middle(), d.high(), d.frozen()};
    for (int k = 0; k < 5; ++k) {
      levels[k] = SaturatingAdd(levels[k], lv[k]);
      drops[k] = SaturatingAdd(drops[k], dv[k]);
    }
    weighted_rate += f.refresh_rate() * static_cast<double>(f.frames());
    frames += static_cast<double>(f.frames());
  }
  absl::StrAppend(&data, "],\"levels\":[", absl::StrJoin(levels, ","), "],\"drops\":[",
                  absl::StrJoin(drops, ","), "],\"refresh\":",
                  JsonNumber(frames > 0 ? weighted_rate / frames : 0), "}");
}

// The scenes with FPS reports, in the order of their first report.
void AppendScenesJson(const std::vector<const IssueRecord*>& selected,
                      const IssueIndex& issue_index, std::string& data) {
  std::vector<std::string> scene_order;
  absl::flat_hash_map<std::string, std::vector<const IssueRecord*>> by_scene;
  for (const IssueRecord* r : selected) {
    if (!r->issue.has_frame()) continue;
    auto [it, inserted] = by_scene.try_emplace(r->scene);
    if (inserted) scene_order.push_back(r->scene);
    it->second.push_back(r);
  }
  for (size_t si = 0; si < scene_order.size(); ++si) {
    if (si > 0) data += ",";
    AppendSceneJson(scene_order[si], by_scene[scene_order[si]], issue_index, data);
  }
}

// The issue whose timeline the page shows first: the worst issue of the
// first ANR group, else of the first other hang group (LAG, SIGNAL_ANR,
// ...), block group or slow-method group.
std::optional<size_t> PreferredTraceIssue(const std::vector<IssueGroup>& groups,
                                          const IssueIndex& issue_index) {
  const std::pair<absl::string_view, absl::string_view> preferred[] = {
      {"anr", "ANR"}, {"anr", ""}, {"block", ""}, {"evil_method", ""}};
  for (const auto& [kind, detail] : preferred) {
    for (const IssueGroup& g : groups) {
      if (g.kind == kind && (detail.empty() || g.detail == detail)) {
        return issue_index.at(WorstIssue(g));
      }
    }
  }
  return std::nullopt;
}

// One trace per issue that has one, labeled for the page's issue list; then
// the default issue (PreferredTraceIssue, else the first trace's).
void AppendTracesJson(const std::vector<const IssueRecord*>& selected,
                      const std::vector<IssueGroup>& groups, const IssueIndex& issue_index,
                      absl::TimeZone tz, std::string& data) {
  std::optional<size_t> default_issue = PreferredTraceIssue(groups, issue_index);
  bool first_trace = true;
  for (size_t i = 0; i < selected.size(); ++i) {
    std::optional<std::string> trace = IssueTraceEventsJson(*selected[i]);
    if (!trace.has_value()) continue;
    if (!default_issue.has_value()) default_issue = i;
    const IssueRecord& r = *selected[i];
    std::string label = absl::StrCat(TimeText(r.time_ms(), tz), "  ", r.TagDetail(), "  ", r.key);
    if (r.metric.present()) absl::StrAppend(&label, "  ", MetricText(r.metric, r.metric.value));
    absl::StrAppend(&data, first_trace ? "" : ",", "\n{\"issue\":", i,
                    ",\"label\":", JsonQuote(label), ",\"trace\":", *trace, "}");
    first_trace = false;
  }
  absl::StrAppend(&data, "],\"default_issue\":",
                  default_issue.has_value() ? absl::StrCat(*default_issue) : "null");
}

// The data the page's script draws from: the time zone, the scenes' FPS
// reports and the issues' traces.
std::string ScriptData(const std::vector<const IssueRecord*>& selected,
                       const std::vector<IssueGroup>& groups, const IssueIndex& issue_index,
                       absl::TimeZone tz) {
  const int64_t first = selected.empty() ? 0 : TimeSpan(selected).first;
  std::string data = "{\"zone\":";
  absl::StrAppend(&data, JsonQuote(ZoneName(first, tz)));
  const int offset_s = selected.empty() ? 0 : tz.At(absl::FromUnixMillis(first)).offset;
  absl::StrAppend(&data, ",\"zone_offset_ms\":", int64_t{offset_s} * 1000, ",\"scenes\":[");
  AppendScenesJson(selected, issue_index, data);
  data += "],\"traces\":[";
  AppendTracesJson(selected, groups, issue_index, tz, data);
  data += "}";
  return data;
}

}  // namespace

std::string RenderHtmlReport(const ReadResult& read,
                             const std::vector<const IssueRecord*>& selected, bool filtered,
                             const HtmlReportOptions& options) {
  const absl::TimeZone tz = options.time_zone;
  const std::vector<IssueGroup> groups = GroupIssues(selected);
  IssueIndex issue_index;
  for (size_t i = 0; i < selected.size(); ++i) issue_index[selected[i]] = i;

  std::string out;
  AppendHead(selected.size(), out);
  out += "<section id=\"summary\"><h2>Summary</h2>\n";
  AppendSummaryTable(read, selected, filtered, tz, out);
  AppendTagCounts(selected, groups, out);
  out += "</section>\n";
  AppendScriptSections(out);
  AppendGroups(groups, issue_index, tz, out);
  AppendHangs(groups, issue_index, options, out);
  absl::StrAppend(&out, "<script type=\"application/json\" id=\"matrix-data\">",
                  ScriptJson(ScriptData(selected, groups, issue_index, tz)),
                  "</script>\n<script>\n", kHtmlReportJs, "</script>\n</body>\n</html>\n");
  return out;
}

}  // namespace matrix::report

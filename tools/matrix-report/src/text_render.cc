#include "matrix/report/text_render.h"

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

namespace matrix::report {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::RepeatedPtrField;
using google::protobuf::Value;

constexpr int kLabelWidth = 12;
// Deeper call-tree nodes are drawn at this depth (the value comes from a
// file and only sets indentation).
constexpr int kMaxDrawnDepth = 64;
// Names shown inline before "and N more".
constexpr size_t kMaxListed = 4;
// BlockCanaryContext's default uid (BlockCanary's provideUid()): no uid given.
constexpr absl::string_view kPlaceholderUid = "uid";

std::string Pad(int indent) { return std::string(static_cast<size_t>(std::max(indent, 0)), ' '); }

// "label      value" with continuation lines of `value` aligned under it.
void AddField(std::string& out, absl::string_view label, absl::string_view value, int indent = 0) {
  const std::string continuation = "\n" + Pad(indent + kLabelWidth + 1);
  absl::StrAppendFormat(&out, "%s%-*s %s\n", Pad(indent), kLabelWidth, label,
                        absl::StrReplaceAll(value, {{"\n", continuation}}));
}

std::string Ms(double ms) { return absl::StrFormat("%.1f ms", ms); }

std::string MetricValue(const Metric& metric, double value) {
  if (metric.unit == "ms") return Ms(value);
  return absl::StrCat(absl::StrFormat("%.1f", value), metric.unit.empty() ? "" : " ", metric.unit);
}

// The metric's last word: "cost_ms" -> "cost", "startup_duration_ms" ->
// "duration", "fps" -> "fps".
std::string MetricLabel(const Metric& metric) {
  absl::string_view name = metric.name;
  if (absl::EndsWith(name, "_ms")) name.remove_suffix(3);
  if (const size_t underscore = name.rfind('_'); underscore != absl::string_view::npos) {
    name.remove_prefix(underscore + 1);
  }
  return std::string(name);
}

std::string YesNo(bool b) { return b ? "yes" : "no"; }

std::string Percent(double p) { return absl::StrFormat("%.1f%%", p); }

std::string GiB(double bytes) {
  return absl::StrFormat("%.1f GiB", bytes / (1024.0 * 1024 * 1024));
}

std::string ZoneName(int64_t time_ms, absl::TimeZone tz) {
  return absl::FormatTime("%Z", absl::FromUnixMillis(time_ms), tz);
}

// "a: 3, b: 2, c: 1 and 4 more".
std::string CountList(const std::vector<NameCount>& counts, size_t max_listed = kMaxListed) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < counts.size() && i < max_listed; ++i) {
    parts.push_back(absl::StrCat(counts[i].name, ": ", counts[i].count));
  }
  std::string out = absl::StrJoin(parts, ", ");
  if (counts.size() > max_listed)
    absl::StrAppend(&out, " and ", counts.size() - max_listed, " more");
  return out;
}

template <typename Frames>
std::string StackFramesText(const Frames& frames, int indent, const RenderOptions& options) {
  std::string out;
  const int digits = static_cast<int>(
      absl::StrCat(std::max<int64_t>(static_cast<int64_t>(frames.size()) - 1, 0)).size());
  int i = 0;
  for (const proto::StackFrame& frame : frames) {
    std::string where;
    if (!frame.function().empty()) {
      where = frame.function();
      if (frame.offset() != 0) absl::StrAppendFormat(&where, "+0x%x", frame.offset());
    } else {
      where = frame.pc().empty() ? "??" : frame.pc();
    }
    const absl::string_view module =
        options.full_paths ? absl::string_view(frame.module()) : Basename(frame.module());
    absl::StrAppendFormat(&out, "%s#%-*d  %s", Pad(indent), digits, i++, where);
    if (!module.empty()) {
      absl::StrAppend(&out, "  (", module);
      if (frame.function().empty() && frame.offset() != 0) {
        absl::StrAppendFormat(&out, "+0x%x", frame.offset());
      }
      out += ")";
    }
    out += "\n";
    // Source lines (from DWARF): the inlined frames innermost first, then
    // the line in the frame's own function.
    for (const proto::InlinedFrame& inlined : frame.inlined()) {
      absl::StrAppend(&out, Pad(indent + 4), "inlined ",
                      inlined.function().empty() ? "??" : inlined.function());
      if (!inlined.file().empty()) {
        absl::StrAppend(&out, " at ", inlined.file(), ":", inlined.line());
      }
      out += "\n";
    }
    if (!frame.file().empty()) {
      absl::StrAppend(&out, Pad(indent + 4), "at ", frame.file(), ":", frame.line(), "\n");
    }
  }
  return out;
}

template <typename Calls>
std::string CallTreeText(const Calls& calls, int indent) {
  size_t width = 0;
  for (const auto& call : calls)
    width = std::max(width, absl::StrFormat("%.1f", call.cost_ms()).size());
  std::string out;
  for (const auto& call : calls) {
    const int depth = std::clamp(call.depth(), 0, kMaxDrawnDepth);
    absl::StrAppendFormat(&out, "%s%*.1f  %s%s", Pad(indent), static_cast<int>(width),
                          call.cost_ms(), Pad(2 * depth), call.name().empty() ? "??" : call.name());
    if (call.count() > 1) absl::StrAppend(&out, " x", call.count());
    if (call.unfinished()) out += " [running]";
    if (!call.file().empty()) absl::StrAppend(&out, "  at ", call.file(), ":", call.line());
    out += "\n";
  }
  return out;
}

std::string ThreadStackTitle(const proto::ThreadStack& stack) {
  std::string title = absl::StrCat("tid ", stack.tid());
  if (!stack.thread_name().empty()) absl::StrAppend(&title, " (", stack.thread_name(), ")");
  if (stack.captured_at_ms() != 0) {
    absl::StrAppend(&title, ", captured at ", Ms(stack.captured_at_ms()));
  }
  return title;
}

void AddThreadStack(std::string& out, absl::string_view label, const proto::ThreadStack& stack,
                    int indent, const RenderOptions& options) {
  absl::StrAppend(&out, Pad(indent), label, " ", ThreadStackTitle(stack), ":\n");
  if (!stack.error().empty())
    absl::StrAppend(&out, Pad(indent + 2), "capture error: ", stack.error(), "\n");
  if (stack.frames().empty()) {
    absl::StrAppend(&out, Pad(indent + 2), "(no frames)\n");
  } else {
    out += StackFramesText(stack.frames(), indent + 2, options);
  }
}

void AddCallTree(std::string& out, const RepeatedPtrField<proto::MethodCall>& calls,
                 bool truncated) {
  if (calls.empty()) return;
  absl::StrAppend(&out, "call tree (ms, pre-order",
                  truncated ? "; the trace buffer had wrapped, "
                              "the oldest calls are missing"
                            : "",
                  "):\n");
  out += CallTreeText(calls, 2);
}

std::string QueueCostsText(const proto::QueueCosts& q) {
  return absl::StrCat("input ", Ms(q.input_ms()), ", animation ", Ms(q.animation_ms()),
                      ", traversal ", Ms(q.traversal_ms()), ", commit ", Ms(q.commit_ms()));
}

std::string MessageText(const proto::MessageInfo& m) {
  std::vector<std::string> parts;
  if (!m.target().empty()) parts.push_back(m.target());
  if (!m.callback().empty()) parts.push_back(absl::StrCat("callback ", m.callback()));
  parts.push_back(absl::StrCat("what ", m.what()));
  return absl::StrJoin(parts, ", ");
}

std::string CpuUsageText(double usage) {
  return usage < 0 ? "not sampled (dispatch too short)" : Percent(usage);
}

void RenderHeader(std::string& out, const IssueRecord& r, const RenderOptions& options) {
  std::string title = absl::StrCat("== ", r.TagDetail(), " ");
  if (title.size() < 72) title.append(72 - title.size(), '=');
  absl::StrAppend(&out, title, "\n");
  AddField(out, "key", r.key.empty() ? "(none)" : r.key);
  AddField(out, "time",
           absl::StrCat(FormatTimeMs(r.time_ms(), options.time_zone), " ",
                        ZoneName(r.time_ms(), options.time_zone)));
  std::string process = r.ProcessLabel();
  if (!r.issue.plugin().empty()) {
    absl::StrAppend(&process, process.empty() ? "" : ", ", "plugin ", r.issue.plugin());
  }
  if (r.issue.type() != 0)
    absl::StrAppend(&process, process.empty() ? "" : ", ", "type ", r.issue.type());
  if (!process.empty()) AddField(out, "process", process);
  if (!r.scene.empty()) AddField(out, "scene", r.scene);
  if (r.metric.present())
    AddField(out, MetricLabel(r.metric), MetricValue(r.metric, r.metric.value));
  if (r.issue.has_device()) {
    const proto::DeviceInfo& d = r.issue.device();
    std::vector<std::string> parts;
    if (d.machine() != proto::DeviceInfo::LEVEL_UNKNOWN) {
      parts.push_back(proto::DeviceInfo::Level_Name(d.machine()));
    }
    if (d.cpu_cores() != 0) parts.push_back(absl::StrCat(d.cpu_cores(), " cores"));
    if (d.mem() != 0) parts.push_back(absl::StrCat(GiB(static_cast<double>(d.mem())), " RAM"));
    if (d.mem_free() != 0) {
      parts.push_back(absl::StrCat(GiB(static_cast<double>(d.mem_free()) * 1024), " available"));
    }
    parts.push_back(absl::StrCat("app CPU ", Percent(d.cpu_app())));
    AddField(out, "device", absl::StrJoin(parts, ", "));
  }
  if (!r.source.file.empty())
    AddField(out, "source", r.source.line > 0 ? absl::StrCat(r.source.file, ":", r.source.line)
                                              : r.source.file);
}

void RenderAnr(std::string& out, const proto::AnrReport& a, const RenderOptions& options) {
  if (a.has_thread()) {
    const proto::ThreadInfo& t = a.thread();
    std::string text = t.name().empty() ? "" : absl::StrCat(t.name(), " ");
    absl::StrAppend(&text, "(tid ", t.tid(), "): ", t.state().empty() ? "state unknown" : t.state(),
                    ", priority ", t.priority(), ", nice ", t.nice(), ", CPU time ",
                    Ms(t.cpu_time_ms()));
    AddField(out, "thread", text);
  }
  if (a.has_memory()) {
    const proto::MemoryInfo& m = a.memory();
    AddField(out, "memory",
             absl::StrCat("VmSize ", m.vm_size_kb(), " KiB, VmRSS ", m.vm_rss_kb(),
                          " KiB, heap in use ", m.heap_in_use_kb(), " KiB"));
  }
  if (a.has_message()) AddField(out, "message", MessageText(a.message()));
  if (a.has_queue_costs()) AddField(out, "queues", QueueCostsText(a.queue_costs()));
  AddField(out, "cpu usage", CpuUsageText(a.cpu_usage()));
  AddField(out, "foreground", YesNo(a.is_process_foreground()));
  if (a.detection_delay_ms() != 0) {
    AddField(out, "detected", absl::StrCat(Ms(a.detection_delay_ms()), " after the threshold"));
  }
  if (a.stopped_ms() > 0) {
    AddField(out, "stopped", absl::StrCat(Ms(a.stopped_ms()), " (process stopped; not in the cost)"));
  }
  if (!a.idle_handler().empty()) AddField(out, "idle handler", a.idle_handler());
  if (!a.input_event().empty()) AddField(out, "input event", a.input_event());
  if (a.signal() != 0) {
    AddField(out, "signal", absl::StrCat(a.signal(), a.signal() == 3 ? " (SIGQUIT)" : ""));
    AddField(out, "queue head", a.queue_head().empty() ? "(empty)" : a.queue_head());
    AddField(out, "overdue", Ms(a.queue_head_overdue_ms()));
    AddField(out, "hang",
             a.confirmed_hang() ? "confirmed (the queue head is overdue)"
                                : "not confirmed (the queue head is not overdue)");
  }
  if (a.has_thread_stack()) {
    AddThreadStack(out, "native stack of", a.thread_stack(), 0, options);
  }
  AddCallTree(out, a.stack(), a.stack_truncated());
  if (!a.all_threads().empty()) {
    absl::StrAppend(&out, "all threads (", a.all_threads_size(), "):\n");
    for (const proto::ThreadStack& stack : a.all_threads()) {
      AddThreadStack(out, "thread", stack, 2, options);
    }
  }
}

void RenderEvilMethod(std::string& out, const proto::EvilMethodReport& e) {
  if (e.detail() == proto::STARTUP && e.sub_type() != 0) {
    AddField(out, "startup",
             e.sub_type() == 1   ? "cold"
             : e.sub_type() == 2 ? "warm"
                                 : absl::StrCat(e.sub_type()));
  }
  if (e.has_message()) AddField(out, "message", MessageText(e.message()));
  if (e.has_queue_costs()) AddField(out, "queues", QueueCostsText(e.queue_costs()));
  AddField(out, "cpu usage", CpuUsageText(e.cpu_usage()));
  AddField(out, "foreground", YesNo(e.is_process_foreground()));
  if (e.stopped_ms() > 0) {
    AddField(out, "stopped", absl::StrCat(Ms(e.stopped_ms()), " (process stopped; not in the cost)"));
  }
  if (e.stack().empty()) {
    AddField(out, "call tree", "(none: method tracing was off or saw no calls)");
  }
  AddCallTree(out, e.stack(), e.stack_truncated());
}

void RenderFrame(std::string& out, const proto::FrameReport& f) {
  AddField(out, "frames",
           absl::StrFormat("%d at %.1f Hz, %d dropped, over %s of frame time: %.1f fps", f.frames(),
                           f.refresh_rate(), f.dropped_frames(), Ms(f.window_ms()), f.fps()));
  const std::pair<const char*, std::pair<int64_t, int64_t>> levels[] = {
      {"BEST", {f.drop_level().best(), f.drop_sum().best()}},
      {"NORMAL", {f.drop_level().normal(), f.drop_sum().normal()}},
      {"MIDDLE", {f.drop_level().middle(), f.drop_sum().middle()}},
      {"HIGH", {f.drop_level().high(), f.drop_sum().high()}},
      {"FROZEN", {f.drop_level().frozen(), f.drop_sum().frozen()}},
  };
  std::string table = absl::StrFormat("%-8s %8s %8s", "level", "frames", "dropped");
  for (const auto& [name, counts] : levels) {
    absl::StrAppendFormat(&table, "\n%-8s %8d %8d", name, counts.first, counts.second);
  }
  AddField(out, "levels", table);
  AddField(out, "phases",
           absl::StrCat("per frame: input ", Ms(f.input_ms()), ", animation ", Ms(f.animation_ms()),
                        ", traversal ", Ms(f.traversal_ms()), ", commit ", Ms(f.commit_ms()),
                        "; vsync to frame end ", Ms(f.frame_ms())));
  AddField(out, "smoothness",
           absl::StrCat("worst 1 s window ", Percent(f.worst_dropped_percent()),
                        " of vsyncs dropped, p95 window ", Percent(f.p95_dropped_percent())));
  if (f.input_events() != 0) {
    AddField(out, "input",
             absl::StrCat(f.input_events(), f.input_events() == 1 ? " event" : " events",
                          ": latency median ", Ms(f.input_latency_median_ms()), ", worst ",
                          Ms(f.input_latency_worst_ms())));
  } else {
    AddField(out, "input", "no input events reported");
  }
  if (f.lost_frames() != 0) {
    AddField(out, "lost",
             absl::StrCat(f.lost_frames(), " frames not analysed (the analysis fell behind)"));
  }
}

void RenderStartup(std::string& out, const proto::StartupReport& s) {
  AddField(out, "startup",
           absl::StrCat(s.is_warm_start_up() ? "warm" : "cold", " start",
                        s.first_scene().empty() ? "" : ", first scene ", s.first_scene()));
  std::vector<std::pair<double, std::string>> events;
  if (s.is_warm_start_up()) {
    events = {{0, "scene created"}, {s.first_scene_create_ms(), "scene shown"}};
  } else {
    const auto add = [&](double ms, std::string what) {
      if (ms > 0) events.emplace_back(ms, std::move(what));
    };
    add(s.before_main_ms(), "main() (static initialisation)");
    add(s.application_create_begin_ms(), "application create begins");
    add(s.application_create_ms(),
        absl::StrCat("application create ends",
                     s.application_create_scene().empty()
                         ? ""
                         : absl::StrCat(" (", s.application_create_scene(), ")")));
    add(s.first_scene_created_ms(), "first scene created");
    add(s.first_scene_create_ms(), "first scene shown");
    add(s.startup_duration_ms(), "startup done");
    std::stable_sort(events.begin(), events.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  std::string timeline =
      s.is_warm_start_up() ? "ms since the scene was created" : "ms since the process started";
  size_t width = 0;
  for (const auto& [ms, what] : events) width = std::max(width, FormatNumber(ms, 1).size());
  for (const auto& [ms, what] : events) {
    absl::StrAppendFormat(&timeline, "\n%*s  %s", static_cast<int>(width), FormatNumber(ms, 1),
                          what);
  }
  AddField(out, "timeline", timeline);
  if (!s.scenes().empty()) AddField(out, "scenes", absl::StrJoin(s.scenes(), " > "));
}

std::string CpuRateText(const proto::BlockCpuRate& r) {
  return absl::StrFormat("cpu %d%%, app %d%%, user %d%%, system %d%%, iowait %d%%", r.cpu_percent(),
                         r.app_percent(), r.user_percent(), r.system_percent(), r.iowait_percent());
}

// Stack samples with the same frames (function and module), merged: how
// many, and the first and last offset.
struct MergedSample {
  const proto::BlockStackSample* sample = nullptr;
  int64_t count = 0;
  int64_t first_offset_ms = 0;
  int64_t last_offset_ms = 0;
};

std::vector<MergedSample> MergeSamples(const RepeatedPtrField<proto::BlockStackSample>& samples) {
  std::vector<MergedSample> merged;
  absl::flat_hash_map<std::string, size_t> index;
  for (const proto::BlockStackSample& sample : samples) {
    std::string signature;
    for (const proto::StackFrame& f : sample.frames()) {
      absl::StrAppend(&signature, f.function().empty() ? f.pc() : f.function(), "\x1f", f.module(),
                      "\x1e");
    }
    auto [it, inserted] = index.try_emplace(signature, merged.size());
    if (inserted) {
      merged.push_back({&sample, 0, sample.offset_ms(), sample.offset_ms()});
    }
    MergedSample& m = merged[it->second];
    ++m.count;
    m.first_offset_ms = std::min(m.first_offset_ms, sample.offset_ms());
    m.last_offset_ms = std::max(m.last_offset_ms, sample.offset_ms());
  }
  std::stable_sort(merged.begin(), merged.end(),
                   [](const MergedSample& a, const MergedSample& b) { return a.count > b.count; });
  return merged;
}

void RenderBlock(std::string& out, const proto::BlockReport& b, const RenderOptions& options) {
  std::string block =
      absl::StrCat(b.cost_ms(), " ms wall, ", b.thread_time_ms(), " ms CPU on the looper thread");
  if (b.stopped_ms() > 0) {
    absl::StrAppend(&block, " (process stopped ", b.stopped_ms(), " ms more, left out)");
  }
  if (b.time_start_ms() != 0 && b.time_end_ms() != 0) {
    absl::StrAppend(&block, ", ", FormatTimeMs(b.time_start_ms(), options.time_zone), " .. ",
                    FormatTimeMs(b.time_end_ms(), options.time_zone));
  }
  AddField(out, "block", block);
  if (b.has_message()) AddField(out, "message", MessageText(b.message()));
  if (b.has_block_cpu()) {
    AddField(out, "cpu",
             absl::StrCat(b.cpu_busy() ? "busy" : "not busy",
                          " over the block: ", CpuRateText(b.block_cpu())));
  }
  std::vector<std::string> machine;
  if (!b.model().empty()) machine.push_back(b.model());
  if (!b.api_level().empty()) machine.push_back(b.api_level());
  if (b.cpu_cores() != 0) machine.push_back(absl::StrCat(b.cpu_cores(), " cores"));
  if (b.total_memory_kb() != 0) {
    machine.push_back(
        absl::StrCat(b.free_memory_kb(), " of ", b.total_memory_kb(), " KiB available"));
  }
  if (b.vm_rss_kb() != 0) machine.push_back(absl::StrCat("VmRSS ", b.vm_rss_kb(), " KiB"));
  if (!machine.empty()) AddField(out, "machine", absl::StrJoin(machine, ", "));
  std::vector<std::string> app;
  if (!b.qualifier().empty()) app.push_back(b.qualifier());
  if (!b.version_name().empty() || b.version_code() != 0) {
    app.push_back(absl::StrCat("version ", b.version_name(), " (", b.version_code(), ")"));
  }
  if (!b.uid().empty() && b.uid() != kPlaceholderUid) {
    app.push_back(absl::StrCat("uid ", b.uid()));
  }
  if (!b.network().empty()) app.push_back(absl::StrCat("network ", b.network()));
  if (!app.empty()) AddField(out, "app", absl::StrJoin(app, ", "));
  if (!b.key_stack_line().empty()) {
    AddField(out, "key line",
             absl::StrCat(b.key_stack_line(), " (in ", b.key_sample_count(), " of ",
                          b.samples_size(), " samples)"));
  }
  if (!b.log_file().empty()) AddField(out, "log file", b.log_file());
  if (!b.cpu_rate().empty()) {
    std::string rates;
    for (const proto::BlockCpuRate& r : b.cpu_rate()) {
      if (!rates.empty()) rates += "\n";
      if (b.time_start_ms() != 0 && r.time_ms() != 0) {
        absl::StrAppendFormat(&rates, "%9s  ",
                              absl::StrCat("+", SaturatingSub(r.time_ms(), b.time_start_ms()), " ms"));
      }
      rates += CpuRateText(r);
    }
    AddField(out, "cpu rate", rates);
  }
  if (b.samples().empty()) return;
  const std::vector<MergedSample> merged = MergeSamples(b.samples());
  absl::StrAppend(&out, "stack samples (", b.samples_size(), ", ", merged.size(),
                  merged.size() == 1 ? " distinct stack" : " distinct stacks",
                  "; most frequent first):\n");
  for (const MergedSample& m : merged) {
    if (m.count == 1) {
      absl::StrAppend(&out, "  1 sample at +", m.first_offset_ms, " ms:\n");
    } else {
      absl::StrAppend(&out, "  ", m.count, " samples from +", m.first_offset_ms, " ms to +",
                      m.last_offset_ms, " ms:\n");
    }
    out += StackFramesText(m.sample->frames(), 4, options);
  }
}

// One scalar field value as text (index -1 for a singular field).
std::string ScalarText(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return FormatNumber(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f), 3);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return FormatNumber(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f), 3);
    case FieldDescriptor::CPPTYPE_BOOL:
      return (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int number = rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f);
      const auto* value = f->enum_type()->FindValueByNumber(number);
      return value != nullptr ? value->name() : absl::StrCat(number);
    }
    case FieldDescriptor::CPPTYPE_STRING:
      return rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return "";
}

bool IsDefaultScalar(const Message& m, const FieldDescriptor* f) {
  const Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return r->GetInt32(m, f) == 0;
    case FieldDescriptor::CPPTYPE_INT64:
      return r->GetInt64(m, f) == 0;
    case FieldDescriptor::CPPTYPE_UINT32:
      return r->GetUInt32(m, f) == 0;
    case FieldDescriptor::CPPTYPE_UINT64:
      return r->GetUInt64(m, f) == 0;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return r->GetDouble(m, f) == 0;
    case FieldDescriptor::CPPTYPE_FLOAT:
      return r->GetFloat(m, f) == 0;
    case FieldDescriptor::CPPTYPE_BOOL:
      return !r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return r->GetEnumValue(m, f) == 0;
    case FieldDescriptor::CPPTYPE_STRING:
      return r->GetString(m, f).empty();
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return !r->HasField(m, f);
  }
  return true;
}

bool IsType(const FieldDescriptor* f, const Descriptor* type) {
  return f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && f->message_type() == type;
}

void AddScalarLine(std::string& out, int indent, absl::string_view name, absl::string_view text) {
  const std::string continuation = "\n" + Pad(indent + 2);
  absl::StrAppend(&out, Pad(indent), name, ": ", absl::StrReplaceAll(text, {{"\n", continuation}}),
                  "\n");
}

bool IsScalar(const Value& v) {
  return v.kind_case() != Value::kStructValue && v.kind_case() != Value::kListValue;
}

std::string JsonScalarText(const Value& v) {
  switch (v.kind_case()) {
    case Value::kNullValue:
      return "null";
    case Value::kNumberValue:
      return FormatNumber(v.number_value(), 3);
    case Value::kStringValue:
      return v.string_value();
    case Value::kBoolValue:
      return v.bool_value() ? "true" : "false";
    default:
      return "";
  }
}

// An object with "function" and "module" strings: a stack frame.
bool LooksLikeFrame(const Value& v) {
  if (v.kind_case() != Value::kStructValue) return false;
  const auto& fields = v.struct_value().fields();
  auto function = fields.find("function");
  auto module = fields.find("module");
  return function != fields.end() && module != fields.end() &&
         function->second.kind_case() == Value::kStringValue &&
         module->second.kind_case() == Value::kStringValue;
}

void AddJsonFields(std::string& out, const google::protobuf::Struct& object, int indent);

void AddJsonList(std::string& out, absl::string_view name, const google::protobuf::ListValue& list,
                 int indent) {
  if (list.values().empty()) return;
  const bool all_scalars = std::all_of(list.values().begin(), list.values().end(), IsScalar);
  if (all_scalars) {
    std::vector<std::string> parts;
    for (const Value& v : list.values()) parts.push_back(JsonScalarText(v));
    AddScalarLine(out, indent, name, absl::StrJoin(parts, ", "));
    return;
  }
  absl::StrAppend(&out, Pad(indent), name, " (", list.values_size(), "):\n");
  int i = 0;
  for (const Value& v : list.values()) {
    if (LooksLikeFrame(v)) {
      const auto& fields = v.struct_value().fields();
      const std::string& function = fields.at("function").string_value();
      absl::StrAppend(&out, Pad(indent + 2), "#", i, "  ", function.empty() ? "??" : function,
                      "  (", Basename(fields.at("module").string_value()), ")\n");
    } else if (v.kind_case() == Value::kStructValue) {
      absl::StrAppend(&out, Pad(indent + 2), "[", i, "]\n");
      AddJsonFields(out, v.struct_value(), indent + 4);
    } else if (v.kind_case() == Value::kListValue) {
      AddJsonList(out, absl::StrCat("[", i, "]"), v.list_value(), indent + 2);
    } else {
      absl::StrAppend(&out, Pad(indent + 2), "- ", JsonScalarText(v), "\n");
    }
    ++i;
  }
}

void AddJsonFields(std::string& out, const google::protobuf::Struct& object, int indent) {
  std::vector<const std::string*> names;
  for (const auto& [name, value] : object.fields()) names.push_back(&name);
  std::sort(names.begin(), names.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  for (const std::string* name : names) {
    const Value& v = object.fields().at(*name);
    if (v.kind_case() == Value::kStructValue) {
      absl::StrAppend(&out, Pad(indent), *name, ":\n");
      AddJsonFields(out, v.struct_value(), indent + 2);
    } else if (v.kind_case() == Value::kListValue) {
      AddJsonList(out, *name, v.list_value(), indent);
    } else {
      AddScalarLine(out, indent, *name, JsonScalarText(v));
    }
  }
}

}  // namespace

std::string RenderStackFrames(const RepeatedPtrField<proto::StackFrame>& frames, int indent,
                              const RenderOptions& options) {
  return StackFramesText(frames, indent, options);
}

std::string RenderCallTree(const RepeatedPtrField<proto::MethodCall>& calls, int indent) {
  return CallTreeText(calls, indent);
}

std::string RenderMessageFields(const Message& message, int indent, const RenderOptions& options) {
  std::string out;
  const Descriptor* d = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) {
      const int n = r->FieldSize(message, f);
      if (n == 0) continue;
      if (IsType(f, proto::StackFrame::descriptor())) {
        absl::StrAppend(&out, Pad(indent), f->name(), " (", n, " frames):\n");
        out += StackFramesText(r->GetRepeatedFieldRef<proto::StackFrame>(message, f), indent + 2,
                               options);
      } else if (IsType(f, proto::MethodCall::descriptor())) {
        absl::StrAppend(&out, Pad(indent), f->name(), " (call tree, ms):\n");
        out += CallTreeText(r->GetRepeatedFieldRef<proto::MethodCall>(message, f), indent + 2);
      } else if (IsType(f, proto::ThreadStack::descriptor())) {
        absl::StrAppend(&out, Pad(indent), f->name(), " (", n, "):\n");
        for (int k = 0; k < n; ++k) {
          AddThreadStack(
              out, "thread",
              static_cast<const proto::ThreadStack&>(r->GetRepeatedMessage(message, f, k)),
              indent + 2, options);
        }
      } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        absl::StrAppend(&out, Pad(indent), f->name(), " (", n, "):\n");
        for (int k = 0; k < n; ++k) {
          absl::StrAppend(&out, Pad(indent + 2), "[", k, "]\n");
          out += RenderMessageFields(r->GetRepeatedMessage(message, f, k), indent + 4, options);
        }
      } else {
        std::vector<std::string> parts;
        for (int k = 0; k < n; ++k) parts.push_back(ScalarText(message, f, k));
        AddScalarLine(out, indent, f->name(), absl::StrJoin(parts, ", "));
      }
      continue;
    }
    if (IsDefaultScalar(message, f)) continue;
    if (IsType(f, proto::ThreadStack::descriptor())) {
      AddThreadStack(out, absl::StrCat(f->name(), ":"),
                     static_cast<const proto::ThreadStack&>(r->GetMessage(message, f)), indent,
                     options);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      absl::StrAppend(&out, Pad(indent), f->name(), ":\n");
      out += RenderMessageFields(r->GetMessage(message, f), indent + 2, options);
    } else {
      AddScalarLine(out, indent, f->name(), ScalarText(message, f, -1));
    }
  }
  return out;
}

std::string RenderJsonValue(const Value& value, int indent) {
  std::string out;
  if (value.kind_case() == Value::kStructValue) {
    AddJsonFields(out, value.struct_value(), indent);
  } else if (value.kind_case() == Value::kListValue) {
    AddJsonList(out, "values", value.list_value(), indent);
  } else {
    absl::StrAppend(&out, Pad(indent), JsonScalarText(value), "\n");
  }
  return out;
}

std::string RenderIssue(const IssueRecord& record, const RenderOptions& options) {
  std::string out;
  RenderHeader(out, record, options);
  const proto::Issue& issue = record.issue;
  switch (issue.report_case()) {
    case proto::Issue::kAnr:
      RenderAnr(out, issue.anr(), options);
      break;
    case proto::Issue::kEvilMethod:
      RenderEvilMethod(out, issue.evil_method());
      break;
    case proto::Issue::kFrame:
      RenderFrame(out, issue.frame());
      break;
    case proto::Issue::kStartup:
      RenderStartup(out, issue.startup());
      break;
    case proto::Issue::kBlock:
      RenderBlock(out, issue.block(), options);
      break;
    default:
      if (const Message* report = record.report(); report != nullptr) {
        absl::StrAppend(&out, record.kind, ":\n");
        out += RenderMessageFields(*report, 2, options);
      } else if (record.unknown_fields.empty()) {
        out += "(no report)\n";
      }
      break;
  }
  // Fields this build does not know (a newer report kind): shown raw.
  for (const auto& [name, value] : record.unknown_fields) {
    absl::StrAppend(&out, name, " (not known to this build of matrix-report; raw fields):\n");
    out += RenderJsonValue(value, 2);
  }
  return out;
}

std::string RenderGroups(const std::vector<IssueGroup>& groups, const RenderOptions& options) {
  int64_t issues = 0;
  for (const IssueGroup& g : groups) issues += g.count;
  std::string out = absl::StrCat(groups.size(), groups.size() == 1 ? " group" : " groups", " of ",
                                 issues, issues == 1 ? " issue" : " issues",
                                 " (by tag, detail and key; most frequent first)\n");
  int n = 0;
  for (const IssueGroup& g : groups) {
    absl::StrAppendFormat(&out, "\n#%d  %s  x%d\n", ++n, g.TagDetail(), g.count);
    AddField(out, "key", g.key.empty() ? "(none)" : g.key, 4);
    if (g.metric_count > 0) {
      std::string text = absl::StrCat("worst ", MetricValue(g.metric, g.worst), ", median ",
                                      MetricValue(g.metric, g.median));
      if (g.metric_count != g.count) absl::StrAppend(&text, " (of ", g.metric_count, " issues)");
      AddField(out, MetricLabel(g.metric), text, 4);
    }
    if (g.first_seen_ms == g.last_seen_ms) {
      AddField(out, "seen",
               absl::StrCat(FormatTimeMs(g.first_seen_ms, options.time_zone), " ",
                            ZoneName(g.first_seen_ms, options.time_zone)),
               4);
    } else {
      AddField(out, "first seen", FormatTimeMs(g.first_seen_ms, options.time_zone), 4);
      AddField(out, "last seen",
               absl::StrCat(FormatTimeMs(g.last_seen_ms, options.time_zone), " ",
                            ZoneName(g.last_seen_ms, options.time_zone), " (",
                            FormatDurationMs(DifferenceMs(g.last_seen_ms, g.first_seen_ms)),
                            " later)"),
               4);
    }
    if (!g.scenes.empty()) AddField(out, "scenes", CountList(g.scenes, 8), 4);
    if (!g.processes.empty()) AddField(out, "processes", CountList(g.processes), 4);
  }
  return out;
}

namespace {

// "4120 fps, 3 slow_method (rotated out by their own kind)", or "".
std::string SinkDropsText(const absl::flat_hash_map<std::string, proto::SinkDrops>& by_process) {
  proto::SinkDrops total;
  for (const auto& [process, d] : by_process) {
    total.set_hang(total.hang() + d.hang());
    total.set_fps(total.fps() + d.fps());
    total.set_slow_method(total.slow_method() + d.slow_method());
    total.set_startup(total.startup() + d.startup());
    total.set_block(total.block() + d.block());
    total.set_other(total.other() + d.other());
  }
  std::vector<std::string> parts;
  for (const auto& [name, n] : {std::pair<const char*, int64_t>{"fps", total.fps()},
                                {"hang", total.hang()},
                                {"slow_method", total.slow_method()},
                                {"startup", total.startup()},
                                {"block", total.block()},
                                {"other", total.other()}}) {
    if (n > 0) parts.push_back(absl::StrCat(n, " ", name));
  }
  if (parts.empty()) return "";
  return absl::StrCat(absl::StrJoin(parts, ", "),
                      " (oldest issues rotated out of the sink's files by their own kind)");
}

}  // namespace

// One row per tag/detail: issues, distinct keys, worst and median metric.
struct IssueSummary::Row {
  std::string name;
  int64_t issues = 0;
  absl::flat_hash_set<std::string> keys;
  MetricStats metric;
};

IssueSummary::IssueSummary() = default;
IssueSummary::~IssueSummary() = default;

void IssueSummary::AddRead(const IssueRecord& r) {
  ++total_;
  if (!r.issue.has_sink_dropped()) return;
  // Each line carries its sink's counts so far (SinkDrops, cumulative), so
  // the largest per process is its total.
  const proto::SinkDrops& d = r.issue.sink_dropped();
  proto::SinkDrops& max = drops_by_process_[absl::StrCat(r.process(), "/", r.pid())];
  max.set_hang(std::max(max.hang(), d.hang()));
  max.set_fps(std::max(max.fps(), d.fps()));
  max.set_slow_method(std::max(max.slow_method(), d.slow_method()));
  max.set_startup(std::max(max.startup(), d.startup()));
  max.set_block(std::max(max.block(), d.block()));
  max.set_other(std::max(max.other(), d.other()));
}

void IssueSummary::AddSelected(const IssueRecord& r, IssueOrder order) {
  if (selected_ == 0) first_ms_ = last_ms_ = r.time_ms();
  ++selected_;
  if (r.has_unknown_fields) ++with_unknown_;
  if (r.kind_unknown_to_build) unknown_kinds_.Add(r.kind);
  first_ms_ = std::min(first_ms_, r.time_ms());
  last_ms_ = std::max(last_ms_, r.time_ms());
  processes_.Add(r.ProcessLabel());
  scenes_.Add(r.scene);
  std::string name = r.TagDetail();
  auto [it, inserted] = row_index_.try_emplace(name, rows_.size());
  if (inserted) {
    rows_.push_back(std::make_unique<Row>());
    rows_.back()->name = std::move(name);
  }
  Row& row = *rows_[it->second];
  ++row.issues;
  row.keys.insert(r.key);
  row.metric.Add(r.metric, order);
}

std::string IssueSummary::Render(const ReadStats& stats, bool filtered,
                                 const RenderOptions& options) const {
  std::string out;
  std::string files = absl::StrJoin(
      stats.files.begin(),
      stats.files.begin() + static_cast<std::ptrdiff_t>(std::min(stats.files.size(), kMaxListed)),
      ", ");
  if (stats.files.size() > kMaxListed)
    absl::StrAppend(&files, " and ", stats.files.size() - kMaxListed, " more");
  std::string issues = filtered ? absl::StrCat(selected_, " of ", total_, " match the filters")
                                : absl::StrCat(total_);
  absl::StrAppend(&issues, " (", stats.files.size(), stats.files.size() == 1 ? " file" : " files",
                  stats.files.empty() ? "" : ": ", files, ")");
  AddField(out, "issues", issues);
  std::string lines =
      absl::StrCat(stats.lines, " read, ", stats.malformed_lines, " malformed");
  if (stats.malformed_lines > 0) absl::StrAppend(&lines, " (skipped; see stderr)");
  AddField(out, "lines", lines);
  if (!stats.errors.empty()) {
    AddField(out, "unreadable",
             absl::StrCat(stats.errors.size(), stats.errors.size() == 1 ? " input" : " inputs",
                          " (listed on stderr)"));
  }
  if (with_unknown_ > 0) {
    std::string text =
        absl::StrCat(with_unknown_, with_unknown_ == 1 ? " issue has" : " issues have",
                     " fields this build does not know");
    if (std::vector<NameCount> kinds = unknown_kinds_.Sorted(); !kinds.empty()) {
      absl::StrAppend(&text, "; report kinds: ", CountList(kinds),
                      " (grouped by their key, shown as raw fields)");
    }
    AddField(out, "unknown", text);
  }
  if (std::string dropped = SinkDropsText(drops_by_process_); !dropped.empty()) {
    AddField(out, "dropped", dropped);
  }
  if (selected_ == 0) return out;

  AddField(out, "time",
           absl::StrCat(FormatTimeMs(first_ms_, options.time_zone), " .. ",
                        FormatTimeMs(last_ms_, options.time_zone), " ",
                        ZoneName(last_ms_, options.time_zone), " (",
                        FormatDurationMs(DifferenceMs(last_ms_, first_ms_)), ")"));
  if (std::vector<NameCount> counts = processes_.Sorted(); !counts.empty()) {
    AddField(out, "processes", CountList(counts));
  }
  if (std::vector<NameCount> counts = scenes_.Sorted(); !counts.empty()) {
    AddField(out, "scenes", CountList(counts, 8));
  }

  std::vector<const Row*> rows;
  rows.reserve(rows_.size());
  for (const std::unique_ptr<Row>& row : rows_) rows.push_back(row.get());
  std::sort(rows.begin(), rows.end(), [](const Row* a, const Row* b) {
    return a->issues != b->issues ? a->issues > b->issues : a->name < b->name;
  });
  size_t width = 10;
  for (const Row* row : rows) width = std::max(width, row->name.size());
  absl::StrAppendFormat(&out, "\n%-*s  %6s  %6s  %-12s  %s\n", static_cast<int>(width),
                        "tag/detail", "issues", "groups", "worst", "median");
  for (const Row* row : rows) {
    std::string worst = "-";
    std::string median = "-";
    if (row->metric.count() > 0) {
      worst = MetricValue(row->metric.metric(), row->metric.worst());
      median = MetricValue(row->metric.metric(), row->metric.median());
    }
    absl::StrAppendFormat(&out, "%-*s  %6d  %6d  %-12s  %s\n", static_cast<int>(width),
                          row->name, row->issues, row->keys.size(), worst, median);
  }
  return out;
}

std::string RenderSummary(const ReadResult& read, const std::vector<const IssueRecord*>& selected,
                          bool filtered, const RenderOptions& options) {
  IssueSummary summary;
  for (const IssueRecord& r : read.records) summary.AddRead(r);
  for (size_t i = 0; i < selected.size(); ++i) {
    summary.AddSelected(*selected[i], {0, static_cast<int64_t>(i)});
  }
  // A ReadResult lists its malformed lines.
  ReadStats stats = read;
  stats.malformed_lines = static_cast<int64_t>(read.malformed.size());
  return summary.Render(stats, filtered, options);
}

}  // namespace matrix::report

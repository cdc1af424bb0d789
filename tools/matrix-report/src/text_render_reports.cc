#include "internal/text_render_util.h"

// matrix-report's text renderer: one section per report kind (ANR and lag,
// evil method, frames, startup, BlockCanary block) and the header above them.

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

#include "matrix/trace/frame_stats.h"

namespace matrix::report::internal {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::RepeatedPtrField;
using google::protobuf::Value;

void RenderHeader(std::string& out, const IssueRecord& r, const RenderOptions& options) {
  std::string title = absl::StrCat("== ", TextEscape(r.TagDetail()), " ");
  if (title.size() < 72) title.append(72 - title.size(), '=');
  absl::StrAppend(&out, title, "\n");
  AddField(out, "key", r.key.empty() ? "(none)" : TextEscape(r.key));
  AddField(out, "time",
           absl::StrCat(FormatTimeMs(r.time_ms(), options.time_zone), " ",
                        ZoneName(r.time_ms(), options.time_zone)));
  std::string process = TextEscape(r.ProcessLabel());
  if (!r.issue.plugin().empty()) {
    absl::StrAppend(&process, process.empty() ? "" : ", ", "plugin ", TextEscape(r.issue.plugin()));
  }
  if (r.issue.type() != 0)
    absl::StrAppend(&process, process.empty() ? "" : ", ", "type ", r.issue.type());
  if (!process.empty()) AddField(out, "process", process);
  if (!r.scene.empty()) AddField(out, "scene", TextEscape(r.scene));
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
    AddField(out, "source",
             r.source.line > 0 ? absl::StrCat(TextEscape(r.source.file), ":", r.source.line)
                               : TextEscape(r.source.file));
}

namespace {

// How late the detection was, and the time the process was stopped or
// waited to run, when there was any.
void AddTiming(std::string& out, double detection_delay_ms, double stopped_ms,
               double throttled_ms) {
  if (detection_delay_ms != 0) {
    AddField(out, "detected", absl::StrCat(Ms(detection_delay_ms), " after the threshold"));
  }
  if (stopped_ms > 0) {
    AddField(out, "stopped", absl::StrCat(Ms(stopped_ms), " (process stopped; not in the cost)"));
  }
  if (throttled_ms > 0) {
    AddField(out, "throttled", absl::StrCat(Ms(throttled_ms),
                                            " (waited to run: CPU quota or busy machine; in the "
                                            "cost)"));
  }
}

}  // namespace

void RenderAnr(std::string& out, const proto::AnrReport& a, const RenderOptions& options) {
  if (a.has_thread()) {
    const proto::ThreadInfo& t = a.thread();
    std::string text = t.name().empty() ? "" : absl::StrCat(TextEscape(t.name()), " ");
    absl::StrAppend(&text, "(tid ", t.tid(), "): ",
                    t.state().empty() ? "state unknown" : TextEscape(t.state()),
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
  AddTiming(out, a.detection_delay_ms(), a.stopped_ms(), a.throttled_ms());
  if (!a.idle_handler().empty()) AddField(out, "idle handler", TextEscape(a.idle_handler()));
  if (!a.input_event().empty()) AddField(out, "input event", TextEscape(a.input_event()));
  if (a.signal() != 0) {
    AddField(out, "signal", absl::StrCat(a.signal(), a.signal() == 3 ? " (SIGQUIT)" : ""));
    AddField(out, "queue head", a.queue_head().empty() ? "(empty)" : TextEscape(a.queue_head()));
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

void RenderEvilMethod(std::string& out, const proto::EvilMethodReport& e,
                      const RenderOptions& options) {
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
  AddTiming(out, e.detection_delay_ms(), e.stopped_ms(), e.throttled_ms());
  if (e.sample_count() > 0) {
    AddField(out, "samples",
             absl::StrCat(e.sample_count(), " stacks from the threshold to the end, weighted by "
                                            "the time each stands for"));
  }
  if (e.has_thread_stack()) {
    AddThreadStack(out, "native stack at the threshold of", e.thread_stack(), 0, options);
  }
  if (e.stack().empty()) {
    AddField(out, "call tree", "(none: method tracing was off or saw no calls)");
  }
  AddCallTree(out, e.stack(), e.stack_truncated());
}

void RenderFrame(std::string& out, const proto::FrameReport& f) {
  AddField(out, "frames",
           absl::StrFormat("%d at %s Hz, %d dropped, over %s of frame time: %s", f.frames(),
                           FormatFixed(f.refresh_rate(), 1), f.dropped_frames(),
                           Ms(f.window_ms()),
                           HasFrameRate(f) ? absl::StrCat(FormatFixed(f.fps(), 1), " fps")
                                           : "too short to measure a rate"));
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
                        s.first_scene().empty() ? "" : ", first scene ",
                        TextEscape(s.first_scene())));
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
                         : absl::StrCat(" (", TextEscape(s.application_create_scene()), ")")));
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
  if (!s.scenes().empty()) {
    std::vector<std::string> scenes;
    for (const std::string& scene : s.scenes()) scenes.push_back(TextEscape(scene));
    AddField(out, "scenes", absl::StrJoin(scenes, " > "));
  }
}

namespace {

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
}  // namespace

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
  if (!b.model().empty()) machine.push_back(TextEscape(b.model()));
  if (!b.api_level().empty()) machine.push_back(TextEscape(b.api_level()));
  if (b.cpu_cores() != 0) machine.push_back(absl::StrCat(b.cpu_cores(), " cores"));
  if (b.total_memory_kb() != 0) {
    machine.push_back(
        absl::StrCat(b.free_memory_kb(), " of ", b.total_memory_kb(), " KiB available"));
  }
  if (b.vm_rss_kb() != 0) machine.push_back(absl::StrCat("VmRSS ", b.vm_rss_kb(), " KiB"));
  if (!machine.empty()) AddField(out, "machine", absl::StrJoin(machine, ", "));
  std::vector<std::string> app;
  if (!b.qualifier().empty()) app.push_back(TextEscape(b.qualifier()));
  if (!b.version_name().empty() || b.version_code() != 0) {
    app.push_back(
        absl::StrCat("version ", TextEscape(b.version_name()), " (", b.version_code(), ")"));
  }
  if (!b.uid().empty() && b.uid() != kPlaceholderUid) {
    app.push_back(absl::StrCat("uid ", TextEscape(b.uid())));
  }
  if (!b.network().empty()) app.push_back(absl::StrCat("network ", TextEscape(b.network())));
  if (!app.empty()) AddField(out, "app", absl::StrJoin(app, ", "));
  if (!b.key_stack_line().empty()) {
    AddField(out, "key line",
             absl::StrCat(TextEscape(b.key_stack_line()), " (in ", b.key_sample_count(), " of ",
                          b.samples_size(), " samples)"));
  }
  if (!b.log_file().empty()) AddField(out, "log file", TextEscape(b.log_file()));
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

}  // namespace matrix::report::internal

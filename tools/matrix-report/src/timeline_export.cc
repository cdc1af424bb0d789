#include "matrix/report/timeline_export.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "matrix/report/cli.h"
#include "matrix/report/format_util.h"

namespace matrix::report {
namespace {

struct Writer {
  int pid = 0;
  std::vector<std::string> events;

  void Metadata(int tid, const char* name, const std::string& value, int sort) {
    if (tid == 0) {
      events.push_back(absl::StrCat(R"({"ph":"M","name":")", name, R"(","pid":)", pid,
                                    R"(,"tid":0,"args":{"name":)", JsonQuote(value), "}}"));
      return;
    }
    events.push_back(absl::StrCat(R"({"ph":"M","name":"thread_name","pid":)", pid,
                                  R"(,"tid":)", tid, R"(,"args":{"name":)", JsonQuote(value),
                                  "}}"));
    events.push_back(absl::StrCat(R"({"ph":"M","name":"thread_sort_index","pid":)", pid,
                                  R"(,"tid":)", tid, R"(,"args":{"sort_index":)", sort, "}}"));
  }
  // A complete event; `args` is a JSON object body without braces.
  void Complete(int tid, const std::string& name, const char* cat, int64_t ts, int64_t dur,
                const std::string& args) {
    events.push_back(absl::StrCat(R"({"ph":"X","name":)", JsonQuote(name), R"(,"cat":")", cat,
                                  R"(","pid":)", pid, R"(,"tid":)", tid, R"(,"ts":)", ts,
                                  R"(,"dur":)", std::max<int64_t>(dur, 0), R"(,"args":{)", args,
                                  "}}"));
  }
};

std::string Arg(const char* key, const std::string& value) {
  return absl::StrCat("\"", key, "\":", JsonQuote(value));
}
std::string Arg(const char* key, int64_t value) { return absl::StrCat("\"", key, "\":", value); }
std::string Arg(const char* key, bool value) {
  return absl::StrCat("\"", key, "\":", value ? "true" : "false");
}

void AppendJoined(std::string* out, const std::vector<std::string>& parts) {
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out->append(",");
    out->append(parts[i]);
  }
}

// "1 dispatch", "3 dispatches".
std::string Counted(int64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

// An aggregate's count and busy time (timeline.proto, FitTimelineToBudget).
void AddAggregateArgs(const proto::TimelineSlice& s, std::vector<std::string>* args) {
  if (s.count() <= 0) return;
  args->push_back(Arg("count", s.count()));
  args->push_back(Arg("busy_us", s.busy_us()));
}

// The process's name, and each track's name in the order viewers show them.
void AddTrackNames(const proto::Issue& issue, Writer& w) {
  const proto::Timeline& t = issue.timeline();
  const std::string process =
      issue.process().empty() ? std::string("process") : issue.process();
  // The name alone: viewers show the pid beside it themselves.
  w.Metadata(0, "process_name", process, 0);
  w.Metadata(kTimelineDispatchTid, "thread_name",
             t.thread_name().empty() ? std::string("main thread")
                                     : absl::StrCat("main thread: ", t.thread_name()),
             1);
  w.Metadata(kTimelineFrameTid, "thread_name", "frames", 2);
  w.Metadata(kTimelinePhaseTid, "thread_name", "frame phases", 3);
  w.Metadata(kTimelineCallTid, "thread_name", "method calls", 4);
  w.Metadata(kTimelineWatchdogTid, "thread_name", "watchdog", 5);
}

// The main thread's dispatches and the idle time between them.
void AddDispatches(const proto::Timeline& t, Writer& w) {
  for (const proto::TimelineSlice& d : t.dispatches()) {
    std::vector<std::string> args;
    if (!d.target().empty()) args.push_back(Arg("target", d.target()));
    if (!d.callback().empty()) args.push_back(Arg("callback", d.callback()));
    if (d.unfinished()) args.push_back(Arg("unfinished", true));
    AddAggregateArgs(d, &args);
    std::string a;
    AppendJoined(&a, args);
    w.Complete(kTimelineDispatchTid, d.name(), "dispatch", d.ts_us(), d.dur_us(), a);
  }
  for (const proto::TimelineSlice& idle : t.idle()) {
    w.Complete(kTimelineDispatchTid, "idle", "idle", idle.ts_us(), idle.dur_us(), "");
  }
}

// Frame `f`'s phases: each runs until the next one starts; the last (commit)
// until the frame's end. They are laid out backwards from the end.
void AddFramePhases(const proto::TimelineSlice& f, Writer& w) {
  const int64_t end = SaturatingAdd(f.ts_us(), f.dur_us());
  const struct {
    const char* name;
    int64_t us;
  } phases[] = {{"commit", f.commit_us()},
                {"traversal", f.traversal_us()},
                {"animation", f.animation_us()},
                {"input", f.input_us()}};
  int64_t phase_end = end;
  for (const auto& p : phases) {
    if (p.us <= 0) continue;
    const int64_t begin = std::max(SaturatingSub(phase_end, p.us), f.ts_us());
    w.Complete(kTimelinePhaseTid, p.name, "phase", begin, SaturatingSub(phase_end, begin),
               Arg("frame_number", f.frame_number()));
    phase_end = begin;
  }
}

void AddFrames(const proto::Timeline& t, Writer& w) {
  for (const proto::TimelineSlice& f : t.frames()) {
    std::vector<std::string> frame_args = {Arg("frame_number", f.frame_number()),
                                           Arg("dropped_frames", f.dropped_frames()),
                                           Arg("intended_vsync_us", f.intended_vsync_us())};
    AddAggregateArgs(f, &frame_args);
    std::string fa;
    AppendJoined(&fa, frame_args);
    w.Complete(kTimelineFrameTid, f.name(), "frame", f.ts_us(), f.dur_us(), fa);
    AddFramePhases(f, w);
  }
}

void AddCalls(const proto::Timeline& t, Writer& w) {
  for (const proto::TimelineSlice& c : t.calls()) {
    std::vector<std::string> call_args = {Arg("depth", static_cast<int64_t>(c.depth()))};
    if (c.unfinished()) call_args.push_back(Arg("unfinished", true));
    AddAggregateArgs(c, &call_args);
    std::string a;
    AppendJoined(&a, call_args);
    w.Complete(kTimelineCallTid, c.name(), "call", c.ts_us(), c.dur_us(), a);
  }
}

// The moment the issue was detected: an instant on the watchdog's track.
void AddDetection(const IssueRecord& record, Writer& w) {
  const proto::Timeline& t = record.issue.timeline();
  const std::string detected_by = t.detected_by().empty() ? "detected" : t.detected_by();
  w.events.push_back(absl::StrCat(R"({"ph":"i","s":"t","name":)",
                                  JsonQuote(absl::StrCat(detected_by, ": ", record.KindDetail())),
                                  R"(,"cat":"detection","pid":)", w.pid, R"(,"tid":)",
                                  kTimelineWatchdogTid, R"(,"ts":)", t.detected_at_us(),
                                  R"(,"args":{)", Arg("key", record.key), "}}"));
}

// The trace file: `events`, one a line, and the issue's facts as otherData.
std::string TraceFile(const IssueRecord& record, const std::vector<std::string>& events) {
  const proto::Issue& issue = record.issue;
  const proto::Timeline& t = issue.timeline();
  std::string out = "{\"traceEvents\":[\n";
  for (size_t i = 0; i < events.size(); ++i) {
    out += events[i];
    out += i + 1 < events.size() ? ",\n" : "\n";
  }
  absl::StrAppend(&out, "],\"displayTimeUnit\":\"ms\",\"otherData\":{",
                  Arg("tag", issue.tag()), ",", Arg("detail", record.detail), ",",
                  Arg("key", record.key), ",", Arg("time_ms", issue.time_ms()), ",",
                  Arg("window_start_ns", t.start_ns()), ",", Arg("window_us", t.window_us()),
                  ",", Arg("detected_at_us", t.detected_at_us()), ",",
                  Arg("lost_events", t.lost_events()), ",", Arg("ring_wrapped", t.ring_wrapped()),
                  ",", Arg("calls_truncated", t.calls_truncated()), "}}\n");
  return out;
}

}  // namespace

std::string TimelineTraceEvents(const IssueRecord& record) {
  const proto::Issue& issue = record.issue;
  const proto::Timeline& t = issue.timeline();
  Writer w;
  w.pid = issue.pid() != 0 ? issue.pid() : 1;
  AddTrackNames(issue, w);
  AddDispatches(t, w);
  AddFrames(t, w);
  AddCalls(t, w);
  AddDetection(record, w);
  return TraceFile(record, w.events);
}

absl::StatusOr<const IssueRecord*> PickTimelineIssue(
    const std::vector<const IssueRecord*>& selected) {
  for (auto it = selected.rbegin(); it != selected.rend(); ++it) {
    if ((*it)->issue.has_timeline()) return *it;
  }
  return absl::NotFoundError(absl::StrCat(
      selected.empty() ? "no issue matches the filters"
                       : absl::StrCat(selected.size(), selected.size() == 1 ? " issue" : " issues",
                                      " selected, none with a timeline"),
      " (timelines come with ANR, LAG, slow-method, frozen-frame FPS and block reports "
      "when TraceConfig::timeline_capacity > 0)"));
}

int RunTimelineCommand(const std::vector<const IssueRecord*>& selected, const std::string& output,
                       std::ostream& out, std::ostream& err, int status) {
  absl::StatusOr<const IssueRecord*> picked = PickTimelineIssue(selected);
  if (!picked.ok()) {
    err << "matrix-report: " << picked.status().message() << "\n";
    return kExitNoInput;
  }
  const IssueRecord& record = **picked;
  const std::string json = TimelineTraceEvents(record);
  const proto::Timeline& t = record.issue.timeline();
  const std::string what =
      absl::StrCat("the timeline of ", record.KindDetail(), " \"", record.key, "\" (",
                   Counted(t.dispatches_size(), "dispatch", "dispatches"), ", ",
                   Counted(t.frames_size(), "frame", "frames"), ", ",
                   Counted(t.calls_size(), "call", "calls"), ")");
  if (output.empty()) {
    out << json;
    out.flush();
    return status;
  }
  std::ofstream file(output, std::ios::out | std::ios::trunc | std::ios::binary);
  file << json;
  file.flush();
  if (!file) {
    err << "matrix-report: cannot write " << output << ": " << std::strerror(errno) << "\n";
    return kExitNoInput;
  }
  err << "matrix-report: wrote " << what << " to " << output
      << " (open it in https://ui.perfetto.dev, chrome://tracing or speedscope)\n";
  return status;
}

}  // namespace matrix::report

#include "matrix/report/html_report.h"

// The trace events of one issue (IssueTraceEventsJson): Chrome trace-event
// JSON that the HTML report's timeline and chrome://tracing draw, one lane
// per thread. The page itself is built in html_report.cc.

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
#include "matrix/report/issue_groups.h"
#include "matrix/report/text_render.h"
#include "matrix/report/timeline_export.h"

namespace matrix::report {
namespace {

// A number for JSON: finite, at most 3 decimals.
// ---------------------------------------------------------------------------
// Trace events.

class TraceWriter {
 public:
  void Thread(int pid, int tid, absl::string_view name) {
    Add(absl::StrCat("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", pid, ",\"tid\":", tid,
                     ",\"args\":{\"name\":", JsonQuote(name), "}}"));
  }
  // `args_json` is the inside of the args object ("" for none).
  void Complete(int pid, int tid, absl::string_view name, absl::string_view cat, double ts_us,
                double dur_us, absl::string_view args_json) {
    Add(absl::StrCat("{\"ph\":\"X\",\"name\":", JsonQuote(name), ",\"cat\":", JsonQuote(cat),
                     ",\"pid\":", pid, ",\"tid\":", tid, ",\"ts\":", JsonNumber(ts_us),
                     ",\"dur\":", JsonNumber(std::max(dur_us, 0.0)), ",\"args\":{", args_json, "}}"));
  }
  void Instant(int pid, int tid, absl::string_view name, absl::string_view cat, double ts_us,
               absl::string_view args_json) {
    Add(absl::StrCat("{\"ph\":\"i\",\"s\":\"t\",\"name\":", JsonQuote(name),
                     ",\"cat\":", JsonQuote(cat), ",\"pid\":", pid, ",\"tid\":", tid,
                     ",\"ts\":", JsonNumber(ts_us), ",\"args\":{", args_json, "}}"));
  }
  bool empty() const { return events_.empty(); }
  std::string Json() const {
    return absl::StrCat("{\"traceEvents\":[\n", absl::StrJoin(events_, ",\n"),
                        "\n],\"displayTimeUnit\":\"ms\"}");
  }

 private:
  void Add(std::string event) { events_.push_back(std::move(event)); }
  std::vector<std::string> events_;
};

std::string Arg(absl::string_view name, absl::string_view value) {
  return absl::StrCat(JsonQuote(name), ":", JsonQuote(value));
}
std::string NumArg(absl::string_view name, double value) {
  return absl::StrCat(JsonQuote(name), ":", JsonNumber(value));
}
std::string Args(const std::vector<std::string>& args) { return absl::StrJoin(args, ","); }

std::string MessageName(const proto::MessageInfo& m) {
  if (!m.callback().empty()) return m.callback();
  return m.target();
}

// The call tree (pre-order, depth, cost) as nested X events: each call
// starts where its previous sibling ended (the tree has no start times).
void AddCallTree(TraceWriter& w, int pid, int tid, double begin_us,
                 const google::protobuf::RepeatedPtrField<proto::MethodCall>& calls) {
  struct Open {
    int depth;
    double cursor_us;
  };
  std::vector<Open> open;
  double top_cursor_us = begin_us;
  for (const proto::MethodCall& call : calls) {
    while (!open.empty() && open.back().depth >= call.depth()) open.pop_back();
    double& cursor = open.empty() ? top_cursor_us : open.back().cursor_us;
    const double start = cursor;
    const double dur = std::max(call.cost_ms(), 0.0) * 1000;
    cursor += dur;
    std::vector<std::string> args = {NumArg("cost_ms", call.cost_ms()),
                                     Arg("start", "call order (the call tree has no start times)")};
    if (call.count() > 1) args.push_back(NumArg("count", call.count()));
    if (call.unfinished()) args.push_back(Arg("running", "still running at the report"));
    w.Complete(pid, tid, call.name().empty() ? "??" : call.name(), "call", start, dur, Args(args));
    open.push_back({call.depth(), start});
  }
}

bool HasDispatchRoot(const google::protobuf::RepeatedPtrField<proto::MethodCall>& calls) {
  for (const proto::MethodCall& call : calls) {
    if (call.depth() == 0 && call.name() == "dispatch") return true;
  }
  return false;
}

std::string TopFrames(const google::protobuf::RepeatedPtrField<proto::StackFrame>& frames) {
  std::vector<std::string> names;
  for (const proto::StackFrame& f : frames) {
    if (names.size() == 4) break;
    names.push_back(f.function().empty() ? f.pc() : f.function());
  }
  return absl::StrJoin(names, " < ");
}

void AnrEvents(TraceWriter& w, const IssueRecord& r, const proto::AnrReport& a) {
  const int pid = r.pid();
  int tid = a.thread().tid() != 0 ? a.thread().tid() : a.thread_stack().tid();
  if (tid == 0) tid = pid;
  std::string thread = !a.thread().name().empty() ? a.thread().name() : a.thread_stack().thread_name();
  w.Thread(pid, tid, absl::StrCat(thread.empty() ? "looper" : thread, " (looper)"));
  const double end_us = static_cast<double>(r.time_ms()) * 1000;
  const double begin_us = end_us - a.cost_ms() * 1000;
  if (!HasDispatchRoot(a.stack())) {
    std::vector<std::string> args = {Arg("detail", r.detail), NumArg("cost_ms", a.cost_ms()),
                                     Arg("running", "still running at the report")};
    if (a.has_message()) {
      args.push_back(Arg("target", a.message().target()));
      args.push_back(Arg("callback", a.message().callback()));
    }
    w.Complete(pid, tid, a.has_message() ? absl::StrCat("dispatch ", MessageName(a.message())) : "dispatch",
               "dispatch", begin_us, a.cost_ms() * 1000, Args(args));
  }
  AddCallTree(w, pid, tid, begin_us, a.stack());
  if (a.has_thread_stack()) {
    w.Instant(pid, tid, "stack captured", "stack",
              begin_us + a.thread_stack().captured_at_ms() * 1000,
              Args({Arg("top", TopFrames(a.thread_stack().frames())),
                    NumArg("captured_at_ms", a.thread_stack().captured_at_ms())}));
  }
  w.Instant(pid, tid, absl::StrCat(r.detail.empty() ? "hang" : r.detail, " detected"), "watchdog",
            end_us,
            Args({Arg("key", r.key), NumArg("cost_ms", a.cost_ms()),
                  NumArg("detection_delay_ms", a.detection_delay_ms())}));
}

void EvilMethodEvents(TraceWriter& w, const IssueRecord& r, const proto::EvilMethodReport& e) {
  const int pid = r.pid();
  const int tid = pid;  // The report has no tid: the main looper's thread is the process's.
  w.Thread(pid, tid, "main (looper)");
  const double end_us = static_cast<double>(r.time_ms()) * 1000;
  const double begin_us = end_us - e.cost_ms() * 1000;
  const bool startup = e.detail() == proto::STARTUP;
  if (startup || !HasDispatchRoot(e.stack())) {
    std::vector<std::string> args = {Arg("detail", r.detail), NumArg("cost_ms", e.cost_ms())};
    if (e.has_message()) {
      args.push_back(Arg("target", e.message().target()));
      args.push_back(Arg("callback", e.message().callback()));
    }
    std::string name = startup ? "startup" : "dispatch";
    if (!startup && e.has_message()) absl::StrAppend(&name, " ", MessageName(e.message()));
    w.Complete(pid, tid, name, startup ? "startup" : "dispatch", begin_us, e.cost_ms() * 1000,
               Args(args));
  }
  AddCallTree(w, pid, tid, begin_us, e.stack());
  w.Instant(pid, tid, absl::StrCat(r.detail.empty() ? "slow method" : r.detail, " reported"),
            "report", end_us, Args({Arg("key", r.key), NumArg("cost_ms", e.cost_ms())}));
}

void BlockEvents(TraceWriter& w, const IssueRecord& r, const proto::BlockReport& b) {
  const int pid = b.pid() != 0 ? b.pid() : r.pid();
  const int tid = pid;
  w.Thread(pid, tid, "main (looper)");
  const double start_us = static_cast<double>(b.time_start_ms()) * 1000;
  const double dur_us = DifferenceMs(b.time_end_ms(), b.time_start_ms()) * 1000;
  std::vector<std::string> args = {NumArg("cost_ms", static_cast<double>(b.cost_ms())),
                                   NumArg("thread_time_ms", static_cast<double>(b.thread_time_ms())),
                                   Arg("key_stack_line", b.key_stack_line())};
  if (b.has_message()) args.push_back(Arg("callback", b.message().callback()));
  w.Complete(pid, tid, "block", "dispatch", start_us, dur_us, Args(args));
  for (const proto::BlockStackSample& s : b.samples()) {
    const double ts = s.time_ms() != 0 ? static_cast<double>(s.time_ms()) * 1000
                                       : start_us + static_cast<double>(s.offset_ms()) * 1000;
    w.Instant(pid, tid, "stack sample", "stack", ts,
              Args({NumArg("offset_ms", static_cast<double>(s.offset_ms())),
                    Arg("top", TopFrames(s.frames()))}));
  }
}

void StartupEvents(TraceWriter& w, const IssueRecord& r, const proto::StartupReport& s) {
  const int pid = r.pid();
  const int tid = pid;
  w.Thread(pid, tid, "main (looper)");
  const double end_us = static_cast<double>(r.time_ms()) * 1000;
  const double zero_us = end_us - s.startup_duration_ms() * 1000;
  const auto at = [&](double ms) { return zero_us + ms * 1000; };
  if (s.is_warm_start_up()) {
    w.Complete(pid, tid, "warm startup", "startup", zero_us, s.startup_duration_ms() * 1000,
               Args({Arg("first_scene", s.first_scene())}));
    return;
  }
  w.Complete(pid, tid, "cold startup", "startup", zero_us, s.startup_duration_ms() * 1000,
             Args({Arg("first_scene", s.first_scene()), Arg("scenes", absl::StrJoin(s.scenes(), " > ")),
                   Arg("zero", "process start")}));
  if (s.before_main_ms() > 0) {
    w.Complete(pid, tid, "before main()", "startup", zero_us, s.before_main_ms() * 1000, "");
  }
  if (s.application_create_ms() > 0) {
    const double begin = s.application_create_begin_ms();
    w.Complete(pid, tid, "application create", "startup", at(begin),
               (s.application_create_ms() - begin) * 1000,
               Args({Arg("ended_by", s.application_create_scene())}));
  }
  if (s.first_scene_created_ms() > 0) {
    w.Instant(pid, tid, "first scene created", "startup", at(s.first_scene_created_ms()), "");
  }
  if (s.first_scene_create_ms() > 0) {
    w.Instant(pid, tid, "first scene shown", "startup", at(s.first_scene_create_ms()),
              Args({Arg("scene", s.first_scene())}));
  }
}

}  // namespace

std::optional<std::string> IssueTraceEventsJson(const IssueRecord& record) {
  // The flight recorder's timeline when the issue carries one (the same JSON
  // as `matrix-report timeline`); otherwise what the report itself says.
  if (record.issue.has_timeline()) return TimelineTraceEvents(record);
  TraceWriter w;
  const proto::Issue& issue = record.issue;
  if (issue.has_anr()) {
    AnrEvents(w, record, issue.anr());
  } else if (issue.has_evil_method()) {
    EvilMethodEvents(w, record, issue.evil_method());
  } else if (issue.has_block() && issue.block().time_start_ms() != 0 &&
             issue.block().time_end_ms() >= issue.block().time_start_ms()) {
    BlockEvents(w, record, issue.block());
  } else if (issue.has_startup() && issue.startup().startup_duration_ms() > 0) {
    StartupEvents(w, record, issue.startup());
  }
  if (w.empty()) return std::nullopt;
  return w.Json();
}

}  // namespace matrix::report

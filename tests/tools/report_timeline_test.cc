// matrix-report timeline: an issue's Timeline as Chrome trace-event JSON
// (parsed back here with protobuf's JSON parser into a Struct), and the
// `timeline` command picking the newest selected issue that has one.

#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "matrix/report/cli.h"
#include "matrix/report/timeline_export.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::testing::HasSubstr;
using test_util::AnrIssue;
using test_util::kBaseTimeMs;
using test_util::Line;
using test_util::Parsed;

proto::Timeline SampleTimeline() {
  proto::Timeline t;
  t.set_start_ns(1'000'000'000);
  t.set_window_us(5'000'000);
  t.set_detected_at_us(4'900'000);
  t.set_detected_by("ANR watchdog");
  t.set_tid(77);
  t.set_thread_name("gallery");
  proto::TimelineSlice* d = t.add_dispatches();
  d->set_name("OnDraw@view.cc:10");
  d->set_ts_us(100);
  d->set_dur_us(40'000);
  d->set_target("app::ViewHandler");
  d->set_callback("OnDraw@view.cc:10");
  proto::TimelineSlice* hang = t.add_dispatches();
  hang->set_name("Reload@net.cc:42");
  hang->set_ts_us(50'000);
  hang->set_dur_us(4'950'000);
  hang->set_unfinished(true);
  proto::TimelineSlice* idle = t.add_idle();
  idle->set_name("idle");
  idle->set_ts_us(40'100);
  idle->set_dur_us(9'900);
  proto::TimelineSlice* f = t.add_frames();
  f->set_name("frame 3");
  f->set_ts_us(100);
  f->set_dur_us(40'000);
  f->set_frame_number(3);
  f->set_dropped_frames(2);
  f->set_input_us(1'000);
  f->set_animation_us(4'000);
  f->set_traversal_us(30'000);
  f->set_commit_us(0);
  proto::TimelineSlice* c = t.add_calls();
  c->set_name("app::Reload()");
  c->set_ts_us(50'010);
  c->set_dur_us(4'949'990);
  c->set_unfinished(true);
  return t;
}

std::vector<Struct> Events(const std::string& json, Struct* root) {
  const auto status = google::protobuf::util::JsonStringToMessage(json, root);
  EXPECT_TRUE(status.ok()) << status << "\n" << json;
  std::vector<Struct> out;
  for (const Value& v : root->fields().at("traceEvents").list_value().values()) {
    out.push_back(v.struct_value());
  }
  return out;
}

std::vector<Struct> Where(const std::vector<Struct>& events, const std::string& ph, double tid) {
  std::vector<Struct> out;
  for (const Struct& e : events) {
    if (e.fields().at("ph").string_value() == ph && e.fields().at("tid").number_value() == tid) {
      out.push_back(e);
    }
  }
  return out;
}

double Num(const Struct& e, const std::string& field) {
  return e.fields().at(field).number_value();
}
std::string Str(const Struct& e, const std::string& field) {
  return e.fields().at(field).string_value();
}

TEST(TimelineTraceEventsTest, EveryTrackHasItsEventsInMicroseconds) {
  proto::Issue issue = AnrIssue("app::Reload()", proto::ANR, 5000, kBaseTimeMs);
  *issue.mutable_timeline() = SampleTimeline();
  Struct root;
  const std::vector<Struct> events = Events(TimelineTraceEvents(Parsed(issue)), &root);
  EXPECT_EQ(root.fields().at("displayTimeUnit").string_value(), "ms");

  // Names of the process and the five tracks.
  std::vector<std::string> names;
  for (const Struct& e : events) {
    if (Str(e, "ph") == "M" &&
        (Str(e, "name") == "thread_name" || Str(e, "name") == "process_name")) {
      names.push_back(e.fields().at("args").struct_value().fields().at("name").string_value());
      EXPECT_EQ(Num(e, "pid"), 4242);
    }
  }
  EXPECT_THAT(names, ::testing::ElementsAre("gallery", "main thread: gallery", "frames",
                                            "frame phases", "method calls", "watchdog"));

  const std::vector<Struct> dispatches = Where(events, "X", kTimelineDispatchTid);
  ASSERT_EQ(dispatches.size(), 3u);  // Two dispatches and the idle gap.
  EXPECT_EQ(Str(dispatches[0], "name"), "OnDraw@view.cc:10");
  EXPECT_EQ(Str(dispatches[0], "cat"), "dispatch");
  EXPECT_EQ(Num(dispatches[0], "ts"), 100);
  EXPECT_EQ(Num(dispatches[0], "dur"), 40000);
  EXPECT_EQ(dispatches[0].fields().at("args").struct_value().fields().at("target").string_value(),
            "app::ViewHandler");
  EXPECT_TRUE(
      dispatches[1].fields().at("args").struct_value().fields().at("unfinished").bool_value());
  EXPECT_EQ(Str(dispatches[2], "cat"), "idle");
  EXPECT_EQ(Num(dispatches[2], "ts"), 40100);

  const std::vector<Struct> frames = Where(events, "X", kTimelineFrameTid);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(
      frames[0].fields().at("args").struct_value().fields().at("dropped_frames").number_value(),
      2);
  // Phases end at the frame's end, back to back; a zero phase is left out.
  const std::vector<Struct> phases = Where(events, "X", kTimelinePhaseTid);
  ASSERT_EQ(phases.size(), 3u);
  EXPECT_EQ(Str(phases[0], "name"), "traversal");
  EXPECT_EQ(Num(phases[0], "ts"), 40100 - 30000);
  EXPECT_EQ(Num(phases[0], "dur"), 30000);
  EXPECT_EQ(Str(phases[1], "name"), "animation");
  EXPECT_EQ(Num(phases[1], "ts"), 40100 - 34000);
  EXPECT_EQ(Str(phases[2], "name"), "input");
  EXPECT_EQ(Num(phases[2], "ts"), 40100 - 35000);
  EXPECT_EQ(Num(phases[2], "dur"), 1000);

  const std::vector<Struct> calls = Where(events, "X", kTimelineCallTid);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(Str(calls[0], "name"), "app::Reload()");

  const std::vector<Struct> instants = Where(events, "i", kTimelineWatchdogTid);
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(Num(instants[0], "ts"), 4900000);
  EXPECT_EQ(Str(instants[0], "s"), "t");
  EXPECT_THAT(Str(instants[0], "name"), HasSubstr("ANR watchdog"));
  EXPECT_THAT(Str(instants[0], "name"), ::testing::EndsWith(": ANR"));  // Not "anr ANR".
}

TEST(TimelineTraceEventsTest, NamesAreJsonEscaped) {
  proto::Issue issue = AnrIssue("k", proto::ANR, 5000, kBaseTimeMs);
  proto::Timeline* t = issue.mutable_timeline();
  proto::TimelineSlice* d = t->add_dispatches();
  d->set_name("say \"hi\"\\\n");
  d->set_dur_us(5);
  Struct root;
  const std::vector<Struct> events = Events(TimelineTraceEvents(Parsed(issue)), &root);
  const std::vector<Struct> dispatches = Where(events, "X", kTimelineDispatchTid);
  ASSERT_EQ(dispatches.size(), 1u);
  EXPECT_EQ(Str(dispatches[0], "name"), "say \"hi\"\\\n");
}

TEST(TimelineCommandTest, WritesTheNewestSelectedIssueWithATimeline) {
  proto::Issue old_anr = AnrIssue("app::Old()", proto::ANR, 5000, kBaseTimeMs);
  *old_anr.mutable_timeline() = SampleTimeline();
  proto::Issue new_anr = AnrIssue("app::New()", proto::ANR, 5000, kBaseTimeMs + 1000);
  *new_anr.mutable_timeline() = SampleTimeline();
  new_anr.mutable_timeline()->set_detected_at_us(123);
  proto::Issue newest_without = AnrIssue("app::New()", proto::ANR, 5000, kBaseTimeMs + 2000);
  const std::string input = absl::StrCat(Line(old_anr), "\n", Line(new_anr), "\n",
                                         Line(newest_without), "\n");
  const RunEnvironment env = {.now = absl::FromUnixMillis(kBaseTimeMs + 3'600'000),
                              .local_zone = absl::UTCTimeZone()};
  std::istringstream in(input);
  std::ostringstream out, err;
  ASSERT_EQ(RunMatrixReport({"timeline", "--key=New", "-"}, in, out, err, env), kExitOk)
      << err.str();
  Struct root;
  const std::vector<Struct> events = Events(out.str(), &root);
  const std::vector<Struct> instants = Where(events, "i", kTimelineWatchdogTid);
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(Num(instants[0], "ts"), 123);

  // None with a timeline: a clear error, exit 1.
  std::istringstream in2(input);
  std::ostringstream out2, err2;
  EXPECT_EQ(RunMatrixReport({"timeline", "--tag=Trace_FPS", "-"}, in2, out2, err2, env),
            kExitNoInput);
  EXPECT_THAT(err2.str(), HasSubstr("no issue matches the filters"));
  EXPECT_EQ(out2.str(), "");
  std::istringstream in3(Line(newest_without));
  std::ostringstream out3, err3;
  EXPECT_EQ(RunMatrixReport({"timeline", "-"}, in3, out3, err3, env), kExitNoInput);
  EXPECT_THAT(err3.str(), HasSubstr("1 issue selected, none with a timeline"));
}

TEST(TimelineCommandTest, WrittenMessageReadsAsProse) {
  proto::Issue anr = AnrIssue("app::Reload()", proto::ANR, 5000, kBaseTimeMs);
  proto::Timeline one = SampleTimeline();
  one.mutable_dispatches()->DeleteSubrange(1, 1);  // One dispatch, one frame, one call.
  *anr.mutable_timeline() = one;
  const RunEnvironment env = {.now = absl::FromUnixMillis(kBaseTimeMs + 1000),
                              .local_zone = absl::UTCTimeZone()};
  const std::string path = absl::StrCat(::testing::TempDir(), "/timeline-prose-", getpid(), ".json");
  std::istringstream in(Line(anr));
  std::ostringstream out, err;
  ASSERT_EQ(RunMatrixReport({"timeline", "-o", path, "-"}, in, out, err, env), kExitOk)
      << err.str();
  std::remove(path.c_str());
  EXPECT_THAT(err.str(), HasSubstr("wrote the timeline of ANR \"app::Reload()\" "
                                   "(1 dispatch, 1 frame, 1 call) to "));
}

TEST(TimelineCommandTest, OutputIsForExportAndTimelineOnly) {
  const RunEnvironment env = {.now = absl::FromUnixMillis(kBaseTimeMs),
                              .local_zone = absl::UTCTimeZone()};
  std::istringstream in;
  std::ostringstream out, err;
  EXPECT_EQ(RunMatrixReport({"show", "-o", "x.json", "-"}, in, out, err, env), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--output applies to the export, html and timeline commands only"));
}

}  // namespace
}  // namespace matrix::report

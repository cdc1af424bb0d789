// FitTimelineToBudget: an issue's timeline stays within its JSON budget by
// merging runs of short events into counted aggregates whose totals are
// exactly those of the events merged; what still runs is never merged.

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "matrix/proto/timeline.pb.h"
#include "matrix/trace/timeline.h"

namespace {

using ::matrix::FitTimelineToBudget;
using ::matrix::proto::Timeline;
using ::matrix::proto::TimelineSlice;

size_t JsonSize(const Timeline& t) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;  // As Issue::ToJson() writes it.
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(t, &json, options).ok());
  return json.size();
}

struct Totals {
  int64_t count = 0;
  int64_t busy_us = 0;
  int64_t dropped = 0;
};
// Totals of one track's events at `depth` (-1: all depths for counts).
Totals Sum(const google::protobuf::RepeatedPtrField<TimelineSlice>& slices, int depth) {
  Totals t;
  for (const TimelineSlice& s : slices) {
    if (depth >= 0 && s.depth() != depth) continue;
    t.count += s.count() > 0 ? s.count() : 1;
    t.busy_us += s.count() > 0 ? s.busy_us() : s.dur_us();
    t.dropped += s.dropped_frames();
  }
  return t;
}

// A busy loop's last 5 s: 4,000 short dispatches (0.3 ms, 0.9 ms apart) with
// two nested calls each, a frame every 16 ms, then the stuck dispatch.
Timeline BusyTimeline() {
  Timeline t;
  t.set_start_ns(1'000'000'000);
  t.set_window_us(10'000'000);
  t.set_detected_at_us(10'000'000);
  t.set_detected_by("ANR watchdog");
  int64_t ts = 0;
  for (int i = 0; i < 4000; ++i) {
    TimelineSlice* d = t.add_dispatches();
    d->set_name("app::Tick@loop.cc:12");
    d->set_target("app::Handler");
    d->set_callback("app::Tick@loop.cc:12");
    d->set_ts_us(ts);
    d->set_dur_us(300);
    TimelineSlice* c = t.add_calls();
    c->set_name("app::Update()");
    c->set_ts_us(ts + 10);
    c->set_dur_us(200);
    c->set_depth(0);
    TimelineSlice* leaf = t.add_calls();
    leaf->set_name("app::Leaf()");
    leaf->set_ts_us(ts + 20);
    leaf->set_dur_us(50);
    leaf->set_depth(1);
    if (i % 18 == 0) {
      TimelineSlice* f = t.add_frames();
      f->set_name("frame");
      f->set_ts_us(ts);
      f->set_dur_us(250);
      f->set_dropped_frames(i % 36 == 0 ? 1 : 0);
    }
    TimelineSlice* idle = t.add_idle();
    idle->set_name("idle");
    idle->set_ts_us(ts + 300);
    idle->set_dur_us(1200);
    ts += 1500;
  }
  TimelineSlice* stuck = t.add_dispatches();
  stuck->set_name("app::Save@io.cc:40");
  stuck->set_ts_us(ts);
  stuck->set_dur_us(4'000'000);
  stuck->set_unfinished(true);
  TimelineSlice* hang = t.add_calls();
  hang->set_name("app::WriteAll()");
  hang->set_ts_us(ts + 5);
  hang->set_dur_us(3'999'000);
  hang->set_unfinished(true);
  return t;
}

TEST(TimelineBudgetTest, BusyLoopFitsIn64KiBAndKeepsEveryTotal) {
  const Timeline original = BusyTimeline();
  ASSERT_GT(JsonSize(original), size_t{1} << 20);  // Over a MiB as recorded.
  Timeline fitted = original;
  const absl::Time t0 = absl::Now();
  FitTimelineToBudget(&fitted, size_t{64} << 10);
  // Informational (timing is for benchmarks, not tests): the worker's cost.
  std::printf("fitting %zu bytes of timeline JSON took %.1f ms\n", JsonSize(original),
              absl::ToDoubleMilliseconds(absl::Now() - t0));

  EXPECT_LE(JsonSize(fitted), size_t{64} << 10);
  EXPECT_GT(fitted.aggregated_under_us(), 0);
  EXPECT_EQ(fitted.budget_dropped_events(), 0);
  EXPECT_EQ(fitted.window_us(), original.window_us());
  // Exactly reversible totals: counts and busy time per track (and depth).
  const Totals d0 = Sum(original.dispatches(), 0), d1 = Sum(fitted.dispatches(), 0);
  EXPECT_EQ(d1.count, d0.count);
  EXPECT_EQ(d1.busy_us, d0.busy_us);
  const Totals f0 = Sum(original.frames(), 0), f1 = Sum(fitted.frames(), 0);
  EXPECT_EQ(f1.count, f0.count);
  EXPECT_EQ(f1.dropped, f0.dropped);
  EXPECT_EQ(Sum(fitted.calls(), -1).count, Sum(original.calls(), -1).count);
  EXPECT_EQ(Sum(fitted.calls(), 0).busy_us, Sum(original.calls(), 0).busy_us);
  // The stuck dispatch and its call are kept as they were, last.
  const TimelineSlice& last = fitted.dispatches(fitted.dispatches_size() - 1);
  EXPECT_TRUE(last.unfinished());
  EXPECT_EQ(last.name(), "app::Save@io.cc:40");
  EXPECT_EQ(last.count(), 0);
  EXPECT_EQ(fitted.calls(fitted.calls_size() - 1).name(), "app::WriteAll()");
  // Aggregates are named and span from their first begin to their last end.
  const TimelineSlice& first = fitted.dispatches(0);
  EXPECT_GT(first.count(), 1);
  EXPECT_THAT(first.name(), ::testing::EndsWith(" dispatches"));
  EXPECT_EQ(first.ts_us(), 0);
  // Idle gaps inside aggregates are gone (span minus busy is that time).
  EXPECT_LT(fitted.idle_size(), original.idle_size());
}

TEST(TimelineBudgetTest, ATimelineWithinBudgetIsUntouched) {
  Timeline t = BusyTimeline();
  t.mutable_dispatches()->DeleteSubrange(0, 3990);
  t.mutable_calls()->DeleteSubrange(0, 7990);
  t.mutable_idle()->DeleteSubrange(0, 3990);
  t.mutable_frames()->DeleteSubrange(0, t.frames_size() - 1);
  const Timeline before = t;
  FitTimelineToBudget(&t, size_t{64} << 10);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(t, before));
  FitTimelineToBudget(&t, 0);  // No limit.
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(t, before));
}

TEST(TimelineBudgetTest, LongEventsThatCannotMergeDropTheCallsThenTheOldest) {
  Timeline t;
  t.set_window_us(100'000'000);
  for (int i = 0; i < 400; ++i) {
    TimelineSlice* d = t.add_dispatches();
    d->set_name("app::LongWork@work.cc:1");
    d->set_ts_us(int64_t{i} * 250'000);
    d->set_dur_us(200'000);
    d->set_unfinished(true);  // Never merged.
    TimelineSlice* c = t.add_calls();
    c->set_name("app::Work()");
    c->set_ts_us(int64_t{i} * 250'000);
    c->set_dur_us(199'000);
    c->set_unfinished(true);
  }
  FitTimelineToBudget(&t, 4096);
  EXPECT_LE(JsonSize(t), 4096u);
  EXPECT_EQ(t.calls_size(), 0);
  EXPECT_TRUE(t.calls_truncated());
  EXPECT_GT(t.budget_dropped_events(), 0);
  EXPECT_EQ(t.budget_dropped_events() + t.dispatches_size(), 400);
  // The newest are the ones kept.
  EXPECT_EQ(t.dispatches(t.dispatches_size() - 1).ts_us(), 399 * 250'000);
}

TEST(TimelineBudgetTest, MergedCallsStayInsideTheirDispatchOrTheirGap) {
  // A debug build instruments the loop's own inline helpers: short calls
  // between dispatches as well as inside them. An aggregate of calls must
  // never straddle a dispatch's edge.
  Timeline t;
  t.set_window_us(5'000'000);
  int64_t ts = 0;
  for (int i = 0; i < 60; ++i) {
    TimelineSlice* d = t.add_dispatches();
    d->set_name("app::Step@step.cc:3");
    d->set_ts_us(ts);
    d->set_dur_us(50'000);
    for (int k = 0; k < 100; ++k) {  // Inside: short calls at depth 0.
      TimelineSlice* c = t.add_calls();
      c->set_name("app::Inner()");
      c->set_ts_us(ts + 10 + 400 * k);
      c->set_dur_us(300);
    }
    for (int k = 0; k < 100; ++k) {  // Between: the loop's own calls.
      TimelineSlice* c = t.add_calls();
      c->set_name("std::vector<>::size()");
      c->set_ts_us(ts + 50'000 + 400 * k);
      c->set_dur_us(1);
    }
    TimelineSlice* idle = t.add_idle();
    idle->set_name("idle");
    idle->set_ts_us(ts + 50'000);
    idle->set_dur_us(50'000);
    ts += 100'000;
  }
  const Totals before = Sum(t.calls(), 0);
  FitTimelineToBudget(&t, 16 << 10);
  ASSERT_GT(t.aggregated_under_us(), 0);
  ASSERT_FALSE(t.calls_truncated());
  EXPECT_EQ(Sum(t.calls(), 0).count, before.count);
  int aggregates = 0;
  for (const TimelineSlice& c : t.calls()) {
    if (c.count() == 0) continue;
    ++aggregates;
    const int64_t begin = c.ts_us(), end = c.ts_us() + c.dur_us();
    bool inside_one = false;
    for (const auto* track : {&t.dispatches(), &t.idle()}) {
      for (const TimelineSlice& s : *track) {
        inside_one = inside_one || (s.ts_us() <= begin && end <= s.ts_us() + s.dur_us());
      }
    }
    EXPECT_TRUE(inside_one) << c.name() << " [" << begin << ", " << end << "]";
  }
  EXPECT_GT(aggregates, 0);
}

}  // namespace

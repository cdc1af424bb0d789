// File: matrix/trace/timeline.h
//
// Timeline is the flight recorder of the looper thread: the recent past
// (dispatches with their target, frames with their phases and dropped
// count), kept in fixed-size rings written on the looper thread for the price
// of a few relaxed stores per event, and copied out by any other thread when
// an issue is reported. Dispatches are not written twice: they are the
// records the UIThreadMonitor's DispatchHeartbeat already keeps for the
// watchdogs (its ring holds the last `capacity` dispatches when the monitor is
// built with UIThreadMonitor::Options::dispatch_history = capacity); the
// timeline's own ring holds the frames. Idle periods are the gaps between
// dispatches; traced calls come from the MethodTracer's own buffer when the
// snapshot is taken (they are not recorded twice either).
//
//   matrix::Timeline timeline({.capacity = 4096, .dispatches = &monitor->heartbeat()});
//   auto registration = monitor->AddObserver(&timeline);   // on the looper thread
//   ...
//   // Watchdog or worker thread, when a hang is detected:
//   matrix::TimelineSnapshot snapshot = timeline.Snapshot(detected_at, absl::Seconds(5));
//   matrix::FillTimeline(snapshot, "ANR watchdog", issue.mutable_timeline());
//
// The rings are preallocated at construction and never grow: the oldest
// events are overwritten. Each slot is a small seqlock (a version word and
// data words, all atomics), so a reader never blocks the writer and drops a
// slot that was rewritten while it copied it.
//
// Thread safety: DoFrame() runs on the looper thread only (the single
// writer). Snapshot() and the accessors may be called from any thread at any
// time, concurrently with the writers.

#ifndef MATRIX_TRACE_TIMELINE_H_
#define MATRIX_TRACE_TIMELINE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "matrix/core/time_ticks.h"
#include "matrix/proto/issue.pb.h"
#include "matrix/proto/timeline.pb.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace matrix {

struct TimelineOptions {
  // Frames kept: capacity / 2 (a frame is one dispatch of several; at least
  // kMinCapacity), rounded down to a power of two, 64 bytes each. The
  // dispatches kept are the heartbeat's ring (see `dispatches`).
  size_t capacity = 4096;
  // The dispatches: the monitor's heartbeat (not owned; must outlive the
  // timeline). Null records frames only.
  const DispatchHeartbeat* dispatches = nullptr;
  // The method tracer whose records give the traced calls at snapshot time
  // (not owned; null without method tracing).
  const MethodTracer* method_tracer = nullptr;

  static constexpr size_t kMinCapacity = 16;
  static constexpr size_t kMaxCapacity = size_t{1} << 22;  // 256 MiB of slots.
};

// One recorded event, decoded.
struct TimelineEvent {
  enum class Kind : uint8_t { kDispatch = 1, kFrame = 2 };
  Kind kind = Kind::kDispatch;
  // kDispatch: the dispatch number (1 = the first); kFrame: the frame's
  // position in the frame ring's history (0 = the first).
  uint64_t number = 0;
  TimeTicks begin;
  TimeTicks end;  // Null for a dispatch still running when copied.

  // kDispatch: what ran (each interned or a literal; valid forever), and the
  // method-trace mark of its begin (0 without tracing).
  const std::string* target_name = nullptr;  // The target Handler's name.
  const char* function = nullptr;            // Where it was posted from...
  const char* file = nullptr;
  int line = 0;
  bool has_callback = false;
  const char* label = nullptr;  // A foreign loop's label.
  uint64_t method_mark = 0;

  // kFrame.
  TimeTicks intended_vsync;
  int64_t frame_number = 0;
  int64_t dropped_frames = 0;
  // Time in each Choreographer queue (UIThreadMonitor::Phase order).
  std::array<absl::Duration, UIThreadMonitor::kPhaseCount> phases{};

  bool finished() const { return !end.is_null(); }
  // "fn@file:line", the Handler's name, the label, or "dispatch".
  std::string DispatchName() const;
};

// What Timeline::Snapshot() copied: events that overlap [begin, end], oldest
// first, and the traced calls of that time when method tracing is on.
struct TimelineSnapshot {
  TimeTicks begin;        // end - window.
  TimeTicks end;          // When the snapshot was taken.
  TimeTicks detected_at;  // The instant the issue was detected.
  std::vector<TimelineEvent> events;
  // Events overwritten before they could be copied (the ring wrapped while
  // a slow reader copied, or the window is longer than the ring).
  uint64_t lost = 0;
  // The window reaches back before the oldest event still in the ring.
  bool ring_wrapped = false;
  bool has_method_records = false;
  RecordCopy method_records;
};

class Timeline : public LooperObserver {
 public:
  explicit Timeline(TimelineOptions options = {});
  ~Timeline() override;
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // LooperObserver (looper thread): a frame is written once, complete, when
  // the monitor reports it.
  void DoFrame(const FrameData& frame) override;

  // Snapshot()
  //
  // Copies the events that overlap [now - window, now], plus the traced calls
  // of that time. Allocates; never call on the looper thread. Any thread.
  TimelineSnapshot Snapshot(TimeTicks now, absl::Duration window, TimeTicks detected_at) const;
  TimelineSnapshot Snapshot(TimeTicks now, absl::Duration window) const {
    return Snapshot(now, window, now);
  }

  // Frames the ring keeps.
  size_t capacity() const { return mask_ + 1; }
  // Frames written so far, plus the dispatches begun. Any thread.
  uint64_t event_count() const {
    return head_.load(std::memory_order_acquire) +
           (options_.dispatches != nullptr ? options_.dispatches->dispatch_number() : 0);
  }

 private:
  // A frame slot: `version` is (frame number + 1) * 4 + state; state bit 0
  // is set while the slot is written.
  struct alignas(64) Slot {
    std::atomic<uint64_t> version{0};
    std::array<std::atomic<uint64_t>, 7> words{};
  };
  static_assert(sizeof(Slot) == 64, "one cache line per event");

  bool ReadSlot(uint64_t number, TimelineEvent* out) const;

  const TimelineOptions options_;
  const size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> head_{0};  // The next frame number.
  TimeTicks last_frame_end_;
};

// FillTimeline()
//
// The snapshot as an issue's timeline: times in microseconds from the start
// of the window, dispatches named as the reports name messages, frames with
// their phases, idle gaps of at least kMinIdleGap between dispatches, and the
// traced calls (names resolved with the Symbolizer; at most `max_calls`, the
// longest kept). `detected_by` names the detector ("ANR watchdog"). Any
// thread but the looper's (symbolizes).
//
// `max_json_bytes` (0: no limit) bounds the timeline's JSON form (as the
// JSON-lines sink writes it) with FitTimelineToBudget().
inline constexpr absl::Duration kMinIdleGap = absl::Milliseconds(1);
inline constexpr size_t kDefaultTimelineMaxBytes = size_t{64} << 10;
inline constexpr size_t kDefaultMaxCalls = 20000;
void FillTimeline(const TimelineSnapshot& snapshot, const std::string& detected_by,
                  proto::Timeline* out, size_t max_calls = kDefaultMaxCalls,
                  size_t max_json_bytes = kDefaultTimelineMaxBytes);

// TimelineAttachment
//
// How a tracer gives the issues it detects the looper thread's timeline: the
// events from `window` before the detected span up to the snapshot, with the
// instant of detection. Every tracer (AnrTracer, EvilMethodTracer,
// FrameTracer) and BlockCanary attach through one, at detection, with the
// instant they detected at.
//
//   TimelineSnapshot snapshot = attachment.Snapshot(now, detected_at, span);
//   attachment.Fill(snapshot, "ANR watchdog", tid, issue.mutable_proto());
//
// Thread safety: a plain value; Snapshot() and Fill() on any thread but the
// looper's (Fill() symbolizes).
struct TimelineAttachment {
  const Timeline* timeline = nullptr;  // Not owned; null: no timeline.
  absl::Duration window = absl::Seconds(5);
  size_t max_bytes = kDefaultTimelineMaxBytes;  // FitTimelineToBudget; 0: no limit

  bool enabled() const { return timeline != nullptr; }
  // The events overlapping [detected_at - span - window, now], detected at
  // `detected_at` (`span`: what was detected, e.g. the stuck dispatch).
  TimelineSnapshot Snapshot(TimeTicks now, TimeTicks detected_at, absl::Duration span) const;
  // Fills `issue`'s timeline from `snapshot` for thread `tid`; returns it.
  proto::Timeline* Fill(const TimelineSnapshot& snapshot, const std::string& detected_by,
                        int tid, proto::Issue* issue) const;
  // Snapshot() then Fill() for `monitor`'s looper thread, now by its clock
  // (never before `detected_at`). Returns null, attaching nothing, when no
  // timeline is given.
  proto::Timeline* Attach(const UIThreadMonitor& monitor, TimeTicks detected_at,
                          absl::Duration span, const std::string& detected_by,
                          proto::Issue* issue) const;
};

// FitTimelineToBudget()
//
// Makes `timeline`'s JSON at most `max_json_bytes` (0: no limit) while
// keeping the whole window. Runs of consecutive short events (dispatches,
// frames, calls at one depth with their nested calls) become aggregates
// that keep their count, their span and the sum of their durations
// (TimelineSlice.count, busy_us), so totals are exactly those of the events
// merged. The limit starts at 1 ms and doubles until the JSON fits; events
// still running are never merged. Idle gaps inside an aggregate's span are
// dropped (its span minus busy_us is that idle time). If even that is too
// big (a budget below a few hundred bytes), the calls track goes, then the
// oldest events, counted in budget_dropped_events. Any thread.
void FitTimelineToBudget(proto::Timeline* timeline, size_t max_json_bytes);

}  // namespace matrix

#endif  // MATRIX_TRACE_TIMELINE_H_

#include "matrix/trace/timeline.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "matrix/core/check.h"
#include "matrix/core/handler.h"
#include "matrix/core/message.h"
#include "matrix/core/proto_json.h"
#include "matrix/trace/call_tree.h"
#include "matrix/trace/frame_stats.h"
#include "matrix/trace/symbolizer.h"

namespace matrix {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

// Slot words.
enum Word { kBegin = 0, kEnd = 1, kMeta = 2, kA = 3, kB = 4, kC = 5, kD = 6 };
// kMeta: kind in bits 0-7, the dropped frames in 32-63.
constexpr uint64_t kStateWriting = 1;

// Two durations in whole nanoseconds, as microseconds (truncated toward zero,
// as absl::ToInt64Microseconds(); saturated to 32 bits), in one word.
uint64_t PackNsAsMicros(int64_t lo_ns, int64_t hi_ns) {
  auto us = [](int64_t ns) -> uint64_t {
    // Unsigned division (cheaper than signed) once negatives are out.
    const uint64_t v = ns <= 0 ? 0 : static_cast<uint64_t>(ns) / 1000;
    return v > UINT32_MAX ? UINT32_MAX : v;
  };
  return us(lo_ns) | (us(hi_ns) << 32);
}
absl::Duration LowMicros(uint64_t w) { return absl::Microseconds(w & UINT32_MAX); }
absl::Duration HighMicros(uint64_t w) { return absl::Microseconds(w >> 32); }

size_t RoundCapacity(size_t requested) {
  size_t c = std::clamp(requested, TimelineOptions::kMinCapacity, TimelineOptions::kMaxCapacity);
  size_t p = 1;
  while (p * 2 <= c) p *= 2;
  return p;
}

}  // namespace

std::string TimelineEvent::DispatchName() const {
  if (function != nullptr && file != nullptr) {
    const char* base = file;
    for (const char* p = file; *p != '\0'; ++p) {
      if (*p == '/') base = p + 1;
    }
    return absl::StrCat(function, "@", base, ":", line);
  }
  if (target_name != nullptr) return absl::StrCat("Handler (", *target_name, ")");
  if (label != nullptr) return label;
  return "dispatch";
}

Timeline::Timeline(TimelineOptions options)
    : LooperObserver(kDoFrame),
      options_(options),
      mask_(RoundCapacity(options.capacity / 2) - 1),
      slots_(new Slot[mask_ + 1]) {}

Timeline::~Timeline() = default;

void Timeline::DoFrame(const FrameData& frame) {
  const uint64_t n = head_.load(kRelaxed);
  Slot& slot = slots_[n & mask_];
  const uint64_t version = (n + 1) << 2;
  // UIThreadMonitor leaves dropped_frames to FrameTracer: count them here the
  // same way (one division per frame, not per message).
  const int64_t dropped =
      frame.dropped_frames > 0 ? frame.dropped_frames
      : frame.has_counted_drops && frame.counted_drops_after == last_frame_end_
          ? frame.counted_drops
          : CountDroppedFrames(frame.intended_frame_time, frame.shown(), last_frame_end_,
                               frame.refresh_rate);
  last_frame_end_ = frame.shown();
  slot.version.store(version | kStateWriting, kRelaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.words[kBegin].store(static_cast<uint64_t>(frame.start.ToNanoseconds()), kRelaxed);
  slot.words[kEnd].store(static_cast<uint64_t>(frame.end.ToNanoseconds()), kRelaxed);
  slot.words[kMeta].store(
      static_cast<uint64_t>(TimelineEvent::Kind::kFrame) |
          (static_cast<uint64_t>(std::clamp<int64_t>(dropped, 0, UINT32_MAX)) << 32),
      kRelaxed);
  slot.words[kA].store(static_cast<uint64_t>(frame.intended_frame_time.ToNanoseconds()),
                       kRelaxed);
  // The monitor's nanoseconds: no absl::Duration conversion.
  slot.words[kB].store(PackNsAsMicros(frame.phase_ns[0], frame.phase_ns[1]), kRelaxed);
  slot.words[kC].store(PackNsAsMicros(frame.phase_ns[2], frame.phase_ns[3]), kRelaxed);

  slot.words[kD].store(static_cast<uint64_t>(frame.frame_number), kRelaxed);
  slot.version.store(version, std::memory_order_release);
  head_.store(n + 1, std::memory_order_release);
}

bool Timeline::ReadSlot(uint64_t number, TimelineEvent* out) const {
  const Slot& slot = slots_[number & mask_];
  const uint64_t v1 = slot.version.load(std::memory_order_acquire);
  if ((v1 & kStateWriting) != 0 || (v1 >> 2) != number + 1) return false;
  std::array<uint64_t, 7> w;
  for (size_t i = 0; i < w.size(); ++i) w[i] = slot.words[i].load(kRelaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (slot.version.load(kRelaxed) != v1) return false;

  *out = TimelineEvent();
  out->number = number;
  out->kind = static_cast<TimelineEvent::Kind>(w[kMeta] & 0xff);
  if (out->kind != TimelineEvent::Kind::kFrame) return false;
  out->begin = TimeTicks::FromNanoseconds(static_cast<int64_t>(w[kBegin]));
  if (w[kEnd] != 0) out->end = TimeTicks::FromNanoseconds(static_cast<int64_t>(w[kEnd]));
  out->intended_vsync = TimeTicks::FromNanoseconds(static_cast<int64_t>(w[kA]));
  out->dropped_frames = static_cast<int64_t>(w[kMeta] >> 32);
  out->phases = {LowMicros(w[kB]), HighMicros(w[kB]), LowMicros(w[kC]), HighMicros(w[kC])};
  out->frame_number = static_cast<int64_t>(w[kD]);
  return true;
}

namespace {

// Adds `e` to `snapshot` unless it was written after the snapshot's instant.
// False, with `reached_window_start` set, for an event that ended before the
// window: the older ones did too (events are written in begin order, and a
// dispatch ends before the next begins; so does a frame, which is one of them).
bool KeepEvent(const TimelineEvent& e, TimelineSnapshot& snapshot, bool* reached_window_start) {
  if (e.begin > snapshot.end) return true;
  if (e.finished() && e.end < snapshot.begin) {
    *reached_window_start = true;
    return false;
  }
  snapshot.events.push_back(e);
  return true;
}

// The heartbeat's dispatch records, newest first, into `snapshot`. True when
// the ring no longer holds the window's start.
bool ReadDispatches(const DispatchHeartbeat& dispatches, TimelineSnapshot& snapshot) {
  const uint64_t head = dispatches.dispatch_number();
  const uint64_t kept = dispatches.capacity();
  const uint64_t oldest = head > kept ? head - kept : 0;  // Dispatches before #oldest+1 are gone.
  bool reached_window_start = false;
  for (uint64_t n = head; n > oldest; --n) {
    DispatchHeartbeat::Record r;
    if (!dispatches.ReadRecord(n, &r)) {
      ++snapshot.lost;  // Overwritten (or being rewritten) while we read.
      continue;
    }
    TimelineEvent e;
    e.kind = TimelineEvent::Kind::kDispatch;
    e.number = n;
    e.begin = r.begin;
    if (r.ended) e.end = r.end;
    e.target_name = r.target_name;
    e.function = r.function;
    e.file = r.file;
    e.line = r.function != nullptr ? r.line : 0;
    e.has_callback = r.has_callback;
    e.label = r.label;
    e.method_mark = r.method_mark;
    if (!KeepEvent(e, snapshot, &reached_window_start)) break;
  }
  return !reached_window_start && oldest > 0;
}

// The method records from the first dispatch in the window that carries a
// mark to now.
void CopyMethodRecords(const MethodTracer& tracer, TimelineSnapshot& snapshot) {
  for (const TimelineEvent& e : snapshot.events) {
    if (e.kind == TimelineEvent::Kind::kDispatch && e.method_mark != 0) {
      snapshot.method_records = tracer.Copy(e.method_mark, tracer.Mark());
      snapshot.has_method_records = true;
      return;
    }
  }
}

}  // namespace

TimelineSnapshot Timeline::Snapshot(TimeTicks now, absl::Duration window,
                                    TimeTicks detected_at) const {
  TimelineSnapshot snapshot;
  snapshot.end = now;
  snapshot.begin = now - window;
  snapshot.detected_at = detected_at;
  // Each ring newest first, until an event ends before the window; then
  // both, oldest first.
  bool wrapped = false;
  if (options_.dispatches != nullptr) wrapped = ReadDispatches(*options_.dispatches, snapshot);
  const uint64_t head = head_.load(std::memory_order_acquire);
  const uint64_t oldest = head > mask_ + 1 ? head - (mask_ + 1) : 0;
  bool reached_window_start = false;
  for (uint64_t n = head; n > oldest;) {
    --n;
    TimelineEvent e;
    if (!ReadSlot(n, &e)) {
      ++snapshot.lost;
      continue;
    }
    if (!KeepEvent(e, snapshot, &reached_window_start)) break;
  }
  snapshot.ring_wrapped = wrapped || (!reached_window_start && oldest > 0);
  // Oldest first; a frame after the dispatch that drew it.
  std::sort(snapshot.events.begin(), snapshot.events.end(),
            [](const TimelineEvent& a, const TimelineEvent& b) {
              if (a.begin != b.begin) return a.begin < b.begin;
              if (a.kind != b.kind) return a.kind == TimelineEvent::Kind::kDispatch;
              return a.number < b.number;
            });
  if (options_.method_tracer != nullptr) CopyMethodRecords(*options_.method_tracer, snapshot);
  return snapshot;
}

namespace {

// As Issue::ToJson() writes it.
size_t JsonSize(const proto::Timeline& timeline) { return ProtoToJson(timeline).size(); }

// A cheap estimate of JsonSize(): every field of a slice is printed, so a
// slice's JSON is a fixed part plus its strings. Confirmed with JsonSize()
// before it is relied on.
size_t EstimateJsonSize(const proto::Timeline& t) {
  static const size_t kSliceFixed =
      ProtoToJson(proto::TimelineSlice()).size() + 1;  // And the comma.
  size_t n = 512 + t.detected_by().size() + t.thread_name().size();
  for (const auto* track : {&t.dispatches(), &t.frames(), &t.idle(), &t.calls()}) {
    for (const proto::TimelineSlice& s : *track) {
      n += kSliceFixed + s.name().size() + s.target().size() + s.callback().size();
    }
  }
  return n;
}

int64_t EndUs(const proto::TimelineSlice& s) { return s.ts_us() + std::max<int64_t>(s.dur_us(), 0); }
// The time the slice's own events ran (an aggregate's busy_us).
int64_t BusyUs(const proto::TimelineSlice& s) { return s.count() > 0 ? s.busy_us() : s.dur_us(); }
int64_t CountOf(const proto::TimelineSlice& s) { return s.count() > 0 ? s.count() : 1; }

// Merges runs of consecutive short slices of `slices` (in begin order; calls
// in call order, nested calls after their caller at a greater depth) into
// aggregates named "<n> <noun>". With `boundaries` (sorted begins and ends of
// the dispatches), a run never crosses one: calls in a dispatch merge with
// calls of that dispatch only, and the loop's own calls between dispatches
// with each other. Returns whether anything was merged.
bool MergeShortSlices(google::protobuf::RepeatedPtrField<proto::TimelineSlice>* slices,
                      int64_t under_us, const char* noun,
                      const std::vector<int64_t>* boundaries = nullptr) {
  auto segment = [&](const proto::TimelineSlice& s) -> size_t {
    if (boundaries == nullptr) return 0;
    return static_cast<size_t>(
        std::upper_bound(boundaries->begin(), boundaries->end(), s.ts_us()) -
        boundaries->begin());
  };
  auto is_short = [&](const proto::TimelineSlice& s) {
    return !s.unfinished() && s.dur_us() < under_us;
  };
  google::protobuf::RepeatedPtrField<proto::TimelineSlice> merged;
  bool changed = false;
  int i = 0;
  const int n = slices->size();
  while (i < n) {
    const proto::TimelineSlice& first = slices->Get(i);
    if (!is_short(first)) {
      *merged.Add() = first;
      ++i;
      continue;
    }
    // The run: short events at first's depth, with whatever is nested in them.
    const int depth = first.depth();
    const size_t first_segment = segment(first);
    int end = i + 1;
    int own = 1;
    while (end < n) {
      const proto::TimelineSlice& next = slices->Get(end);
      if (next.depth() < depth) break;
      if (next.depth() == depth) {
        if (!is_short(next) || segment(next) != first_segment) break;
        ++own;
      }
      ++end;
    }
    if (end - i == 1 && first.count() > 0) {  // Already an aggregate, alone.
      *merged.Add() = first;
      ++i;
      continue;
    }
    if (own == 1 && end - i == 1) {  // A lone short event stays itself.
      *merged.Add() = first;
      ++i;
      continue;
    }
    proto::TimelineSlice aggregate;
    int64_t count = 0;
    int64_t busy = 0;
    int64_t dropped = 0;
    int64_t last_end = first.ts_us();
    for (int k = i; k < end; ++k) {
      const proto::TimelineSlice& s = slices->Get(k);
      count += CountOf(s);
      last_end = std::max(last_end, EndUs(s));
      if (s.depth() == depth) {
        busy += BusyUs(s);
        dropped += s.dropped_frames();
      }
    }
    aggregate.set_name(absl::StrCat(count, " ", noun));
    aggregate.set_ts_us(first.ts_us());
    aggregate.set_dur_us(last_end - first.ts_us());
    aggregate.set_depth(depth);
    aggregate.set_count(count);
    aggregate.set_busy_us(busy);
    if (dropped != 0) aggregate.set_dropped_frames(dropped);
    *merged.Add() = std::move(aggregate);
    changed = true;
    i = end;
  }
  if (changed) slices->Swap(&merged);
  return changed;
}

// Drops idle gaps that lie inside an aggregated dispatch's span.
void DropIdleInsideAggregates(proto::Timeline* t) {
  google::protobuf::RepeatedPtrField<proto::TimelineSlice> kept;
  int d = 0;
  for (const proto::TimelineSlice& idle : t->idle()) {
    while (d < t->dispatches_size() && EndUs(t->dispatches(d)) <= idle.ts_us()) ++d;
    bool inside = false;
    for (int k = std::max(d - 1, 0); k < t->dispatches_size(); ++k) {
      const proto::TimelineSlice& a = t->dispatches(k);
      if (a.ts_us() > idle.ts_us()) break;
      if (a.count() > 0 && a.ts_us() <= idle.ts_us() && EndUs(idle) <= EndUs(a)) inside = true;
    }
    if (!inside) *kept.Add() = idle;
  }
  t->mutable_idle()->Swap(&kept);
}

}  // namespace

void FitTimelineToBudget(proto::Timeline* t, size_t max_json_bytes) {
  if (max_json_bytes == 0) return;
  // Serializing a few MB of JSON costs far more than merging: estimate, and
  // serialize only when the estimate says it fits.
  auto fits = [&] {
    return EstimateJsonSize(*t) <= max_json_bytes && JsonSize(*t) <= max_json_bytes;
  };
  if (fits()) return;
  const int64_t window = std::max<int64_t>(t->window_us(), 1);
  for (int64_t under_us = 1000;; under_us *= 2) {
    MergeShortSlices(t->mutable_dispatches(), under_us, "dispatches");
    MergeShortSlices(t->mutable_frames(), under_us, "frames");
    std::vector<int64_t> boundaries;
    boundaries.reserve(2 * static_cast<size_t>(t->dispatches_size()));
    for (const proto::TimelineSlice& d : t->dispatches()) {
      boundaries.push_back(d.ts_us());
      boundaries.push_back(EndUs(d));
    }
    std::sort(boundaries.begin(), boundaries.end());
    MergeShortSlices(t->mutable_calls(), under_us, "calls", &boundaries);
    DropIdleInsideAggregates(t);
    t->set_aggregated_under_us(under_us);
    if (fits()) return;
    if (under_us > 2 * window) break;  // Everything mergeable is merged.
  }
  if (t->calls_size() > 0) {
    t->clear_calls();
    t->set_calls_truncated(true);
    if (JsonSize(*t) <= max_json_bytes) return;
  }
  // Oldest first, a quarter of what is left at a time.
  while (JsonSize(*t) > max_json_bytes &&
         (t->dispatches_size() > 0 || t->frames_size() > 0 || t->idle_size() > 0)) {
    int64_t dropped = 0;
    for (auto* track : {t->mutable_dispatches(), t->mutable_frames(), t->mutable_idle()}) {
      const int n = track->size() <= 1 ? track->size() : (track->size() + 3) / 4;
      for (int k = 0; k < n; ++k) dropped += CountOf(track->Get(k));
      track->DeleteSubrange(0, n);
    }
    t->set_budget_dropped_events(t->budget_dropped_events() + dropped);
  }
}

TimelineSnapshot TimelineAttachment::Snapshot(TimeTicks now, TimeTicks detected_at,
                                              absl::Duration span) const {
  const absl::Duration covered = std::max(now - detected_at, absl::ZeroDuration()) +
                                 std::max(span, absl::ZeroDuration()) + window;
  return timeline->Snapshot(now, covered, detected_at);
}

proto::Timeline* TimelineAttachment::Fill(const TimelineSnapshot& snapshot,
                                          const std::string& detected_by, int tid,
                                          proto::Issue* issue) const {
  proto::Timeline* out = issue->mutable_timeline();
  FillTimeline(snapshot, detected_by, out, kDefaultMaxCalls, max_bytes);
  out->set_tid(tid);
  return out;
}

proto::Timeline* TimelineAttachment::Attach(const UIThreadMonitor& monitor, TimeTicks detected_at,
                                            absl::Duration span, const std::string& detected_by,
                                            proto::Issue* issue) const {
  if (!enabled()) return nullptr;
  const TimeTicks now = std::max(monitor.clock()->NowTicks(), detected_at);
  return Fill(Snapshot(now, detected_at, span), detected_by, monitor.looper_thread().tid(), issue);
}

namespace {

// Microseconds since the window's start; a time before it counts as its start.
class WindowMicros {
 public:
  explicit WindowMicros(TimeTicks origin) : origin_(origin) {}
  int64_t At(TimeTicks t) const {
    return absl::ToInt64Microseconds(std::max(t, origin_) - origin_);
  }
  // A difference of floored times, so that a span inside another stays
  // inside it in microseconds.
  int64_t Span(TimeTicks a, TimeTicks b) const { return At(b) - At(a); }

 private:
  const TimeTicks origin_;
};

void AddIdle(TimeTicks from, TimeTicks to, const WindowMicros& us, proto::Timeline* out) {
  proto::TimelineSlice* idle = out->add_idle();
  idle->set_name("idle");
  idle->set_ts_us(us.At(from));
  idle->set_dur_us(us.Span(from, to));
}

void AddDispatch(const TimelineEvent& e, TimeTicks end, TimeTicks snapshot_end,
                 const WindowMicros& us, proto::Timeline* out) {
  proto::TimelineSlice* d = out->add_dispatches();
  d->set_name(e.DispatchName());
  d->set_ts_us(us.At(e.begin));
  d->set_dur_us(us.Span(e.begin, end));
  d->set_unfinished(!e.finished() || e.end > snapshot_end);
  if (e.target_name != nullptr) d->set_target(*e.target_name);
  if (e.label != nullptr) {
    d->set_callback(e.label);
  } else if (e.function != nullptr) {
    d->set_callback(e.has_callback ? e.DispatchName() : "null");
  }
}

void AddFrame(const TimelineEvent& e, TimeTicks end, const WindowMicros& us, proto::Timeline* out) {
  proto::TimelineSlice* f = out->add_frames();
  f->set_name(absl::StrCat("frame ", e.frame_number));
  f->set_ts_us(us.At(e.begin));
  f->set_dur_us(us.Span(e.begin, end));
  f->set_frame_number(e.frame_number);
  f->set_dropped_frames(e.dropped_frames);
  f->set_intended_vsync_us(us.At(e.intended_vsync));
  f->set_input_us(absl::ToInt64Microseconds(e.phases[0]));
  f->set_animation_us(absl::ToInt64Microseconds(e.phases[1]));
  f->set_traversal_us(absl::ToInt64Microseconds(e.phases[2]));
  f->set_commit_us(absl::ToInt64Microseconds(e.phases[3]));
}

// The dispatches, the idle gaps between them (and after the last) and the
// frames.
void AddDispatchesAndFrames(const TimelineSnapshot& snapshot, TimeTicks origin,
                            const WindowMicros& us, proto::Timeline* out) {
  TimeTicks last_dispatch_end;
  auto idle_before = [&](TimeTicks t) {
    return !last_dispatch_end.is_null() && t - last_dispatch_end >= kMinIdleGap &&
           last_dispatch_end >= origin;
  };
  for (const TimelineEvent& e : snapshot.events) {
    const TimeTicks end = e.finished() ? std::min(e.end, snapshot.end) : snapshot.end;
    if (e.kind != TimelineEvent::Kind::kDispatch) {
      AddFrame(e, end, us, out);
      continue;
    }
    if (idle_before(e.begin)) AddIdle(last_dispatch_end, e.begin, us, out);
    last_dispatch_end = e.finished() ? e.end : TimeTicks();
    AddDispatch(e, end, snapshot.end, us, out);
  }
  // The trailing gap: idle since the last dispatch ended.
  if (idle_before(snapshot.end)) AddIdle(last_dispatch_end, snapshot.end, us, out);
}

// The method-traced calls, on depths below the dispatches (which have their
// own track).
void AddCalls(const TimelineSnapshot& snapshot, TimeTicks origin, size_t max_calls,
              const WindowMicros& us, proto::Timeline* out) {
  CallTree::Options options;
  options.end_time = snapshot.end;
  options.merge = false;
  options.trim_to = max_calls;
  CallTree tree = CallTree::Build(snapshot.method_records.records, options);
  tree.ResolveNames([](uintptr_t address) { return Symbolizer::Get()->FunctionName(address); });
  bool trimmed = false;
  for (const CallNode& n : tree.nodes()) trimmed = trimmed || n.trimmed_descendants > 0;
  out->set_calls_truncated(snapshot.method_records.truncated() || trimmed);
  std::vector<int> depth(tree.nodes().size(), 0);
  for (size_t i = 0; i < tree.nodes().size(); ++i) {
    const CallNode& n = tree.nodes()[i];
    const int parent_depth = n.parent >= 0 ? depth[static_cast<size_t>(n.parent)] : -1;
    const bool dispatch = n.kind == MethodKind::kDispatch;
    depth[i] = dispatch ? parent_depth : parent_depth + 1;
    if (dispatch) continue;
    if (n.end < origin || n.start > snapshot.end) continue;
    proto::TimelineSlice* c = out->add_calls();
    c->set_name(n.name.empty() ? absl::StrCat("0x", absl::Hex(n.address)) : n.name);
    c->set_ts_us(us.At(n.start));
    c->set_dur_us(us.Span(n.start, std::min(n.end, snapshot.end)));
    c->set_depth(std::max(depth[i], 0));
    c->set_unfinished(n.running);
    if (n.count > 1) {
      // Repeats folded while the tree was built (it was full): an
      // aggregate, like the budget's, over the span of its calls.
      c->set_count(n.count);
      c->set_busy_us(absl::ToInt64Microseconds(n.cost));
    }
  }
}

}  // namespace

void FillTimeline(const TimelineSnapshot& snapshot, const std::string& detected_by,
                  proto::Timeline* out, size_t max_calls, size_t max_json_bytes) {
  const TimeTicks origin = snapshot.begin;
  const WindowMicros us(origin);
  out->set_start_ns(origin.ToNanoseconds());
  out->set_window_us(absl::ToInt64Microseconds(snapshot.end - origin));
  out->set_detected_at_us(us.At(snapshot.detected_at));
  out->set_detected_by(detected_by);
  out->set_lost_events(static_cast<int64_t>(snapshot.lost));
  out->set_ring_wrapped(snapshot.ring_wrapped);
  AddDispatchesAndFrames(snapshot, origin, us, out);
  if (snapshot.has_method_records) AddCalls(snapshot, origin, max_calls, us, out);
  FitTimelineToBudget(out, max_json_bytes);
}

}  // namespace matrix

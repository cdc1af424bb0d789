#include "matrix/trace/startup_tracer.h"

#include <algorithm>
#include <atomic>

#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "absl/strings/str_cat.h"
#include "matrix/trace/call_tree.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/report_context.h"
#include "matrix/trace/symbolizer.h"

namespace matrix {
namespace {

// When matrix-cpp's static initialisers ran: just before main().
const TimeTicks g_load_time = MonotonicNow();

std::atomic<int64_t> g_create_begin_ns{0};
std::atomic<int64_t> g_create_end_ns{0};
std::atomic<uint64_t> g_create_begin_mark{0};
std::atomic<int64_t> g_create_begin_mark_time_ns{0};
std::atomic<bool> g_create_begin_traced{false};

void SetOnce(std::atomic<int64_t>& slot, TimeTicks at) {
  int64_t expected = 0;
  slot.compare_exchange_strong(expected, at.ToNanoseconds());
}

}  // namespace

void MarkApplicationCreateBeginAt(TimeTicks at) {
  int64_t expected = 0;
  if (!g_create_begin_ns.compare_exchange_strong(expected, at.ToNanoseconds())) return;
  if (MethodTracer* tracer = MethodTracer::Current()) {
    // The cached time first: records after the mark are stamped with it or
    // later (see CopyFromMark()).
    g_create_begin_mark_time_ns.store(tracer->CachedTime().ToNanoseconds());
    g_create_begin_mark.store(tracer->Mark());
    g_create_begin_traced.store(true);
  }
}
void MarkApplicationCreateEndAt(TimeTicks at) { SetOnce(g_create_end_ns, at); }
void MarkApplicationCreateBegin() { MarkApplicationCreateBeginAt(MonotonicNow()); }
void MarkApplicationCreateEnd() { MarkApplicationCreateEndAt(MonotonicNow()); }

void ResetStartupMarksForTesting() {
  g_create_begin_ns.store(0);
  g_create_end_ns.store(0);
  g_create_begin_mark.store(0);
  g_create_begin_mark_time_ns.store(0);
  g_create_begin_traced.store(false);
}

namespace {

// The records from a mark on. A mark is any record index, and the records
// after it carry only the low bits of their time until the writer's next
// time record (method_record.h): without the time the tracer stamped them
// with, the calls in the first epoch (up to 16.78 ms) of the copy would be
// dropped as untimed. So the copy starts with a time record carrying the
// tracer's cached time read just before the mark.
RecordCopy CopyFromMark(const MethodTracer& tracer, uint64_t mark, TimeTicks mark_time,
                        uint64_t end) {
  RecordCopy copy = tracer.Copy(mark, end);
  if (!copy.truncated() && !mark_time.is_null()) {
    copy.records.insert(copy.records.begin(), MakeTimeRecord(mark_time));
  }
  return copy;
}

}  // namespace

// One startup, handed to the worker.
struct StartupTracer::Startup {
  bool warm = false;
  TimeTicks begin;  // Process start (cold) or scene creation (warm).
  TimeTicks end;
  TimeTicks create_begin;
  TimeTicks create_end;
  std::string create_source;
  TimeTicks first_scene_created;
  TimeTicks first_scene_shown;
  SceneId first_scene = AppState::kDefaultScene;
  std::vector<SceneId> scenes;
  bool traced = false;
  uint64_t mark_begin = 0;
  TimeTicks mark_begin_time;  // The tracer's cached time at mark_begin.
  uint64_t mark_end = 0;
};

StartupTracer::StartupTracer(Options options)
    : Tracer(kDoFrame | kDispatchEnd), options_(std::move(options)) {
  // DispatchEnd() matters only while a shown scene waits (see SetShownPending()).
  set_dispatch_end_floor_ns(kNoDispatchEnd);
  MATRIX_CHECK(options_.env.monitor != nullptr, "StartupTracer needs a UIThreadMonitor");
  MATRIX_CHECK(options_.env.worker_looper != nullptr, "StartupTracer needs a worker looper");
  worker_handler_ = std::make_unique<Handler>(options_.env.worker_looper, "matrix::StartupTracer");
  if (options_.looper != nullptr) {
    looper_handler_ = std::make_unique<Handler>(options_.looper, "matrix::StartupTracer$Events");
  }
  if (options_.process_start) {
    process_start_ = *options_.process_start;
  } else if (auto start = ProcReader().ReadProcessStartTime(); start.ok()) {
    process_start_ = *start;
  } else {
    process_start_ = g_load_time;
  }
  for (const std::string& scene : options_.splash_scenes) {
    splash_ids_.push_back(options_.env.app_state->InternScene(scene));
  }
}

StartupTracer::~StartupTracer() {
  OnCloseTrace();
  looper_handler_.reset();
  worker_handler_.reset();
}

void StartupTracer::OnAlive() {
  monitor_registration_ = options_.env.monitor->AddObserver(this);
  app_state_registration_ = options_.env.app_state->AddObserver(this);
  live_scenes_ = options_.env.app_state->live_scene_count();
}

void StartupTracer::OnDead() {
  monitor_registration_.Reset();
  app_state_registration_.Reset();
}

bool StartupTracer::IsSplash(SceneId scene) const {
  return std::find(splash_ids_.begin(), splash_ids_.end(), scene) != splash_ids_.end();
}

// AppState events arrive on the thread that reported them; the tracer's state
// lives on the looper thread.
#define MATRIX_ON_LOOPER_THREAD(call)                                          \
  if (looper_handler_ != nullptr && !options_.looper->IsCurrentThread()) {     \
    looper_handler_->Post([this, scene] { call; });                            \
    return;                                                                     \
  }

void StartupTracer::OnSceneCreated(SceneId scene) {
  MATRIX_ON_LOOPER_THREAD(OnSceneCreated(scene));
  const TimeTicks now = options_.env.monitor->clock()->NowTicks();
  if (first_scene_created_.is_null()) first_scene_created_ = now;
  if (cold_done_ && live_scenes_ == 0 && !warm_pending_) {
    // Every scene had gone away: this is a warm start.
    warm_pending_ = true;
    warm_begin_ = now;
    if (MethodTracer* tracer = options_.env.monitor->method_tracer()) {
      warm_mark_time_ = tracer->CachedTime();
      warm_mark_ = tracer->Mark();
    }
  }
  ++live_scenes_;
}

void StartupTracer::OnSceneShown(SceneId scene) {
  MATRIX_ON_LOOPER_THREAD(OnSceneShown(scene));
  if (!WaitsForFrame() && !options_.env.monitor->in_dispatch()) {
    OnShownDrawn(scene, options_.env.monitor->clock()->NowTicks());
    return;
  }
  SetShownPending(scene);
}

void StartupTracer::SetShownPending(std::optional<SceneId> scene) {
  shown_pending_ = scene;
  set_dispatch_end_floor_ns(scene.has_value() ? 0 : kNoDispatchEnd);
}

void StartupTracer::OnSceneDestroyed(SceneId scene) {
  MATRIX_ON_LOOPER_THREAD(OnSceneDestroyed(scene));
  live_scenes_ = std::max(live_scenes_ - 1, 0);
}

#undef MATRIX_ON_LOOPER_THREAD

void StartupTracer::DoFrame(const FrameData& frame) {
  if (frame.is_vsync_frame && shown_pending_) {
    const SceneId scene = *shown_pending_;
    SetShownPending(std::nullopt);
    OnShownDrawn(scene, frame.shown());
  }
}

void StartupTracer::DispatchEnd(const DispatchData& dispatch) {
  if (!WaitsForFrame() && shown_pending_) {
    const SceneId scene = *shown_pending_;
    SetShownPending(std::nullopt);
    OnShownDrawn(scene, dispatch.end);
  }
}

void StartupTracer::OnShownDrawn(SceneId scene, TimeTicks at) {
  MethodTracer* tracer = options_.env.monitor->method_tracer();
  if (!cold_done_) {
    if (first_scene_shown_.is_null()) {
      first_scene_shown_ = at;
      first_scene_ = scene;
    }
    cold_scenes_.push_back(scene);
    if (IsSplash(scene)) {
      splash_shown_ = true;  // The startup goes on until a real scene shows.
      return;
    }
    cold_done_ = true;
    auto startup = std::make_shared<Startup>();
    startup->begin = process_start_;
    startup->end = at;
    const int64_t begin_ns = g_create_begin_ns.load();
    const int64_t end_ns = g_create_end_ns.load();
    startup->create_begin = begin_ns != 0 ? TimeTicks::FromNanoseconds(begin_ns) : TimeTicks();
    if (end_ns != 0) {
      startup->create_end = TimeTicks::FromNanoseconds(end_ns);
      startup->create_source = "marks";
    } else {
      const TimeTicks first_dispatch = options_.env.monitor->first_dispatch_begin();
      startup->create_end = !first_dispatch.is_null() ? first_dispatch : at;
      startup->create_source = "first_dispatch";
    }
    startup->first_scene_created = first_scene_created_;
    startup->first_scene_shown = first_scene_shown_;
    startup->first_scene = first_scene_;
    startup->scenes = cold_scenes_;
    if (tracer != nullptr) {
      startup->traced = true;
      if (g_create_begin_traced.load()) {
        startup->mark_begin = g_create_begin_mark.load();
        startup->mark_begin_time =
            TimeTicks::FromNanoseconds(g_create_begin_mark_time_ns.load());
      }
      startup->mark_end = tracer->Mark();
    }
    Finish(std::move(startup));
    return;
  }
  if (warm_pending_) {
    warm_pending_ = false;
    ++warm_count_;
    auto startup = std::make_shared<Startup>();
    startup->warm = true;
    startup->begin = warm_begin_;
    startup->end = at;
    startup->first_scene_created = warm_begin_;
    startup->first_scene_shown = at;
    startup->first_scene = scene;
    startup->scenes = {scene};
    if (tracer != nullptr) {
      startup->traced = true;
      startup->mark_begin = warm_mark_;
      startup->mark_begin_time = warm_mark_time_;
      startup->mark_end = tracer->Mark();
    }
    Finish(std::move(startup));
  }
}

void StartupTracer::Finish(std::shared_ptr<Startup> startup) {
  worker_handler_->Post([this, startup] { Analyze(*startup); });
}

void StartupTracer::Analyze(const Startup& s) {
  auto ms_since = [](TimeTicks from, TimeTicks to) {
    return from.is_null() || to.is_null() ? 0.0 : absl::ToDoubleMilliseconds(to - from);
  };
  const absl::Duration cost = s.end - s.begin;
  proto::StartupReport report;
  report.set_is_warm_start_up(s.warm);
  report.set_startup_duration_ms(absl::ToDoubleMilliseconds(cost));
  report.set_first_scene(std::string(options_.env.app_state->SceneName(s.first_scene)));
  for (SceneId scene : s.scenes) {
    report.add_scenes(std::string(options_.env.app_state->SceneName(scene)));
  }
  if (!s.warm) {
    report.set_before_main_ms(ms_since(s.begin, g_load_time));
    report.set_application_create_begin_ms(ms_since(s.begin, s.create_begin));
    report.set_application_create_ms(ms_since(s.begin, s.create_end));
    report.set_application_create_scene(s.create_source);
    report.set_first_scene_created_ms(ms_since(s.begin, s.first_scene_created));
    report.set_first_scene_create_ms(ms_since(s.begin, s.first_scene_shown));
  } else {
    report.set_first_scene_created_ms(0);
    report.set_first_scene_create_ms(absl::ToDoubleMilliseconds(cost));
  }

  Issue issue;
  issue.mutable_proto()->set_tag(kTagStartup);
  // Keyed by the scene that ended the startup (after any splash scenes), so
  // cold starts of an app with a splash screen do not all share its key.
  const std::string end_scene = report.scenes().empty()
                                    ? report.first_scene()
                                    : report.scenes(report.scenes_size() - 1);
  issue.mutable_proto()->set_key(absl::StrCat(s.warm ? "warm:" : "cold:", end_scene));
  *issue.mutable_proto()->mutable_startup() = report;
  if (options_.env.report) options_.env.report(issue);

  const absl::Duration threshold = s.warm ? options_.warm_threshold : options_.cold_threshold;
  if (cost <= threshold) return;  // Matrix: strictly over the threshold.
  proto::EvilMethodReport evil;
  evil.set_detail(proto::STARTUP);
  evil.set_sub_type(s.warm ? 2 : 1);
  evil.set_cost_ms(absl::ToDoubleMilliseconds(cost));
  evil.set_scene(report.first_scene());
  evil.set_cpu_usage(-1);
  std::string key;
  if (MethodTracer* tracer = options_.env.monitor->method_tracer(); tracer != nullptr && s.traced) {
    RecordCopy copy = CopyFromMark(*tracer, s.mark_begin, s.mark_begin_time, s.mark_end);
    TracedCallTree traced = BuildCallTree(copy.records, s.end, cost);
    key = std::move(traced.key);
    FillCallTree(traced.tree, evil.mutable_stack(), evil.mutable_stack_text());
    evil.set_stack_truncated(copy.truncated());
  }
  if (key.empty()) key = s.warm ? "warm_startup" : "cold_startup";
  evil.set_stack_key(key);
  Issue slow;
  slow.mutable_proto()->set_tag(kTagEvilMethod);
  slow.mutable_proto()->set_key(key);
  *slow.mutable_proto()->mutable_evil_method() = std::move(evil);
  if (options_.env.report) options_.env.report(std::move(slow));
}

}  // namespace matrix

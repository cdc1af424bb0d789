#include "matrix/plugins/block_canary_plugin.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "matrix/core/app_state.h"
#include "matrix/core/handler.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/trace/dispatch_heartbeat.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/report_context.h"
#include "matrix/trace/stopped_time.h"
#include "internal/block_canary_block.h"

namespace matrix {
namespace {

// How long a TracerPid reading is trusted while a dispatch runs.
constexpr absl::Duration kDebuggerCheckInterval = absl::Seconds(1);
// Block ends the looper thread can publish before the watchdog reads them.
constexpr size_t kEndSlots = 8;

// The text for the dispatched message, as Android's Printer line when the
// source gave one.
std::string DescribeMessage(const DispatchHeartbeat::Snapshot& s) {
  if (!s.log_line.empty()) return s.log_line;
  if (s.target_name != nullptr || s.posted_from.has_source_info()) {
    const std::string target = s.target_name != nullptr ? s.TargetString() : "null";
    return absl::StrCat(">>>>> Dispatching to ", target, " ",
                        s.has_callback && s.posted_from.has_source_info()
                            ? s.posted_from.ToString()
                            : std::string(s.has_callback ? "callback" : "null"),
                        ": ", s.what);
  }
  if (s.label != nullptr) return s.label;
  return "";
}

}  // namespace

// What the looper thread publishes: the heartbeat (begin and end of every
// dispatch) and, for dispatches longer than the threshold only, an end
// record with the looper thread's CPU clock at the end.
class BlockCanaryPlugin::Monitor : public LooperDispatchListener {
 public:
  struct EndRecord {
    uint64_t number = 0;
    TimeTicks begin;
    TimeTicks end;
    absl::Duration thread_cpu;
  };

  Monitor(const TickClock* clock, absl::Duration threshold)
      : clock_(clock), threshold_(threshold) {}

  // Before the monitor is listening (looper thread) or sampled (watchdog):
  // publication happens through the posts that start both.
  void set_thread(ThreadHandle thread) { thread_ = thread; }
  const ThreadHandle& thread() const { return thread_; }
  const DispatchHeartbeat& heartbeat() const { return heartbeat_; }

  // Looper thread, every message: a handful of relaxed stores.
  void OnDispatchBegin(TimeTicks begin, const DispatchInfo& info) override {
    heartbeat_.Begin(begin, info);
  }
  void OnDispatchEnd(TimeTicks begin, TimeTicks end) override {
    if (end - begin > threshold_) {
      // A block (rare): its end record goes out before the heartbeat says
      // the dispatch ended, so a watchdog that sees the end sees the record.
      const absl::Duration cpu = clock_->ThreadCpuTime(thread_);
      const uint64_t n = published_.load(std::memory_order_relaxed);
      EndSlot& slot = slots_[n % kEndSlots];
      slot.number.store(heartbeat_.dispatch_number(), std::memory_order_relaxed);
      slot.begin_ns.store(begin.ToNanoseconds(), std::memory_order_relaxed);
      slot.end_ns.store(end.ToNanoseconds(), std::memory_order_relaxed);
      slot.cpu_ns.store(absl::ToInt64Nanoseconds(cpu), std::memory_order_relaxed);
      published_.store(n + 1, std::memory_order_release);
    }
    heartbeat_.End(end);
  }

  // Watchdog thread: the records published since `*next`, oldest first.
  // Returns how many were overwritten before they could be read.
  int64_t ReadEnds(uint64_t* next, std::vector<EndRecord>* out) const {
    const uint64_t published = published_.load(std::memory_order_acquire);
    uint64_t from = *next;
    int64_t lost = 0;
    if (published - from > kEndSlots) {
      lost += static_cast<int64_t>(published - kEndSlots - from);
      from = published - kEndSlots;
    }
    const size_t first = out->size();
    for (uint64_t k = from; k < published; ++k) {
      const EndSlot& slot = slots_[k % kEndSlots];
      EndRecord r;
      r.number = slot.number.load(std::memory_order_relaxed);
      r.begin = TimeTicks::FromNanoseconds(slot.begin_ns.load(std::memory_order_relaxed));
      r.end = TimeTicks::FromNanoseconds(slot.end_ns.load(std::memory_order_relaxed));
      r.thread_cpu = absl::Nanoseconds(slot.cpu_ns.load(std::memory_order_relaxed));
      out->push_back(r);
    }
    // Records the writer may have overwritten while we read are dropped.
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t now_published = published_.load(std::memory_order_relaxed);
    if (now_published > kEndSlots) {
      const uint64_t safe_from = now_published - kEndSlots;
      size_t keep = first;
      for (size_t i = first; i < out->size(); ++i) {
        if (from + (i - first) >= safe_from) (*out)[keep++] = (*out)[i];
      }
      lost += static_cast<int64_t>(out->size() - keep);
      out->resize(keep);
    }
    *next = published;
    return lost;
  }

 private:
  struct EndSlot {
    std::atomic<uint64_t> number{0};
    std::atomic<int64_t> begin_ns{0};
    std::atomic<int64_t> end_ns{0};
    std::atomic<int64_t> cpu_ns{0};
  };

  const TickClock* const clock_;
  const absl::Duration threshold_;
  ThreadHandle thread_;
  DispatchHeartbeat heartbeat_;
  std::array<EndSlot, kEndSlots> slots_;
  std::atomic<uint64_t> published_{0};
};


// The sampler: the matrix-watchdog looper's state. Every method runs there.
class BlockCanaryPlugin::Sampler {
 public:
  explicit Sampler(BlockCanaryPlugin* plugin)
      : plugin_(plugin),
        config_(plugin->config_),
        ring_(static_cast<size_t>(config_.max_samples_per_block())) {}

  // Starts a tick chain for `generation`; chains of older generations stop
  // at their next tick.
  void Start(uint64_t generation) {
    if (generation != plugin_->live_generation_.load()) return;  // Stopped since.
    started_at_ = plugin_->context().clock->NowTicks();
    scheduled_ = TimeTicks();  // The first tick runs now, on no schedule.
    // A late tick is a stop only for the time the looper thread's counters
    // do not show it waiting to run: a busy machine or a CPU quota stays in
    // the block's cost. Before the first OnWakeup() (the first tick has no
    // schedule).
    if (!has_wait_to_run_reader_ && plugin_->monitor_->thread().valid()) {
      stopped_.SetWaitToRunReader(SystemWaitToRunReader(plugin_->monitor_->thread().tid()));
      has_wait_to_run_reader_ = true;
    }
    expired_ = false;
    ResetCurrent();
    // Blocks that ended while stopped are not ours to report.
    std::vector<Monitor::EndRecord> stale;
    plugin_->monitor_->ReadEnds(&next_end_, &stale);
    Tick(generation);
  }

  // Reports the blocks that ended and were not yet seen (at Stop()), so a
  // block that ends just before the program stops monitoring is not lost.
  void Drain() {
    const DispatchHeartbeat::Snapshot s = plugin_->monitor_->heartbeat().Read();
    ConsumeEnds(plugin_->context().clock->NowTicks(), s);
    ResetCurrent();
  }

  void Tick(uint64_t generation) {
    if (generation != plugin_->live_generation_.load() || expired_) return;
    const TickClock* clock = plugin_->context().clock;
    const TimeTicks now = clock->NowTicks();
    // A tick far later than it was due saw the process stopped (SIGSTOP, a
    // breakpoint) meanwhile: first, so the blocks below leave that time out.
    if (!scheduled_.is_null() && config_.leave_out_stopped_time()) {
      stopped_.OnWakeup(scheduled_, now);
    }
    if (config_.monitor_duration() != absl::InfiniteDuration() &&
        now - started_at_ >= config_.monitor_duration()) {
      expired_ = true;
      Logger()->info("BlockCanary: monitor duration of {} is over; no more blocks reported",
                     absl::FormatDuration(config_.monitor_duration()));
      return;
    }
    // Heartbeat first: every end record published before the state it shows
    // is then visible to ConsumeEnds().
    const DispatchHeartbeat::Snapshot s = plugin_->monitor_->heartbeat().Read();
    ConsumeEnds(now, s);
    const bool active = s.active && s.dispatch_number > last_ended_;
    TimeTicks next = now + config_.dump_interval();
    if (!active) {
      ResetCurrent();
    } else {
      if (s.dispatch_number != current_.number) BeginCurrent(s);
      SampleCurrent(now, s.begin);
      const TimeTicks crossing =
          s.begin + config_.block_threshold() + stopped_.Within(s.begin, now);
      if (!current_.crossed && crossing > now) next = std::min(next, crossing);
    }
    scheduled_ = next;
    plugin_->watchdog_handler_->PostAtTime([this, generation] { Tick(generation); }, this, next);
  }

 private:
  struct Current {
    uint64_t number = 0;
    TimeTicks begin;
    std::string message;
    int64_t ticks = 0;     // Regular ticks seen during the dispatch.
    int stride = 1;        // Sample every stride-th tick.
    size_t count = 0;      // Samples in ring_.
    bool crossed = false;  // The threshold-crossing capture was taken.
    bool debugged = false;
  };

  void ResetCurrent() { current_ = Current(); }

  void BeginCurrent(const DispatchHeartbeat::Snapshot& s) {
    ResetCurrent();
    current_.number = s.dispatch_number;
    current_.begin = s.begin;
    current_.message = DescribeMessage(s);
  }

  bool DebuggerAttached(TimeTicks now, bool fresh) {
    if (fresh || !debugger_checked_ || now - debugger_checked_at_ >= kDebuggerCheckInterval) {
      absl::StatusOr<bool> attached = plugin_->proc_.IsDebuggerAttached();
      debugger_attached_ = attached.ok() && *attached;
      debugger_checked_ = true;
      debugger_checked_at_ = now;
    }
    return debugger_attached_;
  }

  void SampleCurrent(TimeTicks now, TimeTicks begin) {
    if (current_.debugged) return;
    const bool crossing = !current_.crossed &&
                          now - begin - stopped_.Within(begin, now) >= config_.block_threshold();
    if (config_.stop_when_debugging() && DebuggerAttached(now, /*fresh=*/crossing)) {
      // Signals to a traced thread stop it in the debugger: no captures.
      current_.debugged = true;
      return;
    }
    if (crossing) {
      current_.crossed = true;
      Capture(&crossing_, now);
      crossing_valid_ = true;
      crossing_number_ = current_.number;
      return;
    }
    if (current_.ticks++ % current_.stride != 0) return;
    if (current_.count == ring_.size()) Decimate();
    Capture(&ring_[current_.count++], now);
  }

  // Keeps every other sample (the first included) and halves the rate, so
  // the samples keep spanning the whole dispatch.
  void Decimate() {
    const size_t half = ring_.size() / 2;
    for (size_t i = 1; i < half; ++i) ring_[i] = ring_[2 * i];
    current_.count = half;
    current_.stride *= 2;
    // The next regular tick with ticks % stride == 0 continues the grid.
  }

  void Capture(BlockCanarySample* slot, TimeTicks now) {
    slot->at = now;
    plugin_->stats_.samples.fetch_add(1, std::memory_order_relaxed);
    const absl::Status status = plugin_->hooks_.capture(plugin_->monitor_->thread(), &slot->stack);
    slot->stack_ok = status.ok();
    // The sample stands for the instant the stack was read, which a loaded
    // machine can put milliseconds after the tick.
    if (status.ok() && slot->stack.captured_at > now) slot->at = slot->stack.captured_at;
    if (!status.ok()) {
      plugin_->stats_.capture_failures.fetch_add(1, std::memory_order_relaxed);
      slot->stack.depth = 0;
    }
    ReadCpu(slot);
  }

  void ReadCpu(BlockCanarySample* slot) {
    absl::StatusOr<SystemCpuTimes> system = plugin_->proc_.ReadSystemCpuTimes();
    absl::StatusOr<TaskStat> process = plugin_->proc_.ReadProcessStat();
    slot->cpu_ok = system.ok() && process.ok();
    if (slot->cpu_ok) {
      slot->system = *system;
      slot->process_ticks = process->utime + process->stime;
    }
    slot->thread_cpu = plugin_->context().clock->ThreadCpuTime(plugin_->monitor_->thread());
  }

  void ConsumeEnds(TimeTicks now, const DispatchHeartbeat::Snapshot& s) {
    ends_.clear();
    const int64_t lost = plugin_->monitor_->ReadEnds(&next_end_, &ends_);
    if (lost > 0) {
      plugin_->stats_.missed_ends.fetch_add(lost, std::memory_order_relaxed);
      plugin_->stats_.blocks.fetch_add(lost, std::memory_order_relaxed);
    }
    for (const Monitor::EndRecord& end : ends_) {
      last_ended_ = std::max(last_ended_, end.number);
      plugin_->stats_.blocks.fetch_add(1, std::memory_order_relaxed);
      const bool ours = current_.number == end.number;
      bool debugged = ours && current_.debugged;
      if (!debugged && config_.stop_when_debugging()) {
        debugged = DebuggerAttached(now, /*fresh=*/true);
      }
      if (debugged) {
        plugin_->stats_.debugger_suppressed.fetch_add(1, std::memory_order_relaxed);
        if (ours) ResetCurrent();
        continue;
      }
      // Held at a breakpoint or by SIGSTOP: only the time it ran counts.
      const absl::Duration stopped = stopped_.Within(end.begin, end.end);
      if (end.end - end.begin - stopped <= config_.block_threshold()) {
        plugin_->stats_.stopped_suppressed.fetch_add(1, std::memory_order_relaxed);
        if (ours) ResetCurrent();
        continue;
      }
      auto block = std::make_shared<PendingBlock>();
      block->begin = end.begin;
      block->end = end.end;
      block->stopped = stopped;
      block->thread_cpu_end = end.thread_cpu;
      if (ours) {
        block->message = current_.message;
        block->samples.reserve(current_.count + 1);
        for (size_t i = 0; i < current_.count; ++i) block->samples.push_back(ring_[i]);
        if (crossing_valid_ && crossing_number_ == end.number) {
          block->samples.push_back(crossing_);
        }
        std::stable_sort(block->samples.begin(), block->samples.end(),
                         [](const BlockCanarySample& a, const BlockCanarySample& b) {
                           return a.at < b.at;
                         });
        ResetCurrent();
      } else if (s.dispatch_number == end.number) {
        // Never seen running (its whole run fell between two ticks), but it
        // is still the last dispatch the heartbeat describes.
        block->message = DescribeMessage(s);
      }
      block->end_cpu.at = now;
      ReadCpu(&block->end_cpu);
      // Thread CPU at the end is the looper's own reading.
      block->end_cpu.thread_cpu = end.thread_cpu;
      AppState* app_state = plugin_->context().app_state != nullptr
                                ? plugin_->context().app_state
                                : AppState::Get();
      block->scene = app_state->visible_scene_id();
      block->mono_anchor = plugin_->context().clock->NowTicks();
      block->wall_anchor = plugin_->WallNow();
      plugin_->worker_handler_->Post([plugin = plugin_, block] { plugin->BuildAndReport(*block); });
    }
  }

  BlockCanaryPlugin* const plugin_;
  const BlockCanaryContext& config_;
  TimeTicks started_at_;
  TimeTicks scheduled_;  // When the pending tick was due (null: none yet).
  StoppedTime stopped_;
  bool has_wait_to_run_reader_ = false;
  bool expired_ = false;
  uint64_t next_end_ = 0;
  uint64_t last_ended_ = 0;
  std::vector<Monitor::EndRecord> ends_;
  Current current_;
  std::vector<BlockCanarySample> ring_;  // Preallocated: max_samples_per_block.
  BlockCanarySample crossing_;
  bool crossing_valid_ = false;
  uint64_t crossing_number_ = 0;
  bool debugger_checked_ = false;
  bool debugger_attached_ = false;
  TimeTicks debugger_checked_at_;
};

BlockCanaryPlugin::BlockCanaryPlugin(BlockCanaryContext context)
    : BlockCanaryPlugin(std::move(context), Hooks()) {}

BlockCanaryPlugin::BlockCanaryPlugin(BlockCanaryContext context, Hooks hooks)
    : Plugin(kTag),
      config_(std::move(context)),
      hooks_(std::move(hooks)),
      proc_(hooks_.proc_root, hooks_.pid) {
  if (!hooks_.capture) {
    const absl::Duration timeout = std::clamp(config_.dump_interval() / 2, absl::Milliseconds(20),
                                              StackCapturer::kDefaultTimeout);
    hooks_.capture = [timeout](const ThreadHandle& thread, RawStack* out) {
      return StackCapturer::Get()->Capture(thread, out, timeout);
    };
  }
  if (!hooks_.wall_clock) hooks_.wall_clock = [] { return absl::Now(); };
  if (!config_.log_path().empty()) {
    BlockLogWriter::Options options;
    options.directory = config_.log_path();
    options.retention = config_.log_retention();
    options.max_files = config_.max_log_files();
    log_writer_ = std::make_unique<BlockLogWriter>(std::move(options));
  }
  absl::MutexLock lock(&mu_);
  interceptors_ = config_.interceptors();
}

BlockCanaryPlugin::~BlockCanaryPlugin() {
  if (state() != State::kDestroyed && state() != State::kCreated) Destroy().IgnoreError();
}

absl::Status BlockCanaryPlugin::OnInit() {
  const PluginContext& c = context();
  if (c.main_looper == nullptr && config_.looper_source() != LooperMonitor::Source::kForeign) {
    return absl::FailedPreconditionError(
        "BlockCanaryPlugin: no main looper. Call Looper::PrepareMainLooper() before Matrix::Init, "
        "or use BlockCanaryContext::Builder::SetLooperSource(kForeign) for a foreign loop.");
  }
  if (c.watchdog_looper == nullptr || c.worker_looper == nullptr) {
    return absl::FailedPreconditionError(
        "BlockCanaryPlugin: needs the watchdog and worker loopers (Matrix provides them)");
  }
  monitor_ = std::make_unique<Monitor>(c.clock, config_.block_threshold());
  if (c.main_looper != nullptr) {
    monitor_->set_thread(c.main_looper->thread());
  }
  sampler_ = std::make_unique<Sampler>(this);
  watchdog_handler_ =
      std::make_unique<Handler>(c.watchdog_looper, "matrix::BlockCanaryPlugin$Sampler");
  worker_handler_ = std::make_unique<Handler>(c.worker_looper, "matrix::BlockCanaryPlugin$Report");
  return absl::OkStatus();
}

void BlockCanaryPlugin::RunOnLooperThread(absl::AnyInvocable<void()> fn, bool wait) {
  // A foreign loop's components belong to the thread that drives it, which
  // is the one calling the lifecycle methods.
  if (config_.looper_source() == LooperMonitor::Source::kForeign) {
    fn();
    return;
  }
  RunOnMainLooper(std::move(fn), wait);
}

void BlockCanaryPlugin::StartOnLooperThread() {
  if (looper_monitor_ == nullptr) {
    Looper* looper = context().main_looper;
    if (looper != nullptr && config_.looper_source() != LooperMonitor::Source::kForeign) {
      LooperMonitor::Options options;
      options.source = config_.looper_source();
      looper_monitor_ = std::make_unique<LooperMonitor>(looper, options);
    } else {
      looper_monitor_ = std::make_unique<LooperMonitor>(context().clock);
    }
  }
  listener_registration_ = looper_monitor_->AddListener(monitor_.get());
  looper_monitor_->Start();
}

void BlockCanaryPlugin::StopOnLooperThread() {
  if (looper_monitor_ == nullptr) return;
  looper_monitor_->Stop();  // Ends a dispatch in progress for the listener.
  listener_registration_.Reset();
}

absl::Status BlockCanaryPlugin::OnStart() {
  if (config_.looper_source() == LooperMonitor::Source::kForeign && !monitor_->thread().valid()) {
    monitor_->set_thread(ThreadHandle::Current());  // The foreign loop's thread.
  }
  RunOnLooperThread([this] { StartOnLooperThread(); }, /*wait=*/false);
  const uint64_t generation = ++generations_;
  live_generation_.store(generation);
  watchdog_handler_->RemoveCallbacks(sampler_.get());
  watchdog_handler_->Post([this, generation] { sampler_->Start(generation); });
  if (log_writer_ != nullptr) {
    worker_handler_->Post([this] {
      absl::StatusOr<int> deleted = log_writer_->CleanObsolete(WallNow());
      if (!deleted.ok()) {
        Logger()->warn("BlockCanary: cleaning {}: {}", config_.log_path(),
                       deleted.status().ToString());
      }
    });
  }
  return absl::OkStatus();
}

absl::Status BlockCanaryPlugin::OnStop() {
  RunOnLooperThread([this] { StopOnLooperThread(); }, /*wait=*/false);
  // A tick already running or posted finds the generation gone and stops;
  // blocks that ended before now are still reported.
  live_generation_.store(0);
  watchdog_handler_->RemoveCallbacks(sampler_.get());
  watchdog_handler_->Post([this] { sampler_->Drain(); });
  return absl::OkStatus();
}

namespace {

// Waits until whatever `looper` is running now has finished.
void FlushLooper(Looper* looper) {
  if (looper == nullptr || looper->IsCurrentThread() || !looper->is_looping()) return;
  Handler handler(looper, "matrix::BlockCanaryPlugin$Flush");
  absl::Notification done;
  if (handler.Post([&done] { done.Notify(); })) {
    done.WaitForNotificationWithTimeout(absl::Seconds(5));
  }
}

}  // namespace

absl::Status BlockCanaryPlugin::OnDestroy() {
  RunOnLooperThread(
      [this] {
        StopOnLooperThread();
        looper_monitor_.reset();
      },
      /*wait=*/true);
  // No tick or report may run once this returns. Ticks that start from now
  // on return at once. Let the drain posted by OnStop() and the reports it
  // posts finish (twice for the worker: a report posts its delivery there),
  // drop everything else pending with the handlers, then wait for anything
  // that was already dequeued.
  live_generation_.store(0);
  FlushLooper(context().watchdog_looper);
  FlushLooper(context().worker_looper);
  FlushLooper(context().worker_looper);
  watchdog_handler_.reset();
  worker_handler_.reset();
  FlushLooper(context().watchdog_looper);
  FlushLooper(context().worker_looper);
  return absl::OkStatus();
}

void BlockCanaryPlugin::DecorateIssue(Issue& issue) {
  FillDeviceInfo(proc_, issue.mutable_proto()->mutable_device());
}

void BlockCanaryPlugin::AddInterceptor(std::shared_ptr<BlockInterceptor> interceptor) {
  if (interceptor == nullptr) return;
  absl::MutexLock lock(&mu_);
  interceptors_.push_back(std::move(interceptor));
}

std::vector<BlockGroup> BlockCanaryPlugin::GetBlockGroups() const {
  absl::MutexLock lock(&mu_);
  std::vector<BlockGroup> groups = groups_;
  SortBlockGroups(groups);
  return groups;
}

BlockCanaryPlugin::Stats BlockCanaryPlugin::stats() const {
  Stats s;
  s.blocks = stats_.blocks.load();
  s.reported = stats_.reported.load();
  s.white_listed = stats_.white_listed.load();
  s.non_concern = stats_.non_concern.load();
  s.debugger_suppressed = stats_.debugger_suppressed.load();
  s.stopped_suppressed = stats_.stopped_suppressed.load();
  s.samples = stats_.samples.load();
  s.capture_failures = stats_.capture_failures.load();
  s.written = stats_.written.load();
  s.write_failures = stats_.write_failures.load();
  s.missed_ends = stats_.missed_ends.load();
  return s;
}

}  // namespace matrix

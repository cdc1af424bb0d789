// File: matrix/plugins/block_canary_plugin.h
//
// BlockCanaryPlugin is BlockCanary for a native main-thread loop: a dispatch
// of the main looper that takes longer than the block threshold (1 s by
// default) is a block. Each block is written as a text file in BlockCanary's
// layout (<log path>/looper-<time>.log, kept 2 days), reported to the Matrix
// PluginListeners as an Issue (tag "BlockCanary", key = the key stack line,
// report `block`), handed to the OnBlock interceptors, and counted in groups
// by its key stack line.
//
//   matrix::Looper::PrepareMainLooper();
//   auto context = matrix::BlockCanaryContext::Builder()
//                      .SetQualifier("gallery-1.4.2")
//                      .SetLogPath("/var/tmp/gallery/blockcanary")
//                      .Build();
//   auto block_canary = std::make_unique<matrix::BlockCanaryPlugin>(*context);
//   matrix::BlockCanaryPlugin* plugin = block_canary.get();
//   matrix::Matrix::Init(matrix::Matrix::Builder()
//                            .AddPlugin(std::move(block_canary))
//                            .AddPlugin(std::move(trace_plugin))   // side by side
//                            .Build()).IgnoreError();
//   plugin->Start().IgnoreError();
//   ...
//   for (const matrix::BlockGroup& g : plugin->GetBlockGroups()) { ... }
//
// How it works (docs/blockcanary.md has the details and the costs):
//   - Detection goes through a LooperMonitor of its own, by default on the
//     Printer text path as BlockCanary (set another source in the context).
//     Per message the looper thread only publishes the dispatch's begin and
//     end (a few atomic stores: no allocation, lock, syscall or log line); at
//     the end of a block (only then) it also reads its own CPU clock.
//   - The sampler runs on the matrix-watchdog looper. Every dump interval
//     (a tenth of the threshold by default) it looks at the published state;
//     while a dispatch runs it captures the looper thread's native stack and
//     reads /proc/stat and /proc/<pid>/stat into a preallocated store, so a
//     block's samples start at most one interval after it began, and it
//     captures once more exactly at the threshold crossing. A long block
//     keeps every other sample when the store fills, so the samples always
//     span it.
//   - When a block ends, the samples go to the matrix-worker thread, which
//     symbolizes them, reads memory and device context, applies the white
//     list and concern filter, writes the file, and reports.
//
// Start() and Stop() hook and unhook the looper on its thread: called there
// they act at once, called elsewhere they post to it. For a foreign loop
// (source kForeign), call them on the loop's thread and feed
// GetLooperMonitor()'s DispatchBegin()/DispatchEnd() hooks.
//
// Thread safety: lifecycle methods from any thread (see above);
// GetLooperMonitor() returns an object bound to the looper thread;
// AddInterceptor(), GetBlockGroups(), stats() from any thread;
// LoadBlockLogs() and Upload() do file I/O: any thread but the looper's.

#ifndef MATRIX_PLUGINS_BLOCK_CANARY_PLUGIN_H_
#define MATRIX_PLUGINS_BLOCK_CANARY_PLUGIN_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "matrix/core/plugin.h"
#include "matrix/core/thread_handle.h"
#include "matrix/plugins/block_canary_context.h"
#include "matrix/plugins/block_canary_info.h"
#include "matrix/plugins/block_canary_log.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/stack_capture.h"

namespace matrix {

class Handler;

class BlockCanaryPlugin : public Plugin {
 public:
  static constexpr char kTag[] = "BlockCanary";

  // Seams for tests and unusual systems. The defaults read this process's
  // real /proc and /sys, capture with StackCapturer and use absl::Now().
  struct Hooks {
    std::string proc_root = "/proc";
    pid_t pid = 0;  // 0: this process.
    std::string sys_root = "/sys";
    // Captures the looper thread's stack (watchdog thread).
    std::function<absl::Status(const ThreadHandle& thread, RawStack* out)> capture;
    // The wall clock for timestamps, file names and file ages.
    std::function<absl::Time()> wall_clock;
  };

  // Counters since construction. Any thread.
  struct Stats {
    int64_t blocks = 0;              // dispatches longer than the threshold
    int64_t reported = 0;            // blocks reported (Issue + interceptors)
    int64_t white_listed = 0;        // blocks dropped by the white list
    int64_t non_concern = 0;         // blocks dropped by filter_non_concern_stack
    int64_t debugger_suppressed = 0; // blocks dropped: a debugger was attached
    int64_t stopped_suppressed = 0;  // blocks dropped: over the threshold only
                                     // because the process was stopped
    int64_t samples = 0;             // stack captures attempted
    int64_t capture_failures = 0;    // ...that failed (the looper thread did not answer)
    int64_t written = 0;             // block files written
    int64_t write_failures = 0;
    int64_t missed_ends = 0;         // block ends lost by a starved watchdog
  };

  // What LoadBlockLogs() found on disk.
  struct LoadedBlocks {
    std::vector<BlockInfo> blocks;      // newest first, `key` and `log_file` set
    std::vector<absl::Status> errors;   // files that could not be read (kept)
    int white_listed = 0;               // hidden (and deleted if configured)
    int non_concern = 0;                // hidden by filter_non_concern_stack
  };

  explicit BlockCanaryPlugin(BlockCanaryContext context);
  BlockCanaryPlugin(BlockCanaryContext context, Hooks hooks);
  ~BlockCanaryPlugin() override;

  // The configuration (immutable). Any thread.
  const BlockCanaryContext& block_context() const { return config_; }

  // The plugin's LooperMonitor; null until the first Start() has run on the
  // looper thread. Looper thread only.
  LooperMonitor* GetLooperMonitor() const { return looper_monitor_.get(); }

  // Appends an interceptor after the context's ones. Any thread; blocks
  // reported from then on reach it.
  void AddInterceptor(std::shared_ptr<BlockInterceptor> interceptor) ABSL_LOCKS_EXCLUDED(mu_);

  // The blocks reported since Start(), grouped by key stack line, most
  // frequent first. Any thread.
  std::vector<BlockGroup> GetBlockGroups() const ABSL_LOCKS_EXCLUDED(mu_);

  // Any thread.
  Stats stats() const;

  // LoadBlockLogs()
  //
  // Reads every block file in the log path (this run's and earlier ones'),
  // as BlockCanary's block list does: white-listed blocks are hidden (and
  // their files deleted when delete_files_in_white_list), blocks without a
  // concerned frame hidden when filter_non_concern_stack. Files that cannot
  // be parsed are reported in `errors` and never deleted. Group them with
  // GroupBlocks(). Any thread but the looper's.
  LoadedBlocks LoadBlockLogs() const;

  // Upload()
  //
  // Hands every block file to `uploader` (BlockCanary's zip + upload, whose
  // packaging is the application's choice) and deletes the files only when
  // it returns OK (BlockCanary deleted them even when zipping failed). Any
  // thread but the looper's; returns the uploader's status.
  absl::Status Upload(
      const std::function<absl::Status(const std::vector<std::string>& files)>& uploader);

  // The block file writer; null when the log path is empty. Any thread (its
  // methods do file I/O: not the looper thread).
  BlockLogWriter* log_writer() const { return log_writer_.get(); }

 protected:
  absl::Status OnInit() override;
  absl::Status OnStart() override;
  absl::Status OnStop() override;
  absl::Status OnDestroy() override;
  void DecorateIssue(Issue& issue) override;

 private:
  class Monitor;  // The looper-thread listener and what it publishes.
  class Sampler;  // Watchdog-thread state.
  struct PendingBlock;

  void RunOnLooperThread(absl::AnyInvocable<void()> fn, bool wait);
  void StartOnLooperThread();
  void StopOnLooperThread();
  // Worker thread.
  void BuildAndReport(const PendingBlock& block);
  void FillStaticInfo(BlockInfo* info);
  // `detected_at`: when the sampler saw the block end (for the timeline).
  void Finish(BlockInfo info, int key_count, TimeTicks detected_at);
  absl::Time WallNow() const { return hooks_.wall_clock(); }

  const BlockCanaryContext config_;
  Hooks hooks_;
  const ProcReader proc_;
  std::unique_ptr<BlockLogWriter> log_writer_;

  std::unique_ptr<Monitor> monitor_;  // Shared by the looper thread and the watchdog.
  std::unique_ptr<Sampler> sampler_;  // Watchdog thread.
  std::unique_ptr<LooperMonitor> looper_monitor_;  // Looper thread.
  ObserverRegistration listener_registration_;     // Looper thread.

  // The sampler's tick chain runs while its generation is the live one
  // (0: stopped). Written by lifecycle methods, read by the watchdog.
  uint64_t generations_ = 0;  // Lifecycle methods only (serialized).
  std::atomic<uint64_t> live_generation_{0};
  std::unique_ptr<Handler> watchdog_handler_;
  std::unique_ptr<Handler> worker_handler_;

  // Worker thread: the machine's description, read once.
  bool static_info_read_ = false;
  std::string model_;
  std::string api_level_;
  std::string process_name_;
  int cpu_cores_ = 0;

  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<BlockInterceptor>> interceptors_ ABSL_GUARDED_BY(mu_);
  std::vector<BlockGroup> groups_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, size_t> group_index_ ABSL_GUARDED_BY(mu_);

  struct AtomicStats {
    std::atomic<int64_t> blocks{0}, reported{0}, white_listed{0}, non_concern{0},
        debugger_suppressed{0}, stopped_suppressed{0}, samples{0}, capture_failures{0},
        written{0}, write_failures{0}, missed_ends{0};
  };
  mutable AtomicStats stats_;
};

}  // namespace matrix

#endif  // MATRIX_PLUGINS_BLOCK_CANARY_PLUGIN_H_

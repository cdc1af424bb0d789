// File: matrix/plugins/block_canary_context.h
//
// BlockCanaryContext configures BlockCanaryPlugin, as BlockCanary's
// BlockCanaryContext does: who is reporting (qualifier, uid, network,
// version), what counts as a block (the threshold), how often the looper
// thread's stack is sampled (the dump interval), where block files go and for
// how long, which stack frames matter (concern packages, white list), whether
// to stay quiet under a debugger, and the OnBlock interceptor chain. Build()
// validates the values and returns a clear error for ones that make no sense.
//
//   absl::StatusOr<matrix::BlockCanaryContext> context =
//       matrix::BlockCanaryContext::Builder()
//           .SetQualifier("gallery-1.4.2-release")
//           .SetBlockThreshold(absl::Milliseconds(1000))     // BlockCanary's default
//           .SetLogPath("/var/tmp/gallery/blockcanary")
//           .SetConcernPackages({"gallery::", "libgallery-core"})
//           .OnBlock([](const matrix::BlockInfo& block) { Upload(block); })
//           .Build();
//   if (!context.ok()) { std::cerr << context.status() << "\n"; return 1; }
//
// A "package" (BlockCanary's word) is a prefix of a C++ function name (a
// namespace such as "gallery::") or of a module's file name (an executable or
// shared library such as "libgallery-core"). See docs/blockcanary.md for every
// option and where it differs from BlockCanary.
//
// Thread safety: BlockCanaryContext is a value type (thread-compatible); the
// interceptors it holds are called on the matrix-worker thread only.

#ifndef MATRIX_PLUGINS_BLOCK_CANARY_CONTEXT_H_
#define MATRIX_PLUGINS_BLOCK_CANARY_CONTEXT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "matrix/trace/looper_monitor.h"

namespace matrix {

struct BlockInfo;

// BlockInterceptor
//
// BlockCanary's BlockInterceptor: told about every reported block, after its
// file was written and before the Issue goes to the PluginListeners.
// Interceptors run in the order they were added, on the matrix-worker
// thread; a slow one delays the next block's report.
class BlockInterceptor {
 public:
  virtual ~BlockInterceptor() = default;
  // Worker thread. `block.log_file` is the file written ("" if none) and
  // `block.key` the key stack line.
  virtual void OnBlock(const BlockInfo& block) = 0;
};

class BlockCanaryContext {
 public:
  class Builder;

  // Identity, written into every block (BlockCanary's provideQualifier(),
  // provideUid(), provideNetworkType() and the app's version).
  const std::string& qualifier() const { return qualifier_; }
  const std::string& uid() const { return uid_; }
  const std::string& network() const { return network_; }
  const std::string& version_name() const { return version_name_; }
  int64_t version_code() const { return version_code_; }

  // A dispatch longer than this is a block (strictly longer, as BlockCanary).
  absl::Duration block_threshold() const { return block_threshold_; }
  // The stack and CPU sampling interval while a dispatch runs.
  absl::Duration dump_interval() const { return dump_interval_; }
  // At most this many samples are kept per block; a longer block keeps every
  // other sample and halves its sampling rate, so samples always span the
  // whole block.
  int max_samples_per_block() const { return max_samples_per_block_; }
  // Stop reporting this long after Start() (BlockCanary's
  // provideMonitorDuration); InfiniteDuration() to never stop.
  absl::Duration monitor_duration() const { return monitor_duration_; }

  // Block files: <log_path>/looper-yyyy-MM-dd_HH-mm-ss.SSS.log. Empty: no
  // files (blocks are still reported as Issues).
  const std::string& log_path() const { return log_path_; }
  // Files older than this are deleted (at Start() and after each write).
  absl::Duration log_retention() const { return log_retention_; }
  // The newest this many files are kept; older ones are deleted.
  int max_log_files() const { return max_log_files_; }

  // Frames that matter: function-name or module-name prefixes, highest
  // priority first. Empty: every frame outside libc, the C++ runtime, the
  // dynamic loader and matrix-cpp itself.
  const std::vector<std::string>& concern_packages() const { return concern_packages_; }
  // Drop blocks whose samples hold no concerned frame.
  bool filter_non_concern_stack() const { return filter_non_concern_stack_; }
  // A block with any frame matching one of these prefixes is not reported.
  const std::vector<std::string>& white_list() const { return white_list_; }
  // Also delete (do not keep) the files of white-listed blocks.
  bool delete_files_in_white_list() const { return delete_files_in_white_list_; }
  // Skip sampling and reporting while a debugger (or strace) is attached:
  // TracerPid in /proc/<pid>/status.
  bool stop_when_debugging() const { return stop_when_debugging_; }
  // Leave the time the process was stopped (SIGSTOP, a breakpoint: the
  // sampler's tick ran over 100 ms late) out of a block's cost, and report a
  // dispatch only when the time it ran is over the threshold (default).
  // False counts wall time, as BlockCanary does.
  bool leave_out_stopped_time() const { return leave_out_stopped_time_; }
  // Log one line per block (BlockCanary's notification, displayNotification()).
  bool display_notification() const { return display_notification_; }

  // How the plugin learns about dispatches. BlockCanary hooks the Printer.
  LooperMonitor::Source looper_source() const { return looper_source_; }
  // cpu_busy is set when at least this share of the machine's CPU time was
  // busy over the block.
  double cpu_busy_percent() const { return cpu_busy_percent_; }

  const std::vector<std::shared_ptr<BlockInterceptor>>& interceptors() const {
    return interceptors_;
  }

 private:
  std::string qualifier_ = "unknown";
  std::string uid_ = "uid";
  std::string network_ = "unknown";
  std::string version_name_;
  int64_t version_code_ = 0;
  absl::Duration block_threshold_ = absl::Milliseconds(1000);
  absl::Duration dump_interval_;  // Build(): threshold / 10 unless set.
  int max_samples_per_block_ = 64;
  absl::Duration monitor_duration_ = absl::InfiniteDuration();
  std::string log_path_ = "./blockcanary";
  absl::Duration log_retention_ = absl::Hours(48);
  int max_log_files_ = 500;
  std::vector<std::string> concern_packages_;
  bool filter_non_concern_stack_ = false;
  std::vector<std::string> white_list_;
  bool delete_files_in_white_list_ = true;
  bool stop_when_debugging_ = true;
  bool leave_out_stopped_time_ = true;
  bool display_notification_ = true;
  LooperMonitor::Source looper_source_ = LooperMonitor::Source::kPrinter;
  double cpu_busy_percent_ = 80;
  std::vector<std::shared_ptr<BlockInterceptor>> interceptors_;
};

class BlockCanaryContext::Builder {
 public:
  Builder& SetQualifier(std::string q) { c_.qualifier_ = std::move(q); return *this; }
  Builder& SetUid(std::string uid) { c_.uid_ = std::move(uid); return *this; }
  Builder& SetNetworkType(std::string n) { c_.network_ = std::move(n); return *this; }
  Builder& SetVersion(std::string name, int64_t code) {
    c_.version_name_ = std::move(name);
    c_.version_code_ = code;
    return *this;
  }
  Builder& SetBlockThreshold(absl::Duration d) { c_.block_threshold_ = d; return *this; }
  Builder& SetDumpInterval(absl::Duration d) {
    c_.dump_interval_ = d;
    dump_interval_set_ = true;
    return *this;
  }
  Builder& SetMaxSamplesPerBlock(int n) { c_.max_samples_per_block_ = n; return *this; }
  Builder& SetMonitorDuration(absl::Duration d) { c_.monitor_duration_ = d; return *this; }
  Builder& SetLogPath(std::string path) { c_.log_path_ = std::move(path); return *this; }
  Builder& SetLogRetention(absl::Duration d) { c_.log_retention_ = d; return *this; }
  Builder& SetMaxLogFiles(int n) { c_.max_log_files_ = n; return *this; }
  Builder& SetConcernPackages(std::vector<std::string> p) {
    c_.concern_packages_ = std::move(p);
    return *this;
  }
  Builder& FilterNonConcernStack(bool on) { c_.filter_non_concern_stack_ = on; return *this; }
  Builder& SetWhiteList(std::vector<std::string> w) { c_.white_list_ = std::move(w); return *this; }
  Builder& DeleteFilesInWhiteList(bool on) { c_.delete_files_in_white_list_ = on; return *this; }
  Builder& StopWhenDebugging(bool on) { c_.stop_when_debugging_ = on; return *this; }
  Builder& LeaveOutStoppedTime(bool on) { c_.leave_out_stopped_time_ = on; return *this; }
  Builder& DisplayNotification(bool on) { c_.display_notification_ = on; return *this; }
  Builder& SetLooperSource(LooperMonitor::Source s) { c_.looper_source_ = s; return *this; }
  Builder& SetCpuBusyPercent(double p) { c_.cpu_busy_percent_ = p; return *this; }
  // Appends to the interceptor chain (null is an error at Build()).
  Builder& AddInterceptor(std::shared_ptr<BlockInterceptor> interceptor) {
    c_.interceptors_.push_back(std::move(interceptor));
    return *this;
  }
  // Appends `fn` as an interceptor: the context's own onBlock().
  Builder& OnBlock(std::function<void(const BlockInfo&)> fn);

  // Validates and returns the context, or InvalidArgument naming the field.
  // The dump interval defaults to a tenth of the threshold (see
  // docs/blockcanary.md: BlockCanary's default, the threshold itself, gives
  // one late sample per block).
  absl::StatusOr<BlockCanaryContext> Build() const;

 private:
  BlockCanaryContext c_;
  bool dump_interval_set_ = false;
};

}  // namespace matrix

#endif  // MATRIX_PLUGINS_BLOCK_CANARY_CONTEXT_H_

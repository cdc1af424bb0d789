// File: matrix/trace/dispatch_heartbeat.h
//
// DispatchHeartbeat is what the looper thread publishes for the threads that
// watch it (the ANR watchdog, the CPU sampler, the block sampler): whether a
// dispatch is running, since when, and which message it is. Publishing costs a
// handful of relaxed stores (a seqlock); reading never blocks the writer.
//
//   // Looper thread (UIThreadMonitor does this):
//   heartbeat.Begin(begin, info);
//   ...
//   heartbeat.End(end);
//
//   // Watchdog thread:
//   matrix::DispatchHeartbeat::Snapshot s = heartbeat.Read();
//   if (s.active && now - s.begin >= absl::Seconds(5)) ReportAnr(s);
//
// Thread safety: Begin()/End()/SetCpuSample() on the looper thread only (one
// writer); Read() from any thread.

#ifndef MATRIX_TRACE_DISPATCH_HEARTBEAT_H_
#define MATRIX_TRACE_DISPATCH_HEARTBEAT_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "matrix/core/location.h"
#include "matrix/core/time_ticks.h"
#include "matrix/trace/looper_monitor.h"

namespace matrix {

class DispatchHeartbeat {
 public:
  struct Snapshot {
    // Dispatches begun so far; identifies the current (or last) one.
    uint64_t dispatch_number = 0;
    bool active = false;
    TimeTicks begin;     // Of the current or last dispatch.
    TimeTicks last_end;  // Of the last finished dispatch.
    // The message, when the source knew it.
    Location posted_from;
    int what = 0;
    bool has_callback = false;
    // The target Handler's name (interned, valid forever) and address.
    const std::string* target_name = nullptr;
    uintptr_t target_address = 0;
    std::string log_line;                 // Printer source: the begin line.
    const char* label = nullptr;          // Foreign source: the caller's label.
    // The method-trace mark of the dispatch's begin record (0 without tracing).
    uint64_t method_mark = 0;
    // Not read from the heartbeat: the dispatch the loop runs before
    // reporting it (UIThreadMonitor::ReadProvisional()); no method mark yet.
    bool provisional = false;

    // "Handler (<name>) {<address>}", as Handler::ToString(), or "" if unknown.
    std::string TargetString() const;
  };

  DispatchHeartbeat() = default;
  DispatchHeartbeat(const DispatchHeartbeat&) = delete;
  DispatchHeartbeat& operator=(const DispatchHeartbeat&) = delete;

  // Looper thread, at every dispatch begin/end.
  void Begin(TimeTicks begin, const DispatchInfo& info, uint64_t method_mark = 0);
  void End(TimeTicks end);

  // Any thread. Consistent: all fields come from one published state.
  Snapshot Read() const;
  // The number of dispatches begun so far. Any thread; one atomic load.
  uint64_t dispatch_number() const { return dispatch_number_.load(std::memory_order_acquire); }

 private:
  static constexpr size_t kLogWords = 16;  // Up to 128 bytes of a log line.

  template <typename Fn>
  void Write(Fn fn);

  std::atomic<uint64_t> write_seq_{0};  // Odd while being written.
  std::atomic<uint64_t> dispatch_number_{0};
  std::atomic<bool> active_{false};
  std::atomic<int64_t> begin_ns_{0};
  std::atomic<int64_t> last_end_ns_{0};
  std::atomic<const char*> function_{nullptr};
  std::atomic<const char*> file_{nullptr};
  std::atomic<int> line_{0};
  std::atomic<int> what_{0};
  std::atomic<bool> has_callback_{false};
  std::atomic<const std::string*> target_name_{nullptr};
  std::atomic<uintptr_t> target_address_{0};
  std::atomic<const char*> label_{nullptr};
  std::atomic<uint32_t> log_length_{0};
  std::atomic<uint64_t> method_mark_{0};
  std::array<std::atomic<uint64_t>, kLogWords> log_words_{};
};

}  // namespace matrix

#endif  // MATRIX_TRACE_DISPATCH_HEARTBEAT_H_

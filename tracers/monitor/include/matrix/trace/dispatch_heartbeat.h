// File: matrix/trace/dispatch_heartbeat.h
//
// DispatchHeartbeat is what the looper thread publishes for the threads that
// watch it (the ANR watchdog, the CPU sampler, the block sampler, the flight
// recorder): whether a dispatch is running, since when, and which message it
// is, and the recent dispatches before it. Each dispatch is one record in a
// fixed ring, written once at its begin (a handful of relaxed stores into one
// slot, a small seqlock) and closed at its end (one more store): the same
// write serves the watchdogs (Read()) and the Timeline (ReadRecord()), so the
// looper thread writes each dispatch once. Reading never blocks the writer.
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
// The ring keeps the last `capacity` dispatches (rounded up to a power of
// two, at least kMinCapacity); older records are overwritten.
//
// Thread safety: Begin()/End() on the looper thread only (one writer);
// Read(), ReadRecord() and dispatch_number() from any thread.

#ifndef MATRIX_TRACE_DISPATCH_HEARTBEAT_H_
#define MATRIX_TRACE_DISPATCH_HEARTBEAT_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "matrix/core/handler.h"
#include "matrix/core/location.h"
#include "matrix/core/message.h"
#include "matrix/core/time_ticks.h"
#include "matrix/trace/dispatch_info.h"

namespace matrix {

class DispatchHeartbeat {
 public:
  static constexpr size_t kMinCapacity = 16;
  static constexpr size_t kMaxCapacity = size_t{1} << 22;

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

  // One dispatch of the ring, decoded (no log line: see Snapshot).
  struct Record {
    uint64_t number = 0;  // Its dispatch number (1 = the first dispatch).
    TimeTicks begin;
    bool ended = false;
    TimeTicks end;  // Once ended.
    const char* function = nullptr;  // Where the message was posted from...
    const char* file = nullptr;
    int line = 0;
    int what = 0;
    bool has_callback = false;
    const std::string* target_name = nullptr;  // Interned, valid forever.
    uintptr_t target_address = 0;
    const char* label = nullptr;  // Foreign source: the caller's label.
    uint64_t method_mark = 0;
  };

  explicit DispatchHeartbeat(size_t capacity = kMinCapacity);
  ~DispatchHeartbeat();
  DispatchHeartbeat(const DispatchHeartbeat&) = delete;
  DispatchHeartbeat& operator=(const DispatchHeartbeat&) = delete;

  // Looper thread, at every dispatch begin/end. Begin() returns the new
  // dispatch's number.
  uint64_t Begin(TimeTicks begin, const DispatchInfo& info, uint64_t method_mark = 0);
  // Begin() of a message the Looper dispatches (it has a target): the
  // kDispatchObserver source's fast path.
  uint64_t BeginMessage(TimeTicks begin, const Message& msg, uint64_t method_mark = 0);
  void End(TimeTicks end);

  // Any thread. Consistent: all fields describe the latest dispatch as it
  // was at one instant.
  Snapshot Read() const;
  // The number of dispatches begun so far. Any thread; one atomic load.
  uint64_t dispatch_number() const { return head_.load(std::memory_order_acquire); }

  // ReadRecord()
  //
  // Decodes dispatch `number` (1-based) into `*out`. False when it is not in
  // the ring (not begun yet, overwritten) or is being rewritten right now.
  // Any thread.
  bool ReadRecord(uint64_t number, Record* out) const;
  size_t capacity() const { return mask_ + 1; }

 private:
  static constexpr size_t kLogWords = 16;  // Up to 128 bytes of a log line.
  static constexpr uint64_t kStateWriting = 1;
  static constexpr uint64_t kStateEnded = 2;
  // In the target word's low bits.
  static constexpr uint64_t kFlagCallback = 1;
  static constexpr uint64_t kFlagLabel = 2;
  static constexpr uint64_t kFlagLogLine = 4;
  static constexpr uint64_t kFlagMask = 7;
  static uint64_t ToWord(const void* p) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
  }

  // `version` is number * 4 + state: bit 0 while the slot is written, bit 1
  // once the dispatch ended. Flags (kFlag*) ride in the target word's low
  // bits (a Handler is at least 8-byte aligned). 72 bytes, unpadded: each
  // slot spans two cache lines either way, and padding to 128 bytes would
  // take 512 KiB instead of 288 KiB for the default 4096 dispatches.
  struct Slot {
    std::atomic<uint64_t> version{0};
    std::atomic<int64_t> begin_ns{0};
    std::atomic<int64_t> end_ns{0};
    std::atomic<uint64_t> function_or_label{0};
    std::atomic<uint64_t> file{0};
    std::atomic<int32_t> line{0};
    std::atomic<int32_t> what{0};
    std::atomic<uint64_t> target_name{0};
    std::atomic<uint64_t> target_and_flags{0};
    std::atomic<uint64_t> method_mark{0};
  };
  static_assert(sizeof(Slot) == 72, "nine words per dispatch");

  // Writes the record of dispatch n: `store_words(n, slot)` stores its
  // message's words (the slot is being written then).
  template <typename StoreWords>
  uint64_t Publish(TimeTicks begin, uint64_t method_mark, StoreWords store_words);
  static void StoreMessageWords(const Message& msg, const Handler* target, uint64_t flags,
                                Slot& slot);
  void WriteLogLine(uint64_t number, std::string_view line);
  bool ReadSlot(uint64_t number, Record* out, bool* has_log_line) const;
  bool ReadLogLine(uint64_t number, std::string* out) const;

  const size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> head_{0};  // Dispatches begun (published last).
  // The Printer source's begin line of dispatch `log_number_` (its own
  // seqlock: written only by that source).
  std::atomic<uint64_t> log_seq_{0};
  std::atomic<uint64_t> log_number_{0};
  std::atomic<uint32_t> log_length_{0};
  std::array<std::atomic<uint64_t>, kLogWords> log_words_{};
};

// Inline: the looper thread calls these at every dispatch.
template <typename StoreWords>
[[gnu::always_inline]] inline uint64_t DispatchHeartbeat::Publish(TimeTicks begin,
                                                                  uint64_t method_mark,
                                                                  StoreWords store_words) {
  const uint64_t n = head_.load(std::memory_order_relaxed) + 1;  // Single writer.
  Slot& slot = slots_[(n - 1) & mask_];
  slot.version.store((n << 2) | kStateWriting, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.begin_ns.store(begin.ToNanoseconds(), std::memory_order_relaxed);
  // end_ns keeps an older dispatch's end until End(): readers take it only
  // once the version says ended.
  slot.method_mark.store(method_mark, std::memory_order_relaxed);
  store_words(n, slot);
  slot.version.store(n << 2, std::memory_order_release);
  head_.store(n, std::memory_order_release);
  return n;
}

[[gnu::always_inline]] inline void DispatchHeartbeat::StoreMessageWords(const Message& msg,
                                                                        const Handler* target,
                                                                        uint64_t flags,
                                                                        Slot& slot) {
  // Each word is stored as soon as it is known (few registers live: the
  // looper thread's hook needs no stack frame).
  // The location's words as they are (ReadSlot() decodes them as
  // Location's accessors would).
  slot.function_or_label.store(ToWord(msg.posted_from.raw_function()), std::memory_order_relaxed);
  slot.file.store(ToWord(msg.posted_from.raw_file()), std::memory_order_relaxed);
  slot.line.store(msg.posted_from.line_number(), std::memory_order_relaxed);
  slot.what.store(msg.what, std::memory_order_relaxed);
  slot.target_name.store(target != nullptr ? ToWord(&target->name()) : 0,
                         std::memory_order_relaxed);
  if (msg.callback) flags |= kFlagCallback;
  slot.target_and_flags.store(ToWord(target) | flags, std::memory_order_relaxed);
}

[[gnu::always_inline]] inline uint64_t DispatchHeartbeat::BeginMessage(TimeTicks begin,
                                                                       const Message& msg,
                                                                       uint64_t method_mark) {
  // The Looper dispatches only messages with a target (no check for one).
  const Handler* const target = msg.target();
  if (target == nullptr) __builtin_unreachable();
  return Publish(begin, method_mark, [&msg, target](uint64_t, Slot& slot) {
    StoreMessageWords(msg, target, 0, slot);
  });
}

inline uint64_t DispatchHeartbeat::Begin(TimeTicks begin, const DispatchInfo& info,
                                         uint64_t method_mark) {
  return Publish(begin, method_mark, [this, &info](uint64_t n, Slot& slot) {
    uint64_t flags = 0;
    if (!info.log_line.empty()) {  // Printer source only.
      flags = kFlagLogLine;
      WriteLogLine(n, info.log_line);
    }
    if (info.message != nullptr) {
      StoreMessageWords(*info.message, info.message->target(), flags, slot);
      return;
    }
    if (info.label != nullptr) flags |= kFlagLabel;
    slot.function_or_label.store(ToWord(info.label), std::memory_order_relaxed);
    slot.file.store(0, std::memory_order_relaxed);
    slot.line.store(0, std::memory_order_relaxed);
    slot.what.store(0, std::memory_order_relaxed);
    slot.target_name.store(0, std::memory_order_relaxed);
    slot.target_and_flags.store(flags, std::memory_order_relaxed);
  });
}

[[gnu::always_inline]] inline void DispatchHeartbeat::End(TimeTicks end) {
  const uint64_t n = head_.load(std::memory_order_relaxed);
  if (n == 0) return;
  Slot& slot = slots_[(n - 1) & mask_];
  // No "writing" state: a reader takes end_ns only once the version says
  // ended, and this release store orders end_ns before that; a reader that
  // saw the version change under it reads again.
  slot.end_ns.store(end.ToNanoseconds(), std::memory_order_relaxed);
  slot.version.store((n << 2) | kStateEnded, std::memory_order_release);
}

}  // namespace matrix

#endif  // MATRIX_TRACE_DISPATCH_HEARTBEAT_H_

#include "matrix/trace/dispatch_heartbeat.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "matrix/core/handler.h"

namespace matrix {

template <typename Fn>
void DispatchHeartbeat::Write(Fn fn) {
  const uint64_t seq = write_seq_.load(std::memory_order_relaxed);
  write_seq_.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  fn();
  write_seq_.store(seq + 2, std::memory_order_release);
}

void DispatchHeartbeat::Begin(TimeTicks begin, const DispatchInfo& info, uint64_t method_mark) {
  constexpr auto r = std::memory_order_relaxed;
  Write([&] {
    dispatch_number_.store(dispatch_number_.load(r) + 1, r);  // Single writer.
    active_.store(true, r);
    begin_ns_.store(begin.ToNanoseconds(), r);
    if (const Message* msg = info.message) {
      function_.store(msg->posted_from.has_source_info() ? msg->posted_from.function_name()
                                                         : nullptr,
                      r);
      file_.store(msg->posted_from.has_source_info() ? msg->posted_from.file_name() : nullptr, r);
      line_.store(msg->posted_from.line_number(), r);
      what_.store(msg->what, r);
      has_callback_.store(static_cast<bool>(msg->callback), r);
      target_name_.store(msg->target() != nullptr ? &msg->target()->name() : nullptr, r);
      target_address_.store(reinterpret_cast<uintptr_t>(msg->target()), r);
    } else {
      function_.store(nullptr, r);
      file_.store(nullptr, r);
      target_name_.store(nullptr, r);
      target_address_.store(0, r);
    }
    label_.store(info.label, r);
    method_mark_.store(method_mark, r);
    // Printer source only: keep the first 128 bytes of the line.
    const size_t length = std::min(info.log_line.size(), kLogWords * 8);
    log_length_.store(static_cast<uint32_t>(length), r);
    for (size_t i = 0; i * 8 < length; ++i) {
      uint64_t word = 0;
      std::memcpy(&word, info.log_line.data() + i * 8, std::min<size_t>(8, length - i * 8));
      log_words_[i].store(word, r);
    }
  });
}

void DispatchHeartbeat::End(TimeTicks end) {
  Write([&] {
    active_.store(false, std::memory_order_relaxed);
    last_end_ns_.store(end.ToNanoseconds(), std::memory_order_relaxed);
  });
}

std::string DispatchHeartbeat::Snapshot::TargetString() const {
  if (target_name == nullptr) return "";
  return absl::StrFormat("Handler (%s) {%x}", *target_name, target_address);
}

DispatchHeartbeat::Snapshot DispatchHeartbeat::Read() const {
  constexpr auto r = std::memory_order_relaxed;
  Snapshot s;
  for (;;) {
    const uint64_t seq = write_seq_.load(std::memory_order_acquire);
    if (seq & 1) continue;  // A write is in progress (a few ns).
    s.dispatch_number = dispatch_number_.load(r);
    s.active = active_.load(r);
    s.begin = TimeTicks::FromNanoseconds(begin_ns_.load(r));
    s.last_end = TimeTicks::FromNanoseconds(last_end_ns_.load(r));
    const char* function = function_.load(r);
    const char* file = file_.load(r);
    const int line = line_.load(r);
    s.posted_from = file != nullptr ? Location(function, file, line) : Location();
    s.what = what_.load(r);
    s.has_callback = has_callback_.load(r);
    s.target_name = target_name_.load(r);
    s.target_address = target_address_.load(r);
    s.label = label_.load(r);
    s.method_mark = method_mark_.load(r);
    const uint32_t length = log_length_.load(r);
    s.log_line.resize(length);
    for (size_t i = 0; i * 8 < length; ++i) {
      const uint64_t word = log_words_[i].load(r);
      std::memcpy(s.log_line.data() + i * 8, &word, std::min<size_t>(8, length - i * 8));
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (write_seq_.load(r) == seq) return s;
  }
}

}  // namespace matrix

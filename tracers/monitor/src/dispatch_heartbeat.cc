#include "matrix/trace/dispatch_heartbeat.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "matrix/core/handler.h"

namespace matrix {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;
template <typename T>
T* Pointer(uint64_t w) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(w));
}

size_t RoundCapacity(size_t requested) {
  const size_t c = std::clamp(requested, DispatchHeartbeat::kMinCapacity,
                              DispatchHeartbeat::kMaxCapacity);
  size_t p = 1;
  while (p * 2 <= c) p *= 2;
  return p;
}

}  // namespace

DispatchHeartbeat::DispatchHeartbeat(size_t capacity)
    : mask_(RoundCapacity(capacity) - 1), slots_(new Slot[mask_ + 1]) {}

DispatchHeartbeat::~DispatchHeartbeat() = default;

void DispatchHeartbeat::WriteLogLine(uint64_t number, std::string_view line) {
  // The first 128 bytes, under the log line's own seqlock.
  const uint64_t seq = log_seq_.load(kRelaxed);
  log_seq_.store(seq + 1, kRelaxed);
  std::atomic_thread_fence(std::memory_order_release);
  log_number_.store(number, kRelaxed);
  const size_t length = std::min(line.size(), kLogWords * 8);
  log_length_.store(static_cast<uint32_t>(length), kRelaxed);
  for (size_t i = 0; i * 8 < length; ++i) {
    uint64_t word = 0;
    std::memcpy(&word, line.data() + i * 8, std::min<size_t>(8, length - i * 8));
    log_words_[i].store(word, kRelaxed);
  }
  log_seq_.store(seq + 2, std::memory_order_release);
}

bool DispatchHeartbeat::ReadSlot(uint64_t number, Record* out, bool* has_log_line) const {
  if (number == 0) return false;
  const Slot& slot = slots_[(number - 1) & mask_];
  const uint64_t v1 = slot.version.load(std::memory_order_acquire);
  if ((v1 & kStateWriting) != 0 || (v1 >> 2) != number) return false;
  const int64_t begin_ns = slot.begin_ns.load(kRelaxed);
  const int64_t end_ns = slot.end_ns.load(kRelaxed);
  const uint64_t function = slot.function_or_label.load(kRelaxed);
  const uint64_t file = slot.file.load(kRelaxed);
  const int32_t line = slot.line.load(kRelaxed);
  const int32_t what = slot.what.load(kRelaxed);
  const uint64_t target_name = slot.target_name.load(kRelaxed);
  const uint64_t target = slot.target_and_flags.load(kRelaxed);
  const uint64_t method_mark = slot.method_mark.load(kRelaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (slot.version.load(kRelaxed) != v1) return false;

  *out = Record();
  out->number = number;
  out->begin = TimeTicks::FromNanoseconds(begin_ns);
  out->ended = (v1 & kStateEnded) != 0;
  if (out->ended) out->end = TimeTicks::FromNanoseconds(end_ns);
  if ((target & kFlagLabel) != 0) {
    out->label = Pointer<const char>(function);
  } else if (file != 0) {  // A message's location, stored raw (see Location).
    out->function = function != 0 ? Pointer<const char>(function) : "";
    out->file = Pointer<const char>(file);
  }
  out->line = line;
  out->what = what;
  out->has_callback = (target & kFlagCallback) != 0;
  out->target_name = Pointer<const std::string>(target_name);
  out->target_address = static_cast<uintptr_t>(target & ~kFlagMask);
  out->method_mark = method_mark;
  if (has_log_line != nullptr) *has_log_line = (target & kFlagLogLine) != 0;
  return true;
}

bool DispatchHeartbeat::ReadRecord(uint64_t number, Record* out) const {
  return ReadSlot(number, out, nullptr);
}

bool DispatchHeartbeat::ReadLogLine(uint64_t number, std::string* out) const {
  for (;;) {
    const uint64_t seq = log_seq_.load(std::memory_order_acquire);
    if (seq & 1) continue;  // A write is in progress (a few ns).
    if (log_number_.load(kRelaxed) != number) return false;  // A later line replaced it.
    const uint32_t length = std::min<uint32_t>(log_length_.load(kRelaxed), kLogWords * 8);
    out->resize(length);
    for (size_t i = 0; i * 8 < length; ++i) {
      const uint64_t word = log_words_[i].load(kRelaxed);
      std::memcpy(out->data() + i * 8, &word, std::min<size_t>(8, length - i * 8));
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (log_seq_.load(kRelaxed) == seq) return true;
  }
}

std::string DispatchHeartbeat::Snapshot::TargetString() const {
  if (target_name == nullptr) return "";
  return absl::StrFormat("Handler (%s) {%x}", *target_name, target_address);
}

DispatchHeartbeat::Snapshot DispatchHeartbeat::Read() const {
  for (;;) {
    Snapshot s;
    const uint64_t n = head_.load(std::memory_order_acquire);
    if (n == 0) return s;
    Record r;
    bool has_log_line = false;
    // Fails only while the writer rewrites the slot (its end, a few ns) or
    // when the ring lapped this reader: read the news again.
    if (!ReadSlot(n, &r, &has_log_line)) continue;
    s.dispatch_number = n;
    s.active = !r.ended;
    s.begin = r.begin;
    if (r.ended) {
      s.last_end = r.end;
    } else if (n > 1) {
      Record previous;
      if (!ReadSlot(n - 1, &previous, nullptr)) continue;
      s.last_end = previous.end;
    }
    s.posted_from = r.file != nullptr ? Location(r.function, r.file, r.line) : Location();
    s.what = r.what;
    s.has_callback = r.has_callback;
    s.target_name = r.target_name;
    s.target_address = r.target_address;
    s.label = r.label;
    s.method_mark = r.method_mark;
    if (has_log_line && !ReadLogLine(n, &s.log_line)) continue;
    return s;
  }
}

}  // namespace matrix

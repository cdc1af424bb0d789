// File: matrix/trace/internal/spsc_ring.h
//
// A fixed-capacity single-producer single-consumer ring. Push() never
// allocates, locks or blocks: when the ring is full it refuses the item and
// counts it as dropped. Used to hand frames from the looper thread to the
// worker.
//
//   matrix::internal::SpscRing<FrameData, 1024> ring;
//   ring.Push(frame);                          // producer thread
//   while (auto f = ring.Pop()) Use(*f);       // consumer thread
//
// Thread safety: one producer thread and one consumer thread.

#ifndef MATRIX_TRACE_INTERNAL_SPSC_RING_H_
#define MATRIX_TRACE_INTERNAL_SPSC_RING_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace matrix::internal {

template <typename T, size_t kCapacity>
class SpscRing {
  static_assert(kCapacity > 0 && (kCapacity & (kCapacity - 1)) == 0,
                "capacity must be a power of two");

 public:
  // Producer. Returns false (and counts a drop) when full.
  bool Push(const T& item) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) >= kCapacity) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    slots_[head & (kCapacity - 1)] = item;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Producer: as Push(), filling the slot in place with `fill(T&)` (no copy
  // of a large item through a temporary).
  template <typename Fill>
  bool PushWith(Fill&& fill) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) >= kCapacity) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    fill(slots_[head & (kCapacity - 1)]);
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Consumer.
  std::optional<T> Pop() {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_.load(std::memory_order_acquire)) return std::nullopt;
    T item = slots_[tail & (kCapacity - 1)];
    tail_.store(tail + 1, std::memory_order_release);
    return item;
  }

  bool empty() const {
    return tail_.load(std::memory_order_acquire) == head_.load(std::memory_order_acquire);
  }
  // Items refused because the ring was full. Any thread.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  static constexpr size_t capacity() { return kCapacity; }

 private:
  std::array<T, kCapacity> slots_{};
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace matrix::internal

#endif  // MATRIX_TRACE_INTERNAL_SPSC_RING_H_

// Method tracing runtime: the -finstrument-functions hooks, the ring buffer
// writer (traced thread only), the ticker thread and the copier.
//
// This file must never be built with -finstrument-functions; every function
// on the hook path is also marked MATRIX_NO_INSTRUMENT, so it stays correct
// if someone instruments the whole program by hand.
//
// Memory ordering. The single writer stores slot i (release) and then
// publishes its `next` = i + 1 (release; MethodTracer::writer_ points
// at the traced thread's `next`). A copier loads the index
// (acquire), loads the slots it wants (acquire) and loads the index again.
// If a slot load saw a value written for index j, the writer had already
// published index j (program order, made visible by the release/acquire
// pair), so the second index load returns at least j. Records with index
// below (second load + 1 - capacity) may have been overwritten while we read
// them (the writer may be storing the record it has not published yet) and
// are dropped; the rest are exact. On x86-64 every one of these atomics is a
// plain mov.

#include "matrix/trace/method_tracer.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>

#include "matrix/core/check.h"
#include "matrix/trace/patchable_entries.h"

namespace matrix {
namespace {

// Per-thread writer state (see internal::MethodWriter).
using WriterState = internal::MethodWriter;

__attribute__((tls_model("initial-exec"))) constinit thread_local WriterState tls_writer;

// The patched-entry stubs (patchable_trampolines.cc) write the same records.
static_assert(offsetof(WriterState, ring) == internal::kWriterSlotsOffset);
static_assert(offsetof(WriterState, mask) == internal::kWriterMaskOffset);
static_assert(offsetof(WriterState, next) == internal::kWriterNextOffset);
static_assert(offsetof(WriterState, epoch_bits) == internal::kWriterEpochBitsOffset);
static_assert(offsetof(WriterState, stamp) == internal::kWriterStampOffset);

std::atomic<MethodTracer*> g_current{nullptr};

static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t), "a slot is one 8-byte record");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "slots must be plain stores");
static_assert(std::atomic<int64_t>::is_always_lock_free, "the cached time must be a plain load");

// The hook path calls no function but its own: not even std::atomic's
// members. In an unoptimized (-O0) build those are out-of-line inline
// functions, and a program built with clang's method tracing (no exclude list)
// emits instrumented copies of them that the linker may pick for this file
// too: the hook would then call itself until the stack overflows. The
// compiler's __atomic builtins are instructions, never calls.
template <typename T>
MATRIX_NO_INSTRUMENT inline __attribute__((always_inline)) T* Raw(std::atomic<T>* a) {
  return reinterpret_cast<T*>(a);
}
template <typename T>
MATRIX_NO_INSTRUMENT inline __attribute__((always_inline)) const T* Raw(const std::atomic<T>* a) {
  return reinterpret_cast<const T*>(a);
}

MATRIX_NO_INSTRUMENT inline __attribute__((always_inline)) void Store(WriterState* w,
                                                                      uint64_t record) {
  const uint64_t i = w->next;
  __atomic_store_n(Raw(&w->ring[i & w->mask]), record, __ATOMIC_RELEASE);
  __atomic_store_n(&w->next, i + 1, __ATOMIC_RELEASE);
}

MATRIX_NO_INSTRUMENT inline __attribute__((always_inline)) void StoreTime(WriterState* w,
                                                                          int64_t now_ns) {
  w->epoch_bits = RecordEpochBits(now_ns);
  Store(w, EncodeTimeRecord(record::kTimeSubkindTick, now_ns));
}

// Cold: runs once per 16.78 ms epoch of activity. Writes the time record of
// the stamp's epoch, then `base` stamped. The time record carries the cached
// time when the stamp is its own (UpdateTime() stores the time, then the
// stamp), else the stamp's time. A tail call from Append(), so that the hot
// path sets up no frame.
MATRIX_NO_INSTRUMENT __attribute__((noinline, cold)) void AppendRetimed(WriterState* w,
                                                                        uint64_t base) {
  const uint64_t stamp = __atomic_load_n(&w->stamp, __ATOMIC_RELAXED);
  const int64_t now = __atomic_load_n(&w->now_ns, __ATOMIC_RELAXED);
  StoreTime(w, RecordStamp(now) == stamp ? now : RecordStampTime(stamp));
  Store(w, base | (stamp & record::kTimeLowMask));
}

// `base` is a record without its time bits; `ring` is w->ring, not null (the
// caller's check loaded it: the store reuses it). The stamp's epoch is the one
// of the last time record unless the xor leaves bits above the time low.
MATRIX_NO_INSTRUMENT inline __attribute__((always_inline)) void Append(WriterState* w,
                                                                       std::atomic<uint64_t>* ring,
                                                                       uint64_t base) {
  const uint64_t low = __atomic_load_n(&w->stamp, __ATOMIC_RELAXED) ^ w->epoch_bits;
  if (__builtin_expect(low > record::kTimeLowMask, 0)) return AppendRetimed(w, base);
  const uint64_t i = w->next;
  __atomic_store_n(Raw(&ring[i & w->mask]), base | low, __ATOMIC_RELEASE);
  __atomic_store_n(&w->next, i + 1, __ATOMIC_RELEASE);
}

// EncodeFunctionRecord(kind, fn, 0) in two shifts: the address's low 48 bits
// land in bits 61..14 without a 64-bit mask constant.
MATRIX_NO_INSTRUMENT constexpr uint64_t FunctionRecordBase(uint64_t kind, uintptr_t fn) {
  return (kind << record::kKindShift) |
         ((static_cast<uint64_t>(fn) << (64 - record::kAddressBits)) >>
          (64 - record::kAddressBits - record::kAddressShift));
}
static_assert(FunctionRecordBase(record::kKindExit, ~uintptr_t{0}) ==
              EncodeFunctionRecord(record::kKindExit, ~uintptr_t{0}, 0));
static_assert(FunctionRecordBase(record::kKindEnter, uintptr_t{0x7f1234567890}) ==
              EncodeFunctionRecord(record::kKindEnter, uintptr_t{0x7f1234567890}, 0));

MATRIX_NO_INSTRUMENT inline __attribute__((always_inline)) void AppendFunction(uint64_t kind,
                                                                               void* fn) {
  WriterState* w = &tls_writer;
  std::atomic<uint64_t>* const ring = w->ring;
  if (ring == nullptr) return;
  Append(w, ring, FunctionRecordBase(kind, reinterpret_cast<uintptr_t>(fn)));
}

MATRIX_NO_INSTRUMENT inline __attribute__((always_inline)) void AppendScope(bool exit,
                                                                            const TraceSite* site) {
  WriterState* w = &tls_writer;
  std::atomic<uint64_t>* const ring = w->ring;
  if (ring == nullptr) return;
  Append(w, ring, EncodeScopeRecord(exit, reinterpret_cast<uintptr_t>(site), 0));
}

// Rounds down to a power of two, at least 64.
size_t CapacityFor(size_t buffer_bytes) {
  size_t records = std::max<size_t>(buffer_bytes / sizeof(uint64_t), 64);
  size_t capacity = 1;
  while (capacity * 2 <= records) capacity *= 2;
  return capacity;
}

}  // namespace

// ---------------------------------------------------------------------------
// Hooks.

void ScopedTraceSite::Enter(const TraceSite* site) { AppendScope(false, site); }
void ScopedTraceSite::Exit(const TraceSite* site) { AppendScope(true, site); }

MATRIX_NO_INSTRUMENT void internal::AppendMethodRecord(bool exit, void* fn) {
  AppendFunction(exit ? record::kKindExit : record::kKindEnter, fn);
}

void* internal::CurrentThreadWriterState() { return &tls_writer; }

void internal::WithScratchWriter(absl::FunctionRef<void()> fn) {
  MATRIX_CHECK(tls_writer.ring == nullptr, "this thread is already traced");
  constexpr size_t kSlots = 4096;
  std::unique_ptr<std::atomic<uint64_t>[]> slots(new std::atomic<uint64_t>[kSlots]());
  WriterState state;
  state.ring = slots.get();
  state.mask = kSlots - 1;
  state.stamp = RecordStamp(0);
  tls_writer = state;
  StoreTime(&tls_writer, 0);
  PatchedEntriesAttachThread(&tls_writer);
  fn();
  PatchedEntriesDetachThread();
  tls_writer = WriterState();
}

// ---------------------------------------------------------------------------
// MethodTracer.

MethodTracer::MethodTracer(const Options& options)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : TickClock::Default()),
      capacity_(CapacityFor(options.buffer_bytes)),
      thread_(ThreadHandle::Current()),
      // Value-initialized: the whole buffer is zeroed (touched) now, so the
      // traced thread never page-faults on a fresh page later.
      slots_(new std::atomic<uint64_t>[capacity_]()) {}

std::unique_ptr<MethodTracer> MethodTracer::Start(const Options& options) {
  MATRIX_CHECK(tls_writer.ring == nullptr, "this thread is already traced");
  std::unique_ptr<MethodTracer> tracer(new MethodTracer(options));
  MethodTracer* expected = nullptr;
  MATRIX_CHECK(g_current.compare_exchange_strong(expected, tracer.get()),
               "only one MethodTracer may exist at a time");

  const int64_t now =
      std::clamp<int64_t>(tracer->clock_->NowTicks().ToNanoseconds(), 0, kMaxRecordTimeNs);

  // Built aside and published to the hooks in one assignment: the calls made
  // while building it (unique_ptr's members) may be the program's
  // instrumented copies, and their hooks must not see a half-set writer.
  WriterState state;
  state.ring = tracer->slots_.get();
  state.mask = tracer->capacity_ - 1;
  state.next = 0;
  state.now_ns = now;
  state.stamp = RecordStamp(now);
  state.tracer = tracer.get();
  tls_writer = state;
  tracer->writer_ = &tls_writer;
  StoreTime(&tls_writer, now);  // The stream always starts timed.
  internal::PatchedEntriesAttachThread(&tls_writer);

  if (options.tick_period > absl::ZeroDuration()) {
    tracer->ticker_ = std::thread([t = tracer.get()] { t->TickerLoop(); });
  }
  return tracer;
}

MethodTracer::~MethodTracer() {
  MATRIX_CHECK(tls_writer.tracer == this,
               "a MethodTracer must be destroyed on the thread it traces");
  internal::PatchedEntriesDetachThread();
  // The ticker moves tls_writer.now_ns: stop it before clearing the state.
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (ticker_.joinable()) ticker_.join();
  tls_writer = WriterState();
  g_current.store(nullptr, std::memory_order_release);
}

MethodTracer* MethodTracer::Current() { return g_current.load(std::memory_order_acquire); }

// The time first, then its stamp (Retime() relies on the order); each only
// moves forward, so racing updaters leave the latest.
void MethodTracer::UpdateTime(TimeTicks now) {
  const int64_t ns = std::clamp<int64_t>(now.ToNanoseconds(), 0, kMaxRecordTimeNs);
  int64_t current = __atomic_load_n(&writer_->now_ns, __ATOMIC_RELAXED);
  while (ns > current && !__atomic_compare_exchange_n(&writer_->now_ns, &current, ns, /*weak=*/true,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  const uint64_t stamp = RecordStamp(ns);
  uint64_t current_stamp = __atomic_load_n(&writer_->stamp, __ATOMIC_RELAXED);
  while (stamp > current_stamp &&
         !__atomic_compare_exchange_n(&writer_->stamp, &current_stamp, stamp, /*weak=*/true,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

RecordCopy MethodTracer::Copy(uint64_t from, uint64_t to) const {
  RecordCopy copy;
  CopyInto(from, to, &copy);
  return copy;
}

void MethodTracer::CopyInto(uint64_t from, uint64_t to, RecordCopy* out) const {
  out->records.clear();
  out->requested_first = from;
  const uint64_t written = Mark();
  to = std::min(to, written);
  if (from >= to) {
    out->first_index = from;
    return;
  }
  // Whatever is more than capacity_ behind `to` is gone already.
  uint64_t first = (to - from > capacity_) ? to - capacity_ : from;
  const uint64_t mask = capacity_ - 1;
  out->records.resize(to - first);
  for (uint64_t i = first; i < to; ++i) {
    out->records[i - first] = slots_[i & mask].load(std::memory_order_acquire);
  }
  // Validate: anything the writer may have overwritten while we read.
  const uint64_t after = Mark();
  const uint64_t first_valid = after + 1 > capacity_ ? after + 1 - capacity_ : 0;
  if (first_valid > first) {
    const uint64_t drop = std::min<uint64_t>(first_valid - first, out->records.size());
    out->records.erase(out->records.begin(), out->records.begin() + drop);
    first += drop;
  }
  out->first_index = first;
}

void MethodTracer::TickerLoop() {
  SetCurrentThreadName("matrix-ticker");
  absl::Duration period = options_.tick_period;
  TimeTicks last_activity = clock_->NowTicks();
  uint64_t last_index = Mark();
  absl::Duration last_cpu = thread_.CpuTime();
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), period)) {
    ticker_wakeups_.fetch_add(1, std::memory_order_relaxed);
    const TimeTicks now = clock_->NowTicks();
    UpdateTime(now);
    // Busy: records were written, a dispatch is open, or the thread used
    // CPU (it may be running uninstrumented code between two records).
    const uint64_t index = Mark();
    bool active = index != last_index || in_dispatch();
    last_index = index;
    if (!active) {
      const absl::Duration cpu = thread_.CpuTime();
      active = cpu != last_cpu;
      last_cpu = cpu;
    }
    if (active) last_activity = now;
    period = (now - last_activity < options_.idle_after) ? options_.tick_period
                                                         : options_.idle_tick_period;
  }
}

}  // namespace matrix

// The compiler's function hooks (-finstrument-functions). Global C symbols:
// linking matrix::trace provides them to every instrumented object. Each
// starts a 64-byte line (the whole hook fits in it).
extern "C" {

MATRIX_NO_INSTRUMENT __attribute__((aligned(64))) void __cyg_profile_func_enter(
    void* this_fn, void* /*call_site*/) {
  matrix::AppendFunction(matrix::record::kKindEnter, this_fn);
}

MATRIX_NO_INSTRUMENT __attribute__((aligned(64))) void __cyg_profile_func_exit(
    void* this_fn, void* /*call_site*/) {
  matrix::AppendFunction(matrix::record::kKindExit, this_fn);
}

}  // extern "C"

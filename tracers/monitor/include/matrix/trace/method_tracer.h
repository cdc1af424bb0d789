// File: matrix/trace/method_tracer.h
//
// MethodTracer records every instrumented function enter and exit on one
// thread (the looper thread) into a fixed-size ring buffer, so that a slow
// dispatch or a hang can later be explained as a call tree (call_tree.h). It
// is matrix-cpp's analog of Tencent Matrix's AppMethodBeat.
//
// Code is instrumented by the compiler: build it with matrix_trace_methods()
// (cmake/MatrixTraceMethods.cmake), which adds -finstrument-functions, and
// link matrix::trace, which defines the __cyg_profile_func_enter/exit hooks.
// Code built without the flag can mark scopes by hand with
// MATRIX_TRACE_SCOPE("name").
//
//   // On the looper thread, before Looper::Loop():
//   std::unique_ptr<matrix::MethodTracer> tracer = matrix::MethodTracer::Start();
//
//   // Per dispatch, on the looper thread, with the time it already has:
//   uint64_t mark = tracer->DispatchBegin(begin);
//   ... the message runs; instrumented calls are recorded ...
//   tracer->DispatchEnd(end);
//
//   // On any thread (a worker, or the ANR watchdog while the dispatch runs):
//   matrix::RecordCopy copy = tracer->Copy(mark, tracer->Mark());
//   matrix::CallTree tree = matrix::CallTree::Build(copy.records, {.end_time = now});
//
// A traced call costs a few nanoseconds on the traced thread and one
// thread-local load and branch per hook elsewhere: records carry a cached
// time that a ticker thread refreshes (1 ms by default), never a clock read.
// The buffer never grows; a copy reports the records overwritten before or
// while it read them as lost. See docs/method-tracing.md.

#ifndef MATRIX_TRACE_METHOD_TRACER_H_
#define MATRIX_TRACE_METHOD_TRACER_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "matrix/core/check.h"
#include "matrix/core/thread_handle.h"
#include "matrix/core/tick_clock.h"
#include "matrix/core/time_ticks.h"
#include "matrix/trace/method_record.h"

namespace matrix {

class MethodTracer;

namespace internal {

// The per-thread writer state (thread-local, in method_tracer.cc). Only the
// traced thread has ring != nullptr. Other threads read `next` and move
// `now_ns` and `stamp` with atomic builtins; the writer's own accesses are
// single loads and stores. The patched-entry stubs address its fields by the
// offsets in patchable_entries.h.
struct MethodWriter {
  // The ring's slots (not named `slots`: Qt defines that as a macro).
  std::atomic<uint64_t>* ring = nullptr;
  uint64_t mask = 0;
  uint64_t next = 0;        // Absolute index of the next record: what copiers read.
  uint64_t epoch_bits = 0;  // RecordEpochBits() of the last time record written.
  int64_t now_ns = 0;       // The cached time.
  uint64_t stamp = 0;       // RecordStamp() of the cached time: what records carry.
  const MethodTracer* tracer = nullptr;  // The tracer writing (the traced thread only).
};

}  // namespace internal

struct MethodTracerOptions {
  // Size of the ring buffer. Rounded down to a power of two number of 8-byte
  // records; at least 64 records. The default, 8 MiB, holds 1 Mi records
  // (512 Ki traced calls).
  size_t buffer_bytes = size_t{8} << 20;
  // How often the ticker thread refreshes the cached time while the traced
  // thread is busy. Recorded method times have this resolution (except the
  // exact dispatch begin/end). absl::ZeroDuration() starts no ticker: the
  // caller keeps the time current with UpdateTime() (tests, or a program that
  // has its own periodic thread).
  absl::Duration tick_period = absl::Milliseconds(1);
  // When the traced thread has written no record, run no dispatch and used
  // no CPU for `idle_after`, the ticker polls at `idle_tick_period` instead,
  // so an idle program is not woken 1000 times a second. The first
  // `idle_tick_period` of activity after an idle spell may be stamped late by
  // up to that period (dispatch begin/end stay exact).
  absl::Duration idle_after = absl::Milliseconds(200);
  absl::Duration idle_tick_period = absl::Milliseconds(20);
  // The clock the ticker reads. Must be the clock whose TimeTicks are passed
  // to DispatchBegin()/DispatchEnd(). Null means TickClock::Default().
  // Not owned; must outlive the tracer.
  const TickClock* clock = nullptr;
};

// A copy of records [first_index, first_index + records.size()) of the
// buffer. Absolute indices count every record ever written and never wrap.
struct RecordCopy {
  std::vector<uint64_t> records;
  // The index the caller asked to start from.
  uint64_t requested_first = 0;
  // The index of records[0]. Greater than requested_first when the records
  // in between had been overwritten before or during the copy.
  uint64_t first_index = 0;

  // True when part of the requested range was lost to overwriting.
  bool truncated() const { return first_index > requested_first; }
  uint64_t lost() const { return first_index - requested_first; }
  uint64_t end_index() const { return first_index + records.size(); }
};

// MethodTracer
//
// Thread safety: one instance at a time per process (the compiler hooks are
// global). Start() and the destructor must run on the traced thread, as must
// DispatchBegin() and DispatchEnd(). Mark(), Copy(), CopyInto(), UpdateTime()
// and the accessors can be called from any thread while the tracer exists;
// keeping it alive while other threads use it is the owner's job.
class MethodTracer {
 public:
  using Options = MethodTracerOptions;

  // Start()
  //
  // Starts tracing the calling thread: allocates (and touches) the buffer,
  // starts the ticker thread. Fatal if another MethodTracer exists.
  // Must be called on the thread to trace.
  static std::unique_ptr<MethodTracer> Start(const Options& options = Options());

  // Stops tracing and joins the ticker. Must run on the traced thread.
  ~MethodTracer();

  MethodTracer(const MethodTracer&) = delete;
  MethodTracer& operator=(const MethodTracer&) = delete;

  // Current()
  //
  // The live tracer, or null. Can be called from any thread; the pointer is
  // valid only while its owner keeps the tracer alive.
  static MethodTracer* Current();

  // DispatchBegin()
  //
  // Writes a dispatch-begin record carrying `now` exactly, makes the cached
  // time at least `now`, and returns the record's index: the mark to copy
  // this dispatch from. No call, syscall, lock or allocation (inline: the
  // looper thread pays it per message).
  // Must be called on the traced thread (a debug check;
  // LooperMonitor::RecordDispatches() checks once that it records there).
  uint64_t DispatchBegin(TimeTicks now);

  // DispatchEnd()
  //
  // Writes a dispatch-end record carrying `now` exactly. The cached time and
  // the writer's epoch stay as they were (the next begin or tick moves them).
  // Must be called on the traced thread.
  void DispatchEnd(TimeTicks now);

  // Mark()
  //
  // The index the next record will get (the number of records written so
  // far). Copy(Mark(), later Mark()) is what ran in between.
  // Can be called from any thread.
  uint64_t Mark() const { return __atomic_load_n(&writer_->next, __ATOMIC_ACQUIRE); }

  // Copy()
  //
  // Copies records [from, to) (to is clamped to Mark()). Correct across
  // wrap-around. Records overwritten before or during the copy are dropped
  // from the front and reported by RecordCopy::truncated(); what remains is
  // exactly what was written. At most capacity() - 1 records survive (the
  // slot the writer may be filling is never trusted). Never blocks the
  // traced thread. Can be called from any thread.
  RecordCopy Copy(uint64_t from, uint64_t to) const;

  // CopyInto()
  //
  // Copy() into `out`, reusing its storage (for a watchdog that must not
  // allocate on a hot path). Can be called from any thread.
  void CopyInto(uint64_t from, uint64_t to, RecordCopy* out) const;

  // UpdateTime()
  //
  // Moves the cached time forward to `now` (never backward). The ticker calls
  // it every tick_period; with tick_period zero, the program does.
  // Can be called from any thread.
  void UpdateTime(TimeTicks now);

  // The cached time the hooks stamp records with. Any thread.
  TimeTicks CachedTime() const {
    return TimeTicks::FromNanoseconds(__atomic_load_n(&writer_->now_ns, __ATOMIC_RELAXED));
  }

  // Records the buffer holds (a power of two). Any thread.
  size_t capacity() const { return capacity_; }
  // The traced thread. Any thread.
  const ThreadHandle& thread() const { return thread_; }
  // True between DispatchBegin() and DispatchEnd(). Any thread.
  bool in_dispatch() const { return in_dispatch_.load(std::memory_order_relaxed); }
  // How many times the ticker has woken up (for tests and docs). Any thread.
  int64_t ticker_wakeups() const { return ticker_wakeups_.load(std::memory_order_relaxed); }

 private:
  explicit MethodTracer(const Options& options);
  void TickerLoop();
  // A dispatch record at `now` (a begin also moves the cached time and the
  // writer's epoch to it), appended. The index it got.
  uint64_t WriteDispatchRecord(uint64_t subkind, TimeTicks now);

  const Options options_;
  const TickClock* const clock_;
  const size_t capacity_;
  const ThreadHandle thread_;
  std::unique_ptr<std::atomic<uint64_t>[]> slots_;

  // The traced thread's writer state; set by Start().
  internal::MethodWriter* writer_ = nullptr;
  std::atomic<bool> in_dispatch_{false};
  std::atomic<int64_t> ticker_wakeups_{0};

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread ticker_;
};

// A MATRIX_TRACE_SCOPE call site. Its address is the method identity in
// records; CallTree reads the name from it.
struct alignas(16) TraceSite {
  const char* name;
  const char* file;
  int line;
};

// RAII scope for MATRIX_TRACE_SCOPE. Records an enter on construction and an
// exit on destruction if the calling thread is the traced thread; otherwise
// costs a thread-local load and a branch each.
// Thread safety: use on one thread (it lives on the stack).
class ScopedTraceSite {
 public:
  MATRIX_NO_INSTRUMENT explicit ScopedTraceSite(const TraceSite* site) : site_(site) {
    Enter(site);
  }
  MATRIX_NO_INSTRUMENT ~ScopedTraceSite() { Exit(site_); }
  ScopedTraceSite(const ScopedTraceSite&) = delete;
  ScopedTraceSite& operator=(const ScopedTraceSite&) = delete;

  // Any thread; records only on the traced thread.
  static void Enter(const TraceSite* site);
  static void Exit(const TraceSite* site);

 private:
  const TraceSite* const site_;
};

// Inline: the looper thread calls these at every dispatch.
MATRIX_NO_INSTRUMENT inline uint64_t MethodTracer::WriteDispatchRecord(uint64_t subkind,
                                                                        TimeTicks now) {
  MATRIX_DCHECK(thread_.IsCurrent(), "a dispatch record off the traced thread");
  int64_t ns = now.ToNanoseconds();
  // One unsigned compare for the usual case (a real clock is in range); then
  // the time needs no masking.
  if (static_cast<uint64_t>(ns) > static_cast<uint64_t>(kMaxRecordTimeNs)) [[unlikely]] {
    ns = ns < 0 ? 0 : kMaxRecordTimeNs;
  }
  internal::MethodWriter* const w = writer_;
  if (subkind == record::kTimeSubkindDispatchBegin) {
    // The records that follow are stamped from here: the cached time and the
    // writer's epoch move to the begin. A dispatch end moves neither (the
    // next begin or tick will; CallTree decodes what follows an end against
    // the epoch before it, and clamps it to the end).
    if (ns > __atomic_load_n(&w->now_ns, __ATOMIC_RELAXED)) {
      __atomic_store_n(&w->now_ns, ns, __ATOMIC_RELAXED);
      __atomic_store_n(&w->stamp, RecordStamp(ns), __ATOMIC_RELAXED);
    }
    w->epoch_bits = RecordEpochBits(ns);
  }
  const uint64_t index = w->next;
  w->ring[index & w->mask].store(EncodeTimeRecordInRange(subkind, ns),
                                  std::memory_order_release);
  __atomic_store_n(&w->next, index + 1, __ATOMIC_RELEASE);
  return index;
}

MATRIX_NO_INSTRUMENT inline uint64_t MethodTracer::DispatchBegin(TimeTicks now) {
  const uint64_t index = WriteDispatchRecord(record::kTimeSubkindDispatchBegin, now);
  in_dispatch_.store(true, std::memory_order_relaxed);
  return index;
}

MATRIX_NO_INSTRUMENT inline void MethodTracer::DispatchEnd(TimeTicks now) {
  WriteDispatchRecord(record::kTimeSubkindDispatchEnd, now);
  in_dispatch_.store(false, std::memory_order_relaxed);
}

}  // namespace matrix

#define MATRIX_TRACE_CONCAT_INNER(a, b) a##b
#define MATRIX_TRACE_CONCAT(a, b) MATRIX_TRACE_CONCAT_INNER(a, b)

// MATRIX_TRACE_SCOPE("name")
//
// Traces the enclosing scope as a method named "name" (a string literal), for
// code built without -finstrument-functions. The site is a static constant:
// the hot path passes a pointer and looks nothing up. Defining
// MATRIX_TRACE_SCOPES_DISABLED (CMake: -DMATRIX_TRACE_SCOPES=OFF) compiles it
// to nothing.
//
//   void Renderer::DrawFrame() {
//     MATRIX_TRACE_SCOPE("Renderer::DrawFrame");
//     ...
//   }
#if defined(MATRIX_TRACE_SCOPES_DISABLED)
#define MATRIX_TRACE_SCOPE(name) static_assert(true, "")
#else
#define MATRIX_TRACE_SCOPE(name)                                                          \
  static constexpr ::matrix::TraceSite MATRIX_TRACE_CONCAT(matrix_trace_site_, __LINE__){ \
      name, __FILE__, __LINE__};                                                          \
  ::matrix::ScopedTraceSite MATRIX_TRACE_CONCAT(                                          \
      matrix_trace_scope_, __LINE__)(&MATRIX_TRACE_CONCAT(matrix_trace_site_, __LINE__))
#endif

#endif  // MATRIX_TRACE_METHOD_TRACER_H_

// File: matrix/trace/stack_capture.h
//
// Captures the native stack of another thread (the looper thread, from the
// watchdog or the block sampler), of the calling thread, or of every thread
// in the process (for SIGQUIT-style dumps), and turns it into symbolized,
// demangled frames.
//
// Capturing another thread sends it a real-time signal carrying a request
// token (rt_tgsigqueueinfo). The handler unwinds the interrupted stack with
// the DWARF unwind tables (_Unwind_Backtrace from libgcc; frame pointers are
// not needed) into a preallocated slot; where that stops at code without
// unwind info (JIT-compiled code: V8, LuaJIT), it continues along the frame
// pointers (reads bounded and fault-safe; docs/stacks.md, "JIT frames"; when
// the interrupted code itself has no frame of its own yet or any more, its
// caller's return address is taken from the top of the stack first), marks
// the slot done with an atomic store and wakes the capturing thread through
// a futex. The capturing thread
// waits with a bounded timeout. A handler that runs after its capture gave up
// finds the slot no longer waiting for its token and writes nothing. In a
// CPython 3.11/3.12 process the handler also reads the thread's Python frame
// chain, and in a Qt 6.4.2 QML process the V4 engine's JavaScript frame chain
// with each frame's place on the native stack; SymbolizeStack() interleaves
// them (python_frames.h, qml_frames.h). See
// docs/stacks.md for the design, the cost (30-60 us of wall time and about
// 6 us of the capturing thread's CPU per capture; about 6 us of the target's
// CPU for a 40-frame stack) and what the monitored binary needs.
//
//   // At startup, on any thread (optional: the first capture installs the
//   // handler with the default signal).
//   MATRIX_CHECK(matrix::StackCapturer::Get()->Install().ok(), "stack capture");
//
//   // On the watchdog thread, when the looper thread is stuck:
//   matrix::RawStack raw;  // Preallocated; reuse it.
//   absl::Status status = matrix::StackCapturer::Get()->Capture(looper_thread, &raw);
//   if (status.ok()) {
//     // Later, on the worker thread:
//     matrix::SymbolizedStack stack = matrix::SymbolizeStack(raw);
//     report.set_thread_stack(stack.ToString());
//   }
//
// Thread safety: StackCapturer is thread-safe; captures from several threads
// are serialized. RawStack and SymbolizedStack are value types
// (thread-compatible).

#ifndef MATRIX_TRACE_STACK_CAPTURE_H_
#define MATRIX_TRACE_STACK_CAPTURE_H_

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "matrix/core/thread_handle.h"
#include "matrix/core/time_ticks.h"
#include "matrix/trace/python_frames.h"
#include "matrix/trace/qml_frames.h"
#include "matrix/trace/symbolizer.h"

namespace matrix {

// The deepest stack a capture keeps; deeper stacks are cut at the
// outermost end and marked truncated.
inline constexpr int kMaxStackFrames = 128;

// RawStack
//
// A captured stack as program counters, innermost frame first, in fixed
// storage (no allocation, about 2.6 KiB with the Python and QML chains).
// frames[0] is the exact interrupted instruction when `exact_top_pc` is set (a signal
// capture); every other entry is a return address, i.e. the instruction
// after a call.
struct RawStack {
  pid_t tid = 0;              // The thread the stack belongs to.
  int depth = 0;              // Number of valid entries in pcs.
  bool truncated = false;     // The thread had more than kMaxStackFrames frames.
  bool exact_top_pc = false;  // pcs[0] is an interrupted pc, not a return address.
  TimeTicks captured_at;      // CLOCK_MONOTONIC when the unwind ran.
  std::array<uintptr_t, kMaxStackFrames> pcs{};
  // The CPython frame chain of the thread at the same instant, when it runs
  // a supported CPython (python_frames.h); SymbolizeStack() interleaves it.
  RawPythonStack python;
  // The V4 engine's JavaScript frame chain of the thread at the same instant,
  // when a registered Qt 6.4.2 engine runs on it (qml_frames.h); each
  // frame's owner indexes pcs. SymbolizeStack() interleaves it.
  RawQmlStack qml;

  absl::Span<const uintptr_t> frames() const {
    return absl::Span<const uintptr_t>(pcs.data(), static_cast<size_t>(depth));
  }
};

// StackFrame
//
// One symbolized frame: `pc` as captured, `symbol` describing the
// instruction (for return addresses, the call instruction before it; the
// offsets are those of `pc` itself).
struct StackFrame {
  uintptr_t pc = 0;
  SymbolInfo symbol;
};

// SymbolizedStack
//
// A captured stack with names, innermost frame first. The capture
// machinery's own frames (signal handler, unwinder, signal trampoline) are
// not part of it.
struct SymbolizedStack {
  pid_t tid = 0;
  bool truncated = false;
  TimeTicks captured_at;
  std::vector<StackFrame> frames;

  // ToString()
  //
  // One frame per line, then its inlined frames (innermost first) and its
  // source line when the debug info has them:
  //   #0  0x000055d0c0de1234 app::Widget::Draw(int, char const*)+0x1c (matrix-demo)
  //         inlined app::Clamp(int) at /src/app/math.h:12
  //         at /src/app/widget.cc:42
  //   #1  0x00007f5e1a2b3c4d libfoo.so+0x3c4d
  // followed by "    ... (truncated)" when frames were cut.
  std::string ToString() const;
};

// SymbolizeStack()
//
// Names every frame of `stack` with `symbolizer` (return addresses are
// looked up at pc - 1 so calls at the end of a function name the right
// function). When the top pc is not an exact interrupted pc, leading frames
// of a sanitizer runtime (__tsan*, __asan*, __sanitizer*, __interceptor_*)
// are dropped: ThreadSanitizer runs deferred handlers from inside its
// runtime. Allocates and may read files: call it on the worker thread.
SymbolizedStack SymbolizeStack(const RawStack& stack,
                               Symbolizer* symbolizer = Symbolizer::Get());

// ThreadStack
//
// One thread of a whole-process capture.
struct ThreadStack {
  pid_t tid = 0;
  std::string name;   // From /proc/self/task/<tid>/stat, "" if it vanished.
  char state = '?';   // See ThreadStateName() in proc_stats.h.
  absl::Status status;  // Why `stack` is empty, when it is.
  RawStack stack;
};

// FormatThreadStacks()
//
// A text dump of every thread, for logs and SIGQUIT-style reports:
//   "main" tid=1234 state=S (sleeping)
//   #0  0x... function+0x1c (module)
//   ...
//   (blank line between threads; failed captures print their status)
std::string FormatThreadStacks(const std::vector<ThreadStack>& threads,
                               Symbolizer* symbolizer = Symbolizer::Get());

// StackCapturer
//
// Process-wide: one signal handler, a few preallocated capture slots.
//
// Thread safety: thread-safe. Every method can be called from any thread
// (but not from a signal handler unless marked async-signal-safe).
// Capturing the looper thread from the looper thread itself works (it
// captures directly) but costs the looper thread tens of microseconds.
class StackCapturer {
 public:
  // How long Capture() waits for the target thread by default.
  static constexpr absl::Duration kDefaultTimeout = absl::Milliseconds(200);
  // The longest a Capture() with the default timeout keeps its caller on a
  // running process: the timeout and 100 ms for a late handler's unwind.
  static constexpr absl::Duration kLongestWait = absl::Milliseconds(300);

  // DefaultSignal()
  //
  // SIGRTMIN + 5 (39 with glibc). sentry-native uses SIGRTMIN + 4 and
  // Android's debuggerd SIGRTMIN + 3 (bionic); glibc itself reserves the two
  // signals below SIGRTMIN. Change it with Install() if the program uses it.
  // Any thread.
  static int DefaultSignal();

  // Get()
  //
  // The process-wide instance. Never destroyed.
  static StackCapturer* Get();

  // Install()
  //
  // Installs the capture handler for `signal_number` (a real-time signal,
  // SIGRTMIN..SIGRTMAX) with SA_SIGINFO | SA_ONSTACK | SA_RESTART, after
  // warming up the unwinder so the handler never initializes anything. The
  // handler passes signals that are not capture requests to the handler
  // that was installed before it (a default or ignored disposition means
  // the signal is ignored). Installing again with the same signal is a
  // no-op, unless another handler has replaced ours since: then ours is
  // installed again in front of it (chaining to it). With another signal,
  // FailedPrecondition. InvalidArgument for a signal outside the real-time
  // range. Any thread.
  absl::Status Install(int signal_number = DefaultSignal()) ABSL_LOCKS_EXCLUDED(mu_);

  // The installed signal, 0 before Install(). Any thread; async-signal-safe.
  int signal_number() const { return signal_.load(std::memory_order_acquire); }

  // Capture()
  //
  // Captures the stack of `thread` (by kernel thread id) into `out`, waiting
  // at most `timeout` for the thread to answer. Installs the handler with the
  // default signal if Install() was not called. On failure `out->depth` is 0:
  //   NotFound            the thread does not exist (exited).
  //   FailedPrecondition  the thread blocks the capture signal, or another
  //                       handler replaced ours (immediately; see Install()).
  //   DeadlineExceeded    no answer in time: the thread is stopped, in an
  //                       uninterruptible sleep, or not scheduled.
  //   ResourceExhausted   the kernel's signal queue is full, or every slot is
  //                       held by a late handler still unwinding.
  // Allocates only on failure (the status message). The calling thread's own
  // tid is captured directly, without a signal. A tid is only a number: if
  // the thread exited and the kernel gave its tid to a new thread of this
  // process, that thread is captured (its tid is in RawStack::tid). Any
  // thread but a signal handler; blocks up to `timeout` (plus 100 ms when the
  // handler is mid-unwind at the deadline).
  absl::Status Capture(const ThreadHandle& thread, RawStack* out,
                       absl::Duration timeout = kDefaultTimeout) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Capture(pid_t tid, RawStack* out, absl::Duration timeout = kDefaultTimeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  // CaptureAllThreads()
  //
  // Captures every thread listed in /proc/self/task, one after another,
  // each with `per_thread_timeout`. Threads that exit meanwhile show
  // NotFound. Allocates; call it off the looper thread. Any other thread.
  std::vector<ThreadStack> CaptureAllThreads(absl::Duration per_thread_timeout = kDefaultTimeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  // CaptureCurrentThread()
  //
  // Captures the calling thread's stack into `out`, starting at the caller
  // of this function and skipping `skip_frames` more. Async-signal-safe once
  // Install() has run (the first use of the unwinder initializes it).
  static void CaptureCurrentThread(RawStack* out, int skip_frames = 0);

  // Capture signals that arrived after their capture had given up (timed
  // out), and that were therefore ignored. Any thread.
  uint64_t late_signal_count() const;

 private:
  StackCapturer() = default;
  absl::Status CaptureInternal(pid_t tid, RawStack* out, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CaptureOtherThreadLocked(pid_t tid, RawStack* out, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status InstallLocked(int signal_number) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::atomic<int> signal_{0};
  // Generation of the latest request; its low bits pick the slot.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

// InterleavePythonFrames()
//
// Resolves `python` and puts each run of frames (up to and including an
// is_entry frame) just before the next native frame named
// _PyEval_EvalFrameDefault in `frames` (innermost first). Runs left without
// an eval frame go to the end. Frames whose code object fails validation
// become placeholders; incomplete frames are dropped. Any thread.
void InterleavePythonFrames(const PythonRuntimeInfo& runtime, const RawPythonStack& python,
                            std::vector<StackFrame>* frames);

// InterleaveQmlFrames()
//
// Resolves `qml` and puts each frame just inside the engine frames that run
// it: a frame whose owner (the native frame that called the interpreter) is
// frames[o] goes before frames[o - 2] when frames[o - 1] and frames[o - 2]
// are both engine frames (libQt6Qml, or code without a module: the
// interpreter, or JIT code, under VME::exec), else before frames[o - 1].
// `dropped` native frames were removed from the front of `frames` since the
// capture (owners count from the capture). A frame with no owner on the
// stack goes next to its outer neighbour; outermost frames with none go to
// the end. Frames that fail validation become placeholders. Any thread.
void InterleaveQmlFrames(const QmlRuntimeInfo& runtime, const RawQmlStack& qml, int dropped,
                         std::vector<StackFrame>* frames);

}  // namespace matrix

#endif  // MATRIX_TRACE_STACK_CAPTURE_H_

#include "matrix/trace/stack_capture.h"

#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#include <algorithm>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "matrix/core/tick_clock.h"
#include "internal/safe_read.h"
#include "matrix/trace/proc_stats.h"

namespace matrix {
namespace {

// ---------------------------------------------------------------------------
// Shared state between capturing threads and the signal handler.
//
// A request is a 64-bit token: kTokenMagic in the top 16 bits, the
// generation in the low 48. The generation picks a slot (generation %
// kSlotCount). A slot's state word is (generation << 2 | phase):
//
//   capturer                          handler (target thread)
//   state = Requested(g)  --signal-->  CAS Requested(g) -> Writing(g)
//                                      unwind into the slot
//   wait on futex          <--wake---  state = Done(g); futex++
//   read the slot
//
// On timeout the capturer CASes Requested(g) -> Idle(g). A late handler's CAS
// then fails, so it never writes into a slot that was given up or reused. A
// slot still Writing (a handler preempted mid-unwind) is skipped by the next
// captures until that handler marks it Done.
// ---------------------------------------------------------------------------

constexpr uint64_t kTokenMagic = 0x4d58;  // "MX"
constexpr int kTokenMagicShift = 48;
constexpr uint64_t kGenerationMask = (uint64_t{1} << kTokenMagicShift) - 1;
constexpr int kSlotCount = 4;
// Room for the frames above the interrupted one: the unwinder's caller, the
// handler, a sanitizer's signal wrapper, the signal trampoline.
constexpr int kMachineryFrames = 16;
constexpr int kSlotCapacity = kMaxStackFrames + kMachineryFrames;
// How long a capturer whose deadline passed while the handler was already
// unwinding waits for it to finish.
constexpr absl::Duration kWritingGrace = absl::Milliseconds(100);

enum Phase : uint64_t { kIdle = 0, kRequested = 1, kWriting = 2, kDone = 3 };

constexpr uint64_t MakeState(uint64_t generation, Phase phase) {
  return (generation << 2) | phase;
}
constexpr Phase PhaseOf(uint64_t state) { return static_cast<Phase>(state & 3); }

struct Slot {
  std::atomic<uint64_t> state{0};
  std::atomic<uint32_t> futex{0};
  // Written by the handler between Writing and Done; read by the capturer
  // after it observes Done.
  pid_t tid = 0;
  int first = 0;  // Index of the interrupted frame in pcs.
  int depth = 0;  // Valid entries in pcs, machinery frames included.
  bool truncated = false;
  bool exact_top_pc = false;
  int64_t captured_at_ns = 0;
  uintptr_t pcs[kSlotCapacity] = {};
  uintptr_t sps[kSlotCapacity] = {};  // Each frame's stack pointer (where its locals are).
  RawPythonStack python;  // python_frames.h
  RawQmlStack qml;        // qml_frames.h
};

Slot g_slots[kSlotCount];
std::atomic<uint64_t> g_late_signals{0};
// The disposition before ours; written once, before our handler is installed.
struct sigaction g_previous_action;

pid_t GetTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

void FutexWake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
          0);
}

// Waits while *word == expected, at most `timeout`. Spurious returns are fine.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration timeout) {
  timespec relative = absl::ToTimespec(std::max(timeout, absl::ZeroDuration()));
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, &relative,
          nullptr, 0);
}

// --- Unwinding (async-signal-safe) ------------------------------------------

void HandleSignal(int signal_number, siginfo_t* info, void* ucontext);

struct UnwindState {
  uintptr_t* pcs;
  int capacity;
  int depth;
  bool truncated;
  int handler_index;  // Frame index of HandleSignal, -1 if not seen.
  // The last frame the unwinder reported: its frame pointer register and
  // whether its pc is the interrupted instruction itself.
  uintptr_t last_fp = 0;
  bool last_ip_before_instruction = false;
  // When set, each frame's stack pointer (its callee's CFA), beside pcs.
  uintptr_t* sps = nullptr;
};

_Unwind_Reason_Code UnwindCallback(_Unwind_Context* context, void* arg) {
  auto* state = static_cast<UnwindState*>(arg);
  int ip_before_instruction = 0;
  uintptr_t ip = _Unwind_GetIPInfo(context, &ip_before_instruction);
  if (ip == 0) return _URC_END_OF_STACK;
  if (state->depth >= state->capacity) {
    state->truncated = true;
    return _URC_END_OF_STACK;
  }
  if (state->handler_index < 0 &&
      _Unwind_GetRegionStart(context) == reinterpret_cast<uintptr_t>(&HandleSignal)) {
    state->handler_index = state->depth;
  }
#if defined(__x86_64__)
  state->last_fp = _Unwind_GetGR(context, 6);  // DWARF register 6: rbp.
#elif defined(__aarch64__)
  state->last_fp = _Unwind_GetGR(context, 29);  // x29.
#endif
  state->last_ip_before_instruction = ip_before_instruction != 0;
  // The CFA the unwinder reports here is the callee's: this frame's stack
  // pointer at its call.
  if (state->sps != nullptr) state->sps[state->depth] = _Unwind_GetCFA(context);
  state->pcs[state->depth++] = ip;
  return _URC_NO_REASON;
}

// --- Frame-pointer continuation (async-signal-safe) -------------------------
//
// JIT-compiled code (V8, LuaJIT, the JVM) has no DWARF unwind info, so
// _Unwind_Backtrace stops at its first frame. Such code keeps a frame-pointer
// chain (x86-64: push rbp; mov rbp, rsp; the caller's rbp at [rbp], the
// return address at [rbp + 8]), and so do programs built with
// -fno-omit-frame-pointer (node is). The walk below continues from the frame
// pointer the unwinder restored for that last frame.

// Stack span searched above the interrupted stack pointer.
constexpr uintptr_t kMaxFramePointerSpan = uintptr_t{64} << 20;

// Appends the return addresses of the frame-pointer chain starting at
// `fp` to `state`. Every frame pointer must be aligned, inside
// [stack_low, stack_low + kMaxFramePointerSpan) and above the previous one;
// every read goes through SafeRead().
void WalkFramePointers(UnwindState* state, uintptr_t fp, uintptr_t stack_low) {
  const uintptr_t stack_high =
      stack_low + kMaxFramePointerSpan < stack_low ? UINTPTR_MAX : stack_low + kMaxFramePointerSpan;
  const pid_t pid = getpid();
  uintptr_t low = stack_low;
  while (fp != 0 && (fp & (sizeof(uintptr_t) - 1)) == 0 && fp >= low &&
         fp <= stack_high - 2 * sizeof(uintptr_t)) {
    uintptr_t words[2];
    if (!internal::SafeRead(pid, fp, words, sizeof(words))) break;
    const uintptr_t next_fp = words[0];
    const uintptr_t return_address = words[1];
    if (return_address < 4096) break;  // The chain's end (0) or not a code address.
    if (state->depth >= state->capacity) {
      state->truncated = true;
      break;
    }
    if (state->sps != nullptr) state->sps[state->depth] = fp + 2 * sizeof(uintptr_t);
    state->pcs[state->depth++] = return_address;
    low = fp + 2 * sizeof(uintptr_t);
    fp = next_fp;
  }
}

#if defined(__x86_64__)
// How far a call's target may be below the interrupted pc for that call to be
// the one that entered the interrupted function (its size at most).
constexpr uintptr_t kMaxFunctionBytes = uintptr_t{1} << 20;

// Whether the instruction that ends at `address` is a call: `call rel32`
// whose target is at most kMaxFunctionBytes below `callee_pc` (the call
// entered the function `callee_pc` is in), or `call` through a register or
// memory (ff /2, with or without a REX prefix: register, [reg], SIB,
// disp8, disp32 or rip-relative operands; its target is not known).
// Reads the 7 bytes before `address` through SafeRead().
bool FollowsCall(pid_t pid, uintptr_t address, uintptr_t callee_pc) {
  if (!internal::PlausiblePointer(address, 1) || address < 4096 + 7) return false;
  unsigned char bytes[7];
  if (!internal::SafeRead(pid, address - 7, bytes, sizeof(bytes))) return false;
  // The byte `n` bytes before `address`.
  auto before = [&bytes](int n) { return bytes[7 - n]; };
  if (before(5) == 0xe8) {  // call rel32
    int32_t relative;
    std::memcpy(&relative, &bytes[3], sizeof(relative));
    const uintptr_t target = address + static_cast<uintptr_t>(static_cast<intptr_t>(relative));
    return target <= callee_pc && callee_pc - target < kMaxFunctionBytes;
  }
  // ff /2, `length` bytes long: the ModRM byte's reg field is 2, its mod
  // field `mod`; rm 4 adds a SIB byte, mod 0 with rm 5 is rip-relative.
  auto call_through = [&before](int length, unsigned mod, bool sib) {
    const unsigned char modrm = before(length - 1);
    const unsigned rm = modrm & 7;
    if (before(length) != 0xff || (modrm & 0x38) != 0x10 || (modrm >> 6) != mod) return false;
    if (mod == 3) return true;  // A register: no SIB byte.
    return sib ? rm == 4 : rm != 4;
  };
  return call_through(2, 3, false) ||                            // call reg
         (call_through(2, 0, false) && (before(1) & 7) != 5) ||  // call [reg]
         call_through(3, 0, true) ||                             // call [sib]
         call_through(3, 1, false) ||                            // call [reg + d8]
         call_through(4, 1, true) ||                             // call [sib + d8]
         (call_through(6, 0, false) && (before(5) & 7) == 5) ||  // call [rip + d32]
         call_through(6, 2, false) ||                            // call [reg + d32]
         call_through(7, 2, true);                               // call [sib + d32]
}

// The interrupted frame has no unwind info, so the frame-pointer walk starts
// from its rbp. That is its caller's rbp, not its own, while it has no frame
// of its own: at its first instruction (push rbp), right after it (before
// mov rbp, rsp), and in its epilogue after leave / pop rbp (V8's CEntry stub,
// which every JavaScript call into the runtime goes through, runs a few
// instructions there). The walk would then skip the caller: its return
// address is on top of the stack, not at [rbp + 8]. Returns that return
// address: [sp] when it follows a call into the interrupted function, else
// [sp + 8] when [sp] is the pushed rbp (equal to rbp) and it follows such a
// call; 0 otherwise (the function has its frame, or the top of the stack
// holds nothing that looks like a return address into it).
// `*slot` becomes the address it is at.
uintptr_t ReturnAddressOnTop(pid_t pid, uintptr_t pc, uintptr_t sp, uintptr_t fp, uintptr_t* slot) {
  uintptr_t words[2];
  if (!internal::PlausiblePointer(sp) || !internal::SafeRead(pid, sp, words, sizeof(words))) {
    return 0;
  }
  if (FollowsCall(pid, words[0], pc)) {
    *slot = sp;
    return words[0];
  }
  if (words[0] == fp && FollowsCall(pid, words[1], pc)) {
    *slot = sp + sizeof(uintptr_t);
    return words[1];
  }
  return 0;
}
#endif

// When the unwinder stopped at a frame that has no unwind info (not at the
// stack's end, which has some), continues by frame pointers from it.
// `stack_low`: the interrupted stack pointer (no frame of the interrupted
// code is below it). `interrupted_pc`: the pc the signal interrupted (0 for
// a capture of the current thread): when the unwinder stopped at that very
// frame, its caller may be on top of the stack (ReturnAddressOnTop).
void ContinueWithoutUnwindInfo(UnwindState* state, uintptr_t stack_low,
                               uintptr_t interrupted_pc = 0) {
#if defined(__x86_64__) || defined(__aarch64__)
  if (state->depth == 0 || state->truncated || state->last_fp == 0 || stack_low == 0) return;
  uintptr_t ip = state->pcs[state->depth - 1];
  if (!state->last_ip_before_instruction) --ip;  // A return address: look up the call.
  // Null when no FDE covers ip (libgcc's _Unwind_Find_FDE, as the unwinder
  // itself just used).
  if (_Unwind_FindEnclosingFunction(reinterpret_cast<void*>(ip)) != nullptr) return;
#if defined(__x86_64__)
  if (interrupted_pc != 0 && state->last_ip_before_instruction &&
      state->pcs[state->depth - 1] == interrupted_pc) {
    uintptr_t slot = 0;
    const uintptr_t caller =
        ReturnAddressOnTop(getpid(), interrupted_pc, stack_low, state->last_fp, &slot);
    if (caller != 0) {
      if (state->depth >= state->capacity) {
        state->truncated = true;
        return;
      }
      // The caller's stack pointer: above its return address, as the walk's.
      if (state->sps != nullptr) state->sps[state->depth] = slot + sizeof(uintptr_t);
      state->pcs[state->depth++] = caller;
    }
  }
#else
  (void)interrupted_pc;
#endif
  WalkFramePointers(state, state->last_fp, stack_low);
#else
  (void)state;
  (void)stack_low;
  (void)interrupted_pc;
#endif
}

// The pc the signal interrupted, from the signal's ucontext; 0 if this
// architecture is not known.
uintptr_t InterruptedPc(void* ucontext) {
  auto* context = static_cast<ucontext_t*>(ucontext);
  if (context == nullptr) return 0;
#if defined(__x86_64__)
  return static_cast<uintptr_t>(context->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(context->uc_mcontext.pc);
#else
  return 0;
#endif
}

// The stack pointer the signal interrupted; 0 if not known.
uintptr_t InterruptedSp(void* ucontext) {
  auto* context = static_cast<ucontext_t*>(ucontext);
  if (context == nullptr) return 0;
#if defined(__x86_64__)
  return static_cast<uintptr_t>(context->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(context->uc_mcontext.sp);
#else
  return 0;
#endif
}

// Unwinds from inside HandleSignal into `slot`, then finds where the
// interrupted code starts. Async-signal-safe.
ABSL_ATTRIBUTE_NOINLINE void UnwindIntoSlot(Slot* slot, uintptr_t interrupted_pc,
                                            uintptr_t interrupted_sp) {
  UnwindState state{slot->pcs, kSlotCapacity, 0, false, -1};
  state.sps = slot->sps;
  _Unwind_Backtrace(&UnwindCallback, &state);
  ContinueWithoutUnwindInfo(&state, interrupted_sp, interrupted_pc);
  // The stack above the interrupted frame is ours: UnwindIntoSlot,
  // HandleSignal, perhaps a sanitizer's wrapper, the sigreturn trampoline.
  // The interrupted frame is the one whose pc equals the ucontext's pc. If it
  // is not found (ThreadSanitizer runs handlers it deferred from a later
  // point, with the original context), keep everything below HandleSignal.
  int first = state.handler_index >= 0 ? state.handler_index + 1 : 0;
  bool exact = false;
  if (interrupted_pc != 0) {
    for (int i = first; i < state.depth && i < kMachineryFrames + first; ++i) {
      if (state.pcs[i] == interrupted_pc) {
        first = i;
        exact = true;
        break;
      }
    }
  }
  slot->first = std::min(first, state.depth);
  slot->depth = state.depth;
  slot->truncated = state.truncated;
  slot->exact_top_pc = exact;
}

bool IsCaptureRequest(const siginfo_t* info) {
  if (info == nullptr || info->si_code != SI_QUEUE || info->si_pid != getpid()) return false;
  auto token = reinterpret_cast<uintptr_t>(info->si_value.sival_ptr);
  return (static_cast<uint64_t>(token) >> kTokenMagicShift) == kTokenMagic;
}

void ChainToPrevious(int signal_number, siginfo_t* info, void* ucontext) {
  const struct sigaction& previous = g_previous_action;
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    if (previous.sa_sigaction != nullptr) previous.sa_sigaction(signal_number, info, ucontext);
    return;
  }
  // SIG_DFL for a real-time signal would terminate the process; a stray
  // signal with our number is ignored instead. SIG_IGN: ignored.
  if (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN) return;
  previous.sa_handler(signal_number);
}

// The capture signal handler. Async-signal-safe: atomics, syscalls and the
// unwinder (lock-free since glibc 2.35's _dl_find_object; the frame-pointer
// continuation reads memory only through process_vm_readv), no allocation.
void HandleSignal(int signal_number, siginfo_t* info, void* ucontext) {
  if (!IsCaptureRequest(info)) {
    ChainToPrevious(signal_number, info, ucontext);
    return;
  }
  int saved_errno = errno;
  uint64_t generation =
      static_cast<uint64_t>(reinterpret_cast<uintptr_t>(info->si_value.sival_ptr)) &
      kGenerationMask;
  Slot& slot = g_slots[generation % kSlotCount];
  uint64_t expected = MakeState(generation, kRequested);
  if (slot.state.compare_exchange_strong(expected, MakeState(generation, kWriting),
                                         std::memory_order_acquire, std::memory_order_relaxed)) {
    slot.tid = GetTid();
    UnwindIntoSlot(&slot, InterruptedPc(ucontext), InterruptedSp(ucontext));
    CapturePythonStack(slot.tid, &slot.python);
    CaptureQmlStack(slot.sps + slot.first, slot.depth - slot.first, &slot.qml);
    slot.captured_at_ns = MonotonicNow().ToNanoseconds();
    slot.state.store(MakeState(generation, kDone), std::memory_order_release);
    slot.futex.fetch_add(1, std::memory_order_release);
    FutexWake(&slot.futex);
  } else {
    // The capture gave up (or a newer one owns the slot): write nothing.
    g_late_signals.fetch_add(1, std::memory_order_relaxed);
  }
  errno = saved_errno;
}

// Whether the current disposition of `signal_number` is our handler.
bool HandlerIsInstalled(int signal_number) {
  struct sigaction current;
  if (sigaction(signal_number, nullptr, &current) != 0) return false;
  return (current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == &HandleSignal;
}

void CopyOut(const Slot& slot, RawStack* out) {
  int available = slot.depth - slot.first;
  int depth = std::min(available, kMaxStackFrames);
  out->tid = slot.tid;
  out->depth = depth;
  out->truncated = slot.truncated || available > kMaxStackFrames;
  out->exact_top_pc = slot.exact_top_pc;
  out->captured_at = TimeTicks::FromNanoseconds(slot.captured_at_ns);
  std::copy_n(slot.pcs + slot.first, depth, out->pcs.begin());
  out->python = slot.python;
  out->qml = slot.qml;
}

void ResetStack(RawStack* out, pid_t tid) {
  out->tid = tid;
  out->depth = 0;
  out->truncated = false;
  out->exact_top_pc = false;
  out->captured_at = TimeTicks();
  out->python.depth = 0;
  out->python.error = PythonReadError::kNoRuntime;
  out->qml.depth = 0;
  out->qml.error = QmlReadError::kNoRuntime;
}

// Why a thread did not answer, for the error message.
absl::Status DiagnoseTimeout(pid_t tid, int signal_number, absl::Duration timeout) {
  ProcReader proc;
  absl::StatusOr<TaskStat> stat = proc.ReadThreadStat(tid);
  if (absl::IsNotFound(stat.status())) {
    return absl::NotFoundError(absl::StrCat("thread ", tid, " exited during the capture"));
  }
  absl::StatusOr<uint64_t> blocked = proc.ReadThreadSignalBlockedMask(tid);
  if (blocked.ok() && (*blocked & (uint64_t{1} << (signal_number - 1))) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("thread ", tid, " blocks the stack capture signal ", signal_number));
  }
  std::string state = stat.ok() ? absl::StrCat(" (state ", std::string(1, stat->state), ": ",
                                               std::string(ThreadStateName(stat->state)), ")")
                                 : "";
  return absl::DeadlineExceededError(absl::StrCat("thread ", tid, state, " did not answer in ",
                                                  absl::FormatDuration(timeout)));
}

}  // namespace

int StackCapturer::DefaultSignal() { return SIGRTMIN + 5; }

StackCapturer* StackCapturer::Get() {
  static StackCapturer* const instance = new StackCapturer();
  return instance;
}

absl::Status StackCapturer::Install(int signal_number) {
  absl::MutexLock lock(&mu_);
  return InstallLocked(signal_number);
}

absl::Status StackCapturer::InstallLocked(int signal_number) {
  if (signal_number < SIGRTMIN || signal_number > SIGRTMAX) {
    return absl::InvalidArgumentError(absl::StrCat("stack capture signal ", signal_number,
                                                   " is not a real-time signal (", SIGRTMIN,
                                                   "..", SIGRTMAX, ")"));
  }
  int installed = signal_.load(std::memory_order_relaxed);
  if (installed != 0 && installed != signal_number) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stack capture already uses signal ", installed, ", cannot switch to ", signal_number));
  }
  if (installed != 0 && HandlerIsInstalled(signal_number)) return absl::OkStatus();
  // First installation, or someone replaced our handler since: (re)install,
  // chaining to whatever is there now.
  // Warm up everything the handler calls: the unwinder's one-time setup and
  // lazy PLT bindings, so the handler itself initializes nothing.
  RawStack scratch;
  CaptureCurrentThread(&scratch);
  std::atomic<uint32_t> dummy{0};
  FutexWake(&dummy);
  (void)GetTid();
  (void)getpid();
  (void)MonotonicNow();
  RefreshPythonRuntime();
  uintptr_t warm_read = 0;  // process_vm_readv, for the Python frame reader.
  (void)internal::SafeRead(reinterpret_cast<uintptr_t>(&scratch), &warm_read, sizeof(warm_read));

  if (sigaction(signal_number, nullptr, &g_previous_action) != 0) {
    return absl::InternalError(absl::StrCat("sigaction(", signal_number, "): ", strerror(errno)));
  }
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_sigaction = &HandleSignal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(signal_number, &action, nullptr) != 0) {
    return absl::InternalError(absl::StrCat("sigaction(", signal_number, "): ", strerror(errno)));
  }
  signal_.store(signal_number, std::memory_order_release);
  return absl::OkStatus();
}

ABSL_ATTRIBUTE_NOINLINE void StackCapturer::CaptureCurrentThread(RawStack* out,
                                                                 int skip_frames) {
  uintptr_t pcs[kMaxStackFrames + 1];
  uintptr_t sps[kMaxStackFrames + 1];
  UnwindState state{pcs, kMaxStackFrames + 1, 0, false, -1};
  state.sps = sps;
  _Unwind_Backtrace(&UnwindCallback, &state);
  ContinueWithoutUnwindInfo(&state, reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
  // pcs[0] is this function; the caller starts at 1.
  int first = std::min(1 + std::max(skip_frames, 0), state.depth);
  int available = state.depth - first;
  int depth = std::min(available, kMaxStackFrames);
  out->tid = GetTid();
  out->depth = depth;
  out->truncated = state.truncated || available > kMaxStackFrames;
  out->exact_top_pc = false;
  out->captured_at = MonotonicNow();
  std::copy_n(pcs + first, depth, out->pcs.begin());
  CapturePythonStack(out->tid, &out->python);
  CaptureQmlStack(sps + first, state.depth - first, &out->qml);
}

ABSL_ATTRIBUTE_NOINLINE absl::Status StackCapturer::Capture(const ThreadHandle& thread,
                                                            RawStack* out,
                                                            absl::Duration timeout) {
  if (!thread.valid()) {
    ResetStack(out, 0);
    return absl::InvalidArgumentError("invalid ThreadHandle");
  }
  absl::Status status = CaptureInternal(thread.tid(), out, timeout);
  asm volatile("" ::: "memory");  // Not a tail call: self-captures skip this frame.
  return status;
}

ABSL_ATTRIBUTE_NOINLINE absl::Status StackCapturer::Capture(pid_t tid, RawStack* out,
                                                            absl::Duration timeout) {
  absl::Status status = CaptureInternal(tid, out, timeout);
  asm volatile("" ::: "memory");  // Not a tail call: self-captures skip this frame.
  return status;
}

ABSL_ATTRIBUTE_NOINLINE absl::Status StackCapturer::CaptureInternal(pid_t tid, RawStack* out,
                                                                    absl::Duration timeout) {
  if (tid <= 0) {
    ResetStack(out, tid);
    return absl::InvalidArgumentError(absl::StrCat("invalid thread id ", tid));
  }
  if (tid == GetTid()) {
    // Skip CaptureInternal and the public Capture() overload.
    CaptureCurrentThread(out, 2);
    asm volatile("" ::: "memory");
    return absl::OkStatus();
  }
  absl::MutexLock lock(&mu_);
  if (signal_.load(std::memory_order_relaxed) == 0) {
    absl::Status installed = InstallLocked(DefaultSignal());
    if (!installed.ok()) {
      ResetStack(out, tid);
      return installed;
    }
  }
  return CaptureOtherThreadLocked(tid, out, timeout);
}

absl::Status StackCapturer::CaptureOtherThreadLocked(pid_t tid, RawStack* out,
                                                     absl::Duration timeout) {
  ResetStack(out, tid);
  RefreshPythonRuntime();  // Python may have been loaded since Install().
  const int signal_number = signal_.load(std::memory_order_relaxed);
  if (!HandlerIsInstalled(signal_number)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "another handler replaced the stack capture handler for signal ", signal_number,
        "; call StackCapturer::Install() again to chain to it"));
  }

  // Pick a slot no late handler is writing into.
  uint64_t generation = 0;
  Slot* slot = nullptr;
  for (int attempt = 0; attempt < kSlotCount && slot == nullptr; ++attempt) {
    generation = ++generation_ & kGenerationMask;
    Slot& candidate = g_slots[generation % kSlotCount];
    if (PhaseOf(candidate.state.load(std::memory_order_acquire)) != kWriting) slot = &candidate;
  }
  if (slot == nullptr) {
    return absl::ResourceExhaustedError("every stack capture slot is held by a late handler");
  }
  uint32_t wakeups = slot->futex.load(std::memory_order_acquire);
  slot->state.store(MakeState(generation, kRequested), std::memory_order_release);

  siginfo_t info;
  memset(&info, 0, sizeof(info));
  info.si_signo = signal_number;
  info.si_code = SI_QUEUE;
  info.si_pid = getpid();
  info.si_uid = getuid();
  info.si_value.sival_ptr =
      reinterpret_cast<void*>(static_cast<uintptr_t>((kTokenMagic << kTokenMagicShift) |
                                                     generation));
  const TimeTicks deadline = MonotonicNow() + timeout;
  if (syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, signal_number, &info) != 0) {
    int error = errno;
    slot->state.store(MakeState(generation, kIdle), std::memory_order_release);
    if (error == ESRCH) return absl::NotFoundError(absl::StrCat("thread ", tid, " does not exist"));
    if (error == EAGAIN) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "signal queue full sending ", signal_number, " to thread ", tid,
          " (does it block the signal?)"));
    }
    return absl::InternalError(absl::StrCat("rt_tgsigqueueinfo(", tid, "): ", strerror(error)));
  }

  const uint64_t done = MakeState(generation, kDone);
  const uint64_t writing = MakeState(generation, kWriting);
  TimeTicks wait_until = deadline;
  for (;;) {
    uint64_t state = slot->state.load(std::memory_order_acquire);
    if (state == done) {
      CopyOut(*slot, out);
      return absl::OkStatus();
    }
    TimeTicks now = MonotonicNow();
    if (now >= wait_until) {
      uint64_t expected = MakeState(generation, kRequested);
      if (slot->state.compare_exchange_strong(expected, MakeState(generation, kIdle),
                                              std::memory_order_acq_rel)) {
        return DiagnoseTimeout(tid, signal_number, timeout);
      }
      if (expected == writing && wait_until == deadline) {
        wait_until = now + kWritingGrace;  // The handler is unwinding: let it finish.
        continue;
      }
      if (expected == done) continue;
      // Still writing after the grace period: the slot stays with the
      // handler, which marks it Done when it finishes.
      return absl::DeadlineExceededError(
          absl::StrCat("thread ", tid, " started unwinding but did not finish in ",
                       absl::FormatDuration(timeout + kWritingGrace)));
    }
    FutexWait(&slot->futex, wakeups, wait_until - now);
    wakeups = slot->futex.load(std::memory_order_acquire);
  }
}

std::vector<ThreadStack> StackCapturer::CaptureAllThreads(absl::Duration per_thread_timeout) {
  std::vector<ThreadStack> threads;
  ProcReader proc;
  absl::StatusOr<std::vector<pid_t>> tids = proc.ListThreads();
  if (!tids.ok()) return threads;
  threads.reserve(tids->size());
  for (pid_t tid : *tids) {
    ThreadStack& thread = threads.emplace_back();
    thread.tid = tid;
    if (absl::StatusOr<TaskStat> stat = proc.ReadThreadStat(tid); stat.ok()) {
      thread.name = stat->comm;
      thread.state = stat->state;
    }
    thread.status = Capture(tid, &thread.stack, per_thread_timeout);
  }
  return threads;
}

uint64_t StackCapturer::late_signal_count() const {
  return g_late_signals.load(std::memory_order_relaxed);
}

}  // namespace matrix

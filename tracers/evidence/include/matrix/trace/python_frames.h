// File: matrix/trace/python_frames.h
//
// Names the Python functions a CPython thread is running, with their file
// and line, inside a captured native stack: the stack capture's signal
// handler reads the interpreter's frame chain of the interrupted thread (raw
// code object pointers, instruction offsets, entry flags) into the RawStack,
// and SymbolizeStack() later resolves each frame (qualname, co_filename,
// line from co_linetable) and puts the run of Python frames each native
// _PyEval_EvalFrameDefault frame executes just inside (before, innermost
// first) that native frame (InterleavePythonFrames(), stack_capture.h). Python frames are StackFrames whose
// SymbolInfo::module is kPythonFrameModule ("[python]").
//
// Supported: CPython 3.11 and 3.12 on x86-64 (their struct layouts are
// hard-coded, like py-spy does, and picked by the version the process runs:
// the exported Py_Version). Any other version, or no Python in the process,
// reads nothing and the stack stays native. See docs/stacks.md.
//
// Never takes the GIL and never faults: every read of interpreter memory
// goes through process_vm_readv() on our own pid, which returns EFAULT for
// unmapped memory instead of crashing; every pointer is checked (alignment,
// object type == &PyCode_Type / &PyUnicode_Type / &PyBytes_Type) and every
// walk is bounded. A code object freed between the capture and its
// resolution fails validation and gives a placeholder frame (empty function,
// module "[python]"), never a crash.
//
//   // Automatic: StackCapturer::Install() / Capture() detect Python and the
//   // handler fills RawStack::python. By hand (tests):
//   matrix::PythonRuntimeInfo runtime;
//   if (matrix::DetectPythonRuntime(&runtime).ok()) {
//     matrix::RawPythonStack raw;
//     matrix::ReadPythonStack(runtime, tid, &raw);  // Async-signal-safe.
//     for (int i = 0; i < raw.depth; ++i) {
//       absl::StatusOr<matrix::PythonFrameInfo> frame =
//           matrix::ResolvePythonFrame(runtime, raw.frames[i]);
//     }
//   }
//
// Thread safety: the functions are thread-safe; ReadPythonStack() and
// CurrentPythonRuntime() are async-signal-safe (syscalls and atomics only).
// RawPythonStack and PythonFrameInfo are value types (thread-compatible).

#ifndef MATRIX_TRACE_PYTHON_FRAMES_H_
#define MATRIX_TRACE_PYTHON_FRAMES_H_

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace matrix {

// The SymbolInfo::module of every Python frame.
inline constexpr char kPythonFrameModule[] = "[python]";

// The deepest Python chain a capture keeps (innermost frames first; deeper
// chains are cut and marked truncated).
inline constexpr int kMaxPythonFrames = 48;

// RawPythonFrame
//
// One _PyInterpreterFrame as read in the signal handler, unvalidated.
struct RawPythonFrame {
  uintptr_t code = 0;  // f_code: a PyCodeObject*, if the memory was what it seemed.
  int32_t instr = -1;  // prev_instr - co_code_adaptive, in 2-byte code units.
  // The outermost frame its _PyEval_EvalFrameDefault call runs (3.11's
  // is_entry; 3.12: the frame before an entry shim frame).
  uint8_t is_entry = 0;
  uint8_t owner = 0;  // 0 thread, 1 generator, 2 frame object (3.12 shims are not kept).
};
static_assert(sizeof(RawPythonFrame) == 16);

// Why a ReadPythonStack() found no frames.
enum class PythonReadError : int8_t {
  kNone = 0,       // Read (depth may be 0: the thread runs no Python code).
  kNoRuntime,      // No supported CPython in the process.
  kNoThreadState,  // No PyThreadState for the thread (not a Python thread yet).
  kFault,          // A read hit unmapped memory (process_vm_readv failed).
  kBadPointer,     // A pointer or field failed validation (misaligned, out of range).
  kCycle,          // The chain loops.
};

// A readable name for `error` ("ok", "no runtime", ...).
const char* PythonReadErrorName(PythonReadError error);

// RawPythonStack
//
// The frame chain of one thread, innermost first, in fixed storage (768 bytes).
struct RawPythonStack {
  int depth = 0;
  bool truncated = false;
  PythonReadError error = PythonReadError::kNoRuntime;
  std::array<RawPythonFrame, kMaxPythonFrames> frames{};
};

// PythonRuntimeInfo
//
// Where one interpreter's globals are. Filled by DetectPythonRuntime(), or
// by tests pointing at fake memory.
struct PythonRuntimeInfo {
  uintptr_t runtime = 0;       // &_PyRuntime
  uintptr_t code_type = 0;     // &PyCode_Type
  uintptr_t unicode_type = 0;  // &PyUnicode_Type
  uintptr_t bytes_type = 0;    // &PyBytes_Type
  uint32_t version_hex = 0;    // Py_Version (PY_VERSION_HEX), e.g. 0x030b02f0.
};

// PythonVersionSupported()
//
// Whether the frame layout of the CPython whose Py_Version (PY_VERSION_HEX)
// is `version_hex` is known on this architecture: 3.11.x and 3.12.x on
// x86-64. Any thread.
bool PythonVersionSupported(uint32_t version_hex);

// DetectPythonRuntime()
//
// Looks the interpreter's symbols up with dlsym(RTLD_DEFAULT) (Debian's
// python3.11 executable exports them, as do libpython3.x.so). NotFound without
// Python, Unimplemented for a version whose layout is not known (anything
// but 3.11 and 3.12). Not async-signal-safe. Any thread.
absl::Status DetectPythonRuntime(PythonRuntimeInfo* out);

// CurrentPythonRuntime() / RefreshPythonRuntime()
//
// The process-wide runtime the stack capture uses: nullptr until a refresh
// found a supported one. Refresh (dlsym) at most once a second until found;
// StackCapturer calls it from Install() and Capture(). Current: any thread,
// async-signal-safe. Refresh: any thread but a signal handler.
const PythonRuntimeInfo* CurrentPythonRuntime();
void RefreshPythonRuntime();

// ReadPythonStack()
//
// Reads the frame chain of thread `tid` (a kernel tid; usually the calling
// thread, from the capture signal handler, so the chain is not changing):
// finds its PyThreadState among _PyRuntime.interpreters (bounded walks,
// matched on native_thread_id; the GIL is not taken and need not be held by
// that thread), then follows cframe->current_frame and `previous`. Every
// read is fault-safe and every field range-checked; any failure leaves
// depth 0 and says why in `error` (also returned). Async-signal-safe.
PythonReadError ReadPythonStack(const PythonRuntimeInfo& runtime, pid_t tid, RawPythonStack* out);

// CapturePythonStack()
//
// ReadPythonStack() with CurrentPythonRuntime(), or error kNoRuntime without
// one. What the stack capture's handler calls. Async-signal-safe.
void CapturePythonStack(pid_t tid, RawPythonStack* out);

// PythonFrameInfo
//
// A resolved Python frame.
struct PythonFrameInfo {
  std::string qualname;     // co_qualname, e.g. "Widget.draw" or "<module>".
  std::string file;         // co_filename.
  int line = 0;             // From co_linetable at the frame's instruction.
  int first_line = 0;       // co_firstlineno.
  bool incomplete = false;  // Being set up (before its first traceable instruction).
};

// ResolvePythonFrame()
//
// Names `frame` with validated, fault-safe reads (the code object may have
// been freed since the capture, and its memory reused). DataLoss when the
// memory is not (or no longer) that frame's code object. Allocates. Any
// thread; does not need the GIL.
absl::StatusOr<PythonFrameInfo> ResolvePythonFrame(const PythonRuntimeInfo& runtime,
                                                   const RawPythonFrame& frame);

// LineFromLocationTable()
//
// The line of code unit `instr` in a 3.11/3.12 co_linetable (Objects/locations.md),
// starting from `first_line`; `first_line` when `instr` < 0, -1 when the
// table says the instruction has no line or is malformed. Bounded by the
// table's size. Any thread.
int LineFromLocationTable(const uint8_t* table, size_t size, int first_line, int instr);

namespace internal {

// Fault-safe copy of `size` bytes at `address` of this process into `out`:
// false (never a fault) when any of it is unmapped. Async-signal-safe.
bool SafeRead(uintptr_t address, void* out, size_t size);

}  // namespace internal
}  // namespace matrix

#endif  // MATRIX_TRACE_PYTHON_FRAMES_H_

// File: matrix/trace/qml_frames.h
//
// Names the QML/JavaScript functions a Qt Quick thread is running, with their
// file and line, inside a captured native stack: the stack capture's signal
// handler reads the V4 engine's frame chain (raw QV4::Function pointers and
// instruction offsets) into the RawStack, with the native frame each JS frame
// sits in, and SymbolizeStack() later resolves each frame (name from the
// compiled unit's string table, file from the compilation unit, line from
// the compiled function's line table) and puts it just inside the engine
// frames that run it (InterleaveQmlFrames(), stack_capture.h). QML frames
// are StackFrames whose SymbolInfo::module is kQmlFrameModule ("[qml]").
//
// Supported: Qt 6.4.2's libQt6Qml (Debian 12's libqt6qml6) on x86-64, whose
// struct layout is hard-coded (src/internal/qv4_642_layout.h). The engine
// holds its frame chain and no global holds the engine: engines are
// registered as they are created (matrix-run's agent interposes the public
// QJSEngine, QQmlEngine and QQmlApplicationEngine constructors and calls
// RegisterQmlEngine()). Any other libQt6Qml, or memory that fails the
// layout probe, reads nothing and the stack stays native. See docs/stacks.md.
//
// Never faults: every read of engine memory goes through process_vm_readv()
// on our own pid (EFAULT, not SIGSEGV, for unmapped memory); every pointer is
// checked (alignment, range), every walk is bounded (kMaxQmlFrames, a cycle
// check), and resolution validates the compilation unit (its vtable, its
// reference count, its engine, the compiled unit's magic and version). A
// function freed between the capture and its resolution gives a placeholder
// frame (empty function, module "[qml]"), never a crash.
//
//   // The agent, after a QQmlEngine constructor returned:
//   matrix::RegisterQmlEngine(js_engine, matrix::QmlEngineOf(js_engine));
//   // Automatic from then on: the capture handler fills RawStack::qml.
//
// Thread safety: the functions are thread-safe; ReadQmlStack(),
// CaptureQmlStack() and CurrentQmlRuntime() are async-signal-safe (syscalls
// and atomics only). RawQmlStack and QmlFrameInfo are value types
// (thread-compatible).

#ifndef MATRIX_TRACE_QML_FRAMES_H_
#define MATRIX_TRACE_QML_FRAMES_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace matrix {

// The SymbolInfo::module of every QML/JavaScript frame.
inline constexpr char kQmlFrameModule[] = "[qml]";

// The deepest JS chain a capture keeps (innermost frames first; deeper
// chains are cut and marked truncated).
inline constexpr int kMaxQmlFrames = 48;

// How many engines the registry holds (a program has one or two, plus one
// per WorkerScript); new engines beyond that replace the entries in turn.
inline constexpr int kMaxQmlEngines = 16;

// RawQmlFrame
//
// One QV4::CppStackFrame as read in the signal handler, unvalidated.
struct RawQmlFrame {
  uintptr_t function = 0;  // v4Function: a QV4::Function*, if the memory was what it seemed.
  int32_t ip = 0;          // instructionPointer: offset after the current instruction; <= 0 none.
  // Index in RawStack::pcs of the native frame whose stack holds this frame
  // (the engine function that called the interpreter for it); -1 when the
  // frame is not on the captured native stack (a generator's, on the heap).
  int16_t owner = -1;
  uint8_t kind = 0;  // 0 JS, 1 Meta.
};
static_assert(sizeof(RawQmlFrame) == 16);

// Why a ReadQmlStack() found no frames.
enum class QmlReadError : int8_t {
  kNone = 0,    // Read (depth may be 0: the engine runs no JavaScript now).
  kNoRuntime,   // No supported libQt6Qml, or no engine registered.
  kNoEngine,    // No registered engine runs JavaScript on this thread's stack.
  kFault,       // A read hit unmapped memory.
  kBadPointer,  // A pointer or field failed validation.
  kCycle,       // The chain loops.
};

// A readable name for `error` ("ok", "no engine on this stack", ...).
const char* QmlReadErrorName(QmlReadError error);

// RawQmlStack
//
// One engine's frame chain on one thread, innermost first, in fixed storage
// (792 bytes).
struct RawQmlStack {
  int depth = 0;
  bool truncated = false;
  QmlReadError error = QmlReadError::kNoRuntime;
  uintptr_t engine = 0;  // The QV4::ExecutionEngine read.
  std::array<RawQmlFrame, kMaxQmlFrames> frames{};
};

// QmlRuntimeInfo
//
// What validation compares against: filled by DetectQmlRuntime(), or by
// tests pointing at fake memory.
struct QmlRuntimeInfo {
  // Every ExecutableCompilationUnit's vptr:
  // &_ZTVN3QV425ExecutableCompilationUnitE + 16.
  uintptr_t unit_vptr = 0;
};

// DetectQmlRuntime()
//
// Finds libQt6Qml's ExecutableCompilationUnit vtable (dlsym) and checks that
// the library defining it is libQt6Qml.so.6.4.2 (its real path). NotFound
// without libQt6Qml, Unimplemented for any other version. Not
// async-signal-safe. Any thread.
absl::Status DetectQmlRuntime(QmlRuntimeInfo* out);

// CurrentQmlRuntime()
//
// The process-wide runtime the stack capture uses: nullptr until
// RegisterQmlEngine() found a supported one. Any thread; async-signal-safe.
const QmlRuntimeInfo* CurrentQmlRuntime();

// QmlEngineOf()
//
// The QV4::ExecutionEngine of the QJSEngine (or QQmlEngine) at `js_engine`
// (QJSEngine::m_v4Engine, read fault-safely), 0 when unreadable. Meaningful
// only with a supported runtime. Any thread.
uintptr_t QmlEngineOf(uintptr_t js_engine);

// RegisterQmlEngine()
//
// Adds the ExecutionEngine `engine` to the process-wide registry the capture
// handler searches, detecting the runtime on first use (DetectQmlRuntime()).
// `js_engine` is its QJSEngine (0 for a WorkerScript engine): the engine's
// back link (ExecutionEngine::publicEngine) must equal it, which also probes
// the layout. An engine at an address already registered (a new engine where
// a destroyed one was) keeps its entry. False, with nothing registered, when
// the runtime is unsupported or the probe fails. Allocates nothing after the
// first call; not async-signal-safe. Any thread.
bool RegisterQmlEngine(uintptr_t js_engine, uintptr_t engine);

// Tests: `runtime` becomes the current runtime (nullptr: none), and the
// registry is emptied. Not while captures run.
void SetQmlRuntimeForTesting(const QmlRuntimeInfo* runtime);
// Tests: adds `engine` of `js_engine` to the registry without probing it.
void RegisterQmlEngineForTesting(uintptr_t js_engine, uintptr_t engine);

// ReadQmlStack()
//
// Reads `engine`'s frame chain (currentStackFrame, then each frame's
// parent), innermost first, skipping frames without a function and Meta
// frames that repeat their outer neighbour. Bounded: kMaxQmlFrames frames
// kept (truncated after), twice that many visited, a cycle check. The
// owners are found from `stack_pointers`, the stack pointer of each of
// `depth` captured native frames (innermost first, ascending): a frame at
// address A belongs to native frame i when stack_pointers[i] <= A <
// stack_pointers[i + 1]; pass depth 0 to leave every owner -1. Any failure
// leaves depth 0 and says why in `error` (also returned). Async-signal-safe.
QmlReadError ReadQmlStack(uintptr_t engine, const uintptr_t* stack_pointers, int depth,
                          RawQmlStack* out);

// CaptureQmlStack()
//
// What the capture handler calls, on the interrupted thread: among the
// registered engines that still link back to their QJSEngine (a destroyed
// engine's memory, reused, does not), the one whose chain (its first 8
// frames) reaches the
// thread's stack, [stack_pointers[0], stack_pointers[0] + 64 MiB), nearest
// to the interrupted stack pointer, is read with ReadQmlStack(). An engine
// created on this thread but running on another one is therefore not read
// for this thread. Error kNoRuntime without a runtime or an engine, kNoEngine
// when no engine's chain is on this stack. Async-signal-safe.
void CaptureQmlStack(const uintptr_t* stack_pointers, int depth, RawQmlStack* out);

// QmlFrameInfo
//
// A resolved QML/JavaScript frame.
struct QmlFrameInfo {
  // The function's name: "<anonymous>" for an anonymous function,
  // "<global>" for a script's global code, "expression for onCompleted" for
  // a signal handler.
  std::string function;
  std::string file;    // The URL, a local file's as a path (file:// removed).
  int line = 0;        // At the frame's instruction (see line_exact).
  int first_line = 0;  // The function's own first line.
  // False when the frame has stored no instruction offset yet (it has made
  // no call since it started): `line` is then the function's first line.
  bool line_exact = false;
};

// ResolveQmlFrame()
//
// Names `frame` of `engine` with validated, fault-safe reads (the function
// and its compilation unit may have been freed since the capture and the
// memory reused). DataLoss when the memory is not (or no longer) that
// engine's compiled function. Allocates. Any thread.
absl::StatusOr<QmlFrameInfo> ResolveQmlFrame(const QmlRuntimeInfo& runtime, uintptr_t engine,
                                             const RawQmlFrame& frame);

}  // namespace matrix

#endif  // MATRIX_TRACE_QML_FRAMES_H_

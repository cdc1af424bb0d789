// File: matrix/trace/stack_key.h
//
// The group key of a hang: the innermost frame of the stack that belongs to
// the program itself, the way Matrix keys on application methods. Frames in
// libc, the C++ runtime, the toolkit, the language runtime and the
// interpreter's internals never name the culprit and are skipped. The same
// hang then lands in the same group on every run and on every machine,
// whatever system helper the sample happened to fall in.
//
//   // Worker thread, building an ANR report:
//   std::string key = matrix::HangStackKey(crossing_stack, tree, traced, cost,
//                                          earlier_captures);
//
// Which modules are "system or runtime" (docs/stacks.md, "Group keys"):
//   - every module under /lib/, /lib64/, /usr/lib/, /usr/lib64/ (Debian's
//     libraries: libc, libstdc++, GLib, GTK, Qt, Tcl/Tk, SDL, Mesa, libuv,
//     libpython, libnode, ...);
//   - by file name (block files keep base names): the same libraries, the
//     vDSO, the dynamic loader, matrix-cpp's own libraries, and the
//     executables of language runtimes (python*, node, nodejs, lua*, luajit,
//     java, ruby*, perl*, tclsh*, wish*, gjs, qml, qmlscene);
//   - frames of interpreted or JIT code (a module in brackets, "[python]",
//     "[jit]") whose source file is the runtime's own: /usr/lib/python*,
//     "<frozen ...>", "node:...", /usr/share/nodejs/, or that has no source
//     file (V8's builtins and stubs);
//   - by function name: matrix::, std::, absl::, v8::, node::, the
//     implementation's "__" names and CPython's _Py/Py C API.
// StackKeyRule adds modules to skip and names modules that are the program's
// own even where the built-in list says otherwise (an application installed
// under /usr/lib/myapp/). Set it once at start (TraceConfig
// key_skip_modules / key_program_modules, matrix-run --key-skip /
// --key-program).
//
// Thread safety: SetStackKeyRule() and the functions here may be called from
// any thread; none of them is for the looper thread's hot path.

#ifndef MATRIX_TRACE_STACK_KEY_H_
#define MATRIX_TRACE_STACK_KEY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "matrix/proto/common.pb.h"
#include "matrix/trace/call_tree.h"
#include "matrix/trace/stack_capture.h"

namespace matrix {

// Module patterns, each either a directory ("/opt/vendor/", ending in '/':
// a prefix of the module's path, or of the source file of a bracketed
// module's frame) or a file name prefix ("libfoo": libfoo.so.2 in any
// directory).
struct StackKeyRule {
  // Skipped besides the built-in system and runtime modules.
  std::vector<std::string> skip_modules = {};
  // The program's own: never skipped, whatever else matches. Wins over
  // `skip_modules` and the built-in list.
  std::vector<std::string> program_modules = {};

  // InvalidArgument naming the pattern when one is empty or has a '/' that
  // is not its last character after a leading '/' form ("lib/x" is neither a
  // directory nor a file name).
  absl::Status Validate() const;
};

// Replaces the process-wide rule (the built-in lists always apply). Keys
// built afterwards use it.
void SetStackKeyRule(StackKeyRule rule);
StackKeyRule GetStackKeyRule();

// IsSystemOrRuntimeFrame()
//
// Whether a frame never names the culprit (see the file comment): by its
// `module` (a path or a base name), the `file` of a bracketed module's frame,
// and its `function`.
bool IsSystemOrRuntimeFrame(std::string_view module, std::string_view function,
                            std::string_view file = {});

// SharedOuterFrames()
//
// How many of `stack`'s outermost frames every stack in `others` also has, in
// the same order counted from the outermost frame (main) inwards: the
// function they all were inside. Frames are the same when they are the same
// function of the same module (the pc within it may differ); unnamed frames
// compare by their function's start from the unwind info
// (SymbolInfo::function_offset), or by pc when it is unknown. Empty stacks in
// `others` (a failed capture) are ignored.
// Returns stack.frames.size() when `others` has no usable stack.
size_t SharedOuterFrames(const SymbolizedStack& stack, absl::Span<const SymbolizedStack> others);

// HangStackKey()
//
// The stack key of a hang, from the looper thread's stack at the crossing,
// the stacks captured shortly before it (`earlier`, may be empty), and the
// method-trace tree of the dispatch (null without tracing; it may be
// trimmed). Only the frames the captures share are considered (one capture
// alone lands wherever the loop happens to be: a clock helper, malloc); when
// they share none, the crossing stack alone. `traced` holds the stack's
// functions that were traced (see TracedFunctions). Walking from the
// innermost considered frame and skipping system and runtime frames:
//   - a function built without tracing is where the thread is stuck: it is
//     the key;
//   - a traced function is the key when its call costs at least 30% of
//     `total_cost` (a cheaper one is a passing moment of a longer call);
// otherwise the tree's own key, then NativeStackKey() of the considered
// frames.
std::string HangStackKey(const SymbolizedStack& stack, const CallTree* tree,
                         const absl::flat_hash_set<uintptr_t>& traced, absl::Duration total_cost,
                         absl::Span<const SymbolizedStack> earlier = {});

// NativeStackKey()
//
// The stack key of a native stack: the innermost frame that belongs to the
// program (not IsSystemOrRuntimeFrame), named by its function, or by
// UnnamedFrameKey() when it has no name and its module names no frame of the
// stack (the function's start, elf_address - offset, when the offset is
// known; else elf_address; else the offset of older reports, which is the
// address for an unnamed frame). Falls back to
// the innermost named frame outside the C runtime (IsCRuntimeFrame: where a
// capture happens to land, a clock read or a system call, differs from run
// to run), then to the innermost named frame that is not the vDSO's, then to
// "unknown". A vDSO or unnamed frame never keys a report.
std::string NativeStackKey(const proto::ThreadStack& stack);

// UnnamedFrameKey()
//
// How a frame without a function name keys a report: "myapp+0x1a2b", the
// module's base name and an address in the ELF file's own address space,
// stable for one build of the module. The callers pass the start of the
// frame's function when the unwind info gives it (the same for every capture
// inside the function), else the frame's own address. "" without a module.
// matrix-report symbolize names such frames off the host and recomputes the
// key.
std::string UnnamedFrameKey(std::string_view module, uint64_t elf_address);

// UnnamedFunctionStart()
//
// The address that UnnamedFrameKey() takes for a captured frame: the start of
// its function in the ELF file (module_offset - function_offset) when the
// unwind info gave it (function_offset not 0 and smaller than module_offset),
// else the frame's own module_offset.
uint64_t UnnamedFunctionStart(const SymbolInfo& symbol);

// The same for a report's frame (proto::StackFrame, its name aside): the
// function's start, elf_address - offset, when the offset is known (smaller
// than elf_address, not 0); else elf_address; else the offset of reports of
// older versions, which is the address for an unnamed frame.
std::string UnnamedFrameKey(const proto::StackFrame& frame);

// NamedModules()
//
// The modules that name at least one of `frames`. An unnamed frame of such a
// module never keys a report: the module has symbols, so the address is
// outside its functions (a stub, padding). Only a module with no named
// frame (stripped, or recorded raw) keys by UnnamedFrameKey().
absl::flat_hash_set<std::string> NamedModules(absl::Span<const StackFrame> frames);

// ProgramFrameKey()
//
// The key a frame gives when it belongs to the program: its function, or
// UnnamedFrameKey() for an unnamed frame of a module that is not a system or
// runtime one and not in `named_modules` (a stripped executable or library
// of the program). "" for a system or runtime frame and for an unnamed frame
// of no module or of a module in `named_modules`.
std::string ProgramFrameKey(const SymbolInfo& symbol,
                            const absl::flat_hash_set<std::string>& named_modules);

// IsCRuntimeFrame()
//
// Whether a frame of `module` (a path or base name) is the C or C++ runtime,
// the loader or the vDSO: libc, libpthread, libm, libdl, librt, ld-linux,
// libstdc++, libgcc_s, linux-vdso.so.1 / [vdso].
bool IsCRuntimeFrame(std::string_view module);

// IsVdsoFrame()
//
// Whether a frame is the kernel's vDSO (by module, or a __vdso_ function).
bool IsVdsoFrame(std::string_view module, std::string_view function);

}  // namespace matrix

#endif  // MATRIX_TRACE_STACK_KEY_H_

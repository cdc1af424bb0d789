#include "matrix/core/file_path.h"
#include "matrix/trace/stack_capture.h"

// Stack capture, part 2 of 2: a captured RawStack symbolized and formatted
// (SymbolizeStack with its Python and QML frames interleaved, SymbolizedStack::ToString,
// FormatThreadStacks). The
// capture itself (the signal, the unwind, the frame-pointer walk) is in
// stack_capture.cc.

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/python_frames.h"
#include "matrix/trace/qml_frames.h"

namespace matrix {

namespace {

bool IsEvalFrame(const StackFrame& frame) {
  return absl::StartsWith(frame.symbol.function, "_PyEval_EvalFrameDefault");
}

// Python frames to StackFrames (placeholders for frames that fail
// validation; incomplete frames dropped).
void AppendResolved(const PythonRuntimeInfo& runtime, const RawPythonFrame* begin,
                    const RawPythonFrame* end, std::vector<StackFrame>* out) {
  for (const RawPythonFrame* raw = begin; raw != end; ++raw) {
    StackFrame frame;
    frame.pc = raw->code;
    frame.symbol.module = kPythonFrameModule;
    absl::StatusOr<PythonFrameInfo> info = ResolvePythonFrame(runtime, *raw);
    if (info.ok()) {
      if (info->incomplete) continue;
      frame.symbol.function = std::move(info->qualname);
      frame.symbol.file = std::move(info->file);
      frame.symbol.line = info->line;
      frame.symbol.function_offset = raw->instr > 0 ? static_cast<uintptr_t>(raw->instr) * 2 : 0;
    }
    out->push_back(std::move(frame));
  }
}

// A frame of the V4 engine running a JS frame: libQt6Qml's (VME::exec and
// VME::interpret are hidden symbols, named by the module only), or JIT code
// (no module).
bool IsQmlEngineFrame(const StackFrame& frame) {
  const std::string& module = frame.symbol.module;
  if (module.empty()) return true;
  return BaseName(module).starts_with("libQt6Qml.so");
}

// Names `frame` `name` when it is an unnamed libQt6Qml frame.
void NameEngineFrame(const char* name, StackFrame* frame) {
  if (frame->symbol.function.empty() && !frame->symbol.module.empty() && IsQmlEngineFrame(*frame)) {
    frame->symbol.function = name;
    frame->symbol.function_offset = 0;
  }
}

StackFrame ResolvedQmlFrame(const QmlRuntimeInfo& runtime, uintptr_t engine,
                            const RawQmlFrame& raw) {
  StackFrame frame;
  frame.pc = raw.function;
  frame.symbol.module = kQmlFrameModule;
  absl::StatusOr<QmlFrameInfo> info = ResolveQmlFrame(runtime, engine, raw);
  if (info.ok()) {
    frame.symbol.function = std::move(info->function);
    frame.symbol.file = std::move(info->file);
    frame.symbol.line = info->line;
  }
  return frame;
}

}  // namespace

void InterleaveQmlFrames(const QmlRuntimeInfo& runtime, const RawQmlStack& qml, int dropped,
                         std::vector<StackFrame>* frames) {
  if (qml.depth <= 0) return;
  const int n = static_cast<int>(frames->size());
  const int depth = std::min(qml.depth, kMaxQmlFrames);
  // Where each JS frame goes: before native frame at[j] (n: at the end).
  std::vector<int> at(static_cast<size_t>(depth), n);
  int outer = n;  // The position of the outer neighbour.
  for (int j = depth - 1; j >= 0; --j) {
    const int owner = qml.frames[static_cast<size_t>(j)].owner - dropped;
    int position = outer;
    if (qml.frames[static_cast<size_t>(j)].owner >= 0 && owner >= 0 && owner < n) {
      position = owner - 1;
      if (owner >= 2 && IsQmlEngineFrame((*frames)[static_cast<size_t>(owner - 1)]) &&
          IsQmlEngineFrame((*frames)[static_cast<size_t>(owner - 2)])) {
        position = owner - 2;
        // The owner called VME::exec, which runs the interpreter (or JIT
        // code): hidden symbols of libQt6Qml, named here from their place so
        // that captures compare them by name, not by return address.
        NameEngineFrame("QV4::Moth::VME::exec", &(*frames)[static_cast<size_t>(owner - 1)]);
        NameEngineFrame("QV4::Moth::VME::interpret", &(*frames)[static_cast<size_t>(owner - 2)]);
      }
      position = std::clamp(position, 0, outer);  // Inner frames stay inside outer ones.
    }
    at[static_cast<size_t>(j)] = position;
    outer = position;
  }
  std::vector<StackFrame> merged;
  merged.reserve(frames->size() + static_cast<size_t>(depth));
  int j = 0;
  for (int i = 0; i <= n; ++i) {
    for (; j < depth && at[static_cast<size_t>(j)] == i; ++j) {
      merged.push_back(ResolvedQmlFrame(runtime, qml.engine, qml.frames[static_cast<size_t>(j)]));
    }
    if (i < n) merged.push_back(std::move((*frames)[static_cast<size_t>(i)]));
  }
  *frames = std::move(merged);
}

void InterleavePythonFrames(const PythonRuntimeInfo& runtime, const RawPythonStack& python,
                            std::vector<StackFrame>* frames) {
  if (python.depth <= 0) return;
  std::vector<StackFrame> merged;
  merged.reserve(frames->size() + static_cast<size_t>(python.depth));
  const RawPythonFrame* next = python.frames.data();
  const RawPythonFrame* const end = python.frames.data() + python.depth;
  for (StackFrame& native : *frames) {
    if (next != end && IsEvalFrame(native)) {
      // This eval loop runs the frames up to and including the next entry frame.
      const RawPythonFrame* run_end = next;
      while (run_end != end && run_end->is_entry == 0) ++run_end;
      if (run_end != end) ++run_end;
      AppendResolved(runtime, next, run_end, &merged);
      next = run_end;
    }
    merged.push_back(std::move(native));
  }
  AppendResolved(runtime, next, end, &merged);
  *frames = std::move(merged);
}


namespace {

// Functions of a sanitizer runtime (statically linked into the executable,
// so recognizable only by name).
bool IsSanitizerRuntimeFunction(const std::string& function) {
  for (const char* prefix : {"__tsan", "__asan", "__msan", "__ubsan", "__sanitizer",
                             "__interceptor_"}) {
    if (function.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace

SymbolizedStack SymbolizeStack(const RawStack& stack, Symbolizer* symbolizer) {
  SymbolizedStack result;
  result.tid = stack.tid;
  result.truncated = stack.truncated;
  result.captured_at = stack.captured_at;
  result.frames.reserve(static_cast<size_t>(stack.depth));
  for (int i = 0; i < stack.depth; ++i) {
    uintptr_t pc = stack.pcs[static_cast<size_t>(i)];
    // A return address names the instruction after the call, which may
    // belong to the next function; look up the call itself.
    bool return_address = !(i == 0 && stack.exact_top_pc);
    uintptr_t lookup = return_address && pc > 0 ? pc - 1 : pc;
    StackFrame frame{pc, symbolizer->Symbolize(lookup)};
    if (lookup != pc && !frame.symbol.module.empty()) {
      if (frame.symbol.function_offset != 0 || !frame.symbol.function.empty()) {
        frame.symbol.function_offset += 1;
      }
      frame.symbol.module_offset += 1;
    }
    result.frames.push_back(std::move(frame));
  }
  size_t dropped = 0;
  if (!stack.exact_top_pc) {
    // ThreadSanitizer runs a deferred handler from its runtime (at the
    // thread's next intercepted call or atomic operation), so the stack
    // starts with runtime frames above the user's code. Drop them.
    auto user = std::find_if(result.frames.begin(), result.frames.end(),
                             [](const StackFrame& frame) {
                               return !IsSanitizerRuntimeFunction(frame.symbol.function);
                             });
    dropped = static_cast<size_t>(user - result.frames.begin());
    result.frames.erase(result.frames.begin(), user);
  }
  // QML frames first: their owners index the native frames.
  if (const QmlRuntimeInfo* qml = CurrentQmlRuntime(); qml != nullptr && stack.qml.depth > 0) {
    InterleaveQmlFrames(*qml, stack.qml, static_cast<int>(dropped), &result.frames);
  }
  if (const PythonRuntimeInfo* python = CurrentPythonRuntime();
      python != nullptr && stack.python.depth > 0) {
    InterleavePythonFrames(*python, stack.python, &result.frames);
  }
  return result;
}

std::string SymbolizedStack::ToString() const {
  std::string text;
  for (size_t i = 0; i < frames.size(); ++i) {
    const StackFrame& frame = frames[i];
    const SymbolInfo& symbol = frame.symbol;
    const std::string module(BaseName(symbol.module));
    absl::StrAppendFormat(&text, "#%-2d 0x%016x ", i, frame.pc);
    if (symbol.module == kPythonFrameModule || symbol.module == kQmlFrameModule) {
      // "qualname ([python])", "function ([qml])"
      absl::StrAppend(&text, symbol.function.empty() ? "??" : symbol.function, " (", symbol.module,
                      ")\n");
    } else if (!symbol.function.empty() && !module.empty()) {
      absl::StrAppendFormat(&text, "%s+0x%x (%s)\n", symbol.function, symbol.function_offset,
                            module);
    } else if (!symbol.function.empty()) {
      absl::StrAppend(&text, symbol.function, "\n");
    } else if (!module.empty()) {
      absl::StrAppendFormat(&text, "%s+0x%x\n", module, symbol.module_offset);
    } else {
      absl::StrAppend(&text, "???\n");
    }
    for (const InlinedFrame& inlined : symbol.inlined) {
      absl::StrAppend(&text, "      inlined ", inlined.function.empty() ? "??" : inlined.function);
      if (!inlined.file.empty()) absl::StrAppend(&text, " at ", inlined.file, ":", inlined.line);
      text += "\n";
    }
    if (!symbol.file.empty()) {
      absl::StrAppend(&text, "      at ", symbol.file, ":", symbol.line, "\n");
    }
  }
  if (truncated) absl::StrAppend(&text, "    ... (truncated)\n");
  return text;
}

std::string FormatThreadStacks(const std::vector<ThreadStack>& threads, Symbolizer* symbolizer) {
  std::string text;
  for (const ThreadStack& thread : threads) {
    if (!text.empty()) text += "\n";
    absl::StrAppendFormat(&text, "\"%s\" tid=%d state=%c (%s)\n", thread.name, thread.tid,
                          thread.state, std::string(ThreadStateName(thread.state)));
    if (!thread.status.ok()) {
      absl::StrAppend(&text, "    <no stack: ", thread.status.ToString(), ">\n");
      continue;
    }
    absl::StrAppend(&text, SymbolizeStack(thread.stack, symbolizer).ToString());
  }
  return text;
}

}  // namespace matrix

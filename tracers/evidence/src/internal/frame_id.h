// FrameId: a symbolized frame's identity when captures are compared (stack
// keys, sampled call trees): the function of a module; the source file too
// for interpreted code (a bracketed module such as "[python]"), whose
// functions of different files share names; for an unnamed frame, its
// function's start (from the unwind info), else its pc.
//
// Thread safety: value types and pure functions.

#ifndef MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_FRAME_ID_H_
#define MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_FRAME_ID_H_

#include <cstdint>
#include <string_view>

#include "matrix/trace/stack_capture.h"

namespace matrix::internal {

struct FrameId {
  std::string_view module;
  std::string_view function;
  std::string_view file;  // Interpreted code: functions of different files.
  uintptr_t start;        // Unnamed frames only: the function's start, else the pc.
  bool operator==(const FrameId&) const = default;
};

inline FrameId IdOf(const StackFrame& frame) {
  const SymbolInfo& s = frame.symbol;
  if (s.function.empty()) return {s.module, {}, {}, frame.pc - s.function_offset};
  const bool bracketed = !s.module.empty() && s.module.front() == '[';
  return {s.module, s.function, bracketed ? std::string_view(s.file) : "", 0};
}

}  // namespace matrix::internal

#endif  // MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_FRAME_ID_H_

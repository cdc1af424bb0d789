// File: tracers/evidence/src/internal/python311_layout.h
//
// The CPython 3.11 (x86-64, LP64) struct offsets python_frames.cc reads,
// from the 3.11 headers (Include/internal/pycore_runtime.h, pycore_interp.h,
// pycore_frame.h, Include/cpython/pystate.h, code.h, bytesobject.h,
// unicodeobject.h). They did not change within 3.11.x. Valid C and C++:
// tests/tracers/evidence/python311_layout_check.c _Static_asserts every one against
// the interpreter's own headers (offsetof with Py_BUILD_CORE) when
// python3.11-dev is installed.
//
//   uintptr_t code_address = frame + kPy311FrameCode;
//
// Thread safety: constants only.

#ifndef MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_PYTHON311_LAYOUT_H_
#define MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_PYTHON311_LAYOUT_H_

#ifdef __cplusplus
namespace matrix {
namespace internal {
#endif

enum MatrixPython311Layout {
  // _PyRuntimeState
  kPy311RuntimeInterpretersHead = 40,  // interpreters.head
  // PyInterpreterState
  kPy311InterpNext = 0,
  kPy311InterpThreadsHead = 16,  // threads.head
  kPy311InterpReadSize = 24,
  // PyThreadState
  kPy311ThreadNext = 8,
  kPy311ThreadInterp = 16,
  kPy311ThreadCFrame = 56,
  kPy311ThreadNativeThreadId = 160,
  kPy311ThreadReadSize = 168,
  // _PyCFrame
  kPy311CFrameCurrentFrame = 8,
  // _PyInterpreterFrame
  kPy311FrameCode = 32,       // f_code
  kPy311FramePrevious = 48,   // previous
  kPy311FramePrevInstr = 56,  // prev_instr
  kPy311FrameIsEntry = 68,    // is_entry (bool)
  kPy311FrameOwner = 69,      // owner (char)
  kPy311FrameReadSize = 72,
  // PyObject / PyVarObject
  kPy311ObjectType = 8,  // ob_type
  kPy311VarSize = 16,    // ob_size
  // PyCodeObject (ob_size is the number of 2-byte code units)
  kPy311CodeFirstLineNo = 72,
  kPy311CodeFilename = 112,
  kPy311CodeQualname = 128,
  kPy311CodeLinetable = 136,
  kPy311CodeFirstTraceable = 168,
  kPy311CodeCodeAdaptive = 184,  // co_code_adaptive: the instructions
  kPy311CodeReadSize = 192,
  // PyBytesObject
  kPy311BytesData = 32,  // ob_sval
  // PyASCIIObject / PyCompactUnicodeObject
  kPy311UnicodeLength = 16,
  kPy311UnicodeState = 32,         // interned:2 kind:3 compact:1 ascii:1 ready:1
  kPy311UnicodeAsciiData = 48,     // sizeof(PyASCIIObject)
  kPy311UnicodeCompactData = 72    // sizeof(PyCompactUnicodeObject)
};

#ifdef __cplusplus
}  // namespace internal
}  // namespace matrix
#endif

#endif  // MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_PYTHON311_LAYOUT_H_

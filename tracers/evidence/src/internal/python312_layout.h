// File: tracers/evidence/src/internal/python312_layout.h
//
// The CPython 3.12 (x86-64, LP64) struct offsets python_frames.cc reads; see
// python311_layout.h. Differences that matter: _PyInterpreterFrame starts
// with f_code and previous and has no is_entry (each _PyEval_EvalFrameDefault
// call links a shim frame owned by the C stack, owner 3, before the frames it
// runs); PyASCIIObject lost wstr. Checked against CPython 3.12.1's headers by
// tests/tracers/evidence/python312_layout_check.c when they are installed.
//
//   uintptr_t code_address = frame + kPy312FrameCode;
//
// Thread safety: constants only.

#ifndef MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_PYTHON312_LAYOUT_H_
#define MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_PYTHON312_LAYOUT_H_

#ifdef __cplusplus
namespace matrix {
namespace internal {
#endif

enum MatrixPython312Layout {
  // _PyRuntimeState
  kPy312RuntimeInterpretersHead = 40,  // interpreters.head
  // PyInterpreterState
  kPy312InterpNext = 0,
  kPy312InterpThreadsHead = 72,  // threads.head
  kPy312InterpReadSize = 80,
  // PyThreadState
  kPy312ThreadNext = 8,
  kPy312ThreadInterp = 16,
  kPy312ThreadCFrame = 56,
  kPy312ThreadNativeThreadId = 144,
  kPy312ThreadReadSize = 152,
  // _PyCFrame
  kPy312CFrameCurrentFrame = 0,
  // _PyInterpreterFrame
  kPy312FrameCode = 0,        // f_code
  kPy312FramePrevious = 8,    // previous
  kPy312FramePrevInstr = 56,  // prev_instr
  kPy312FrameOwner = 70,      // owner (char); 3 = FRAME_OWNED_BY_CSTACK (entry shim)
  kPy312FrameReadSize = 72,
  kPy312FrameOwnedByCStack = 3,
  // PyObject / PyVarObject
  kPy312ObjectType = 8,  // ob_type
  kPy312VarSize = 16,    // ob_size
  // PyCodeObject (ob_size is the number of 2-byte code units)
  kPy312CodeFirstLineNo = 68,
  kPy312CodeFilename = 112,
  kPy312CodeQualname = 128,
  kPy312CodeLinetable = 136,
  kPy312CodeFirstTraceable = 176,
  kPy312CodeCodeAdaptive = 192,  // co_code_adaptive: the instructions
  kPy312CodeReadSize = 192,
  // PyBytesObject
  kPy312BytesData = 32,  // ob_sval
  // PyASCIIObject / PyCompactUnicodeObject
  kPy312UnicodeLength = 16,
  kPy312UnicodeState = 32,        // interned:2 kind:3 compact:1 ascii:1 statically_allocated:1
  kPy312UnicodeAsciiData = 40,    // sizeof(PyASCIIObject)
  kPy312UnicodeCompactData = 56   // sizeof(PyCompactUnicodeObject)
};

#ifdef __cplusplus
}  // namespace internal
}  // namespace matrix
#endif

#endif  // MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_PYTHON312_LAYOUT_H_

/* The hard-coded CPython 3.12 offsets (tracers/evidence/src/internal/python312_layout.h)
 * against the interpreter's own headers: compiles only when every one matches.
 * Built when python3.12-dev's headers are installed (tests/CMakeLists.txt). */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>

#include "internal/pycore_frame.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"
#include "internal/python312_layout.h"

#if PY_VERSION_HEX < 0x030c0000 || PY_VERSION_HEX >= 0x030d0000
#error "python312_layout_check needs CPython 3.12 headers"
#endif

#define CHECK(type, field, constant) \
  _Static_assert(offsetof(type, field) == constant, #type "." #field " != " #constant)

CHECK(_PyRuntimeState, interpreters.head, kPy312RuntimeInterpretersHead);
CHECK(PyInterpreterState, next, kPy312InterpNext);
CHECK(PyInterpreterState, threads.head, kPy312InterpThreadsHead);
CHECK(PyThreadState, next, kPy312ThreadNext);
CHECK(PyThreadState, interp, kPy312ThreadInterp);
CHECK(PyThreadState, cframe, kPy312ThreadCFrame);
CHECK(PyThreadState, native_thread_id, kPy312ThreadNativeThreadId);
CHECK(_PyCFrame, current_frame, kPy312CFrameCurrentFrame);
CHECK(_PyInterpreterFrame, f_code, kPy312FrameCode);
CHECK(_PyInterpreterFrame, previous, kPy312FramePrevious);
CHECK(_PyInterpreterFrame, prev_instr, kPy312FramePrevInstr);
CHECK(_PyInterpreterFrame, owner, kPy312FrameOwner);
_Static_assert(FRAME_OWNED_BY_CSTACK == kPy312FrameOwnedByCStack, "FRAME_OWNED_BY_CSTACK");
CHECK(PyObject, ob_type, kPy312ObjectType);
CHECK(PyVarObject, ob_size, kPy312VarSize);
CHECK(PyCodeObject, co_firstlineno, kPy312CodeFirstLineNo);
CHECK(PyCodeObject, co_filename, kPy312CodeFilename);
CHECK(PyCodeObject, co_qualname, kPy312CodeQualname);
CHECK(PyCodeObject, co_linetable, kPy312CodeLinetable);
CHECK(PyCodeObject, _co_firsttraceable, kPy312CodeFirstTraceable);
CHECK(PyCodeObject, co_code_adaptive, kPy312CodeCodeAdaptive);
CHECK(PyBytesObject, ob_sval, kPy312BytesData);
CHECK(PyASCIIObject, length, kPy312UnicodeLength);
CHECK(PyASCIIObject, state, kPy312UnicodeState);
_Static_assert(sizeof(PyASCIIObject) == kPy312UnicodeAsciiData, "sizeof(PyASCIIObject)");
_Static_assert(sizeof(PyCompactUnicodeObject) == kPy312UnicodeCompactData,
               "sizeof(PyCompactUnicodeObject)");
/* The reads cover the fields. */
_Static_assert(kPy312ThreadReadSize >= kPy312ThreadNativeThreadId + 8, "thread read size");
_Static_assert(kPy312FrameReadSize >= kPy312FrameOwner + 1, "frame read size");
_Static_assert(kPy312CodeReadSize >= kPy312CodeCodeAdaptive, "code read size");
_Static_assert(kPy312InterpReadSize >= kPy312InterpThreadsHead + 8, "interp read size");

int main(void) {
  /* The unicode state bit-field order (kind at bit 2, compact 5, ascii 6). */
  PyASCIIObject s;
  memset(&s, 0, sizeof(s));
  s.state.kind = PyUnicode_2BYTE_KIND;
  s.state.compact = 1;
  s.state.ascii = 1;
  unsigned int bits;
  memcpy(&bits, (char*)&s + kPy312UnicodeState, sizeof(bits));
  return bits == ((2u << 2) | (1u << 5) | (1u << 6)) ? 0 : 1;
}

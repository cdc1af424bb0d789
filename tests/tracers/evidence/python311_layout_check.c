/* The hard-coded CPython 3.11 offsets (tracers/evidence/src/internal/python311_layout.h)
 * against the interpreter's own headers: compiles only when every one matches.
 * Built when python3.11-dev's headers are installed (tests/CMakeLists.txt). */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>

#include "internal/pycore_frame.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"
#include "internal/python311_layout.h"

#if PY_VERSION_HEX < 0x030b0000 || PY_VERSION_HEX >= 0x030c0000
#error "python311_layout_check needs CPython 3.11 headers"
#endif

#define CHECK(type, field, constant) \
  _Static_assert(offsetof(type, field) == constant, #type "." #field " != " #constant)

CHECK(_PyRuntimeState, interpreters.head, kPy311RuntimeInterpretersHead);
CHECK(PyInterpreterState, next, kPy311InterpNext);
CHECK(PyInterpreterState, threads.head, kPy311InterpThreadsHead);
CHECK(PyThreadState, next, kPy311ThreadNext);
CHECK(PyThreadState, interp, kPy311ThreadInterp);
CHECK(PyThreadState, cframe, kPy311ThreadCFrame);
CHECK(PyThreadState, native_thread_id, kPy311ThreadNativeThreadId);
CHECK(_PyCFrame, current_frame, kPy311CFrameCurrentFrame);
CHECK(_PyInterpreterFrame, f_code, kPy311FrameCode);
CHECK(_PyInterpreterFrame, previous, kPy311FramePrevious);
CHECK(_PyInterpreterFrame, prev_instr, kPy311FramePrevInstr);
CHECK(_PyInterpreterFrame, is_entry, kPy311FrameIsEntry);
CHECK(_PyInterpreterFrame, owner, kPy311FrameOwner);
CHECK(PyObject, ob_type, kPy311ObjectType);
CHECK(PyVarObject, ob_size, kPy311VarSize);
CHECK(PyCodeObject, co_firstlineno, kPy311CodeFirstLineNo);
CHECK(PyCodeObject, co_filename, kPy311CodeFilename);
CHECK(PyCodeObject, co_qualname, kPy311CodeQualname);
CHECK(PyCodeObject, co_linetable, kPy311CodeLinetable);
CHECK(PyCodeObject, _co_firsttraceable, kPy311CodeFirstTraceable);
CHECK(PyCodeObject, co_code_adaptive, kPy311CodeCodeAdaptive);
CHECK(PyBytesObject, ob_sval, kPy311BytesData);
CHECK(PyASCIIObject, length, kPy311UnicodeLength);
CHECK(PyASCIIObject, state, kPy311UnicodeState);
_Static_assert(sizeof(PyASCIIObject) == kPy311UnicodeAsciiData, "sizeof(PyASCIIObject)");
_Static_assert(sizeof(PyCompactUnicodeObject) == kPy311UnicodeCompactData,
               "sizeof(PyCompactUnicodeObject)");
/* The reads cover the fields. */
_Static_assert(kPy311ThreadReadSize >= kPy311ThreadNativeThreadId + 8, "thread read size");
_Static_assert(kPy311FrameReadSize >= kPy311FrameOwner + 1, "frame read size");
_Static_assert(kPy311CodeReadSize >= kPy311CodeCodeAdaptive, "code read size");
_Static_assert(kPy311InterpReadSize >= kPy311InterpThreadsHead + 8, "interp read size");

int main(void) {
  /* The unicode state bit-field order (kind at bit 2, compact 5, ascii 6). */
  PyASCIIObject s;
  memset(&s, 0, sizeof(s));
  s.state.kind = PyUnicode_2BYTE_KIND;
  s.state.compact = 1;
  s.state.ascii = 1;
  unsigned int bits;
  memcpy(&bits, (char*)&s + kPy311UnicodeState, sizeof(bits));
  return bits == ((2u << 2) | (1u << 5) | (1u << 6)) ? 0 : 1;
}

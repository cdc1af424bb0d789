// File: tracers/evidence/src/internal/qv4_642_layout.h
//
// The Qt 6.4.2 V4 engine (libQt6Qml.so.6.4.2, x86-64, LP64) struct offsets
// qml_frames.cc reads, from Qt 6.4.2's private headers (qv4enginebase_p.h,
// qv4engine_p.h, qv4stackframe_p.h, qv4function_p.h,
// qv4executablecompilationunit_p.h, qv4compileddata_p.h; Debian 12's
// qt6-declarative-private-dev 6.4.2+dfsg-1) and confirmed against the
// disassembly of the exported accessors CppStackFrame::function(), source()
// and lineNumber() and of QJSEngine::QJSEngine(QObject*). They hold for that
// release only: qml_frames.cc reads nothing from any other libQt6Qml.
//
//   uintptr_t frame_address = engine + kQv4EngineCurrentStackFrame;
//
// Thread safety: constants only.

#ifndef MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_QV4_642_LAYOUT_H_
#define MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_QV4_642_LAYOUT_H_

#include <cstddef>
#include <cstdint>

namespace matrix::internal {

enum MatrixQv4642Layout : size_t {
  // QJSEngine (QObject: vptr, d_ptr), then m_v4Engine.
  kQv4JsEngineV4Engine = 16,  // QV4::ExecutionEngine*
  // QV4::EngineBase / QV4::ExecutionEngine.
  kQv4EngineCurrentStackFrame = 0,  // CppStackFrame* (the innermost JS frame)
  kQv4EnginePublicEngine = 392,     // QJSEngine* (null for WorkerScript engines)
  // QV4::CppStackFrame (CppStackFrameBase).
  kQv4FrameParent = 0,               // CppStackFrame*
  kQv4FrameFunction = 8,             // QV4::Function*
  kQv4FrameInstructionPointer = 20,  // int: bytecode offset of the next instruction
  kQv4FrameKind = 80,                // quint8: 0 JS, 1 Meta
  kQv4FrameReadSize = 88,            // sizeof(CppStackFrame)
  // QV4::Function.
  kQv4FunctionCompilationUnit = 0,   // CompilationUnit* (see kQv4UnitVptrBefore)
  kQv4FunctionCompiledFunction = 8,  // const CompiledData::Function*
  kQv4FunctionAotFunction = 40,      // non-null: AOT-compiled (native code)
  kQv4FunctionReadSize = 48,
  // QV4::CompiledData::CompilationUnit, the base at offset 16 of
  // QV4::ExecutableCompilationUnit (whose polymorphic QQmlRefCount base,
  // vptr then refCount, comes first). Offsets from the base's address.
  kQv4UnitVptrBefore = 16,     // *(cu - 16): the ExecutableCompilationUnit vptr
  kQv4UnitRefCountBefore = 8,  // *(int*)(cu - 8): QQmlRefCount::refCount
  kQv4UnitData = 40,           // const CompiledData::Unit*
  kQv4UnitFileName = 88,       // QString m_fileName
  kQv4UnitEngine = 160,        // ExecutionEngine* (ExecutableCompilationUnit::engine)
  kQv4UnitReadSize = 184,      // Read from cu - 16: vptr to engine.
  // QString (QArrayDataPointer<char16_t>): d, ptr, size.
  kQv4QStringPtr = 8,
  kQv4QStringSize = 16,
  kQv4QStringReadSize = 24,
  // QV4::CompiledData::Unit (the compiled unit's immutable data).
  kQv4CdUnitMagic = 0,              // "qv4cdata"
  kQv4CdUnitVersion = 8,            // quint32 QV4_DATA_STRUCTURE_VERSION
  kQv4CdUnitQtVersion = 12,         // quint32 QT_VERSION
  kQv4CdUnitUnitSize = 24,          // quint32
  kQv4CdUnitStringTableSize = 112,  // quint32
  kQv4CdUnitOffsetToStringTable = 116,
  kQv4CdUnitSourceFileIndex = 236,
  kQv4CdUnitReadSize = 248,  // sizeof(Unit)
  // QV4::CompiledData::String: qint32 size, then size UTF-16 units.
  kQv4CdStringChars = 4,
  // QV4::CompiledData::Function.
  kQv4CdFunctionNameIndex = 8,      // quint32
  kQv4CdFunctionLocalsOffset = 24,  // quint32
  kQv4CdFunctionNLocals = 28,       // quint16
  kQv4CdFunctionNLineNumbers = 30,  // quint16
  kQv4CdFunctionLocation = 40,      // quint32: line:20, column:12
  kQv4CdFunctionReadSize = 56,
  // The line table: nLineNumbers CodeOffsetToLine {quint32 codeOffset,
  // quint32 line}, sorted by codeOffset, at cf + localsOffset + 4 * nLocals.
  kQv4LineEntrySize = 8,
};

// QV4_DATA_STRUCTURE_VERSION and QT_VERSION of Qt 6.4.2's compiled units.
inline constexpr uint32_t kQv4642DataStructureVersion = 0x36;
inline constexpr uint32_t kQv4642QtVersion = 0x060402;
// The mangled vtable whose address + 16 is every ExecutableCompilationUnit's vptr.
inline constexpr char kQv4UnitVtableSymbol[] = "_ZTVN3QV425ExecutableCompilationUnitE";

}  // namespace matrix::internal

#endif  // MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_QV4_642_LAYOUT_H_

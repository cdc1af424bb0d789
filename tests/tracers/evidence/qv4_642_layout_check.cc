// Checks every offset of tracers/evidence/src/internal/qv4_642_layout.h (the
// Qt 6.4.2 V4 engine layout qml_frames.cc reads) against Qt 6.4.2's own
// private headers (qt6-declarative-private-dev), when they are installed:
// compile-only, the build fails if one differs (tests/CMakeLists.txt).

#include <cstddef>
#include <type_traits>

#include <QtCore/QObject>
#include <QtCore/QString>
// The fields read are private or protected; offsetof needs them public.
#define private public
#define protected public
#include <QtQml/qjsengine.h>
#include <private/qv4compileddata_p.h>
#include <private/qv4engine_p.h>
#include <private/qv4executablecompilationunit_p.h>
#include <private/qv4function_p.h>
#include <private/qv4stackframe_p.h>
#undef private
#undef protected

#include "internal/qv4_642_layout.h"

namespace m = matrix::internal;

static_assert(QT_VERSION == m::kQv4642QtVersion);
static_assert(QV4_DATA_STRUCTURE_VERSION == m::kQv4642DataStructureVersion);
// QJSEngine and the engine.
static_assert(offsetof(QJSEngine, m_v4Engine) == m::kQv4JsEngineV4Engine);
static_assert(offsetof(QV4::EngineBase, currentStackFrame) == m::kQv4EngineCurrentStackFrame);
static_assert(offsetof(QV4::ExecutionEngine, publicEngine) == m::kQv4EnginePublicEngine);
// Frames.
static_assert(offsetof(QV4::CppStackFrameBase, parent) == m::kQv4FrameParent);
static_assert(offsetof(QV4::CppStackFrameBase, v4Function) == m::kQv4FrameFunction);
static_assert(offsetof(QV4::CppStackFrameBase, instructionPointer) ==
              m::kQv4FrameInstructionPointer);
static_assert(offsetof(QV4::CppStackFrameBase, kind) == m::kQv4FrameKind);
static_assert(sizeof(QV4::CppStackFrame) == m::kQv4FrameReadSize);
static_assert(sizeof(QV4::JSTypesStackFrame) == m::kQv4FrameReadSize);
static_assert(int(QV4::CppStackFrameBase::Kind::JS) == 0 &&
              int(QV4::CppStackFrameBase::Kind::Meta) == 1);
// Functions.
static_assert(offsetof(QV4::Function, compilationUnit) == m::kQv4FunctionCompilationUnit);
static_assert(offsetof(QV4::Function, compiledFunction) == m::kQv4FunctionCompiledFunction);
static_assert(offsetof(QV4::Function, aotFunction) == m::kQv4FunctionAotFunction);
static_assert(offsetof(QV4::Function, aotFunction) + sizeof(void*) <= m::kQv4FunctionReadSize);
// Compilation units: QQmlRefCount (vptr, refCount) first, then the base.
static_assert(std::is_polymorphic_v<QQmlRefCount> &&
              sizeof(QQmlRefCount) == m::kQv4UnitVptrBefore);
static_assert(offsetof(QQmlRefCount, refCount) ==
              m::kQv4UnitVptrBefore - m::kQv4UnitRefCountBefore);
static_assert(offsetof(QV4::CompiledData::CompilationUnit, data) == m::kQv4UnitData);
static_assert(offsetof(QV4::CompiledData::CompilationUnit, m_fileName) == m::kQv4UnitFileName);
static_assert(offsetof(QV4::ExecutableCompilationUnit, engine) - m::kQv4UnitVptrBefore ==
              m::kQv4UnitEngine);
static_assert(m::kQv4UnitVptrBefore + m::kQv4UnitEngine + sizeof(void*) <= m::kQv4UnitReadSize);
static_assert(offsetof(QArrayDataPointer<char16_t>, ptr) == m::kQv4QStringPtr);
static_assert(offsetof(QArrayDataPointer<char16_t>, size) == m::kQv4QStringSize);
static_assert(sizeof(QArrayDataPointer<char16_t>) == m::kQv4QStringReadSize);
// The compiled unit, its strings, functions and line tables.
static_assert(offsetof(QV4::CompiledData::Unit, magic) == m::kQv4CdUnitMagic);
static_assert(offsetof(QV4::CompiledData::Unit, version) == m::kQv4CdUnitVersion);
static_assert(offsetof(QV4::CompiledData::Unit, qtVersion) == m::kQv4CdUnitQtVersion);
static_assert(offsetof(QV4::CompiledData::Unit, unitSize) == m::kQv4CdUnitUnitSize);
static_assert(offsetof(QV4::CompiledData::Unit, stringTableSize) ==
              m::kQv4CdUnitStringTableSize);
static_assert(offsetof(QV4::CompiledData::Unit, offsetToStringTable) ==
              m::kQv4CdUnitOffsetToStringTable);
static_assert(offsetof(QV4::CompiledData::Unit, sourceFileIndex) ==
              m::kQv4CdUnitSourceFileIndex);
static_assert(sizeof(QV4::CompiledData::Unit) == m::kQv4CdUnitReadSize);
static_assert(sizeof(QV4::CompiledData::String) == m::kQv4CdStringChars);
static_assert(offsetof(QV4::CompiledData::Function, nameIndex) == m::kQv4CdFunctionNameIndex);
static_assert(offsetof(QV4::CompiledData::Function, localsOffset) ==
              m::kQv4CdFunctionLocalsOffset);
static_assert(offsetof(QV4::CompiledData::Function, nLocals) == m::kQv4CdFunctionNLocals);
static_assert(offsetof(QV4::CompiledData::Function, nLineNumbers) ==
              m::kQv4CdFunctionNLineNumbers);
static_assert(offsetof(QV4::CompiledData::Function, location) == m::kQv4CdFunctionLocation);
static_assert(sizeof(QV4::CompiledData::Function) == m::kQv4CdFunctionReadSize);
static_assert(sizeof(QV4::CompiledData::CodeOffsetToLine) == m::kQv4LineEntrySize &&
              offsetof(QV4::CompiledData::CodeOffsetToLine, line) == 4);

#include "matrix/trace/qml_frames.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "internal/qv4_642_layout.h"
#include "internal/safe_read.h"
#include "matrix/core/file_path.h"

namespace matrix {
namespace {

using internal::kQv4642DataStructureVersion;
using internal::kQv4642QtVersion;
using internal::kQv4CdFunctionLocalsOffset;
using internal::kQv4CdFunctionLocation;
using internal::kQv4CdFunctionNameIndex;
using internal::kQv4CdFunctionNLineNumbers;
using internal::kQv4CdFunctionNLocals;
using internal::kQv4CdFunctionReadSize;
using internal::kQv4CdStringChars;
using internal::kQv4CdUnitMagic;
using internal::kQv4CdUnitOffsetToStringTable;
using internal::kQv4CdUnitQtVersion;
using internal::kQv4CdUnitReadSize;
using internal::kQv4CdUnitSourceFileIndex;
using internal::kQv4CdUnitStringTableSize;
using internal::kQv4CdUnitUnitSize;
using internal::kQv4CdUnitVersion;
using internal::kQv4EngineCurrentStackFrame;
using internal::kQv4EnginePublicEngine;
using internal::kQv4FrameFunction;
using internal::kQv4FrameInstructionPointer;
using internal::kQv4FrameKind;
using internal::kQv4FrameParent;
using internal::kQv4FrameReadSize;
using internal::kQv4FunctionCompilationUnit;
using internal::kQv4FunctionCompiledFunction;
using internal::kQv4FunctionReadSize;
using internal::kQv4JsEngineV4Engine;
using internal::kQv4LineEntrySize;
using internal::kQv4QStringPtr;
using internal::kQv4QStringSize;
using internal::kQv4UnitData;
using internal::kQv4UnitEngine;
using internal::kQv4UnitFileName;
using internal::kQv4UnitReadSize;
using internal::kQv4UnitRefCountBefore;
using internal::kQv4UnitVptrBefore;
using internal::kQv4UnitVtableSymbol;
using internal::ChainWalk;
using internal::Field;
using internal::PlausiblePointer;
using internal::SafeRead;

// The library whose layout qv4_642_layout.h describes, by its real file name.
constexpr char kSupportedLibrary[] = "libQt6Qml.so.6.4.2";

// Bounds.
constexpr int kMaxSteps = 2 * kMaxQmlFrames;  // Frames visited, skipped ones included.
constexpr int kEngineProbeFrames = 8;         // Chain frames tried when picking the engine.
constexpr uintptr_t kStackSpan = uintptr_t{64} << 20;
constexpr int64_t kMaxName = 1024;  // UTF-16 units.
constexpr int64_t kMaxFile = 4096;
constexpr uint32_t kMaxUnitSize = uint32_t{1} << 30;
constexpr uint32_t kMaxLine = (uint32_t{1} << 20) - 1;  // The width of Function::location's line.


bool Read(uintptr_t address, void* out, size_t size) {
  return SafeRead(getpid(), address, out, size);
}

QmlReadError Fail(RawQmlStack* out, QmlReadError error) {
  out->depth = 0;
  out->truncated = false;
  out->error = error;
  return error;
}

// The process-wide runtime (written once, before `g_current` publishes it)
// and the engine registry.
QmlRuntimeInfo g_runtime;
std::atomic<const QmlRuntimeInfo*> g_current{nullptr};
// Each entry: the engine, and its QJSEngine (its back link when registered,
// 0 for WorkerScript engines), checked again at every capture: a destroyed
// engine's memory, reused, no longer links back.
struct EngineEntry {
  std::atomic<uintptr_t> engine{0};
  std::atomic<uintptr_t> js_engine{0};
};
EngineEntry g_engines[kMaxQmlEngines];
std::atomic<unsigned> g_next_engine{0};

void AddEngine(uintptr_t js_engine, uintptr_t engine) {
  for (EngineEntry& entry : g_engines) {
    if (entry.engine.load(std::memory_order_acquire) == engine) {  // Address reused.
      entry.js_engine.store(js_engine, std::memory_order_release);
      return;
    }
  }
  EngineEntry* target = nullptr;
  for (EngineEntry& entry : g_engines) {
    uintptr_t expected = 0;
    if (entry.engine.compare_exchange_strong(expected, engine, std::memory_order_acq_rel)) {
      target = &entry;
      break;
    }
  }
  if (target == nullptr) {
    // Full: replace the entries in turn.
    target = &g_engines[g_next_engine.fetch_add(1, std::memory_order_relaxed) % kMaxQmlEngines];
    target->engine.store(engine, std::memory_order_release);
  }
  // A capture between the two stores sees a mismatched pair and skips it.
  target->js_engine.store(js_engine, std::memory_order_release);
}

// The owner of the frame at `address` among the native frames whose stack
// pointers are `sps` (ascending): -1 when outside them.
int16_t OwnerOf(uintptr_t address, const uintptr_t* sps, int depth) {
  for (int i = 0; i + 1 < depth; ++i) {
    if (sps[i] <= address && address < sps[i + 1]) return static_cast<int16_t>(i);
  }
  return -1;
}

// Appends the UTF-8 encoding of `c` to `out`.
void AppendUtf8(uint32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

// `length` UTF-16 units at `chars` as UTF-8 (surrogate pairs joined, a lone
// surrogate as U+FFFD).
absl::StatusOr<std::string> ReadUtf16(uintptr_t chars, int64_t length, int64_t max_length) {
  if (length < 0 || length > max_length) return absl::DataLossError("string length out of range");
  if (length == 0) return std::string();
  if (!PlausiblePointer(chars, 2)) return absl::DataLossError("bad string pointer");
  std::u16string raw(static_cast<size_t>(length), u'\0');
  if (!Read(chars, raw.data(), raw.size() * 2)) return absl::DataLossError("string unreadable");
  std::string utf8;
  utf8.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    uint32_t c = raw[i];
    if (c >= 0xd800 && c < 0xdc00 && i + 1 < raw.size() && raw[i + 1] >= 0xdc00 &&
        raw[i + 1] < 0xe000) {
      c = 0x10000 + ((c - 0xd800) << 10) + (raw[++i] - 0xdc00);
    } else if (c >= 0xd800 && c < 0xe000) {
      c = 0xfffd;
    }
    AppendUtf8(c, &utf8);
  }
  return utf8;
}

// String `index` of the compiled unit at `unit` (whose header is `header`):
// an offset table entry, then {qint32 size, UTF-16 units}, all inside the
// unit.
absl::StatusOr<std::string> ReadUnitString(uintptr_t unit, const unsigned char* header,
                                           uint32_t index, int64_t max_length) {
  const uint32_t unit_size = Field<uint32_t>(header, kQv4CdUnitUnitSize);
  const uint32_t count = Field<uint32_t>(header, kQv4CdUnitStringTableSize);
  const uint32_t table = Field<uint32_t>(header, kQv4CdUnitOffsetToStringTable);
  if (index >= count || table >= unit_size || (unit_size - table) / 4 <= index) {
    return absl::DataLossError("string index out of range");
  }
  uint32_t offset = 0;
  if (!Read(unit + table + 4 * uintptr_t{index}, &offset, sizeof(offset))) {
    return absl::DataLossError("string table unreadable");
  }
  int32_t size = 0;
  if (offset > unit_size - kQv4CdStringChars || !Read(unit + offset, &size, sizeof(size))) {
    return absl::DataLossError("string unreadable");
  }
  if (size < 0 || uint64_t{offset} + kQv4CdStringChars + 2 * uint64_t(size) > unit_size) {
    return absl::DataLossError("string outside its unit");
  }
  return ReadUtf16(unit + offset + kQv4CdStringChars, size, max_length);
}

}  // namespace

const char* QmlReadErrorName(QmlReadError error) {
  switch (error) {
    case QmlReadError::kNone:
      return "ok";
    case QmlReadError::kNoRuntime:
      return "no supported Qt QML runtime";
    case QmlReadError::kNoEngine:
      return "no QML engine runs on this thread";
    case QmlReadError::kFault:
      return "unreadable memory";
    case QmlReadError::kBadPointer:
      return "invalid pointer or field";
    case QmlReadError::kCycle:
      return "the frame chain loops";
  }
  return "?";
}

absl::Status DetectQmlRuntime(QmlRuntimeInfo* out) {
  void* vtable = dlsym(RTLD_DEFAULT, kQv4UnitVtableSymbol);
  if (vtable == nullptr) {
    // Loaded with RTLD_LOCAL (by a plugin): not in the global scope.
    if (void* handle = dlopen("libQt6Qml.so.6", RTLD_NOW | RTLD_NOLOAD)) {
      vtable = dlsym(handle, kQv4UnitVtableSymbol);
      dlclose(handle);  // RTLD_NOLOAD took a reference; the program keeps its own.
    }
  }
  if (vtable == nullptr) return absl::NotFoundError("no libQt6Qml in the process");
  Dl_info info;
  if (dladdr(vtable, &info) == 0 || info.dli_fname == nullptr) {
    return absl::NotFoundError("libQt6Qml's file not known");
  }
  char real[PATH_MAX];
  if (realpath(info.dli_fname, real) == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", info.dli_fname));
  }
  const std::string path = real;
  const std::string base(BaseName(path));
#if defined(__x86_64__)
  if (base != kSupportedLibrary) {
    return absl::UnimplementedError(absl::StrCat(base, ": only the V4 frame layout of ",
                                                 kSupportedLibrary, " (Qt 6.4.2) is known"));
  }
#else
  return absl::UnimplementedError("the V4 frame layout is known on x86-64 only");
#endif
  out->unit_vptr = reinterpret_cast<uintptr_t>(vtable) + 16;
  return absl::OkStatus();
}

const QmlRuntimeInfo* CurrentQmlRuntime() { return g_current.load(std::memory_order_acquire); }

uintptr_t QmlEngineOf(uintptr_t js_engine) {
  uintptr_t engine = 0;
  if (!PlausiblePointer(js_engine) || !Read(js_engine + kQv4JsEngineV4Engine, &engine, sizeof(engine))) {
    return 0;
  }
  return engine;
}

bool RegisterQmlEngine(uintptr_t js_engine, uintptr_t engine) {
  static absl::Mutex mu(absl::kConstInit);
  static bool detected = false;
  {
    absl::MutexLock lock(&mu);
    if (!detected) {
      detected = true;
      QmlRuntimeInfo found;
      if (DetectQmlRuntime(&found).ok()) {
        g_runtime = found;
        g_current.store(&g_runtime, std::memory_order_release);
      }
    }
  }
  if (CurrentQmlRuntime() == nullptr || !PlausiblePointer(engine)) return false;
  // The layout probe: the engine's back link to its QJSEngine, and a
  // readable current frame pointer.
  uintptr_t public_engine = 1;
  uintptr_t frame = 1;
  if (!Read(engine + kQv4EnginePublicEngine, &public_engine, sizeof(public_engine)) ||
      public_engine != js_engine ||
      !Read(engine + kQv4EngineCurrentStackFrame, &frame, sizeof(frame)) ||
      (frame != 0 && !PlausiblePointer(frame))) {
    return false;
  }
  AddEngine(js_engine, engine);
  return true;
}

void SetQmlRuntimeForTesting(const QmlRuntimeInfo* runtime) {
  for (EngineEntry& entry : g_engines) {
    entry.engine.store(0, std::memory_order_relaxed);
    entry.js_engine.store(0, std::memory_order_relaxed);
  }
  g_next_engine.store(0, std::memory_order_relaxed);
  if (runtime == nullptr) {
    g_current.store(nullptr, std::memory_order_release);
    return;
  }
  g_runtime = *runtime;
  g_current.store(&g_runtime, std::memory_order_release);
}

void RegisterQmlEngineForTesting(uintptr_t js_engine, uintptr_t engine) {
  AddEngine(js_engine, engine);
}

QmlReadError ReadQmlStack(uintptr_t engine, const uintptr_t* stack_pointers, int depth,
                          RawQmlStack* out) {
  out->engine = engine;
  if (!PlausiblePointer(engine)) return Fail(out, QmlReadError::kBadPointer);
  uintptr_t frame = 0;
  if (!Read(engine + kQv4EngineCurrentStackFrame, &frame, sizeof(frame))) {
    return Fail(out, QmlReadError::kFault);
  }
  ChainWalk<kMaxSteps> walk;
  int kept = 0;
  bool truncated = false;
  while (frame != 0) {
    if (kept == kMaxQmlFrames || walk.full()) {
      truncated = true;
      break;
    }
    if (!PlausiblePointer(frame)) return Fail(out, QmlReadError::kBadPointer);
    if (!walk.Visit(frame)) return Fail(out, QmlReadError::kCycle);
    unsigned char fields[kQv4FrameReadSize];
    if (!Read(frame, fields, sizeof(fields))) return Fail(out, QmlReadError::kFault);
    const uintptr_t function = Field<uintptr_t>(fields, kQv4FrameFunction);
    const int32_t ip = Field<int32_t>(fields, kQv4FrameInstructionPointer);
    const uint8_t kind = fields[kQv4FrameKind];
    if (kind > 1 || (function != 0 && !PlausiblePointer(function))) {
      return Fail(out, QmlReadError::kBadPointer);
    }
    const uintptr_t address = frame;
    frame = Field<uintptr_t>(fields, kQv4FrameParent);
    if (function == 0) continue;  // A scope frame (default constructor, top level).
    RawQmlFrame raw;
    raw.function = function;
    raw.ip = ip;
    raw.kind = kind;
    raw.owner = OwnerOf(address, stack_pointers, depth);
    // A Meta frame repeating its outer neighbour (a scoped frame copies its
    // parent's function and position) gives way to it.
    if (kept > 0) {
      const RawQmlFrame& inner = out->frames[static_cast<size_t>(kept - 1)];
      if (inner.kind == 1 && inner.function == function && inner.ip == ip) --kept;
    }
    out->frames[static_cast<size_t>(kept++)] = raw;
  }
  out->depth = kept;
  out->truncated = truncated;
  out->error = QmlReadError::kNone;
  return QmlReadError::kNone;
}

void CaptureQmlStack(const uintptr_t* stack_pointers, int depth, RawQmlStack* out) {
  out->engine = 0;
  if (CurrentQmlRuntime() == nullptr || depth <= 0) {
    Fail(out, QmlReadError::kNoRuntime);
    return;
  }
  const uintptr_t low = stack_pointers[0];
  const uintptr_t high = low + kStackSpan < low ? UINTPTR_MAX : low + kStackSpan;
  uintptr_t best = 0;
  uintptr_t best_address = UINTPTR_MAX;
  bool any = false;
  for (const EngineEntry& entry : g_engines) {
    const uintptr_t engine = entry.engine.load(std::memory_order_acquire);
    if (engine == 0) continue;
    any = true;
    // Still the engine registered: it links back to its QJSEngine.
    uintptr_t public_engine = 0;
    if (!Read(engine + kQv4EnginePublicEngine, &public_engine, sizeof(public_engine)) ||
        public_engine != entry.js_engine.load(std::memory_order_acquire)) {
      continue;
    }
    uintptr_t frame = 0;
    if (!Read(engine + kQv4EngineCurrentStackFrame, &frame, sizeof(frame))) continue;
    // Generator frames live on the heap: try a few parents.
    for (int i = 0; i < kEngineProbeFrames && PlausiblePointer(frame); ++i) {
      if (frame >= low && frame < high) {
        if (frame < best_address) {
          best = engine;
          best_address = frame;
        }
        break;
      }
      if (!Read(frame + kQv4FrameParent, &frame, sizeof(frame))) break;
    }
  }
  if (best == 0) {
    Fail(out, any ? QmlReadError::kNoEngine : QmlReadError::kNoRuntime);
    return;
  }
  ReadQmlStack(best, stack_pointers, depth, out);
}

absl::StatusOr<QmlFrameInfo> ResolveQmlFrame(const QmlRuntimeInfo& runtime, uintptr_t engine,
                                             const RawQmlFrame& frame) {
  if (!PlausiblePointer(frame.function)) return absl::DataLossError("bad function pointer");
  unsigned char function[kQv4FunctionReadSize];
  if (!Read(frame.function, function, sizeof(function))) {
    return absl::DataLossError("function unreadable");
  }
  const uintptr_t cu = Field<uintptr_t>(function, kQv4FunctionCompilationUnit);
  const uintptr_t cf = Field<uintptr_t>(function, kQv4FunctionCompiledFunction);
  if (!PlausiblePointer(cu) || !PlausiblePointer(cf, 4)) return absl::DataLossError("no compiled function");
  unsigned char unit_fields[kQv4UnitReadSize];
  if (!Read(cu - kQv4UnitVptrBefore, unit_fields, sizeof(unit_fields))) {
    return absl::DataLossError("compilation unit unreadable");
  }
  auto unit_field = [&](size_t offset) { return offset + kQv4UnitVptrBefore; };
  if (Field<uintptr_t>(unit_fields, 0) != runtime.unit_vptr) {
    return absl::DataLossError("not a compilation unit (freed or reused)");
  }
  if (Field<int32_t>(unit_fields, kQv4UnitVptrBefore - kQv4UnitRefCountBefore) <= 0) {
    return absl::DataLossError("compilation unit released");
  }
  if (engine != 0 && Field<uintptr_t>(unit_fields, unit_field(kQv4UnitEngine)) != engine) {
    return absl::DataLossError("compilation unit of another engine");
  }
  const uintptr_t unit = Field<uintptr_t>(unit_fields, unit_field(kQv4UnitData));
  unsigned char header[kQv4CdUnitReadSize];
  if (!PlausiblePointer(unit) || !Read(unit, header, sizeof(header))) {
    return absl::DataLossError("compiled unit unreadable");
  }
  const uint32_t unit_size = Field<uint32_t>(header, kQv4CdUnitUnitSize);
  if (memcmp(header + kQv4CdUnitMagic, "qv4cdata", 8) != 0 ||
      Field<uint32_t>(header, kQv4CdUnitVersion) != kQv4642DataStructureVersion ||
      Field<uint32_t>(header, kQv4CdUnitQtVersion) != kQv4642QtVersion ||
      unit_size < kQv4CdUnitReadSize || unit_size > kMaxUnitSize) {
    return absl::DataLossError("not a Qt 6.4.2 compiled unit (magic, version)");
  }
  // The compiled function is part of its unit.
  if (cf < unit + kQv4CdUnitReadSize || cf - unit > unit_size - kQv4CdFunctionReadSize) {
    return absl::DataLossError("compiled function outside its unit");
  }
  unsigned char compiled[kQv4CdFunctionReadSize];
  if (!Read(cf, compiled, sizeof(compiled))) {
    return absl::DataLossError("compiled function unreadable");
  }
  QmlFrameInfo info;
  info.first_line = static_cast<int>(Field<uint32_t>(compiled, kQv4CdFunctionLocation) & kMaxLine);
  absl::StatusOr<std::string> name =
      ReadUnitString(unit, header, Field<uint32_t>(compiled, kQv4CdFunctionNameIndex), kMaxName);
  if (!name.ok()) return name.status();
  // The file: the unit's m_fileName (what Qt's own stack traces show), else
  // the compiled unit's source file name.
  absl::StatusOr<std::string> file = absl::DataLossError("no file name");
  const uintptr_t file_chars =
      Field<uintptr_t>(unit_fields, unit_field(kQv4UnitFileName) + kQv4QStringPtr);
  const int64_t file_length =
      Field<int64_t>(unit_fields, unit_field(kQv4UnitFileName) + kQv4QStringSize);
  if (file_length > 0) file = ReadUtf16(file_chars, file_length, kMaxFile);
  if (!file.ok() || file->empty()) {
    file =
        ReadUnitString(unit, header, Field<uint32_t>(header, kQv4CdUnitSourceFileIndex), kMaxFile);
  }
  // The line: CppStackFrame::lineNumber(), the last entry of the line table
  // whose code offset is below the frame's instruction pointer.
  info.line = info.first_line;
  const uint16_t lines = Field<uint16_t>(compiled, kQv4CdFunctionNLineNumbers);
  if (frame.ip > 0 && lines > 0) {
    const uint64_t table = (cf - unit) + Field<uint32_t>(compiled, kQv4CdFunctionLocalsOffset) +
                           4 * uint64_t{Field<uint16_t>(compiled, kQv4CdFunctionNLocals)};
    if (table + uint64_t{lines} * kQv4LineEntrySize > unit_size) {
      return absl::DataLossError("line table outside its unit");
    }
    std::vector<uint32_t> entries(2 * size_t{lines});
    if (!Read(unit + table, entries.data(), entries.size() * sizeof(uint32_t))) {
      return absl::DataLossError("line table unreadable");
    }
    for (size_t i = 0; i < lines && entries[2 * i] < static_cast<uint32_t>(frame.ip); ++i) {
      if (entries[2 * i + 1] <= kMaxLine) {
        info.line = static_cast<int>(entries[2 * i + 1]);
        info.line_exact = true;
      }
    }
  }
  // Re-check the unit: it may have been freed while we read it.
  uintptr_t vptr = 0;
  if (!Read(cu - kQv4UnitVptrBefore, &vptr, sizeof(vptr)) || vptr != runtime.unit_vptr) {
    return absl::DataLossError("compilation unit freed while reading");
  }
  if (name->empty()) {
    info.function = "<anonymous>";
  } else if (*name == "%entry") {
    info.function = "<global>";
  } else {
    info.function = *std::move(name);
  }
  if (file.ok()) {
    info.file = *std::move(file);
    if (absl::StartsWith(info.file, "file:///")) info.file.erase(0, 7);
  }
  return info;
}

}  // namespace matrix

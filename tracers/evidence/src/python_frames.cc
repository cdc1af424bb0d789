#include "matrix/trace/python_frames.h"

#include <dlfcn.h>
#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "matrix/core/tick_clock.h"
#include "internal/python311_layout.h"
#include "internal/python312_layout.h"
#include "internal/safe_read.h"

namespace matrix {
namespace {

using internal::ChainWalk;
using internal::Field;
using internal::PlausiblePointer;

// The struct offsets of one CPython minor version (x86-64).
struct Layout {
  size_t runtime_interpreters_head;
  size_t interp_next, interp_threads_head, interp_read_size;
  size_t thread_next, thread_interp, thread_cframe, thread_native_thread_id, thread_read_size;
  size_t cframe_current_frame;
  size_t frame_code, frame_previous, frame_prev_instr, frame_owner, frame_read_size;
  // 3.11: the is_entry flag. 3.12: none (kNoField); each eval call links a
  // shim frame owned by the C stack (owner `frame_owner_cstack`) before the
  // frames it runs.
  size_t frame_is_entry;
  int frame_owner_max;
  int frame_owner_cstack;  // -1: no shim frames.
  size_t object_type, var_size;
  size_t code_first_line_no, code_filename, code_qualname, code_linetable, code_first_traceable,
      code_code_adaptive, code_read_size;
  size_t bytes_data;
  size_t unicode_length, unicode_state, unicode_ascii_data, unicode_compact_data;
};
constexpr size_t kNoField = ~size_t{0};

// CPython 3.11: tracers/evidence/src/internal/python311_layout.h, checked against
// Debian 12's python3.11-dev (3.11.2) by tests/tracers/evidence/python311_layout_check.c.
constexpr Layout kLayout311 = {internal::kPy311RuntimeInterpretersHead,
                               internal::kPy311InterpNext,
                               internal::kPy311InterpThreadsHead,
                               internal::kPy311InterpReadSize,
                               internal::kPy311ThreadNext,
                               internal::kPy311ThreadInterp,
                               internal::kPy311ThreadCFrame,
                               internal::kPy311ThreadNativeThreadId,
                               internal::kPy311ThreadReadSize,
                               internal::kPy311CFrameCurrentFrame,
                               internal::kPy311FrameCode,
                               internal::kPy311FramePrevious,
                               internal::kPy311FramePrevInstr,
                               internal::kPy311FrameOwner,
                               internal::kPy311FrameReadSize,
                               internal::kPy311FrameIsEntry,
                               /*frame_owner_max=*/2,
                               /*frame_owner_cstack=*/-1,
                               internal::kPy311ObjectType,
                               internal::kPy311VarSize,
                               internal::kPy311CodeFirstLineNo,
                               internal::kPy311CodeFilename,
                               internal::kPy311CodeQualname,
                               internal::kPy311CodeLinetable,
                               internal::kPy311CodeFirstTraceable,
                               internal::kPy311CodeCodeAdaptive,
                               internal::kPy311CodeReadSize,
                               internal::kPy311BytesData,
                               internal::kPy311UnicodeLength,
                               internal::kPy311UnicodeState,
                               internal::kPy311UnicodeAsciiData,
                               internal::kPy311UnicodeCompactData};

// CPython 3.12: tracers/evidence/src/internal/python312_layout.h, checked against
// CPython 3.12.1 by tests/tracers/evidence/python312_layout_check.c.
constexpr Layout kLayout312 = {internal::kPy312RuntimeInterpretersHead,
                               internal::kPy312InterpNext,
                               internal::kPy312InterpThreadsHead,
                               internal::kPy312InterpReadSize,
                               internal::kPy312ThreadNext,
                               internal::kPy312ThreadInterp,
                               internal::kPy312ThreadCFrame,
                               internal::kPy312ThreadNativeThreadId,
                               internal::kPy312ThreadReadSize,
                               internal::kPy312CFrameCurrentFrame,
                               internal::kPy312FrameCode,
                               internal::kPy312FramePrevious,
                               internal::kPy312FramePrevInstr,
                               internal::kPy312FrameOwner,
                               internal::kPy312FrameReadSize,
                               kNoField,
                               /*frame_owner_max=*/3,
                               internal::kPy312FrameOwnedByCStack,
                               internal::kPy312ObjectType,
                               internal::kPy312VarSize,
                               internal::kPy312CodeFirstLineNo,
                               internal::kPy312CodeFilename,
                               internal::kPy312CodeQualname,
                               internal::kPy312CodeLinetable,
                               internal::kPy312CodeFirstTraceable,
                               internal::kPy312CodeCodeAdaptive,
                               internal::kPy312CodeReadSize,
                               internal::kPy312BytesData,
                               internal::kPy312UnicodeLength,
                               internal::kPy312UnicodeState,
                               internal::kPy312UnicodeAsciiData,
                               internal::kPy312UnicodeCompactData};

// Room for the largest struct read, for fixed buffers.
constexpr size_t kMaxStructRead = 256;
static_assert(internal::kPy311ThreadReadSize <= kMaxStructRead &&
              internal::kPy312ThreadReadSize <= kMaxStructRead &&
              internal::kPy311CodeReadSize <= kMaxStructRead &&
              internal::kPy312CodeReadSize <= kMaxStructRead &&
              internal::kPy312InterpReadSize <= kMaxStructRead);

// The layout of the CPython whose PY_VERSION_HEX is `version_hex`; nullptr
// when unknown.
const Layout* LayoutFor(uint32_t version_hex) {
#if defined(__x86_64__)
  switch (version_hex >> 16) {
    case 0x030b:
      return &kLayout311;
    case 0x030c:
      return &kLayout312;
    default:
      return nullptr;
  }
#else
  (void)version_hex;
  return nullptr;
#endif
}

// Bounds on the walks (each step is one process_vm_readv).
constexpr int kMaxInterpreters = 16;
constexpr int kMaxThreadStates = 256;
constexpr int64_t kMaxCodeUnits = int64_t{1} << 24;
constexpr int64_t kMaxLineTable = int64_t{1} << 20;
constexpr int kMaxLine = 1 << 24;
constexpr int64_t kMaxQualname = 1024;
constexpr int64_t kMaxFilename = 4096;


// process_vm_readv on our own pid: EFAULT, not SIGSEGV, for unmapped memory.
class Reader {
 public:
  Reader() : pid_(getpid()) {}
  bool Read(uintptr_t address, void* out, size_t size) const {
    return internal::SafeRead(pid_, address, out, size);
  }
  bool ReadPointer(uintptr_t address, uintptr_t* out) const {
    return Read(address, out, sizeof(*out));
  }

 private:
  pid_t pid_;
};

// Reads through a few cached pages: one process_vm_readv per 4 KiB page
// instead of one per frame (a thread's frames sit together in its data
// stack chunks). Only for memory that does not change during the read: the
// interrupted thread's own frames, read from its signal handler. A page
// that cannot be read whole is bypassed (exact reads).
class PageCache {
 public:
  static constexpr size_t kPageSize = 4096;
  static constexpr int kPages = 4;

  bool Read(const Reader& reader, uintptr_t address, void* out, size_t size) {
    if (size > kPageSize) return reader.Read(address, out, size);
    auto* dest = static_cast<unsigned char*>(out);
    while (size > 0) {
      const uintptr_t page = address & ~(kPageSize - 1);
      const size_t in_page = std::min(size, static_cast<size_t>(page + kPageSize - address));
      const unsigned char* data = Page(reader, page);
      if (data == nullptr) {
        if (!reader.Read(address, dest, in_page)) return false;
      } else {
        memcpy(dest, data + (address - page), in_page);
      }
      dest += in_page;
      address += in_page;
      size -= in_page;
    }
    return true;
  }

  void Clear() {
    for (uintptr_t& page : pages_) page = 0;
  }

 private:
  const unsigned char* Page(const Reader& reader, uintptr_t page) {
    for (int i = 0; i < kPages; ++i) {
      if (pages_[i] == page) return data_[i];
    }
    const int victim = next_++ % kPages;
    pages_[victim] = 0;
    if (!reader.Read(page, data_[victim], kPageSize)) return nullptr;
    pages_[victim] = page;
    return data_[victim];
  }

  uintptr_t pages_[kPages] = {};
  unsigned int next_ = 0;
  unsigned char data_[kPages][kPageSize];
};

// A pool of caches for concurrent readers (handlers on several threads);
// a reader that finds none free reads uncached. Async-signal-safe.
constexpr int kCaches = 4;
PageCache g_caches[kCaches];
std::atomic<bool> g_cache_busy[kCaches];

class ScopedPageCache {
 public:
  ScopedPageCache() {
    for (int i = 0; i < kCaches; ++i) {
      if (!g_cache_busy[i].exchange(true, std::memory_order_acquire)) {
        index_ = i;
        g_caches[i].Clear();
        return;
      }
    }
  }
  ~ScopedPageCache() {
    if (index_ >= 0) g_cache_busy[index_].store(false, std::memory_order_release);
  }
  bool Read(const Reader& reader, uintptr_t address, void* out, size_t size) {
    return index_ >= 0 ? g_caches[index_].Read(reader, address, out, size)
                       : reader.Read(address, out, size);
  }

 private:
  int index_ = -1;
};

PythonReadError Fail(RawPythonStack* out, PythonReadError error) {
  out->depth = 0;
  out->truncated = false;
  out->error = error;
  return error;
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
  } else if (c < 0x110000) {
    out->push_back(static_cast<char>(0xf0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out->append("\xef\xbf\xbd");  // U+FFFD
  }
}

// A compact str object (code objects' names and file names always are).
absl::StatusOr<std::string> ReadUnicode(const Reader& reader, const PythonRuntimeInfo& runtime,
                                        const Layout& layout, uintptr_t address,
                                        int64_t max_length) {
  if (!PlausiblePointer(address)) return absl::DataLossError("bad str pointer");
  unsigned char header[kMaxStructRead];
  if (!reader.Read(address, header, layout.unicode_ascii_data)) {
    return absl::DataLossError("str unreadable");
  }
  if (Field<uintptr_t>(header, layout.object_type) != runtime.unicode_type) {
    return absl::DataLossError("not a str");
  }
  const int64_t length = Field<int64_t>(header, layout.unicode_length);
  if (length < 0 || length > max_length) return absl::DataLossError("str length out of range");
  const uint32_t state = Field<uint32_t>(header, layout.unicode_state);
  const uint32_t kind = (state >> 2) & 7;
  const bool compact = ((state >> 5) & 1) != 0;
  const bool ascii = ((state >> 6) & 1) != 0;
  if (!compact || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1)) {
    return absl::DataLossError("not a compact str");
  }
  const uintptr_t data =
      address + (ascii ? layout.unicode_ascii_data : layout.unicode_compact_data);
  std::string raw(static_cast<size_t>(length) * kind, '\0');
  if (!reader.Read(data, raw.data(), raw.size())) return absl::DataLossError("str unreadable");
  if (ascii) return raw;
  std::string utf8;
  utf8.reserve(raw.size());
  for (int64_t i = 0; i < length; ++i) {
    uint32_t c = 0;
    const auto* p = reinterpret_cast<const unsigned char*>(raw.data()) + i * kind;
    if (kind == 1) c = p[0];
    if (kind == 2) c = Field<uint16_t>(p, 0);
    if (kind == 4) c = Field<uint32_t>(p, 0);
    AppendUtf8(c, &utf8);
  }
  return utf8;
}

absl::StatusOr<std::string> ReadBytes(const Reader& reader, const PythonRuntimeInfo& runtime,
                                      const Layout& layout, uintptr_t address, int64_t max_size) {
  if (!PlausiblePointer(address)) return absl::DataLossError("bad bytes pointer");
  unsigned char header[kMaxStructRead];
  if (!reader.Read(address, header, layout.bytes_data)) {
    return absl::DataLossError("bytes unreadable");
  }
  if (Field<uintptr_t>(header, layout.object_type) != runtime.bytes_type) {
    return absl::DataLossError("not a bytes object");
  }
  const int64_t size = Field<int64_t>(header, layout.var_size);
  if (size < 0 || size > max_size) return absl::DataLossError("bytes size out of range");
  std::string data(static_cast<size_t>(size), '\0');
  if (!reader.Read(address + layout.bytes_data, data.data(), data.size())) {
    return absl::DataLossError("bytes unreadable");
  }
  return data;
}

// The process-wide runtime: written once (before `g_current` publishes it).
PythonRuntimeInfo g_runtime;
std::atomic<const PythonRuntimeInfo*> g_current{nullptr};
std::atomic<int64_t> g_last_refresh_ns{INT64_MIN};

}  // namespace

const char* PythonReadErrorName(PythonReadError error) {
  switch (error) {
    case PythonReadError::kNone:
      return "ok";
    case PythonReadError::kNoRuntime:
      return "no supported Python runtime";
    case PythonReadError::kNoThreadState:
      return "no Python thread state for the thread";
    case PythonReadError::kFault:
      return "unreadable memory";
    case PythonReadError::kBadPointer:
      return "invalid pointer or field";
    case PythonReadError::kCycle:
      return "the frame chain loops";
  }
  return "?";
}

namespace internal {
bool SafeRead(uintptr_t address, void* out, size_t size) {
  return Reader().Read(address, out, size);
}
}  // namespace internal

bool PythonVersionSupported(uint32_t version_hex) { return LayoutFor(version_hex) != nullptr; }

absl::Status DetectPythonRuntime(PythonRuntimeInfo* out) {
  void* runtime = dlsym(RTLD_DEFAULT, "_PyRuntime");
  void* code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
  void* unicode_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
  void* bytes_type = dlsym(RTLD_DEFAULT, "PyBytes_Type");
  if (runtime == nullptr || code_type == nullptr || unicode_type == nullptr ||
      bytes_type == nullptr) {
    return absl::NotFoundError("no CPython in the process (_PyRuntime not found)");
  }
  // Py_Version (PY_VERSION_HEX) is exported since 3.11; older versions
  // lack it and are not supported anyway.
  const void* version = dlsym(RTLD_DEFAULT, "Py_Version");
  uint32_t hex = 0;
  if (version == nullptr ||
      !internal::SafeRead(reinterpret_cast<uintptr_t>(version), &hex, sizeof(hex))) {
    return absl::UnimplementedError("CPython older than 3.11 (no Py_Version)");
  }
  if (!PythonVersionSupported(hex)) {
    return absl::UnimplementedError(
        absl::StrFormat("CPython %d.%d: only the x86-64 frame layouts of 3.11 and 3.12 are "
                        "known",
                        hex >> 24, (hex >> 16) & 0xff));
  }
  out->runtime = reinterpret_cast<uintptr_t>(runtime);
  out->code_type = reinterpret_cast<uintptr_t>(code_type);
  out->unicode_type = reinterpret_cast<uintptr_t>(unicode_type);
  out->bytes_type = reinterpret_cast<uintptr_t>(bytes_type);
  out->version_hex = hex;
  return absl::OkStatus();
}

const PythonRuntimeInfo* CurrentPythonRuntime() {
  return g_current.load(std::memory_order_acquire);
}

void RefreshPythonRuntime() {
  static absl::Mutex mu(absl::kConstInit);
  if (g_current.load(std::memory_order_acquire) != nullptr) return;
  const int64_t now = MonotonicNow().ToNanoseconds();
  const int64_t last = g_last_refresh_ns.load(std::memory_order_relaxed);
  if (last != INT64_MIN && now - last < 1'000'000'000) return;
  absl::MutexLock lock(&mu);
  if (g_current.load(std::memory_order_acquire) != nullptr) return;
  g_last_refresh_ns.store(now, std::memory_order_relaxed);
  PythonRuntimeInfo found;
  if (!DetectPythonRuntime(&found).ok()) return;
  g_runtime = found;
  g_current.store(&g_runtime, std::memory_order_release);
}

void CapturePythonStack(pid_t tid, RawPythonStack* out) {
  const PythonRuntimeInfo* runtime = CurrentPythonRuntime();
  if (runtime == nullptr) {
    Fail(out, PythonReadError::kNoRuntime);
    return;
  }
  ReadPythonStack(*runtime, tid, out);
}

namespace {

// The current frame's CFrame of thread `tid`'s PyThreadState: interpreters
// -> threads, matched on native_thread_id. These lists change under
// HEAD_LOCK, which we do not take: a torn read gives a bad pointer (caught)
// or misses the thread.
PythonReadError FindThreadCFrame(const Reader& reader, const Layout& layout, uintptr_t runtime,
                                 pid_t tid, uintptr_t* cframe) {
  uintptr_t interp = 0;
  if (!reader.ReadPointer(runtime + layout.runtime_interpreters_head, &interp)) {
    return PythonReadError::kFault;
  }
  for (int i = 0; i < kMaxInterpreters && interp != 0; ++i) {
    if (!PlausiblePointer(interp)) return PythonReadError::kBadPointer;
    unsigned char interp_fields[kMaxStructRead];
    if (!reader.Read(interp, interp_fields, layout.interp_read_size)) {
      return PythonReadError::kFault;
    }
    uintptr_t thread = Field<uintptr_t>(interp_fields, layout.interp_threads_head);
    for (int t = 0; t < kMaxThreadStates && thread != 0; ++t) {
      if (!PlausiblePointer(thread)) return PythonReadError::kBadPointer;
      unsigned char fields[kMaxStructRead];
      if (!reader.Read(thread, fields, layout.thread_read_size)) return PythonReadError::kFault;
      if (Field<uintptr_t>(fields, layout.thread_interp) != interp) {
        return PythonReadError::kBadPointer;
      }
      if (Field<uint64_t>(fields, layout.thread_native_thread_id) == static_cast<uint64_t>(tid)) {
        *cframe = Field<uintptr_t>(fields, layout.thread_cframe);
        return PythonReadError::kNone;
      }
      thread = Field<uintptr_t>(fields, layout.thread_next);
    }
    interp = Field<uintptr_t>(interp_fields, layout.interp_next);
  }
  return PythonReadError::kNoThreadState;
}

// Walks the frame chain from `frame` into `out`'s frames, innermost first.
PythonReadError WalkFrames(const Reader& reader, const Layout& layout, uintptr_t frame,
                           RawPythonStack* out) {
  ScopedPageCache cache;  // The chain is the calling thread's: it is not changing.
  // Frames visited, shims included (3.12 links one per eval call).
  ChainWalk<2 * kMaxPythonFrames> walk;
  int depth = 0;
  bool truncated = false;
  while (frame != 0) {
    if (depth == kMaxPythonFrames || walk.full()) {
      truncated = true;
      break;
    }
    if (!PlausiblePointer(frame)) return PythonReadError::kBadPointer;
    if (!walk.Visit(frame)) return PythonReadError::kCycle;
    unsigned char fields[kMaxStructRead];
    if (!cache.Read(reader, frame, fields, layout.frame_read_size)) return PythonReadError::kFault;
    const uintptr_t code = Field<uintptr_t>(fields, layout.frame_code);
    const uintptr_t prev_instr = Field<uintptr_t>(fields, layout.frame_prev_instr);
    const uint8_t is_entry = layout.frame_is_entry != kNoField ? fields[layout.frame_is_entry] : 0;
    const uint8_t owner = fields[layout.frame_owner];
    if (!PlausiblePointer(code) || is_entry > 1 || owner > layout.frame_owner_max) {
      return PythonReadError::kBadPointer;
    }
    frame = Field<uintptr_t>(fields, layout.frame_previous);
    if (owner == layout.frame_owner_cstack) {
      // 3.12's entry shim: the frame read before it is its eval call's
      // outermost one.
      if (depth > 0) out->frames[static_cast<size_t>(depth - 1)].is_entry = 1;
      continue;
    }
    // prev_instr points into the code object's own instructions (or one
    // unit before them, for a frame that has not started).
    const int64_t offset =
        static_cast<int64_t>(prev_instr) - static_cast<int64_t>(code + layout.code_code_adaptive);
    if (offset < -2 || offset >= 2 * kMaxCodeUnits || (offset & 1) != 0) {
      return PythonReadError::kBadPointer;
    }
    RawPythonFrame& raw = out->frames[static_cast<size_t>(depth++)];
    raw.code = code;
    raw.instr = static_cast<int32_t>(offset / 2);
    raw.is_entry = is_entry;
    raw.owner = owner;
  }
  out->depth = depth;
  out->truncated = truncated;
  return PythonReadError::kNone;
}

}  // namespace

PythonReadError ReadPythonStack(const PythonRuntimeInfo& runtime, pid_t tid, RawPythonStack* out) {
  const Layout* const layout = LayoutFor(runtime.version_hex);
  if (runtime.runtime == 0 || runtime.code_type == 0 || layout == nullptr) {
    return Fail(out, PythonReadError::kNoRuntime);
  }
  const Reader reader;
  uintptr_t cframe = 0;
  if (PythonReadError e = FindThreadCFrame(reader, *layout, runtime.runtime, tid, &cframe);
      e != PythonReadError::kNone) {
    return Fail(out, e);
  }
  if (!PlausiblePointer(cframe)) return Fail(out, PythonReadError::kBadPointer);
  uintptr_t frame = 0;
  if (!reader.ReadPointer(cframe + layout->cframe_current_frame, &frame)) {
    return Fail(out, PythonReadError::kFault);
  }
  if (PythonReadError e = WalkFrames(reader, *layout, frame, out); e != PythonReadError::kNone) {
    return Fail(out, e);
  }
  out->error = PythonReadError::kNone;
  return PythonReadError::kNone;
}

int LineFromLocationTable(const uint8_t* table, size_t size, int first_line, int instr) {
  if (instr < 0) return first_line;
  int64_t line = first_line;
  int64_t address = 0;
  size_t i = 0;
  // Reads a varint (6-bit chunks, 0x40 = more) at `at`; false past the end.
  auto varint = [&](size_t at, uint32_t* value) {
    uint32_t result = 0;
    for (int shift = 0; at < size && shift <= 30; shift += 6, ++at) {
      result |= static_cast<uint32_t>(table[at] & 63) << shift;
      if ((table[at] & 64) == 0) {
        *value = result;
        return true;
      }
    }
    return false;
  };
  while (i < size) {
    const uint8_t first = table[i];
    if ((first & 0x80) == 0) return -1;  // Not the start of an entry.
    const int code = (first >> 3) & 15;
    const int length = (first & 7) + 1;  // Code units covered.
    int64_t delta = 0;
    bool has_line = true;
    if (code == 15) {  // PY_CODE_LOCATION_INFO_NONE
      has_line = false;
    } else if (code == 13 || code == 14) {  // NO_COLUMNS, LONG: signed varint delta
      uint32_t value = 0;
      if (!varint(i + 1, &value)) return -1;
      delta =
          (value & 1) != 0 ? -static_cast<int64_t>(value >> 1) : static_cast<int64_t>(value >> 1);
    } else if (code >= 10) {  // ONE_LINE0..2
      delta = code - 10;
    }  // SHORT0..9: same line.
    line += delta;
    if (line < 0 || line > kMaxLine) return -1;
    if (instr < address + length) return has_line ? static_cast<int>(line) : -1;
    address += length;
    do {
      ++i;
    } while (i < size && (table[i] & 0x80) == 0);
  }
  return -1;
}

absl::StatusOr<PythonFrameInfo> ResolvePythonFrame(const PythonRuntimeInfo& runtime,
                                                   const RawPythonFrame& frame) {
  const Layout* const layout_or_null = LayoutFor(runtime.version_hex);
  if (layout_or_null == nullptr) return absl::UnimplementedError("unsupported CPython version");
  const Layout& layout = *layout_or_null;
  const Reader reader;
  if (!PlausiblePointer(frame.code)) return absl::DataLossError("bad code pointer");
  unsigned char code[kMaxStructRead];
  if (!reader.Read(frame.code, code, layout.code_read_size)) {
    return absl::DataLossError("code object unreadable");
  }
  if (Field<uintptr_t>(code, layout.object_type) != runtime.code_type) {
    return absl::DataLossError("not a code object (freed or reused)");
  }
  const int64_t units = Field<int64_t>(code, layout.var_size);
  const int first_line = Field<int32_t>(code, layout.code_first_line_no);
  const int first_traceable = Field<int32_t>(code, layout.code_first_traceable);
  if (units <= 0 || units > kMaxCodeUnits || first_line < 0 || first_line > kMaxLine ||
      first_traceable < 0 || first_traceable > units || frame.instr < -1 || frame.instr >= units) {
    return absl::DataLossError("code object fields out of range");
  }
  PythonFrameInfo info;
  info.first_line = first_line;
  // pycore_frame.h's _PyFrame_IsIncomplete().
  info.incomplete = frame.owner != 1 && frame.instr < first_traceable;
  absl::StatusOr<std::string> qualname = ReadUnicode(
      reader, runtime, layout, Field<uintptr_t>(code, layout.code_qualname), kMaxQualname);
  if (!qualname.ok()) return qualname.status();
  absl::StatusOr<std::string> file = ReadUnicode(
      reader, runtime, layout, Field<uintptr_t>(code, layout.code_filename), kMaxFilename);
  if (!file.ok()) return file.status();
  absl::StatusOr<std::string> table = ReadBytes(
      reader, runtime, layout, Field<uintptr_t>(code, layout.code_linetable), kMaxLineTable);
  if (!table.ok()) return table.status();
  // Re-check the type: the object may have been freed while we read it.
  uintptr_t type = 0;
  if (!reader.ReadPointer(frame.code + layout.object_type, &type) || type != runtime.code_type) {
    return absl::DataLossError("code object freed while reading");
  }
  info.qualname = *std::move(qualname);
  info.file = *std::move(file);
  const int line = LineFromLocationTable(reinterpret_cast<const uint8_t*>(table->data()),
                                         table->size(), first_line, frame.instr);
  info.line = line > 0 ? line : 0;
  return info;
}

}  // namespace matrix

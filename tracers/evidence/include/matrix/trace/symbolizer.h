// File: matrix/trace/symbolizer.h
//
// Symbolizer turns code addresses (stack frames, instrumented function
// addresses) into demangled C++ names with parameters, such as
// "app::Widget::Draw(int, char const*)", the ELF module and offsets, and,
// when debug info is available, the source line and the inlined calls at
// that address.
//
// It maps an address to its module with dl_iterate_phdr, reads that ELF
// file's own symbol table (.symtab, else .dynsym; a separate debug file found
// by build id or .gnu_debuglink when the binary is stripped), and demangles
// with abi::__cxa_demangle. So static and non-exported functions of a PIE
// executable get full names without -rdynamic. Addresses its reader cannot
// name fall back to absl::Symbolize, and then to "module+0xoffset". Source
// lines and inlined frames come from the DWARF debug info through elfutils'
// libdw (one Dwfl handle per module, opened on first use; the debug info is
// in the binary or in a separate debug file that libdwfl's standard search
// finds by build id or .gnu_debuglink in the debug directories).
//
//   matrix::Symbolizer* symbolizer = matrix::Symbolizer::Get();
//   matrix::SymbolInfo info = symbolizer->Symbolize(pc);
//   // info.function == "app::Widget::Draw(int, char const*)"
//   // info.file == "/src/app/widget.cc", info.line == 42
//   std::string line = symbolizer->Describe(pc);
//   // "app::Widget::Draw(int, char const*)+0x1c (matrix-demo)"
//
// Code addresses in no loaded ELF module (JIT-compiled code) are named from
// the runtime's perf map, /tmp/perf-PID.map, when it writes one (node
// --perf-basic-prof, LuaJIT, perf-map-agent, CPython -X perf): for
// JavaScript the bare function name ("busyLoop"), the script as file and
// its line, and module kJitModule ("[jit]"); see perf_map.h. Those lookups
// are not cached (the runtime reuses addresses). Only a map that is a regular
// file owned by the process's user is read (others are refused, said once in
// the log), and a lookup reads at most a bounded part of it.
//
// Costs: the first address in a module loads that module's symbol table
// and opens its DWARF (milliseconds for a large binary, once); after that a
// lookup is a binary search, a line-table and scope lookup and a demangle
// (microseconds), and repeated addresses hit a cache. See docs/stacks.md and
// docs/performance.md. Never call it on the looper thread: it allocates,
// locks and reads files.
//
// Thread safety: thread-safe. Every method can be called from any thread
// except where noted; calls are serialized on an internal mutex.

#ifndef MATRIX_TRACE_SYMBOLIZER_H_
#define MATRIX_TRACE_SYMBOLIZER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace matrix {

class PerfMap;

namespace internal {
class SymbolModule;
class DwarfModule;
}  // namespace internal

// InlinedFrame
//
// A function inlined at a code address, and the source line inside it.
struct InlinedFrame {
  // Demangled, with parameters when the debug info has its linkage name
  // ("app::Clamp(int)"), else its source name qualified with its namespaces
  // and classes, without parameters ("(anonymous namespace)::Clamp").
  std::string function;
  // Where the address is inside this function: for the innermost inlined
  // function, the instruction's own line; for the others, the line that
  // calls the next inner one. "" / 0 when unknown.
  std::string file;
  int line = 0;
  int column = 0;  // 0 when the compiler gave none.
};

// SymbolInfo
//
// What is known about one code address.
struct SymbolInfo {
  // Demangled, with parameters, e.g. "app::Widget::Draw(int, char const*)";
  // empty if unknown.
  std::string function;
  // Path of the ELF file containing the address; kJitModule ("[jit]",
  // perf_map.h) for JIT code named from a perf map; "" if neither.
  std::string module;
  // pc - function start (0 when the start is unknown). The start comes from
  // the symbol, or, for a frame without a name (a stripped module, raw
  // frames), from the unwind info (`.eh_frame`'s FDE) that stripping keeps.
  uintptr_t function_offset = 0;
  // pc - module load bias: the address in the ELF file's own address space,
  // which is what addr2line and llvm-symbolizer take. For PIE executables and
  // shared libraries this is pc minus the address the module is mapped at.
  uintptr_t module_offset = 0;
  // The module's GNU build id, lowercase hex, read once per module from its
  // PT_NOTE segments in memory; "" when unknown or when it has none.
  std::string build_id;
  // The module was read and has no build id note.
  bool no_build_id = false;
  // The source line in `function`'s own code, from the DWARF line table: the
  // instruction's line, or, when code was inlined there, the line of the
  // outermost inlined call. "" / 0 without debug info (stripped binary, no
  // separate debug file, or source lines off).
  std::string file;
  int line = 0;
  int column = 0;  // 0 when the compiler gave none.
  // The functions inlined at this address, innermost first: inlined[0] is
  // the code the instruction belongs to, inlined.back() was inlined into
  // `function` at file:line.
  std::vector<InlinedFrame> inlined;
};

// SymbolizerOptions
//
// How a Symbolizer instance works.
struct SymbolizerOptions {
  // Read DWARF with libdw for source lines and inlined frames. Off gives
  // names and offsets only (the ELF symbol-table reader alone); benchmarks
  // use it as the baseline.
  bool source_lines = true;
  // Source lines for frames in system libraries too (modules under /lib,
  // /lib64, /usr/lib, /usr/lib64: libc, libstdc++, the toolkits), from their
  // separate debug files (Debian's -dbg/-dbgsym packages). Off by default:
  // they rarely help fix the program, and cost memory for the life of the
  // process (libc6-dbg's compressed DWARF alone is 10 MB decompressed, 18 MB
  // with its line tables). Names come from the symbol tables either way.
  bool system_library_lines = false;
};

// Whether `module_path` is a system library (SymbolizerOptions::
// system_library_lines): under /lib/, /lib64/, /usr/lib/ or /usr/lib64/.
bool IsSystemLibrary(std::string_view module_path);

// Symbolizer
//
// Process-wide symbol lookup with a cache. Thread safety: thread-safe.
class Symbolizer {
 public:
  // A private instance with its own caches; most code uses Get().
  Symbolizer();
  explicit Symbolizer(SymbolizerOptions options);
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Get()
  //
  // The process-wide instance. Never destroyed. Any thread.
  static Symbolizer* Get();

  // Symbolize()
  //
  // Everything known about the instruction at `pc`. For a return address
  // taken from a stack, pass pc - 1 to name the call instruction (a call at
  // the very end of a function would otherwise name the next function);
  // SymbolizeStack() in stack_capture.h does this. Results are cached. Any
  // thread.
  SymbolInfo Symbolize(uintptr_t pc) ABSL_LOCKS_EXCLUDED(mu_);

  // FunctionName()
  //
  // The name registered for `address` with RegisterName(), else the demangled
  // name of the function containing it, else "module+0x1a2b" (module base
  // name and module offset), else "0x7f00deadbeef". Any thread.
  std::string FunctionName(uintptr_t address) ABSL_LOCKS_EXCLUDED(mu_);

  // Describe()
  //
  // A one-line description: "function+0x1c (module)" with the module's base
  // name, "module+0x1a2b" when the function is unknown, or the hex address
  // when no module maps it. Any thread.
  std::string Describe(uintptr_t pc) ABSL_LOCKS_EXCLUDED(mu_);

  // RegisterName()
  //
  // Names a synthetic address (a manual trace scope's id, a JIT stub). The
  // name is returned as-is, without demangling, by Symbolize(),
  // FunctionName() and Describe() for exactly this address. A later call
  // replaces the name. Any thread.
  void RegisterName(uintptr_t address, std::string name) ABSL_LOCKS_EXCLUDED(mu_);

  // AddDebugDirectory()
  //
  // Adds a directory searched for separate debug files of stripped modules,
  // before /usr/lib/debug: both <dir>/.build-id/ab/cdef....debug and
  // <dir>/<debuglink name> (symbols), and for source lines libdwfl's
  // <dir>/.build-id/ab/cdef....debug, <dir>/<module's directory>/<debuglink
  // name> and <dir>/<debuglink name>. The module's own directory and its
  // .debug/ subdirectory are always searched. Modules already loaded are not
  // re-read. Any thread.
  void AddDebugDirectory(std::string directory) ABSL_LOCKS_EXCLUDED(mu_);

  // PreloadModules()
  //
  // Loads ahead of the first report what the first symbolization in each of
  // the program's own modules would otherwise load then: for every mapped
  // module outside the system library directories (IsSystemLibrary), its
  // symbol table and, with source_lines, its DWARF and unit index. System
  // libraries are left to their first use (names only, and hundreds of them
  // in a toolkit program), and so is matrix-cpp's own shared object when it
  // is one (InMatrixSharedObject). Call it on a worker thread at start
  // (TracePlugin does): a first report then costs what later ones do.
  // Returns the number of modules loaded. Any thread.
  size_t PreloadModules() ABSL_LOCKS_EXCLUDED(mu_);

  // InMatrixSharedObject()
  //
  // Whether `pc` is in the shared object that holds matrix-cpp's tracers
  // (matrix-run's libmatrix-agent.so, or libmatrix_trace.so in a shared
  // build), false when they are linked into the executable. Reports seldom
  // show its frames, and its DWARF (Abseil, protobuf and matrix-cpp's own)
  // is the largest of a program's: it is loaded at its first use, not ahead.
  // Any thread (async-signal-unsafe: dladdr).
  static bool InMatrixSharedObject(uintptr_t pc);

  // ClearCache()
  //
  // Drops the cached lookups; loaded modules (symbol tables, DWARF handles)
  // stay. Any thread.
  void ClearCache() ABSL_LOCKS_EXCLUDED(mu_);

  // SetRawFrames()
  //
  // With `raw` true, Symbolize() fills only what names a frame later, off
  // the host: module, module_offset (the ELF address) and the build id, and
  // function_offset from the unwind info in memory. No symbol table or DWARF
  // is read (hosts where in-process symbolization costs too much;
  // matrix-report symbolize names the frames). Clears the cache. Any thread.
  void SetRawFrames(bool raw) ABSL_LOCKS_EXCLUDED(mu_);

  // Number of cached lookups (for tests and memory accounting). Any thread.
  size_t CacheSizeForTesting() ABSL_LOCKS_EXCLUDED(mu_);

  // Lookups cached before the cache is cleared, bounding its memory.
  static constexpr size_t kMaxCacheEntries = 1 << 16;

 private:
  SymbolInfo SymbolizeLocked(uintptr_t pc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The module mapping `pc`, rescanning loaded modules when none does and
  // the set of loaded objects changed. Null if none.
  internal::SymbolModule* FindModuleLocked(uintptr_t pc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RescanModulesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills `info` for JIT code at `pc` (in no module) from /tmp/perf-PID.map.
  bool LookupPerfMapLocked(uintptr_t pc, SymbolInfo* info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  // Loaded modules sorted by their lowest mapped address.
  std::vector<std::unique_ptr<internal::SymbolModule>> modules_ ABSL_GUARDED_BY(mu_);
  // dl_iterate_phdr's load/unload counters at the last scan.
  unsigned long long scanned_adds_ ABSL_GUARDED_BY(mu_) = 0;
  unsigned long long scanned_subs_ ABSL_GUARDED_BY(mu_) = 0;
  bool scanned_ ABSL_GUARDED_BY(mu_) = false;
  const SymbolizerOptions options_;
  bool raw_frames_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<uintptr_t, SymbolInfo> cache_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uintptr_t, std::string> registered_names_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> debug_directories_ ABSL_GUARDED_BY(mu_);
  // This process's perf map (opened on the first pc outside every module).
  std::unique_ptr<PerfMap> perf_map_ ABSL_GUARDED_BY(mu_);
  pid_t perf_map_pid_ ABSL_GUARDED_BY(mu_) = 0;
};

namespace internal {

// One symbol of an ELF file: [address, address + size) in the file's own
// address space (add the load bias for the runtime address).
struct ElfSymbol {
  uintptr_t address = 0;
  uintptr_t size = 0;  // 0 when the symbol table gives none; see ElfSymbolTable.
  std::string name;    // Mangled, as in the symbol table.
};

// ElfSymbolTable
//
// The function symbols of one ELF file, sorted by address. Exposed for
// tests; production code goes through Symbolizer. Thread-compatible.
class ElfSymbolTable {
 public:
  // Which table the symbols came from.
  enum class Source { kNone, kSymtab, kDynsym };

  // Load()
  //
  // Reads the function symbols of the 64-bit ELF file at `path`: .symtab if
  // present, else .dynsym. If the file has no .symtab, it first looks for a
  // separate debug file with a .symtab (and the same build id): by build id,
  // <dir>/.build-id/xx/yyyy.debug for each of `debug_directories`; then by
  // the .gnu_debuglink name, next to the file, in its .debug/ subdirectory,
  // and at <dir>/<the file's directory>/ and <dir>/ for each directory.
  // Never fails: an unreadable or non-ELF file gives an empty table.
  static ElfSymbolTable Load(const std::string& path,
                             const std::vector<std::string>& debug_directories);

  // Lookup()
  //
  // The symbol containing file address `address`, or null. A symbol with a
  // size contains [address, address + size); one without (hand-written
  // assembly) extends to the next symbol or the end of its section.
  const ElfSymbol* Lookup(uintptr_t address) const;

  Source source() const { return source_; }
  // The file the symbols were read from (the debug file when one was used).
  const std::string& symbol_file() const { return symbol_file_; }
  size_t size() const { return symbols_.size(); }

 private:
  std::vector<ElfSymbol> symbols_;  // Sorted by address, one per address.
  Source source_ = Source::kNone;
  std::string symbol_file_;
};

// DwarfModule
//
// Source lines and inlined frames of one ELF file through one libdwfl
// handle. Exposed for tests and benchmarks; production code goes through
// Symbolizer. Thread-compatible (libdw handles are not thread-safe).
class DwarfModule {
 public:
  // Open()
  //
  // Opens `open_path` (read through it; "/proc/self/exe" for the main
  // executable) as the module at `path` (the name libdwfl searches
  // .gnu_debuglink files next to). `debug_directories` are searched for
  // separate debug files (see Symbolizer::AddDebugDirectory). Null when the
  // file cannot be read as ELF. A file without DWARF opens (Lookup() then
  // finds nothing).
  static std::unique_ptr<DwarfModule> Open(const std::string& path, const std::string& open_path,
                                           const std::vector<std::string>& debug_directories);
  ~DwarfModule();
  DwarfModule(const DwarfModule&) = delete;
  DwarfModule& operator=(const DwarfModule&) = delete;

  // Lookup()
  //
  // Fills info->file, line, column and inlined for the instruction at
  // `file_address` (the address in the ELF file's own address space, i.e.
  // SymbolInfo::module_offset). False, leaving `info` alone, when the debug
  // info has no line for it.
  bool Lookup(uintptr_t file_address, SymbolInfo* info);

  // Whether DWARF was found (in the file or a separate debug file). Opens
  // it if not yet done.
  bool HasDwarf();

  // IndexUnits()
  //
  // Loads the DWARF and indexes its compilation units by address range, so
  // each Lookup() finds its unit by binary search (without .debug_aranges,
  // as clang emits, libdw would try every unit in turn). Lookup() does it on
  // first use; Symbolizer::PreloadModules() does it ahead of the first
  // report. Returns the number of units.
  size_t IndexUnits();

 private:
  struct Handle;  // libdwfl's state and the unit and function indexes.
  explicit DwarfModule(std::unique_ptr<Handle> handle);
  std::unique_ptr<Handle> handle_;
};

// The GNU build id in a run of ELF notes (a PT_NOTE segment's or a
// SHT_NOTE section's bytes) as lowercase hex; "" when none is there or the
// notes are malformed.
std::string BuildIdFromNotes(absl::string_view notes);

// ElfFileInfo
//
// What names an address of a 64-bit ELF file off the host: its build id
// (from its PT_NOTE segments, else its SHT_NOTE sections, so a debug file
// made by objcopy --only-keep-debug has it too) and its PT_LOAD segments.
struct ElfFileInfo {
  struct Load {
    uint64_t offset = 0;  // p_offset
    uint64_t vaddr = 0;   // p_vaddr
    uint64_t filesz = 0;  // p_filesz
  };
  std::string build_id;  // Lowercase hex; "" when it has none.
  std::vector<Load> loads;
  bool pie = false;  // ET_DYN (PIE or shared library).

  // Reads the file; nullopt when it is not a readable 64-bit ELF file.
  static std::optional<ElfFileInfo> Read(const std::string& path);

  // ElfAddressOfFileOffset()
  //
  // The address in the file's own address space of the byte at
  // `file_offset` (what /proc/PID/maps gives: pc - mapping start + mapping
  // offset), through the PT_LOAD segment holding it: p_vaddr + (offset -
  // p_offset). For a PIE that is the pc minus the load bias; for a non-PIE
  // executable the pc itself. Nullopt when no segment holds it.
  std::optional<uint64_t> ElfAddressOfFileOffset(uint64_t file_offset) const;
};

// Demangles an Itanium C++ ABI name ("_ZN3app6Widget4DrawEiPKc" ->
// "app::Widget::Draw(int, char const*)") after dropping compiler clone
// suffixes (".isra.0", ".constprop.1", ".part.2", ".cold", ".llvm.123", ...),
// so a specialized copy reads and groups like its source function. Other
// names are returned without the clone suffixes.
std::string Demangle(const std::string& symbol);

// Drops trailing compiler clone suffixes: "_Z3fooi.isra.0.cold" -> "_Z3fooi".
std::string StripCloneSuffixes(absl::string_view name);

}  // namespace internal

}  // namespace matrix

#endif  // MATRIX_TRACE_SYMBOLIZER_H_

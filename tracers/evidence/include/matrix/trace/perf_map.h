// File: matrix/trace/perf_map.h
//
// Names for JIT-compiled code from a perf map: the text file
// /tmp/perf-PID.map that JIT runtimes write for Linux perf, one line per
// code object,
//
//   START SIZE NAME            (START and SIZE in hex, with or without 0x)
//   7fdc11fc6680 310 JS:*busyLoop /app/main.js:1:18
//
// node writes it with --perf-basic-prof (V8), LuaJIT with its perf support,
// the JVM through perf-map-agent, CPython 3.12+ with -X perf. The Symbolizer
// asks a PerfMap about code addresses that are in no loaded ELF module
// (docs/stacks.md, "JIT frames").
//
//   matrix::PerfMap map(matrix::PerfMap::PathForPid(getpid()));
//   if (std::optional<matrix::PerfMapEntry> e = map.Lookup(pc)) {
//     matrix::JitName name = matrix::ParseJitName(e->name);
//     // name.function == "busyLoop", name.file == "/app/main.js", name.line == 1
//   }
//
// Only a regular file owned by this process's effective user is read, as
// perf itself requires of the maps it reads: /tmp is writable by everyone,
// so another user could otherwise plant /tmp/perf-PID.map and put names in
// this program's reports. The file is opened with O_NOFOLLOW | O_NONBLOCK
// (a symbolic link is not followed, a FIFO does not block) and checked with
// fstat(); a map that is refused is said once in the log (Logger()) and
// names nothing.
//
// The runtime appends to the file while it runs. A lookup first reads what
// was appended since the last read, if anything (one lstat() tells): each
// byte is read once, from the remembered offset, at most
// kMaxReadBytesPerLookup per lookup (a bigger backlog is read over the next
// lookups). A partial last line is kept (at most kMaxLineBytes) until its
// newline arrives; a longer line is skipped up to its newline and counted
// as bad. Reading stops at kMaxFileBytes (said once in the log): code the
// map lists later gets no names. A later line for memory an earlier line
// covered wins: code addresses are reused after garbage collection or
// recompilation. Malformed lines are skipped and counted. A missing file
// means no names, not an error. A file replaced at the path (another
// process with this pid) is read from its start.
//
// Memory is bounded: at most kMaxEntries entries, names cut at kMaxNameBytes,
// so about kMaxEntries * (kMaxNameBytes + 64) bytes at worst (~20 MB; a node
// server's map holds a few thousand to tens of thousands of lines of ~60
// bytes), plus one partial line. When full, the entries read so far are
// dropped and reading goes on (newer code keeps its names, long-lived older
// code loses them). A lookup's work is bounded too: one lstat(), reading and
// parsing at most kMaxReadBytesPerLookup, and a search of the entries.
//
// Thread safety: thread-compatible (the Symbolizer calls it under its mutex,
// on the threads that symbolize; never on the stack-capture path).

#ifndef MATRIX_TRACE_PERF_MAP_H_
#define MATRIX_TRACE_PERF_MAP_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace matrix {

// The module string of a frame named from a perf map (SymbolInfo::module).
// Stable across runs (the map's file name has the pid in it).
inline constexpr char kJitModule[] = "[jit]";

// One line of a perf map: code at [start, start + size).
struct PerfMapEntry {
  uintptr_t start = 0;
  uintptr_t size = 0;
  std::string name;  // As written, e.g. "JS:*busyLoop /app/main.js:1:18".
};

// JitName
//
// A perf map name split into parts that do not change between runs.
struct JitName {
  // What to call the frame. For JavaScript code (V8 kinds JS, LazyCompile,
  // Function, Script, Eval) the bare function name without the kind prefix
  // and tier marker ("busyLoop"; "(anonymous)" for an anonymous function);
  // for CPython ("py::qualname:file") the qualified name; otherwise the name
  // as written ("Builtin:CEntry_Return1", LuaJIT's "TRACE_3::x.lua:12").
  std::string function;
  // The script and position, when the name has them ("/app/main.js",
  // "file:///x.js", "node:internal/timers"); "" / 0 otherwise.
  std::string file;
  int line = 0;
  int column = 0;
  // V8's kind prefix ("JS", "LazyCompile", "Builtin", ...) and tier marker
  // ("*" TurboFan, "+" Maglev, "^" Sparkplug, "~" interpreted); they change
  // as code is re-tiered, so they are not part of `function`. "" when absent.
  std::string kind;
  std::string tier;
};

// ParseJitName()
//
// Splits a perf map name: "JS:*busyLoop /app/main.js:3:18" ->
// {function "busyLoop", file "/app/main.js", line 3, column 18, kind "JS",
// tier "*"}; "LazyCompile:~foo file:///x.js:1" -> {"foo", "file:///x.js", 1};
// "JS:~ /app/main.js:1:1" -> {"(anonymous)", ...}. Any thread.
JitName ParseJitName(std::string_view raw);

// PerfMap
//
// The entries of one perf map file, read incrementally. Thread-compatible.
class PerfMap {
 public:
  // Entries kept at most (see the file comment).
  static constexpr size_t kMaxEntries = size_t{1} << 16;
  // Longer names are cut to this many bytes.
  static constexpr size_t kMaxNameBytes = 256;
  // Longer lines (without their newline) are skipped.
  static constexpr size_t kMaxLineBytes = 4096;
  // Bytes of the file read at most; the rest is not read.
  static constexpr uint64_t kMaxFileBytes = uint64_t{64} << 20;
  // Bytes of the file one Lookup() or Refresh() reads at most.
  static constexpr size_t kMaxReadBytesPerLookup = size_t{4} << 20;

  // Reads `path` if it is a regular file owned by geteuid().
  explicit PerfMap(std::string path);
  ~PerfMap();

  PerfMap(const PerfMap&) = delete;
  PerfMap& operator=(const PerfMap&) = delete;

  // "/tmp/perf-PID.map".
  static std::string PathForPid(pid_t pid);

  // Lookup()
  //
  // The entry whose code contains `pc`, after reading (up to
  // kMaxReadBytesPerLookup of) what was appended since the last read, so a
  // name is not older than the file. nullopt when no entry contains `pc`
  // (or the file does not exist, or is refused).
  std::optional<PerfMapEntry> Lookup(uintptr_t pc);

  // Refresh()
  //
  // Reads up to kMaxReadBytesPerLookup of what was appended since the last
  // read. A file replaced at the path, or truncated, is read again from the
  // start; a file that is not a regular file owned by this process's user
  // is refused (said once in the log). Lookup() calls it.
  void Refresh();

  const std::string& path() const { return path_; }
  // Entries held now.
  size_t size() const { return entries_.size(); }
  // Lines skipped since construction: they did not parse, or were longer
  // than kMaxLineBytes.
  size_t bad_lines() const { return bad_lines_; }
  // Bytes of the file consumed so far (complete lines).
  uint64_t offset() const { return consumed_; }
  // Times the entries were dropped because kMaxEntries was reached.
  size_t overflows() const { return overflows_; }
  // Bytes read from the file since construction, counting every read (a
  // byte read twice would count twice; only a replaced file is read again).
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  struct Code {
    uintptr_t end = 0;  // One past the last byte.
    std::string name;
  };
  // Why a file is not read; each is said once in the log.
  enum class Refusal : uint8_t { kNotRegular = 1, kSymlink = 2, kOtherOwner = 4 };

  std::optional<PerfMapEntry> Find(uintptr_t pc) const;
  // Whether `st` describes a file this map reads. If not, remembers it as
  // refused and says why (once per kind of refusal).
  bool Acceptable(const struct stat& st);
  void Refuse(Refusal why, std::string_view detail);
  // Opens the file at path_, checks it again with fstat() and reads it from
  // its start: `st` becomes its fstat(). False when it is refused or gone.
  bool Open(struct stat* st);
  // Reads up to kMaxReadBytesPerLookup from offset_, up to `size`.
  void ReadMore(uint64_t size);
  // Splits `chunk`, the bytes at [offset_, offset_ + chunk.size()), into
  // lines.
  void Consume(std::string_view chunk);
  void ParseLine(std::string_view line);
  void Insert(uintptr_t start, uintptr_t size, std::string_view name);
  // Forgets what was read (the file is to be read from its start).
  void Reset();

  std::string path_;
  uid_t owner_;
  int fd_ = -1;  // The file being read, kept open: its inode is not reused.
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  // The last file refused (lstat() identity), not checked again.
  bool refused_ = false;
  dev_t refused_dev_ = 0;
  ino_t refused_ino_ = 0;
  uint8_t said_ = 0;  // Refusals logged (Refusal bits).
  bool said_capped_ = false;
  uint64_t offset_ = 0;    // Bytes read, a partial last line included.
  uint64_t consumed_ = 0;  // Bytes of complete lines.
  std::string partial_;    // The last line, until its newline; <= kMaxLineBytes.
  bool skipping_ = false;  // In a line longer than kMaxLineBytes.
  size_t bad_lines_ = 0;
  size_t overflows_ = 0;
  uint64_t bytes_read_ = 0;
  std::map<uintptr_t, Code> entries_;  // By start; ranges never overlap.
};

}  // namespace matrix

#endif  // MATRIX_TRACE_PERF_MAP_H_

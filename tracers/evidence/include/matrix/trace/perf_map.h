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
// The runtime appends to the file while it runs, so a lookup first reads the
// lines added since the last read, if any (one stat() tells; reading goes on
// from the remembered offset; a partial last line waits for the next read). A later line for
// memory an earlier line covered wins: code addresses are reused after
// garbage collection or recompilation. Malformed lines are skipped and
// counted. A missing file means no names, not an error.
//
// Memory is bounded: at most kMaxEntries entries, names cut at kMaxNameBytes,
// so about kMaxEntries * (kMaxNameBytes + 64) bytes at worst (~20 MB; a node
// server's map holds a few thousand to tens of thousands of lines of ~60
// bytes). When full, the entries read so far are dropped and reading goes on
// (newer code keeps its names, long-lived older code loses them).
//
// Thread safety: thread-compatible (the Symbolizer calls it under its mutex).

#ifndef MATRIX_TRACE_PERF_MAP_H_
#define MATRIX_TRACE_PERF_MAP_H_

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

  explicit PerfMap(std::string path);

  // "/tmp/perf-PID.map".
  static std::string PathForPid(pid_t pid);

  // Lookup()
  //
  // The entry whose code contains `pc`, after reading the lines appended
  // since the last read (so a name is never older than the file). nullopt
  // when no entry contains `pc` (or the file does not exist).
  std::optional<PerfMapEntry> Lookup(uintptr_t pc);

  // Refresh()
  //
  // Reads the lines appended since the last read. When the file shrank (it
  // was replaced), reads it again from the start. Lookup() calls it.
  void Refresh();

  const std::string& path() const { return path_; }
  // Entries held now.
  size_t size() const { return entries_.size(); }
  // Lines skipped since construction because they did not parse.
  size_t bad_lines() const { return bad_lines_; }
  // Bytes of the file consumed so far (complete lines).
  uint64_t offset() const { return offset_; }
  // Times the entries were dropped because kMaxEntries was reached.
  size_t overflows() const { return overflows_; }
  // Bytes read from the file since construction, counting every read (a
  // byte read twice counts twice).
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  struct Code {
    uintptr_t end = 0;  // One past the last byte.
    std::string name;
  };
  std::optional<PerfMapEntry> Find(uintptr_t pc) const;
  void ParseLine(std::string_view line);
  void Insert(uintptr_t start, uintptr_t size, std::string_view name);

  std::string path_;
  uint64_t offset_ = 0;
  size_t bad_lines_ = 0;
  size_t overflows_ = 0;
  uint64_t bytes_read_ = 0;
  std::map<uintptr_t, Code> entries_;  // By start; ranges never overlap.
};

}  // namespace matrix

#endif  // MATRIX_TRACE_PERF_MAP_H_

// File: matrix/report/symbolize.h
//
// Names, off the host, the frames a report carries raw: frames of a stripped
// module (its debug file kept elsewhere) and every frame of a process run
// with matrix-run --symbolize=off. A raw frame keeps what names it: its
// module's GNU build id and its address in the ELF file's own address space
// (proto::StackFrame build_id, elf_address). The debug file of a build id is
// looked for, in order:
//   1. in each --debug-dir DIR, at DIR/.build-id/xx/yyyy.debug;
//   2. on debuginfod servers, through elfutils' own client (libdebuginfod,
//      with its cache, ~/.cache/debuginfod_client or
//      $DEBUGINFOD_CACHE_PATH): the --debuginfod URLs first, then those of
//      $DEBUGINFOD_URLS, as every elfutils tool reads it;
//   3. the module's own file on this host, when its build id is the same
//      (its symbol table, else its exported symbols).
// A debug file names a frame by its symbol table (demangled) and its DWARF
// (file:line and the inlined calls, through libdw). The stack key is then
// computed again by the usual rule (matrix/trace/stack_key.h), so a hang
// keyed "myapp+0x1a2b" on the host is keyed by its function here.
//
//   matrix::report::FrameSymbolizer symbolizer({.debug_dirs = {"/srv/debug"}});
//   if (symbolizer.SymbolizeIssue(&record.issue)) { ... the issue changed ... }
//   for (const std::string& problem : symbolizer.problems()) std::cerr << problem;
//
// Thread safety: thread-compatible (one instance per thread).

#ifndef MATRIX_REPORT_SYMBOLIZE_H_
#define MATRIX_REPORT_SYMBOLIZE_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "matrix/proto/issue.pb.h"

namespace matrix::report {

struct SymbolizeOptions {
  // Directories holding .build-id/xx/yyyy.debug files, searched first.
  std::vector<std::string> debug_dirs = {};
  // debuginfod server URLs, asked before those of $DEBUGINFOD_URLS.
  std::vector<std::string> debuginfod_urls = {};
};

// What a FrameSymbolizer did, over every issue it was given.
struct SymbolizeCounts {
  int64_t raw_frames = 0;     // Frames without a function name that it tried.
  int64_t named_frames = 0;   // Of them, named.
  int64_t no_build_id = 0;    // Left raw: their module has no build id.
  int64_t keys_changed = 0;   // Issues whose key changed.
};

class FrameSymbolizer {
 public:
  explicit FrameSymbolizer(SymbolizeOptions options);
  ~FrameSymbolizer();
  FrameSymbolizer(const FrameSymbolizer&) = delete;
  FrameSymbolizer& operator=(const FrameSymbolizer&) = delete;

  // SymbolizeIssue()
  //
  // Names the raw frames of every native stack of `issue` (hang and slow
  // method stacks, all threads, BlockCanary's samples) and computes its key
  // again when it was a raw frame's ("myapp+0x1a2b"), a system frame's
  // fallback or "unknown" (a block's key only when it was a raw frame's).
  // True when anything changed. Frames it cannot name stay as they are.
  bool SymbolizeIssue(proto::Issue* issue);

  const SymbolizeCounts& counts() const { return counts_; }

  // One line per module it could not name frames of, with why (no debug
  // file anywhere, a server that could not be reached), in order of first
  // occurrence. Each ends with '\n'.
  std::vector<std::string> problems() const;

  // Whether a debuginfod server failed (could not be reached, or answered
  // with an error other than "not found").
  bool server_failed() const { return server_failed_; }

 private:
  struct DebugInfo;
  struct Problem {
    std::string module;
    std::string build_id;
    std::string why;
    int64_t frames = 0;
  };
  // Names `frame` in place; false when it stays raw. A return address is
  // named by its call instruction (elf_address - 1).
  bool NameFrame(proto::StackFrame* frame, bool return_address);
  bool NameStack(proto::ThreadStack* stack);
  bool SymbolizeBlock(proto::Issue* issue);
  // The debug info of `build_id` (null when none was found; the reason is
  // then in `why`), cached.
  DebugInfo* Find(const std::string& build_id, const std::string& module, std::string* why);
  DebugInfo* FromDebugServers(const std::string& build_id, std::string* why);
  void NoteProblem(const proto::StackFrame& frame, const std::string& why);

  const SymbolizeOptions options_;
  std::string urls_;  // Every server, space-separated, as DEBUGINFOD_URLS.
  std::string shown_urls_;  // The same as messages show them (RedactUrl).
  absl::flat_hash_map<std::string, std::unique_ptr<DebugInfo>> debug_info_;
  absl::flat_hash_map<std::string, std::string> not_found_;  // Build id -> why.
  std::vector<Problem> problems_;
  SymbolizeCounts counts_;
  bool server_failed_ = false;
};

// The symbolize command's help text.
const char* SymbolizeUsageText();

// RunSymbolizeCommand()
//
// `args`: "symbolize" and its options and inputs. Returns the exit status
// (cli.h kExit*).
int RunSymbolizeCommand(const std::vector<std::string>& args, std::ostream& out,
                        std::ostream& err);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_SYMBOLIZE_H_

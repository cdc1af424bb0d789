// File: matrix/plugins/block_canary_info.h
//
// BlockInfo is one block as BlockCanary records it: who and where (qualifier,
// model, cores, process, memory), when and how long (wall time, the looper
// thread's CPU time, start and end), the CPU (busy flag and rates), and the
// looper thread's stack samples with their timestamps. This header renders it
// in BlockCanary's text layout and parses that text back, converts it to the
// BlockReport protobuf, finds its key stack line and groups blocks by it.
//
//   std::string text = matrix::FormatBlockLog(info, absl::Now());
//   absl::StatusOr<matrix::BlockInfo> back = matrix::ParseBlockLog(text);
//   // *back == info: the text holds every field (times at millisecond
//   // precision, which is what BlockInfo keeps).
//
//   std::vector<matrix::BlockGroup> groups = matrix::GroupBlocks(blocks);
//   for (const auto& g : groups) std::printf("%d x %s\n", g.count, g.key.c_str());
//
// The text layout (CRLF line ends, as BlockCanary's LogWriter and BlockInfo):
//
//   <blank>
//   **********************
//   2025-11-21 10:00:01(write log time)
//   <blank>
//   qua = gallery-1.4.2
//   versionName = 1.4.2
//   ...                                   (basic section: key = value)
//   time = 1503
//   thread-time = 1410
//   time-start = 11-21 10:00:00.123
//   time-end = 11-21 10:00:01.626
//   ...
//   cpu-busy = false
//   block-cpu = cpu:52% app:50% [user:48% system:4% ioWait:0% ]
//   cpu-rate = 11-21 10:00:00.265 cpu:51% app:50% [user:47% system:4% ioWait:0% ]
//   11-21 10:00:00.365 cpu:...
//   <blank>
//   stack = 11-21 10:00:00.165
//   <blank>
//   app::ParseHeader()+0x2e (gallery)
//   app::Load()+0x11 (gallery)
//   <blank>
//   11-21 10:00:00.265
//   ...
//
// Dates are local time (`time_zone`) without a year, as BlockCanary writes
// them; the parser takes the year from the header line.
//
// Thread safety: value types and pure functions; thread-compatible.

#ifndef MATRIX_PLUGINS_BLOCK_CANARY_INFO_H_
#define MATRIX_PLUGINS_BLOCK_CANARY_INFO_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "matrix/proto/block.pb.h"

namespace matrix {

// One frame of a sampled stack, as written: "function+0xOFFSET (module)",
// with "??" for an unknown function (the offset is then the module offset,
// for addr2line), followed by " in module+0xSTART" when the unwind info gives
// that function's start.
struct BlockFrame {
  std::string function;  // Demangled; empty if unknown.
  uint64_t offset = 0;   // From the function start, or the module base.
  // The ELF file's base name (its path when another module of that base name
  // has unnamed frames in the block: see BlockInfo::modules); empty if unknown.
  std::string module;
  std::string file = {};  // Source file (DWARF, or the interpreted code's); empty if unknown.
  int line = 0;           // Source line in `file`; 0 if unknown.
  // An unnamed frame's function start in the module's ELF address space, from
  // the unwind info (stripping keeps it); 0 if unknown or named.
  uint64_t function_start = 0;

  // The key form: the function; for an unnamed frame "module+0xSTART", the
  // same for every sample inside one function, or "module+0xOFFSET" when the
  // start is unknown.
  std::string Name() const;
  friend bool operator==(const BlockFrame&, const BlockFrame&) = default;
};

// One stack sample, innermost frame first.
struct BlockStackSample {
  absl::Time time;  // Millisecond precision.
  std::vector<BlockFrame> frames;
  friend bool operator==(const BlockStackSample&, const BlockStackSample&) = default;
};

// CPU use over a window, in whole percent of the machine's CPU time.
struct BlockCpuRate {
  absl::Time time;  // End of the window (unused for the whole-block rate).
  int cpu = 0;      // busy: everything but idle and iowait
  int app = 0;      // this process
  int user = 0;
  int system = 0;
  int iowait = 0;
  friend bool operator==(const BlockCpuRate&, const BlockCpuRate&) = default;
};

// A module of the sampled frames and its GNU build id: what names its
// unnamed frames off the host (matrix-report symbolize, debuginfod).
struct BlockModule {
  // The module as the frames write it: the ELF file's base name, or its path
  // when another module of that base name is listed first.
  std::string name;
  std::string build_id;  // Lowercase hex.
  friend bool operator==(const BlockModule&, const BlockModule&) = default;
};

struct BlockInfo {
  // basic
  std::string qualifier;
  std::string version_name;
  int64_t version_code = 0;
  std::string uid;
  std::string network;
  std::string model;      // CPU model name
  std::string api_level;  // kernel: "Linux 6.1.0-13-amd64 x86_64"
  std::string machine;    // Matrix's device level: BEST, HIGH, ... UN_KNOW
  int cpu_cores = 0;
  std::string process;
  int pid = 0;
  int64_t free_memory_kb = 0;   // MemAvailable
  int64_t total_memory_kb = 0;  // MemTotal
  int64_t vm_rss_kb = 0;        // the process's VmRSS
  // time
  int64_t time_cost_ms = 0;    // wall time of the dispatch, stopped time left out
  int64_t stopped_ms = 0;      // the process was stopped (SIGSTOP, a breakpoint)
  int64_t thread_time_ms = 0;  // looper thread CPU time, first sample to end
  absl::Time time_start;       // millisecond precision
  absl::Time time_end;
  std::string message;  // the dispatched message, when known
  std::string scene;    // the visible scene (AppState)
  // cpu
  bool cpu_busy = false;
  std::optional<BlockCpuRate> block_cpu;  // over the whole block
  std::vector<BlockCpuRate> cpu_rate;     // between consecutive samples
  // stack
  std::vector<BlockStackSample> samples;
  // The build ids of the modules with an unnamed frame in `samples`, one per
  // module as the frames name it.
  std::vector<BlockModule> modules;

  // Not in the text: set by the plugin and by LoadBlockLogs().
  std::string key;       // the key stack line (see KeyStackLine)
  std::string log_file;  // the file it was written to / read from

  friend bool operator==(const BlockInfo&, const BlockInfo&) = default;
};

// FormatBlockLog()
//
// The whole file text for `info`: LogWriter's header with `write_time`, then
// BlockInfo's four sections (see the file comment). Values are written on
// one line: line breaks inside them become spaces.
std::string FormatBlockLog(const BlockInfo& info, absl::Time write_time,
                           absl::TimeZone time_zone = absl::LocalTimeZone());

// ParseBlockLog()
//
// Parses FormatBlockLog()'s output (CRLF or LF line ends). Unknown keys are
// ignored. Fails with InvalidArgument (and never guesses) when the header,
// "time", "time-start" or "time-end" is missing or malformed, or a stack
// entry or CPU line cannot be read.
absl::StatusOr<BlockInfo> ParseBlockLog(absl::string_view text,
                                        absl::TimeZone time_zone = absl::LocalTimeZone());

// The structured report carried by the BlockCanary Issue.
proto::BlockReport ToBlockReport(const BlockInfo& info);

// FrameMatches()
//
// Whether `frame` belongs to `package`: its function name or its module's
// file name starts with `package`.
bool FrameMatches(const BlockFrame& frame, absl::string_view package);

// IsConcernedFrame()
//
// Whether `frame`, a frame of `sample`, is one the application cares about:
// it matches one of `concern_packages` (frames matched only by module must
// also not be C++ runtime or matrix-cpp code); with no packages, any frame
// outside libc, the C++ runtime, the dynamic loader and matrix-cpp that is
// named, or unnamed in a module that names no frame of `sample` (a stripped
// program's own code, as NativeStackKey() takes it).
bool IsConcernedFrame(const BlockFrame& frame, const BlockStackSample& sample,
                      const std::vector<std::string>& concern_packages);

// The innermost concerned frame of `sample`, or null.
const BlockFrame* FirstConcernedFrame(const BlockStackSample& sample,
                                      const std::vector<std::string>& concern_packages);

// KeyStackLine()
//
// The block's key: the function that held the thread. Each sample stands for
// the time from half-way to the previous sample to half-way to the next (the
// first from time_start, the last to time_end). Descending from the
// outermost frame while one call holds more than half of that time, the key
// is the deepest concerned frame on the way, so a callee that ran for less
// than half of the block never takes the key from its caller, and a function
// whose time is spread over several callees is not split among them.
// Without a concerned frame on that path: the innermost concerned frame
// whose samples stand for the most time (ties: more samples, then the
// earliest); without any concerned frame, the innermost named frame of the
// first sample, else "unknown". `count` receives how many samples hold the
// key.
std::string KeyStackLine(const BlockInfo& info, const std::vector<std::string>& concern_packages,
                         int* count = nullptr);

// Whether any sample holds a concerned frame.
bool HasConcernedFrame(const BlockInfo& info, const std::vector<std::string>& concern_packages);

// Whether any frame of any sample matches one of `white_list`.
bool IsWhiteListed(const BlockInfo& info, const std::vector<std::string>& white_list);

// BlockGroup
//
// Blocks that share a key stack line. BlockCanary's list only labels each
// block with its key; here they are counted.
struct BlockGroup {
  std::string key;
  int count = 0;
  int64_t total_cost_ms = 0;
  int64_t max_cost_ms = 0;
  absl::Time first_seen = absl::InfiniteFuture();  // earliest time_start
  absl::Time last_seen = absl::InfinitePast();     // latest time_start
  std::string last_log_file;                       // of the latest block

  // Adds one block (with `info.key` set) to the group.
  void Add(const BlockInfo& info);
};

// GroupBlocks()
//
// Groups `blocks` by their `key` (blocks with an empty key are grouped under
// "unknown"), most frequent first; ties by total cost, then key.
std::vector<BlockGroup> GroupBlocks(const std::vector<BlockInfo>& blocks);

// Sorts groups most frequent first (ties: total cost, then key).
void SortBlockGroups(std::vector<BlockGroup>& groups);

}  // namespace matrix

#endif  // MATRIX_PLUGINS_BLOCK_CANARY_INFO_H_

#include "matrix/plugins/block_canary_info.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "matrix/trace/report_context.h"
#include "matrix/trace/sampled_stacks.h"
#include "matrix/trace/stack_capture.h"

namespace matrix {
namespace {

constexpr char kSep[] = "\r\n";
// Between a frame's module and its source location.
constexpr absl::string_view kAt = " at ";
constexpr absl::string_view kIn = " in ";
constexpr char kKv[] = " = ";
constexpr char kStars[] = "**********************";
constexpr char kWriteLogTime[] = "(write log time)";
// BlockInfo.TIME_FORMATTER "MM-dd HH:mm:ss.SSS" and LogWriter's
// "yyyy-MM-dd HH:mm:ss".
constexpr char kEntryTimeFormat[] = "%m-%d %H:%M:%E3S";
constexpr size_t kEntryTimeLength = 18;
constexpr char kHeaderTimeFormat[] = "%Y-%m-%d %H:%M:%S";

// Keys, in BlockCanary's spelling; ours are chosen so that none starts with
// another key (BlockCanary's own reader matches keys with startsWith).
constexpr char kQua[] = "qua";
constexpr char kVersionName[] = "versionName";
constexpr char kVersionCode[] = "versionCode";
constexpr char kUid[] = "uid";
constexpr char kNetwork[] = "network";
constexpr char kModel[] = "model";
constexpr char kApi[] = "api-level";
constexpr char kMachine[] = "machine";
constexpr char kCpuCore[] = "cpu-core";
constexpr char kProcess[] = "process";
constexpr char kPid[] = "pid";
constexpr char kFreeMemory[] = "freeMemory";
constexpr char kTotalMemory[] = "totalMemory";
constexpr char kVmRss[] = "vm-rss";
constexpr char kTime[] = "time";
constexpr char kThreadTime[] = "thread-time";
// Written only when the process was stopped during the block (BlockCanary's
// own files have no such key).
constexpr char kStoppedTime[] = "stopped-time";
constexpr char kTimeStart[] = "time-start";
constexpr char kTimeEnd[] = "time-end";
constexpr char kMessage[] = "message";
constexpr char kScene[] = "scene";
constexpr char kCpuBusy[] = "cpu-busy";
constexpr char kBlockCpu[] = "block-cpu";
constexpr char kCpuRate[] = "cpu-rate";
constexpr char kStack[] = "stack";
constexpr char kBuildId[] = "build-id";

// One line per value: line breaks would break the layout.
std::string OneLine(absl::string_view value) {
  std::string out(value);
  for (char& c : out) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return out;
}

void AppendKv(std::string* out, absl::string_view key, absl::string_view value) {
  absl::StrAppend(out, key, kKv, OneLine(value), kSep);
}

std::string FormatEntryTime(absl::Time t, absl::TimeZone tz) {
  return absl::FormatTime(kEntryTimeFormat, t, tz);
}

std::string FormatRates(const BlockCpuRate& r) {
  return absl::StrFormat("cpu:%d%% app:%d%% [user:%d%% system:%d%% ioWait:%d%% ]", r.cpu, r.app,
                         r.user, r.system, r.iowait);
}

bool IsLowerHex(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

bool HasStart(const BlockFrame& f) { return f.function.empty() && f.function_start != 0; }

// "function+0xOFFSET (module)", then " at file:line" when the line is known,
// then " in module+0xSTART" for an unnamed frame whose start is known.
std::string FormatFrame(const BlockFrame& f) {
  std::string out = absl::StrFormat("%s+0x%x (%s)", f.function.empty() ? "??" : OneLine(f.function),
                                    f.offset, OneLine(f.module));
  if (!f.file.empty() && f.line > 0) absl::StrAppend(&out, kAt, OneLine(f.file), ":", f.line);
  if (HasStart(f)) absl::StrAppend(&out, kIn, f.Name());
  return out;
}

absl::Status Corrupt(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("block log: ", what));
}

// Parses "MM-dd HH:mm:ss.SSS" in the year that puts it closest to
// `reference` (the file has no year; a block can straddle New Year).
std::optional<absl::Time> ParseEntryTime(absl::string_view text, absl::Time reference,
                                         absl::TimeZone tz) {
  const int year = static_cast<int>(absl::ToCivilYear(reference, tz).year());
  std::optional<absl::Time> best;
  for (int y : {year - 1, year, year + 1}) {
    absl::Time t;
    std::string err;
    if (!absl::ParseTime("%Y-%m-%d %H:%M:%E*S", absl::StrCat(y, "-", text), tz, &t, &err)) {
      continue;
    }
    if (!best || absl::AbsDuration(t - reference) < absl::AbsDuration(*best - reference)) best = t;
  }
  return best;
}

std::optional<BlockCpuRate> ParseRates(absl::string_view text) {
  BlockCpuRate r;
  int consumed = 0;
  const std::string s(text);
  if (std::sscanf(s.c_str(), "cpu:%d%% app:%d%% [user:%d%% system:%d%% ioWait:%d%% ]%n", &r.cpu,
                  &r.app, &r.user, &r.system, &r.iowait, &consumed) != 5 ||
      consumed != static_cast<int>(s.size())) {
    return std::nullopt;
  }
  return r;
}

// The function start of " in module+0xSTART" at the end of `line`, which is
// cut off; 0 when there is none.
uint64_t CutFunctionStart(absl::string_view* line, std::string* start_module) {
  const size_t in = line->rfind(kIn);
  if (in == absl::string_view::npos) return 0;
  const absl::string_view key = line->substr(in + kIn.size());
  const size_t plus = key.rfind("+0x");
  uint64_t start = 0;
  if (plus == absl::string_view::npos || plus == 0 ||
      !absl::SimpleHexAtoi(key.substr(plus + 3), &start) || start == 0) {
    return 0;
  }
  *start_module = std::string(key.substr(0, plus));
  *line = line->substr(0, in);
  return start;
}

std::optional<BlockFrame> ParseFrame(absl::string_view line) {
  std::string start_module;
  const uint64_t start = CutFunctionStart(&line, &start_module);
  // The source location after the module, when known.
  std::string file;
  int source_line = 0;
  // The first ") at " ends the module: a file name may hold " at " itself.
  if (const size_t close = line.find(absl::StrCat(")", kAt)); close != absl::string_view::npos) {
    const size_t at = close + 1;
    const absl::string_view location = line.substr(at + kAt.size());
    const size_t colon = location.rfind(':');
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(location.substr(colon + 1), &source_line) || source_line <= 0) {
      return std::nullopt;
    }
    file = std::string(location.substr(0, colon));
    line = line.substr(0, at);
  }
  if (line.empty() || line.back() != ')') return std::nullopt;
  const size_t open = line.rfind(" (");
  if (open == absl::string_view::npos) return std::nullopt;
  BlockFrame f;
  f.module = std::string(line.substr(open + 2, line.size() - open - 3));
  const absl::string_view left = line.substr(0, open);
  const size_t plus = left.rfind("+0x");
  if (plus == absl::string_view::npos) return std::nullopt;
  if (!absl::SimpleHexAtoi(left.substr(plus + 3), &f.offset)) return std::nullopt;
  const absl::string_view fn = left.substr(0, plus);
  if (fn != "??") f.function = std::string(fn);
  f.file = std::move(file);
  f.line = source_line;
  if (start != 0) {
    // Written for unnamed frames only, with the frame's own module.
    if (!f.function.empty() || start_module != f.module) return std::nullopt;
    f.function_start = start;
  }
  return f;
}

template <typename T>
bool ParseInt(absl::string_view s, T* out) {
  return absl::SimpleAtoi(s, out);
}

}  // namespace

std::string BlockFrame::Name() const {
  if (!function.empty()) return function;
  return absl::StrFormat("%s+0x%x", module.empty() ? "??" : module,
                         function_start != 0 ? function_start : offset);
}

std::string FormatBlockLog(const BlockInfo& info, absl::Time write_time, absl::TimeZone tz) {
  std::string out;
  // LogWriter.save().
  absl::StrAppend(&out, kSep, kStars, kSep, absl::FormatTime(kHeaderTimeFormat, write_time, tz),
                  kWriteLogTime, kSep, kSep);
  // BlockInfo.flushString(): basic.
  AppendKv(&out, kQua, info.qualifier);
  AppendKv(&out, kVersionName, info.version_name);
  AppendKv(&out, kVersionCode, absl::StrCat(info.version_code));
  AppendKv(&out, kUid, info.uid);
  AppendKv(&out, kNetwork, info.network);
  AppendKv(&out, kModel, info.model);
  AppendKv(&out, kApi, info.api_level);
  AppendKv(&out, kMachine, info.machine);
  AppendKv(&out, kCpuCore, absl::StrCat(info.cpu_cores));
  AppendKv(&out, kProcess, info.process);
  AppendKv(&out, kPid, absl::StrCat(info.pid));
  AppendKv(&out, kFreeMemory, absl::StrCat(info.free_memory_kb));
  AppendKv(&out, kTotalMemory, absl::StrCat(info.total_memory_kb));
  AppendKv(&out, kVmRss, absl::StrCat(info.vm_rss_kb));
  // time.
  AppendKv(&out, kTime, absl::StrCat(info.time_cost_ms));
  AppendKv(&out, kThreadTime, absl::StrCat(info.thread_time_ms));
  if (info.stopped_ms > 0) AppendKv(&out, kStoppedTime, absl::StrCat(info.stopped_ms));
  AppendKv(&out, kTimeStart, FormatEntryTime(info.time_start, tz));
  AppendKv(&out, kTimeEnd, FormatEntryTime(info.time_end, tz));
  AppendKv(&out, kMessage, info.message);
  AppendKv(&out, kScene, info.scene);
  // One line per module: "<build id> <module>".
  for (const BlockModule& m : info.modules) {
    AppendKv(&out, kBuildId, absl::StrCat(m.build_id, " ", m.name));
  }
  // cpu: the rate entries each end with a line break and the section with
  // another, so a blank line ends it.
  AppendKv(&out, kCpuBusy, info.cpu_busy ? "true" : "false");
  if (info.block_cpu) AppendKv(&out, kBlockCpu, FormatRates(*info.block_cpu));
  absl::StrAppend(&out, kCpuRate, kKv);
  for (const BlockCpuRate& r : info.cpu_rate) {
    absl::StrAppend(&out, FormatEntryTime(r.time, tz), " ", FormatRates(r), kSep);
  }
  absl::StrAppend(&out, kSep);
  // stack: "<time>", blank, frames, blank; per sample.
  if (!info.samples.empty()) {
    absl::StrAppend(&out, kStack, kKv);
    for (const BlockStackSample& s : info.samples) {
      absl::StrAppend(&out, FormatEntryTime(s.time, tz), kSep, kSep);
      for (const BlockFrame& f : s.frames) absl::StrAppend(&out, FormatFrame(f), kSep);
      absl::StrAppend(&out, kSep);
    }
    absl::StrAppend(&out, kSep);
  }
  absl::StrAppend(&out, kSep);
  return out;
}

namespace {

// The 'key = value' fields that are copied as text, or read as integers.
struct TextField {
  const char* key;
  std::string BlockInfo::*member;
};
constexpr TextField kTextFields[] = {
    {kQua, &BlockInfo::qualifier},   {kVersionName, &BlockInfo::version_name},
    {kUid, &BlockInfo::uid},         {kNetwork, &BlockInfo::network},
    {kModel, &BlockInfo::model},     {kApi, &BlockInfo::api_level},
    {kMachine, &BlockInfo::machine}, {kProcess, &BlockInfo::process},
    {kMessage, &BlockInfo::message}, {kScene, &BlockInfo::scene},
};
struct IntField {
  const char* key;
  int64_t BlockInfo::*member;
  bool non_negative;
};
constexpr IntField kIntFields[] = {
    {kVersionCode, &BlockInfo::version_code, false},
    {kFreeMemory, &BlockInfo::free_memory_kb, false},
    {kTotalMemory, &BlockInfo::total_memory_kb, false},
    {kVmRss, &BlockInfo::vm_rss_kb, false},
    {kTime, &BlockInfo::time_cost_ms, true},
    {kThreadTime, &BlockInfo::thread_time_ms, false},
    {kStoppedTime, &BlockInfo::stopped_ms, true},
};

absl::Status BadValue(absl::string_view key, absl::string_view value) {
  return Corrupt(absl::StrCat("bad ", key, " '", value, "'"));
}

// Reads one block log top to bottom: the header, the fields, the cpu-rate
// and stack sections; then resolves the entries' times against the header's.
class BlockLogParser {
 public:
  BlockLogParser(absl::string_view text, absl::TimeZone tz)
      : lines_(absl::StrSplit(text, '\n')), tz_(tz) {
    for (absl::string_view& line : lines_) {
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    }
  }

  absl::StatusOr<BlockInfo> Parse() {
    if (absl::Status s = ReadHeader(); !s.ok()) return s;
    for (; i_ < lines_.size(); ++i_) {
      const absl::string_view line = lines_[i_];
      if (line.empty()) continue;
      const size_t eq = line.find(kKv);
      if (eq == absl::string_view::npos) {
        return Corrupt(absl::StrCat("unexpected line '", line, "'"));
      }
      absl::Status s = ReadField(line.substr(0, eq), line.substr(eq + sizeof(kKv) - 1));
      if (!s.ok()) return s;
    }
    if (absl::Status s = ResolveTimes(); !s.ok()) return s;
    return std::move(info_);
  }

 private:
  struct RawSample {
    absl::string_view time;
    std::vector<BlockFrame> frames;
  };

  absl::Status ReadHeader() {
    while (i_ < lines_.size() && lines_[i_].empty()) ++i_;
    if (i_ >= lines_.size() || lines_[i_] != kStars) return Corrupt("no '*****' header line");
    ++i_;
    if (i_ >= lines_.size() || !absl::EndsWith(lines_[i_], kWriteLogTime)) {
      return Corrupt("no '(write log time)' header line");
    }
    std::string err;
    absl::string_view t = lines_[i_];
    t.remove_suffix(sizeof(kWriteLogTime) - 1);
    if (!absl::ParseTime(kHeaderTimeFormat, t, tz_, &write_time_, &err)) {
      return Corrupt(absl::StrCat("bad write time '", t, "': ", err));
    }
    ++i_;
    return absl::OkStatus();
  }

  absl::Status ReadField(absl::string_view key, absl::string_view value) {
    for (const TextField& f : kTextFields) {
      if (key == f.key) {
        info_.*f.member = std::string(value);
        return absl::OkStatus();
      }
    }
    for (const IntField& f : kIntFields) {
      if (key != f.key) continue;
      int64_t& field = info_.*f.member;
      if (!ParseInt(value, &field) || (f.non_negative && field < 0)) return BadValue(key, value);
      if (key == kTime) has_time_ = true;
      return absl::OkStatus();
    }
    if (key == kCpuCore || key == kPid) {
      if (!ParseInt(value, key == kPid ? &info_.pid : &info_.cpu_cores)) {
        return BadValue(key, value);
      }
    } else if (key == kTimeStart) {
      start_text_ = value;
    } else if (key == kTimeEnd) {
      end_text_ = value;
    } else if (key == kCpuBusy) {
      if (value != "true" && value != "false") return BadValue(key, value);
      info_.cpu_busy = value == "true";
    } else if (key == kBlockCpu) {
      std::optional<BlockCpuRate> r = ParseRates(value);
      if (!r) return BadValue(key, value);
      info_.block_cpu = *r;
    } else if (key == kCpuRate) {
      return ReadCpuRates(value);
    } else if (key == kStack) {
      return ReadStackSamples(value);
    } else if (key == kBuildId) {
      const size_t space = value.find(' ');
      if (space == 0 || space == absl::string_view::npos || space + 1 == value.size() ||
          !IsLowerHex(value.substr(0, space))) {
        return BadValue(key, value);
      }
      info_.modules.push_back(
          {std::string(value.substr(space + 1)), std::string(value.substr(0, space))});
    }
    // Unknown keys are skipped: newer writers may add fields.
    return absl::OkStatus();
  }

  // Entries until a blank line; the first shares the key's line.
  absl::Status ReadCpuRates(absl::string_view first) {
    if (!first.empty() && !ReadRateEntry(first)) return BadValue(kCpuRate, first);
    while (i_ + 1 < lines_.size() && !lines_[i_ + 1].empty() &&
           lines_[i_ + 1].find(kKv) == absl::string_view::npos) {
      ++i_;
      if (!ReadRateEntry(lines_[i_])) return BadValue(kCpuRate, lines_[i_]);
    }
    return absl::OkStatus();
  }

  bool ReadRateEntry(absl::string_view line) {
    if (line.size() < kEntryTimeLength + 1 || line[kEntryTimeLength] != ' ') return false;
    rate_lines_.emplace_back(line.substr(0, kEntryTimeLength), line.substr(kEntryTimeLength + 1));
    return true;
  }

  // "<time>", blank, frames until a blank line; repeated until a blank line
  // stands where the next time would.
  absl::Status ReadStackSamples(absl::string_view time) {
    for (;;) {
      RawSample sample{time, {}};
      ++i_;
      if (i_ >= lines_.size() || !lines_[i_].empty()) {
        return Corrupt(absl::StrCat("stack entry '", time, "' lacks its blank line"));
      }
      for (++i_; i_ < lines_.size() && !lines_[i_].empty(); ++i_) {
        std::optional<BlockFrame> f = ParseFrame(lines_[i_]);
        if (!f) return Corrupt(absl::StrCat("bad stack frame '", lines_[i_], "'"));
        sample.frames.push_back(std::move(*f));
      }
      raw_samples_.push_back(std::move(sample));
      if (i_ + 1 >= lines_.size() || lines_[i_ + 1].empty()) return absl::OkStatus();
      ++i_;
      time = lines_[i_];
    }
  }

  // Entry times carry no year: each is read closest to the one before it.
  absl::Status ResolveTimes() {
    if (!has_time_) return Corrupt("no 'time'");
    if (start_text_.empty() || end_text_.empty()) {
      return Corrupt("no 'time-start' or 'time-end'");
    }
    std::optional<absl::Time> start = ParseEntryTime(start_text_, write_time_, tz_);
    if (!start) return BadValue(kTimeStart, start_text_);
    info_.time_start = *start;
    std::optional<absl::Time> end = ParseEntryTime(end_text_, *start, tz_);
    if (!end || *end < *start) return BadValue(kTimeEnd, end_text_);
    info_.time_end = *end;
    for (const auto& [time_text, rates_text] : rate_lines_) {
      std::optional<absl::Time> t = ParseEntryTime(time_text, *start, tz_);
      std::optional<BlockCpuRate> r = ParseRates(rates_text);
      if (!t || !r) return BadValue(kCpuRate, absl::StrCat(time_text, " ", rates_text));
      r->time = *t;
      info_.cpu_rate.push_back(*r);
    }
    for (RawSample& raw : raw_samples_) {
      std::optional<absl::Time> t = ParseEntryTime(raw.time, *start, tz_);
      if (!t) return BadValue(kStack, raw.time);
      info_.samples.push_back(BlockStackSample{*t, std::move(raw.frames)});
    }
    return absl::OkStatus();
  }

  std::vector<absl::string_view> lines_;
  const absl::TimeZone tz_;
  size_t i_ = 0;  // the line being read
  absl::Time write_time_;
  BlockInfo info_;
  bool has_time_ = false;
  absl::string_view start_text_, end_text_;
  std::vector<std::pair<absl::string_view, absl::string_view>> rate_lines_;  // time, rates
  std::vector<RawSample> raw_samples_;
};

}  // namespace

absl::StatusOr<BlockInfo> ParseBlockLog(absl::string_view text, absl::TimeZone tz) {
  return BlockLogParser(text, tz).Parse();
}

proto::BlockReport ToBlockReport(const BlockInfo& info) {
  proto::BlockReport r;
  r.set_qualifier(info.qualifier);
  r.set_version_name(info.version_name);
  r.set_version_code(info.version_code);
  r.set_uid(info.uid);
  r.set_network(info.network);
  r.set_model(info.model);
  r.set_api_level(info.api_level);
  r.set_cpu_cores(info.cpu_cores);
  r.set_process(info.process);
  r.set_pid(info.pid);
  r.set_free_memory_kb(info.free_memory_kb);
  r.set_total_memory_kb(info.total_memory_kb);
  r.set_vm_rss_kb(info.vm_rss_kb);
  r.set_cost_ms(info.time_cost_ms);
  r.set_thread_time_ms(info.thread_time_ms);
  r.set_stopped_ms(info.stopped_ms);
  r.set_time_start_ms(absl::ToUnixMillis(info.time_start));
  r.set_time_end_ms(absl::ToUnixMillis(info.time_end));
  if (!info.message.empty()) r.mutable_message()->set_callback(info.message);
  r.set_scene(info.scene);
  r.set_cpu_busy(info.cpu_busy);
  auto fill_rate = [](const BlockCpuRate& from, proto::BlockCpuRate* to, bool with_time) {
    if (with_time) to->set_time_ms(absl::ToUnixMillis(from.time));
    to->set_cpu_percent(from.cpu);
    to->set_app_percent(from.app);
    to->set_user_percent(from.user);
    to->set_system_percent(from.system);
    to->set_iowait_percent(from.iowait);
  };
  if (info.block_cpu) fill_rate(*info.block_cpu, r.mutable_block_cpu(), false);
  for (const BlockCpuRate& rate : info.cpu_rate) fill_rate(rate, r.add_cpu_rate(), true);
  for (const BlockStackSample& s : info.samples) {
    proto::BlockStackSample* sample = r.add_samples();
    sample->set_time_ms(absl::ToUnixMillis(s.time));
    sample->set_offset_ms(absl::ToInt64Milliseconds(s.time - info.time_start));
    for (const BlockFrame& f : s.frames) {
      proto::StackFrame* frame = sample->add_frames();
      frame->set_function(f.function);
      frame->set_module(f.module);
      frame->set_offset(f.offset);
      if (f.function.empty() && !f.module.empty()) {
        // As a tracer's report writes it: named later by build id and address.
        frame->set_elf_address(f.offset);
        if (HasStart(f)) frame->set_offset(f.offset - f.function_start);
        for (const BlockModule& m : info.modules) {
          if (m.name == f.module) frame->set_build_id(m.build_id);
        }
      }
      if (!f.file.empty()) frame->set_file(f.file);
      if (f.line > 0) frame->set_line(f.line);
    }
  }
  r.set_key_stack_line(info.key);
  r.set_log_file(info.log_file);
  return r;
}

bool FrameMatches(const BlockFrame& frame, absl::string_view package) {
  if (package.empty()) return false;
  return absl::StartsWith(frame.function, package) || absl::StartsWith(frame.module, package);
}

bool IsConcernedFrame(const BlockFrame& frame, const BlockStackSample& sample,
                      const std::vector<std::string>& concern_packages) {
  if (concern_packages.empty()) {
    if (IsSystemOrRuntimeFrame(frame.module, frame.function, frame.file)) return false;
    if (!frame.function.empty()) return true;
    // Unnamed: the program's own only when its module is stripped.
    return !frame.module.empty() &&
           std::none_of(sample.frames.begin(), sample.frames.end(), [&](const BlockFrame& f) {
             return !f.function.empty() && f.module == frame.module;
           });
  }
  for (const std::string& package : concern_packages) {
    if (package.empty()) continue;
    if (absl::StartsWith(frame.function, package)) return true;
    // A module holds the runtime linked into it too (matrix-cpp, std).
    if (absl::StartsWith(frame.module, package) && !IsSystemOrRuntimeFrame("", frame.function)) {
      return true;
    }
  }
  return false;
}

const BlockFrame* FirstConcernedFrame(const BlockStackSample& sample,
                                      const std::vector<std::string>& concern_packages) {
  for (const BlockFrame& frame : sample.frames) {
    if (IsConcernedFrame(frame, sample, concern_packages)) return &frame;
  }
  return nullptr;
}

namespace {

// The time each sample stands for: from half-way to the previous sample to
// half-way to the next one; the first reaches back to the block's start and
// the last forward to its end. A sample outside the block stands for none.
std::vector<absl::Duration> SampleWeights(const BlockInfo& info) {
  const std::vector<BlockStackSample>& samples = info.samples;
  const bool has_bounds = info.time_end > info.time_start;
  std::vector<absl::Duration> weights(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    absl::Time lo = i == 0 ? (has_bounds ? info.time_start : samples[i].time)
                           : samples[i - 1].time + (samples[i].time - samples[i - 1].time) / 2;
    absl::Time hi = i + 1 == samples.size()
                        ? (has_bounds ? info.time_end : samples[i].time)
                        : samples[i].time + (samples[i + 1].time - samples[i].time) / 2;
    if (has_bounds) {
      lo = std::max(lo, info.time_start);
      hi = std::min(hi, info.time_end);
    }
    weights[i] = std::max(absl::ZeroDuration(), hi - lo);
  }
  return weights;
}

// The block's samples as symbolized stacks, frame for frame.
std::vector<SymbolizedStack> AsStacks(const BlockInfo& info) {
  std::vector<SymbolizedStack> stacks(info.samples.size());
  for (size_t i = 0; i < info.samples.size(); ++i) {
    for (const BlockFrame& f : info.samples[i].frames) {
      StackFrame frame;
      frame.symbol.function = f.function;
      frame.symbol.module = f.module;
      // Unnamed frames are told apart by their function's start, else by
      // their module offset.
      if (f.function.empty()) frame.pc = f.function_start != 0 ? f.function_start : f.offset;
      stacks[i].frames.push_back(std::move(frame));
    }
  }
  return stacks;
}

}  // namespace

std::string KeyStackLine(const BlockInfo& info, const std::vector<std::string>& concern_packages,
                         int* count) {
  const std::vector<absl::Duration> weights = SampleWeights(info);
  // The dominant call path: the deepest concerned frame that more than half
  // of the block's sampled time was inside.
  const std::vector<SymbolizedStack> stacks = AsStacks(info);
  std::vector<WeightedStack> weighted(stacks.size());
  for (size_t i = 0; i < stacks.size(); ++i) weighted[i] = {&stacks[i], weights[i]};
  const std::vector<DominantFrame> path = DominantCallPath(weighted);
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const BlockStackSample& sample = info.samples[it->sample];
    const BlockFrame& frame = sample.frames[it->frame];
    if (!IsConcernedFrame(frame, sample, concern_packages)) continue;
    if (count != nullptr) *count = static_cast<int>(it->samples_inside);
    return frame.Name();
  }
  // No concerned frame holds the majority: the innermost concerned frame
  // whose samples stand for the most time; ties go to more samples, then to
  // the earliest.
  struct Tally {
    absl::Duration weight;
    int count = 0;
    size_t first = 0;
  };
  absl::flat_hash_map<std::string, Tally> tallies;
  for (size_t i = 0; i < info.samples.size(); ++i) {
    const BlockFrame* frame = FirstConcernedFrame(info.samples[i], concern_packages);
    if (frame == nullptr) continue;
    auto [it, inserted] = tallies.try_emplace(frame->Name(), Tally{absl::ZeroDuration(), 0, i});
    it->second.weight += weights[i];
    ++it->second.count;
  }
  const std::string* best = nullptr;
  Tally best_tally;
  for (const auto& [name, tally] : tallies) {
    if (best == nullptr || tally.weight > best_tally.weight ||
        (tally.weight == best_tally.weight &&
         (tally.count > best_tally.count ||
          (tally.count == best_tally.count && tally.first < best_tally.first)))) {
      best = &name;
      best_tally = tally;
    }
  }
  if (count != nullptr) *count = best != nullptr ? best_tally.count : 0;
  if (best != nullptr) return *best;
  if (!info.samples.empty()) {
    for (const BlockFrame& frame : info.samples.front().frames) {
      if (!frame.function.empty()) return frame.function;
    }
  }
  return "unknown";
}

bool HasConcernedFrame(const BlockInfo& info, const std::vector<std::string>& concern_packages) {
  for (const BlockStackSample& sample : info.samples) {
    if (FirstConcernedFrame(sample, concern_packages) != nullptr) return true;
  }
  return false;
}

bool IsWhiteListed(const BlockInfo& info, const std::vector<std::string>& white_list) {
  for (const BlockStackSample& sample : info.samples) {
    for (const BlockFrame& frame : sample.frames) {
      for (const std::string& package : white_list) {
        if (FrameMatches(frame, package)) return true;
      }
    }
  }
  return false;
}

void BlockGroup::Add(const BlockInfo& info) {
  if (key.empty()) key = info.key.empty() ? "unknown" : info.key;
  ++count;
  total_cost_ms += info.time_cost_ms;
  max_cost_ms = std::max(max_cost_ms, info.time_cost_ms);
  first_seen = std::min(first_seen, info.time_start);
  if (info.time_start >= last_seen) {
    last_seen = info.time_start;
    last_log_file = info.log_file;
  }
}

void SortBlockGroups(std::vector<BlockGroup>& groups) {
  std::sort(groups.begin(), groups.end(), [](const BlockGroup& a, const BlockGroup& b) {
    if (a.count != b.count) return a.count > b.count;
    if (a.total_cost_ms != b.total_cost_ms) return a.total_cost_ms > b.total_cost_ms;
    return a.key < b.key;
  });
}

std::vector<BlockGroup> GroupBlocks(const std::vector<BlockInfo>& blocks) {
  absl::flat_hash_map<std::string, size_t> index;
  std::vector<BlockGroup> groups;
  for (const BlockInfo& info : blocks) {
    const std::string key = info.key.empty() ? "unknown" : info.key;
    auto [it, inserted] = index.try_emplace(key, groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].Add(info);
  }
  SortBlockGroups(groups);
  return groups;
}

}  // namespace matrix

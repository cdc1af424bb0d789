#include "matrix/report/issue_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/string_view.h"
#include "matrix/core/issue.h"
#include "matrix/plugins/block_canary_info.h"

namespace matrix::report {
namespace {

namespace fs = std::filesystem;

constexpr absl::string_view kExtension = ".jsonl";
// BlockLogWriter's file names: looper-yyyy-MM-dd_HH-mm-ss.SSS[-N].log.
constexpr absl::string_view kBlockLogPrefix = "looper-";
constexpr absl::string_view kBlockLogExtension = ".log";
// The date part, 'd' for a digit.
constexpr absl::string_view kBlockLogDate = "dddd-dd-dd_dd-dd-dd.ddd";
// How every line the sink writes begins (Issue::ToJson: `tag` is field 1).
constexpr char kIssueStart[] = "{\"tag\":";
// A BlockCanary file's first non-blank character (its "****" header line).
constexpr char kBlockLogStart = '*';

// A file's place in its sink's rotation: directory, sink name and index
// (0 for the current file, N for <name>.N.jsonl).
struct RotationKey {
  std::string directory;
  std::string sink;
  int64_t index = 0;
};

RotationKey KeyFor(const std::string& path) {
  const fs::path p(path);
  RotationKey key;
  key.directory = p.parent_path().string();
  std::string stem = p.filename().string();
  if (absl::EndsWith(stem, kExtension)) stem.resize(stem.size() - kExtension.size());
  const size_t dot = stem.rfind('.');
  int64_t index = 0;
  if (dot != std::string::npos && dot + 1 < stem.size() &&
      std::all_of(stem.begin() + static_cast<std::ptrdiff_t>(dot) + 1, stem.end(),
                  [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) &&
      absl::SimpleAtoi(absl::string_view(stem).substr(dot + 1), &index) && index > 0) {
    key.sink = stem.substr(0, dot);
    key.index = index;
  } else {
    key.sink = stem;
  }
  return key;
}

// Whether `name` is a BlockLogWriter file name.
bool IsBlockLogName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kBlockLogPrefix) ||
      !absl::ConsumeSuffix(&name, kBlockLogExtension) || name.size() < kBlockLogDate.size()) {
    return false;
  }
  for (size_t i = 0; i < kBlockLogDate.size(); ++i) {
    const bool digit = absl::ascii_isdigit(static_cast<unsigned char>(name[i]));
    if (kBlockLogDate[i] == 'd' ? !digit : name[i] != kBlockLogDate[i]) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> OrderIssueFiles(std::vector<std::string> paths) {
  std::vector<std::pair<RotationKey, std::string>> keyed;
  keyed.reserve(paths.size());
  for (std::string& path : paths) keyed.emplace_back(KeyFor(path), std::move(path));
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    // Same sink: higher index (older) first; the current file (0) last.
    return std::tie(a.first.directory, a.first.sink, b.first.index, a.second) <
           std::tie(b.first.directory, b.first.sink, a.first.index, b.second);
  });
  std::vector<std::string> ordered;
  ordered.reserve(keyed.size());
  for (auto& [key, path] : keyed) ordered.push_back(std::move(path));
  return ordered;
}

absl::StatusOr<std::vector<std::string>> ExpandInput(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return absl::NotFoundError(absl::StrCat(path, ": ", ec ? ec.message() : "no such file"));
  }
  // Anything but a directory is read as a file: regular files, and also
  // pipes such as <(zcat old.jsonl.gz) or /dev/stdin.
  if (!fs::is_directory(status)) return std::vector<std::string>{path};
  std::vector<std::string> files;
  std::vector<std::string> block_logs;
  fs::directory_iterator it(path, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat(path, ": ", ec.message()));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return absl::InternalError(absl::StrCat(path, ": ", ec.message()));
    const std::string name = it->path().filename().string();
    const bool issues = absl::EndsWith(name, kExtension) && name.size() > kExtension.size();
    const bool block_log = IsBlockLogName(name);
    if (!issues && !block_log) continue;
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    (issues ? files : block_logs).push_back(it->path().string());
  }
  if (files.empty() && block_logs.empty()) {
    return absl::NotFoundError(absl::StrCat(
        path, ": no *.jsonl issue files or BlockCanary looper-*.log files in this directory"));
  }
  files = OrderIssueFiles(std::move(files));
  std::sort(block_logs.begin(), block_logs.end());
  files.insert(files.end(), std::make_move_iterator(block_logs.begin()),
               std::make_move_iterator(block_logs.end()));
  return files;
}

absl::StatusOr<IssueRecord> RecordFromBlockLog(absl::string_view text, SourceLocation source,
                                               absl::TimeZone time_zone) {
  absl::StatusOr<BlockInfo> info = ParseBlockLog(text, time_zone);
  if (!info.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a BlockCanary block file: ", info.status().message()));
  }
  // As BlockCanaryPlugin::Finish() and Plugin::OnDetectIssue() build it.
  int key_count = 0;
  info->key = KeyStackLine(*info, /*concern_packages=*/{}, &key_count);
  info->log_file = source.file;
  proto::Issue issue;
  issue.set_tag(kTagBlockCanary);
  issue.set_key(info->key);
  issue.set_plugin(kTagBlockCanary);
  issue.set_process(info->process);
  issue.set_pid(info->pid);
  issue.set_time_ms(absl::ToUnixMillis(info->time_end));
  proto::DeviceInfo* device = issue.mutable_device();
  if (proto::DeviceInfo::Level level; proto::DeviceInfo::Level_Parse(info->machine, &level)) {
    device->set_machine(level);
  }
  device->set_cpu_cores(info->cpu_cores);
  device->set_mem(info->total_memory_kb * 1024);
  device->set_mem_free(info->free_memory_kb);
  proto::BlockReport* report = issue.mutable_block();
  *report = ToBlockReport(*info);
  report->set_key_sample_count(key_count);
  return RecordFromIssue(std::move(issue), std::move(source));
}

void ReadIssueStream(std::istream& in, const std::string& name, ReadResult& result,
                     const ReadOptions& options) {
  result.files.push_back(name);
  // Leading blank lines are skipped (and counted) to see what the file is.
  int64_t number = 0;
  for (int c = in.peek(); c != std::char_traits<char>::eof() &&
                          absl::ascii_isspace(static_cast<unsigned char>(c));
       c = in.peek()) {
    if (in.get() == '\n') ++number;
  }
  if (in.peek() == kBlockLogStart) {
    const std::string text(std::istreambuf_iterator<char>(in), {});
    if (in.bad()) {
      result.errors.push_back(absl::StrCat(name, ": read error"));
      return;
    }
    ++result.lines;
    absl::StatusOr<IssueRecord> record =
        RecordFromBlockLog(text, {name, 0}, options.block_log_time_zone);
    if (!record.ok()) {
      result.malformed.push_back({{name, 0}, std::string(record.status().message())});
      return;
    }
    record->sequence = static_cast<int64_t>(result.records.size());
    result.records.push_back(*std::move(record));
    return;
  }
  std::string line;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    ++result.lines;
    absl::StatusOr<IssueRecord> record = ParseIssueLine(line, {name, number});
    if (!record.ok()) {
      result.malformed.push_back({{name, number}, std::string(record.status().message())});
      // A torn line (its writer was killed mid-write) may have the next
      // writer's first issue glued on after it: read that one.
      for (size_t start = line.find(kIssueStart, 1); start != std::string::npos;
           start = line.find(kIssueStart, start + 1)) {
        record = ParseIssueLine(absl::string_view(line).substr(start), {name, number});
        if (record.ok()) break;
      }
      if (!record.ok()) continue;
    }
    record->sequence = static_cast<int64_t>(result.records.size());
    result.records.push_back(*std::move(record));
  }
  if (in.bad()) {
    result.errors.push_back(absl::StrCat(name, ": read error after line ", number));
  }
}

namespace {

// A block as both files give it: the plugin's pid and the block's bounds,
// at the text file's millisecond precision.
using BlockIdentity = std::tuple<int32_t, int64_t, int64_t>;
BlockIdentity IdentityOf(const proto::Issue& issue) {
  return {issue.pid(), issue.block().time_start_ms(), issue.block().time_end_ms()};
}

// Leaves out the BlockCanary text files' copies of blocks that a JSON-lines
// file also holds (naming both matrix-reports/ and matrix-reports/blockcanary/
// would count each block twice), and numbers the records again.
void RemoveDuplicateBlocks(ReadResult& result) {
  absl::flat_hash_set<BlockIdentity> json_blocks;
  for (const IssueRecord& record : result.records) {
    // Text files' records have line 0; JSON lines are numbered from 1.
    if (record.issue.has_block() && record.source.line > 0) {
      json_blocks.insert(IdentityOf(record.issue));
    }
  }
  if (json_blocks.empty()) return;
  const size_t before = result.records.size();
  std::erase_if(result.records, [&](const IssueRecord& record) {
    return record.issue.has_block() && record.source.line == 0 &&
           json_blocks.contains(IdentityOf(record.issue));
  });
  result.duplicate_blocks += static_cast<int64_t>(before - result.records.size());
  for (size_t i = 0; i < result.records.size(); ++i) {
    result.records[i].sequence = static_cast<int64_t>(i);
  }
}

}  // namespace

ReadResult ReadIssueInputs(const std::vector<std::string>& inputs, std::istream* stdin_stream,
                           const ReadOptions& options) {
  ReadResult result;
  absl::flat_hash_set<std::string> seen;
  for (const std::string& input : inputs) {
    if (input == "-") {
      if (stdin_stream == nullptr) {
        result.errors.push_back("-: standard input is not available");
        continue;
      }
      if (!seen.insert(kStdinName).second) continue;
      ReadIssueStream(*stdin_stream, kStdinName, result, options);
      continue;
    }
    absl::StatusOr<std::vector<std::string>> files = ExpandInput(input);
    if (!files.ok()) {
      result.errors.push_back(std::string(files.status().message()));
      continue;
    }
    for (const std::string& file : *files) {
      std::error_code ec;
      fs::path canonical = fs::weakly_canonical(file, ec);
      if (!seen.insert(ec ? file : canonical.string()).second) continue;
      std::ifstream stream(file, std::ios::in | std::ios::binary);
      if (!stream.is_open()) {
        result.errors.push_back(absl::StrCat(file, ": ", std::strerror(errno)));
        continue;
      }
      ReadIssueStream(stream, file, result, options);
    }
  }
  RemoveDuplicateBlocks(result);
  return result;
}

}  // namespace matrix::report

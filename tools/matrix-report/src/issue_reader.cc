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
#include "internal/bounded_read.h"
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

absl::StatusOr<std::vector<std::string>> ExpandInput(const std::string& path,
                                                     std::vector<std::string>* not_regular) {
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
    if (!it->is_regular_file(type_ec)) {
      if (not_regular != nullptr) {
        not_regular->push_back(
            absl::StrCat(it->path().string(), ": not a regular file (",
                         it->is_symlink(type_ec) ? "a link to one that is not, or to nothing"
                         : it->is_fifo(type_ec)  ? "a FIFO"
                                                 : "a device, socket or directory",
                         "); skipped"));
      }
      continue;
    }
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

IssueStreamReader::IssueStreamReader(std::istream& in, std::string name,
                                     const ReadOptions& options, ReadStats* stats,
                                     MalformedCallback on_malformed)
    : in_(in),
      name_(std::move(name)),
      options_(options),
      stats_(stats),
      on_malformed_(std::move(on_malformed)) {
  if (stats_ != nullptr) stats_->files.push_back(name_);
}

void IssueStreamReader::Malformed(int64_t line, absl::string_view reason) {
  const MalformedLine malformed{{name_, line}, std::string(reason)};
  if (stats_ != nullptr) {
    ++stats_->malformed_lines;
    if (stats_->malformed_files.empty() ||
        stats_->malformed_files.back().first.where.file != name_) {
      stats_->malformed_files.push_back({malformed, 0});
    }
    ++stats_->malformed_files.back().count;
  }
  if (on_malformed_) on_malformed_(malformed);
}

bool IssueStreamReader::ReadBlockLog(IssueRecord& record) {
  done_ = true;
  // At most the cap and one byte more: a longer file is not a block file.
  std::string text;
  char chunk[65536];
  while (static_cast<int64_t>(text.size()) <= kMaxIssueLineBytes) {
    const std::streamsize want = static_cast<std::streamsize>(std::min<int64_t>(
        sizeof(chunk), kMaxIssueLineBytes + 1 - static_cast<int64_t>(text.size())));
    in_.read(chunk, want);
    if (in_.gcount() <= 0) break;
    text.append(chunk, static_cast<size_t>(in_.gcount()));
  }
  if (static_cast<int64_t>(text.size()) > kMaxIssueLineBytes) {
    if (stats_ != nullptr) ++stats_->lines;
    Malformed(0, kLineTooLong);
    return false;
  }
  if (in_.bad()) {
    if (stats_ != nullptr) stats_->errors.push_back(absl::StrCat(name_, ": read error"));
    return false;
  }
  if (stats_ != nullptr) ++stats_->lines;
  absl::StatusOr<IssueRecord> parsed =
      RecordFromBlockLog(text, {name_, 0}, options_.block_log_time_zone);
  if (!parsed.ok()) {
    Malformed(0, parsed.status().message());
    return false;
  }
  record = *std::move(parsed);
  record.sequence = sequence_++;
  return true;
}

bool IssueStreamReader::Next(IssueRecord& record) {
  if (done_) return false;
  if (!started_) {
    started_ = true;
    // Leading blank lines are skipped (and counted) to see what the file is.
    for (int c = in_.peek(); c != std::char_traits<char>::eof() &&
                             absl::ascii_isspace(static_cast<unsigned char>(c));
         c = in_.peek()) {
      if (in_.get() == '\n') ++number_;
    }
    if (in_.peek() == kBlockLogStart) return ReadBlockLog(record);
  }
  while (true) {
    const internal::LineRead read =
        internal::ReadLineBounded(in_, static_cast<size_t>(kMaxIssueLineBytes), line_);
    if (!read.got) break;
    ++number_;
    if (read.too_long) {
      if (stats_ != nullptr) ++stats_->lines;
      Malformed(number_, kLineTooLong);
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (absl::StripAsciiWhitespace(line_).empty()) continue;
    if (stats_ != nullptr) ++stats_->lines;
    absl::StatusOr<IssueRecord> parsed = ParseIssueLine(line_, {name_, number_});
    if (!parsed.ok()) {
      Malformed(number_, parsed.status().message());
      // A torn line (its writer was killed mid-write) may have the next
      // writer's first issue glued on after it: read that one.
      for (size_t start = line_.find(kIssueStart, 1); start != std::string::npos;
           start = line_.find(kIssueStart, start + 1)) {
        parsed = ParseIssueLine(absl::string_view(line_).substr(start), {name_, number_});
        if (parsed.ok()) break;
      }
      if (!parsed.ok()) continue;
    }
    record = *std::move(parsed);
    record.sequence = sequence_++;
    return true;
  }
  done_ = true;
  if (in_.bad() && stats_ != nullptr) {
    stats_->errors.push_back(absl::StrCat(name_, ": read error after line ", number_));
  }
  return false;
}

void ReadIssueStream(std::istream& in, const std::string& name, ReadResult& result,
                     const ReadOptions& options) {
  IssueStreamReader reader(in, name, options, &result,
                           [&](const MalformedLine& bad) { result.malformed.push_back(bad); });
  IssueRecord record;
  while (reader.Next(record)) {
    record.sequence = static_cast<int64_t>(result.records.size());
    result.records.push_back(std::move(record));
  }
}

namespace {

// A block as both files give it: the plugin's pid and the block's bounds,
// at the text file's millisecond precision.
using BlockIdentity = std::tuple<int32_t, int64_t, int64_t>;
BlockIdentity IdentityOf(const proto::Issue& issue) {
  return {issue.pid(), issue.block().time_start_ms(), issue.block().time_end_ms()};
}

// Text files' records have line 0; JSON lines are numbered from 1.
bool IsTextFileBlock(const IssueRecord& record) {
  return record.issue.has_block() && record.source.line == 0;
}
bool IsJsonLinesBlock(const IssueRecord& record) {
  return record.issue.has_block() && record.source.line > 0;
}

// One thing to do, in input order: read a file or standard input, or report
// an input that cannot be read.
struct ReadStep {
  std::string file;  // Empty for an error or standard input.
  bool is_stdin = false;
  std::string error;
};

std::vector<ReadStep> PlanReads(const std::vector<std::string>& inputs,
                                std::istream* stdin_stream) {
  std::vector<ReadStep> steps;
  absl::flat_hash_set<std::string> seen;
  for (const std::string& input : inputs) {
    if (input == "-") {
      if (stdin_stream == nullptr) {
        steps.push_back(
            {.file = "", .is_stdin = false, .error = "-: standard input is not available"});
      } else if (seen.insert(kStdinName).second) {
        steps.push_back({.file = "", .is_stdin = true, .error = ""});
      }
      continue;
    }
    std::vector<std::string> not_regular;
    absl::StatusOr<std::vector<std::string>> files = ExpandInput(input, &not_regular);
    for (std::string& skipped : not_regular) {
      steps.push_back({.file = "", .is_stdin = false, .error = std::move(skipped)});
    }
    if (!files.ok()) {
      if (not_regular.empty()) {
        steps.push_back(
            {.file = "", .is_stdin = false, .error = std::string(files.status().message())});
      }
      continue;
    }
    for (const std::string& file : *files) {
      std::error_code ec;
      fs::path canonical = fs::weakly_canonical(file, ec);
      if (seen.insert(ec ? file : canonical.string()).second) {
        steps.push_back({.file = file, .is_stdin = false, .error = ""});
      }
    }
  }
  return steps;
}

bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// Whether the regular file `path` is a BlockCanary text file (its first
// non-blank character is '*'). Pipes are not peeked: that would eat them.
bool IsBlockLogFile(const std::string& path) {
  if (!IsRegularFile(path)) return false;
  std::ifstream in(path, std::ios::in | std::ios::binary);
  for (int c = in.get(); c != std::char_traits<char>::eof(); c = in.get()) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) return c == kBlockLogStart;
  }
  return false;
}

// Reads the regular file `path` without stats, calling `visit` with each
// issue; false when it cannot be opened.
bool ReadQuietly(const std::string& path, const ReadOptions& options,
                 absl::FunctionRef<void(IssueRecord&)> visit) {
  std::ifstream in(path, std::ios::in | std::ios::binary);
  if (!in.is_open()) return false;
  IssueStreamReader reader(in, path, options, /*stats=*/nullptr);
  IssueRecord record;
  while (reader.Next(record)) visit(record);
  return true;
}

// The blocks of the BlockCanary text files among the regular files, and
// those of them that a JSON-lines file also holds: found before the read, so
// that a text file is left out wherever it comes. Nothing is read twice when
// no regular file is a text file.
struct TextBlocks {
  absl::flat_hash_set<BlockIdentity> all;
  absl::flat_hash_set<BlockIdentity> duplicated;
};

TextBlocks FindTextBlocks(const std::vector<ReadStep>& steps, const ReadOptions& options) {
  TextBlocks blocks;
  std::vector<const std::string*> issue_files;
  for (const ReadStep& step : steps) {
    if (step.file.empty()) continue;
    if (!IsBlockLogFile(step.file)) {
      if (IsRegularFile(step.file)) issue_files.push_back(&step.file);
      continue;
    }
    ReadQuietly(step.file, options, [&](IssueRecord& record) {
      if (IsTextFileBlock(record)) blocks.all.insert(IdentityOf(record.issue));
    });
  }
  if (blocks.all.empty()) return blocks;
  for (const std::string* file : issue_files) {
    ReadQuietly(*file, options, [&](IssueRecord& record) {
      if (IsJsonLinesBlock(record) && blocks.all.contains(IdentityOf(record.issue))) {
        blocks.duplicated.insert(IdentityOf(record.issue));
      }
    });
  }
  return blocks;
}

}  // namespace

ReadStats ForEachIssue(const std::vector<std::string>& inputs, std::istream* stdin_stream,
                       const ReadOptions& options,
                       absl::FunctionRef<void(IssueRecord&)> visit,
                       const MalformedCallback& on_malformed) {
  ReadStats stats;
  const std::vector<ReadStep> steps = PlanReads(inputs, stdin_stream);
  // Grows with the text files, not with the issues.
  TextBlocks text_blocks = FindTextBlocks(steps, options);
  int64_t sequence = 0;
  auto read = [&](std::istream& in, const std::string& name) {
    // Standard input and pipes were not scanned before the read.
    const bool scanned = name != kStdinName && IsRegularFile(name);
    IssueStreamReader reader(in, name, options, &stats, on_malformed);
    IssueRecord record;
    while (reader.Next(record)) {
      if (IsTextFileBlock(record) && text_blocks.duplicated.contains(IdentityOf(record.issue))) {
        ++stats.duplicate_blocks;
        continue;
      }
      if (IsJsonLinesBlock(record) && !scanned &&
          text_blocks.all.contains(IdentityOf(record.issue))) {
        text_blocks.duplicated.insert(IdentityOf(record.issue));
      }
      record.sequence = sequence++;
      visit(record);
    }
  };
  for (const ReadStep& step : steps) {
    if (!step.error.empty()) {
      stats.errors.push_back(step.error);
    } else if (step.is_stdin) {
      read(*stdin_stream, kStdinName);
    } else {
      std::ifstream stream(step.file, std::ios::in | std::ios::binary);
      if (!stream.is_open()) {
        stats.errors.push_back(absl::StrCat(step.file, ": ", std::strerror(errno)));
        continue;
      }
      read(stream, step.file);
    }
  }
  return stats;
}

ReadResult ReadIssueInputs(const std::vector<std::string>& inputs, std::istream* stdin_stream,
                           const ReadOptions& options) {
  ReadResult result;
  static_cast<ReadStats&>(result) = ForEachIssue(
      inputs, stdin_stream, options,
      [&](IssueRecord& record) { result.records.push_back(std::move(record)); },
      [&](const MalformedLine& bad) { result.malformed.push_back(bad); });
  return result;
}

struct IssuesByTime::File {
  std::string name;
  // Regular files are read again by ForEach(); the others are held.
  bool regular = false;
  bool in_order = true;
  int64_t last_time_ms = 0;
  // How many issues of the file the filter selects: ForEach() reads no
  // more, should the file have grown since Scan().
  int64_t selected = 0;
  // The selected issues when the file is held in memory, in time order.
  std::vector<IssueRecord> held;
  size_t next_held = 0;
  std::ifstream stream;
  std::unique_ptr<IssueStreamReader> reader;
  int64_t taken = 0;
  // The file's next issue in the merge.
  IssueRecord current;
};

IssuesByTime::IssuesByTime(const ReadOptions& options, const IssueFilter& filter)
    : options_(options), filter_(filter) {}
IssuesByTime::IssuesByTime(IssuesByTime&&) noexcept = default;
IssuesByTime& IssuesByTime::operator=(IssuesByTime&&) noexcept = default;
IssuesByTime::~IssuesByTime() = default;

IssuesByTime IssuesByTime::Scan(const std::vector<std::string>& inputs,
                                std::istream* stdin_stream, const ReadOptions& options,
                                const IssueFilter& filter) {
  IssuesByTime issues(options, filter);
  issues.stats_ = ForEachIssue(inputs, stdin_stream, options, [&](IssueRecord& record) {
    if (!filter.Matches(record)) return;
    ++issues.selected_;
    // A file is read in one go, so its issues are adjacent.
    if (issues.files_.empty() || issues.files_.back()->name != record.source.file) {
      auto file = std::make_unique<File>();
      file->name = record.source.file;
      file->regular = file->name != kStdinName && IsRegularFile(file->name);
      file->last_time_ms = record.time_ms();
      issues.files_.push_back(std::move(file));
    }
    File& file = *issues.files_.back();
    ++file.selected;
    if (record.time_ms() < file.last_time_ms) file.in_order = false;
    file.last_time_ms = record.time_ms();
    if (!file.regular) file.held.push_back(std::move(record));
  });
  return issues;
}

void IssuesByTime::Hold(File& file) {
  if (file.regular) {
    ReadQuietly(file.name, options_, [&](IssueRecord& record) {
      if (static_cast<int64_t>(file.held.size()) < file.selected && filter_.Matches(record)) {
        file.held.push_back(std::move(record));
      }
    });
    file.regular = false;
  }
  // Stable: equal times keep read order.
  std::stable_sort(file.held.begin(), file.held.end(),
                   [](const IssueRecord& a, const IssueRecord& b) {
                     return a.time_ms() < b.time_ms();
                   });
}

void IssuesByTime::HoldFile(const std::string& path) {
  for (std::unique_ptr<File>& file : files_) {
    std::error_code ec;
    if (file->regular && fs::equivalent(path, file->name, ec)) Hold(*file);
  }
}

void IssuesByTime::ForEach(absl::FunctionRef<void(const IssueRecord&)> visit) {
  // Moves `file`'s next selected issue into `current`; false at its end.
  auto advance = [&](File& file) {
    if (file.reader == nullptr) {
      if (file.next_held == file.held.size()) return false;
      file.current = std::move(file.held[file.next_held++]);
      return true;
    }
    while (file.taken < file.selected && file.reader->Next(file.current)) {
      if (!filter_.Matches(file.current)) continue;
      ++file.taken;
      return true;
    }
    return false;
  };
  for (std::unique_ptr<File>& file : files_) {
    if (!file->regular || !file->in_order) {
      Hold(*file);
      continue;
    }
    file->stream.open(file->name, std::ios::in | std::ios::binary);
    file->reader = std::make_unique<IssueStreamReader>(file->stream, file->name, options_,
                                                       /*stats=*/nullptr);
  }
  // The files by their next issue's time, then read order (SelectIssues'
  // order): a min-heap of file indexes.
  auto later = [&](size_t a, size_t b) {
    const int64_t ta = files_[a]->current.time_ms();
    const int64_t tb = files_[b]->current.time_ms();
    return ta != tb ? ta > tb : a > b;
  };
  std::vector<size_t> heap;
  for (size_t i = 0; i < files_.size(); ++i) {
    if (advance(*files_[i])) heap.push_back(i);
  }
  std::make_heap(heap.begin(), heap.end(), later);
  int64_t sequence = 0;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    File& file = *files_[heap.back()];
    file.current.sequence = sequence++;
    visit(file.current);
    if (advance(file)) {
      std::push_heap(heap.begin(), heap.end(), later);
    } else {
      heap.pop_back();
      file.held = {};
      file.reader.reset();
      file.stream.close();
    }
  }
}

}  // namespace matrix::report

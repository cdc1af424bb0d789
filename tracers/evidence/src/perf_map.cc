#include "matrix/trace/perf_map.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "matrix/core/logging.h"

namespace matrix {
namespace {

// This absl's string_view is its own type, not std::string_view.
absl::string_view ToAbsl(std::string_view text) { return {text.data(), text.size()}; }

// "1a2b" or "0x1a2b".
bool ParseHex(std::string_view text, uintptr_t* value) {
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    text.remove_prefix(2);
  }
  if (text.empty() || text.size() > 16) return false;
  uint64_t v = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    v = v << 4 | static_cast<uint64_t>(digit);
  }
  *value = static_cast<uintptr_t>(v);
  return true;
}

bool AllDigits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), absl::ascii_isdigit);
}

// Splits "path:LINE" or "path:LINE:COL" into its parts. False when `text`
// does not end with a line number.
bool ParseLocation(std::string_view text, std::string* file, int* line, int* column) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || !AllDigits(text.substr(colon + 1))) return false;
  int last = 0;
  if (!absl::SimpleAtoi(ToAbsl(text.substr(colon + 1)), &last)) return false;
  std::string_view rest = text.substr(0, colon);
  size_t colon2 = rest.rfind(':');
  int first = 0;
  if (colon2 != std::string_view::npos && AllDigits(rest.substr(colon2 + 1)) &&
      absl::SimpleAtoi(ToAbsl(rest.substr(colon2 + 1)), &first)) {
    rest = rest.substr(0, colon2);
    *line = first;
    *column = last;
  } else {
    *line = last;
    *column = 0;
  }
  if (rest.empty()) return false;
  *file = std::string(rest);
  return true;
}

// Whether `text` looks like the start of a script location rather than more
// of a function name ("get x" is a getter's name).
bool LooksLikeScript(std::string_view text) {
  return !text.empty() && (text[0] == '/' || text[0] == '.' || text[0] == '<' ||
                           text.starts_with("node:") || text.find("://") != std::string_view::npos);
}

bool IsJavaScriptKind(std::string_view kind) {
  return kind == "JS" || kind == "LazyCompile" || kind == "Function" || kind == "Script" ||
         kind == "Eval";
}

}  // namespace

JitName ParseJitName(std::string_view raw) {
  JitName name;
  // CPython 3.12+: "py::qualname:/path/file.py".
  if (raw.starts_with("py::")) {
    std::string_view rest = raw.substr(4);
    size_t colon = rest.find(':');
    if (colon != std::string_view::npos && colon > 0) {
      name.kind = "py";
      name.function = std::string(rest.substr(0, colon));
      name.file = std::string(rest.substr(colon + 1));
      return name;
    }
    name.function = std::string(raw);
    return name;
  }
  size_t colon = raw.find(':');
  std::string_view kind = colon == std::string_view::npos ? "" : raw.substr(0, colon);
  if (!IsJavaScriptKind(kind)) {
    name.function = std::string(raw);
    if (!kind.empty() && kind.find(' ') == std::string_view::npos) name.kind = std::string(kind);
    return name;
  }
  name.kind = std::string(kind);
  std::string_view rest = raw.substr(colon + 1);
  size_t tier_end = rest.find_first_not_of("*~^+'");
  if (tier_end == std::string_view::npos) tier_end = rest.size();
  name.tier = std::string(rest.substr(0, tier_end));
  rest.remove_prefix(tier_end);
  // The function name, then " location". The name may contain spaces (a
  // getter is "get x"), so the location starts at the first space followed
  // by something that looks like a script and ends with :LINE[:COL], else
  // at the last space followed by :LINE[:COL].
  std::string_view function = rest;
  size_t chosen = std::string_view::npos;
  size_t last_located = std::string_view::npos;
  for (size_t space = rest.find(' '); space != std::string_view::npos;
       space = rest.find(' ', space + 1)) {
    std::string_view location = rest.substr(space + 1);
    std::string file;
    int line = 0, column = 0;
    if (!ParseLocation(location, &file, &line, &column)) continue;
    last_located = space;
    if (LooksLikeScript(location)) {
      chosen = space;
      break;
    }
  }
  if (chosen == std::string_view::npos) chosen = last_located;
  if (chosen != std::string_view::npos) {
    function = rest.substr(0, chosen);
    ParseLocation(rest.substr(chosen + 1), &name.file, &name.line, &name.column);
  } else if (size_t space = rest.find(' '); space != std::string_view::npos) {
    // "Script:~ /app/main.js" (no position).
    function = rest.substr(0, space);
    name.file = std::string(rest.substr(space + 1));
  }
  const absl::string_view stripped = absl::StripAsciiWhitespace(ToAbsl(function));
  function = std::string_view(stripped.data(), stripped.size());
  name.function = function.empty() ? "(anonymous)" : std::string(function);
  return name;
}

PerfMap::PerfMap(std::string path) : path_(std::move(path)), owner_(geteuid()) {}

PerfMap::~PerfMap() {
  if (fd_ >= 0) close(fd_);
}

std::string PerfMap::PathForPid(pid_t pid) { return absl::StrCat("/tmp/perf-", pid, ".map"); }

std::optional<PerfMapEntry> PerfMap::Find(uintptr_t pc) const {
  auto it = entries_.upper_bound(pc);
  if (it == entries_.begin()) return std::nullopt;
  --it;
  if (pc >= it->second.end) return std::nullopt;
  return PerfMapEntry{it->first, it->second.end - it->first, it->second.name};
}

std::optional<PerfMapEntry> PerfMap::Lookup(uintptr_t pc) {
  // Lines appended since the last read may name this pc, or name newer code
  // at an address an older entry covers: read them first (one lstat() when
  // nothing changed).
  Refresh();
  return Find(pc);
}

void PerfMap::Refresh() {
  struct stat st;
  // Not (yet) written, or removed: no more names (those read stay).
  if (lstat(path_.c_str(), &st) != 0) return;
  if (fd_ < 0 || st.st_dev != dev_ || st.st_ino != ino_) {
    // The first file, or another one at the path (a new process with this
    // pid): read from its start, unless it was refused already.
    if (refused_ && st.st_dev == refused_dev_ && st.st_ino == refused_ino_) return;
    if (!Acceptable(st) || !Open(&st)) return;
  } else if (static_cast<uint64_t>(st.st_size) < offset_) {
    Reset();  // Truncated: written again from the start.
  }
  ReadMore(static_cast<uint64_t>(st.st_size));
}

bool PerfMap::Acceptable(const struct stat& st) {
  Refusal why;
  std::string detail;
  if (S_ISLNK(st.st_mode)) {
    why = Refusal::kSymlink;
    detail = "it is a symbolic link";
  } else if (!S_ISREG(st.st_mode)) {
    why = Refusal::kNotRegular;
    detail = "it is not a regular file";
  } else if (st.st_uid != owner_) {
    why = Refusal::kOtherOwner;
    detail = absl::StrCat("it is owned by uid ", st.st_uid, ", not by this process's user (uid ",
                          owner_, ")");
  } else {
    return true;
  }
  refused_ = true;
  refused_dev_ = st.st_dev;
  refused_ino_ = st.st_ino;
  Refuse(why, detail);
  return false;
}

void PerfMap::Refuse(Refusal why, std::string_view detail) {
  const auto bit = static_cast<uint8_t>(why);
  if ((said_ & bit) != 0) return;
  said_ |= bit;
  Logger()->warn(
      "perf map {} is not read: {}; JIT code gets no names from it (a perf map is read only "
      "from a regular file owned by the process's user)",
      path_, detail);
}

bool PerfMap::Open(struct stat* st) {
  // O_NOFOLLOW: a symbolic link put there since the lstat() is not followed.
  // O_NONBLOCK: nor does a FIFO put there block the open.
  const int fd = open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) Refuse(Refusal::kSymlink, "it is a symbolic link");
    return false;
  }
  struct stat opened;
  if (fstat(fd, &opened) != 0 || !Acceptable(opened)) {
    close(fd);
    return false;
  }
  if (fd_ >= 0) close(fd_);
  Reset();
  fd_ = fd;
  dev_ = opened.st_dev;
  ino_ = opened.st_ino;
  *st = opened;
  return true;
}

void PerfMap::Reset() {
  entries_.clear();
  offset_ = 0;
  consumed_ = 0;
  partial_.clear();
  skipping_ = false;
}

void PerfMap::ReadMore(uint64_t size) {
  const uint64_t end = std::min({size, kMaxFileBytes, offset_ + uint64_t{kMaxReadBytesPerLookup}});
  if (offset_ < end) {
    constexpr uint64_t kChunkBytes = 64 * 1024;
    std::vector<char> buffer(std::min(kChunkBytes, end - offset_));
    while (offset_ < end) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), end - offset_));
      const ssize_t n = pread(fd_, buffer.data(), want, static_cast<off_t>(offset_));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      bytes_read_ += static_cast<uint64_t>(n);
      Consume(std::string_view(buffer.data(), static_cast<size_t>(n)));
    }
  }
  if (size > kMaxFileBytes && offset_ >= kMaxFileBytes && !said_capped_) {
    said_capped_ = true;
    Logger()->warn(
        "perf map {} is read up to its first {} MiB only: JIT code it lists after that gets no "
        "names",
        path_, kMaxFileBytes >> 20);
  }
}

void PerfMap::Consume(std::string_view chunk) {
  while (!chunk.empty()) {
    const size_t newline = chunk.find('\n');
    const std::string_view piece = chunk.substr(0, newline);
    const size_t taken = newline == std::string_view::npos ? chunk.size() : newline + 1;
    offset_ += taken;
    chunk.remove_prefix(taken);
    // A line longer than kMaxLineBytes is dropped as it comes, so at most
    // kMaxLineBytes of it are ever held.
    if (!skipping_ && partial_.size() + piece.size() > kMaxLineBytes) {
      skipping_ = true;
      partial_.clear();
    }
    if (newline == std::string_view::npos) {  // The runtime is still writing this line.
      if (!skipping_) partial_.append(piece);
      return;
    }
    if (skipping_) {
      ++bad_lines_;
      skipping_ = false;
    } else if (partial_.empty()) {
      ParseLine(piece);
    } else {
      partial_.append(piece);
      ParseLine(partial_);
      partial_.clear();
    }
    consumed_ = offset_;
  }
}

void PerfMap::ParseLine(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return;
  size_t space1 = line.find(' ');
  if (space1 == std::string_view::npos) {
    ++bad_lines_;
    return;
  }
  size_t space2 = line.find(' ', space1 + 1);
  if (space2 == std::string_view::npos) {
    ++bad_lines_;
    return;
  }
  uintptr_t start = 0, size = 0;
  std::string_view name = line.substr(space2 + 1);
  if (!ParseHex(line.substr(0, space1), &start) ||
      !ParseHex(line.substr(space1 + 1, space2 - space1 - 1), &size) || size == 0 ||
      start + size < start || name.empty()) {
    ++bad_lines_;
    return;
  }
  Insert(start, size, name);
}

void PerfMap::Insert(uintptr_t start, uintptr_t size, std::string_view name) {
  const uintptr_t end = start + size;
  // Older entries overlapping [start, end) describe code that was replaced.
  auto it = entries_.lower_bound(start);
  if (it != entries_.begin()) {
    auto previous = std::prev(it);
    if (previous->second.end > start) it = previous;
  }
  while (it != entries_.end() && it->first < end) it = entries_.erase(it);
  if (entries_.size() >= kMaxEntries) {
    entries_.clear();
    ++overflows_;
  }
  entries_.emplace(start, Code{end, std::string(name.substr(0, kMaxNameBytes))});
}

}  // namespace matrix

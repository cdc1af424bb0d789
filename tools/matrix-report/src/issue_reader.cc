#include "matrix/report/issue_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace matrix::report {
namespace {

namespace fs = std::filesystem;

constexpr absl::string_view kExtension = ".jsonl";

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
  fs::directory_iterator it(path, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat(path, ": ", ec.message()));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return absl::InternalError(absl::StrCat(path, ": ", ec.message()));
    const std::string name = it->path().filename().string();
    if (!absl::EndsWith(name, kExtension) || name.size() == kExtension.size()) continue;
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    files.push_back(it->path().string());
  }
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat(path, ": no *.jsonl issue files in this directory"));
  }
  return OrderIssueFiles(std::move(files));
}

void ReadIssueStream(std::istream& in, const std::string& name, ReadResult& result) {
  result.files.push_back(name);
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    ++result.lines;
    absl::StatusOr<IssueRecord> record = ParseIssueLine(line, {name, number});
    if (!record.ok()) {
      result.malformed.push_back({{name, number}, std::string(record.status().message())});
      continue;
    }
    record->sequence = static_cast<int64_t>(result.records.size());
    result.records.push_back(*std::move(record));
  }
  if (in.bad()) {
    result.errors.push_back(absl::StrCat(name, ": read error after line ", number));
  }
}

ReadResult ReadIssueInputs(const std::vector<std::string>& inputs, std::istream* stdin_stream) {
  ReadResult result;
  absl::flat_hash_set<std::string> seen;
  for (const std::string& input : inputs) {
    if (input == "-") {
      if (stdin_stream == nullptr) {
        result.errors.push_back("-: standard input is not available");
        continue;
      }
      if (!seen.insert(kStdinName).second) continue;
      ReadIssueStream(*stdin_stream, kStdinName, result);
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
      ReadIssueStream(stream, file, result);
    }
  }
  return result;
}

}  // namespace matrix::report

// matrix-report symbolize: names the raw frames of report files off the host
// (FrameSymbolizer, symbolize.h) and writes the files again into a directory.

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "internal/option_split.h"
#include "internal/redact_url.h"
#include "matrix/report/cli.h"
#include "matrix/report/format_util.h"
#include "matrix/report/issue_reader.h"
#include "matrix/report/issue_record.h"
#include "matrix/report/symbolize.h"

namespace matrix::report {
namespace {

constexpr char kSymbolizeUsage[] = R"(Naming frames off the host (docs/matrix-report.md, symbolize):
  symbolize [--debuginfod URL]... [--debug-dir DIR]... -o OUTDIR FILE|DIR...
              names the frames reports carry raw (a stripped module, or
              matrix-run --symbolize=off) from their module's build id and
              ELF address, computes their keys again, and writes each report
              file into OUTDIR under its own name; lines it cannot name or
              parse are written as they were
    --debug-dir DIR     a directory of DIR/.build-id/xx/yyyy.debug files,
                        searched first (repeatable)
    --debuginfod URL    a debuginfod server, asked before $DEBUGINFOD_URLS
                        (repeatable); elfutils' client and cache
  push and fleet take --debuginfod and --debug-dir too: push stores issues
  named, fleet show names what is still raw.
)";

struct SymbolizeCommandLine {
  SymbolizeOptions options;
  std::string output;
  std::vector<std::string> inputs;
};

enum class SymbolizeFlag { kDebuginfod, kDebugDir, kOutput };

constexpr struct {
  const char* name;
  SymbolizeFlag flag;
} kSymbolizeFlags[] = {
    {"--debuginfod", SymbolizeFlag::kDebuginfod},
    {"--debug-dir", SymbolizeFlag::kDebugDir},
    {"--output", SymbolizeFlag::kOutput},
    {"-o", SymbolizeFlag::kOutput},
};

absl::StatusOr<SymbolizeCommandLine> ParseSymbolize(const std::vector<std::string>& args) {
  SymbolizeCommandLine cl;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.empty() || arg[0] != '-') {
      cl.inputs.push_back(arg);
      continue;
    }
    auto [name, value] = internal::SplitOptionArgument(arg);
    std::optional<SymbolizeFlag> flag;
    for (const auto& spec : kSymbolizeFlags) {
      if (name == spec.name) flag = spec.flag;
    }
    if (!flag) return absl::InvalidArgumentError(absl::StrCat("unknown option ", name,
                                                              " for symbolize"));
    if (!value) {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(name + " needs a value");
      value = args[++i];
    }
    if (value->empty()) return absl::InvalidArgumentError(name + " needs a non-empty value");
    switch (*flag) {
      case SymbolizeFlag::kDebuginfod:
        if (!absl::StartsWith(*value, "http://") && !absl::StartsWith(*value, "https://")) {
          return absl::InvalidArgumentError(
              absl::StrCat("--debuginfod needs a server's URL, http://HOST:PORT, not \"",
                           internal::RedactUrl(*value), "\""));
        }
        cl.options.debuginfod_urls.push_back(*value);
        break;
      case SymbolizeFlag::kDebugDir:
        cl.options.debug_dirs.push_back(*value);
        break;
      case SymbolizeFlag::kOutput:
        cl.output = *value;
        break;
    }
  }
  if (cl.output.empty()) return absl::InvalidArgumentError("symbolize needs -o OUTDIR");
  if (cl.inputs.empty()) return absl::InvalidArgumentError("symbolize needs report files");
  return cl;
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// Copies `in` to `out` line by line, each issue line named by `symbolizer`
// (written again only when it changed). Counts the issues changed.
void SymbolizeLines(std::istream& in, const std::string& file, FrameSymbolizer& symbolizer,
                    std::ostream& out, int64_t* changed) {
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    const bool terminated = !in.eof();
    absl::StatusOr<IssueRecord> record = ParseIssueLine(absl::StripAsciiWhitespace(line),
                                                        {.file = file, .line = number});
    if (record.ok() && symbolizer.SymbolizeIssue(&record->issue)) {
      out << RecordToJson(*record) << "\n";
      ++*changed;
      continue;
    }
    out << line;
    if (terminated) out << "\n";
  }
}

}  // namespace

const char* SymbolizeUsageText() { return kSymbolizeUsage; }

int RunSymbolizeCommand(const std::vector<std::string>& args, std::ostream& out,
                        std::ostream& err) {
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      out << kSymbolizeUsage;
      return kExitOk;
    }
  }
  absl::StatusOr<SymbolizeCommandLine> cl = ParseSymbolize(args);
  if (!cl.ok()) {
    err << "matrix-report: " << cl.status().message() << "\nTry 'matrix-report --help'.\n";
    return kExitUsage;
  }
  std::vector<std::string> files;
  int status = kExitOk;
  for (const std::string& input : cl->inputs) {
    absl::StatusOr<std::vector<std::string>> expanded = ExpandInput(input);
    if (!expanded.ok()) {
      err << "matrix-report: " << expanded.status().message() << "\n";
      status = kExitNoInput;
      continue;
    }
    files.insert(files.end(), expanded->begin(), expanded->end());
  }
  if (mkdir(cl->output.c_str(), 0755) != 0 && errno != EEXIST) {
    err << "matrix-report: cannot create " << cl->output << ": " << std::strerror(errno) << "\n";
    return kExitNoInput;
  }
  absl::flat_hash_set<std::string> names;
  FrameSymbolizer symbolizer(cl->options);
  int64_t changed = 0;
  for (const std::string& file : files) {
    const std::string target = absl::StrCat(cl->output, "/", Basename(file));
    if (!names.insert(std::string(Basename(file))).second || SameFile(file, target)) {
      err << "matrix-report: " << file << ": would overwrite "
          << (SameFile(file, target) ? "itself" : "another input's output") << " in "
          << cl->output << "; skipped\n";
      status = kExitNoInput;
      continue;
    }
    std::ifstream in(file, std::ios::binary);
    std::ofstream written(target, std::ios::trunc | std::ios::binary);
    if (!in.is_open() || !written.is_open()) {
      err << "matrix-report: cannot " << (in.is_open() ? "write " + target : "read " + file)
          << ": " << std::strerror(errno) << "\n";
      status = kExitNoInput;
      continue;
    }
    SymbolizeLines(in, file, symbolizer, written, &changed);
    written.flush();
    if (!written || in.bad()) {
      err << "matrix-report: cannot write " << target << ": " << std::strerror(errno) << "\n";
      status = kExitNoInput;
    }
  }
  for (const std::string& problem : symbolizer.problems()) err << "matrix-report: " << problem;
  const SymbolizeCounts& counts = symbolizer.counts();
  err << "matrix-report: named " << counts.named_frames << " of " << counts.raw_frames
      << " raw frames; " << changed << (changed == 1 ? " issue" : " issues") << " changed, "
      << counts.keys_changed << (counts.keys_changed == 1 ? " key" : " keys")
      << " computed again; wrote " << names.size() << (names.size() == 1 ? " file" : " files")
      << " to " << cl->output << "\n";
  if (symbolizer.server_failed()) {
    err << "matrix-report: error: a debuginfod server could not be asked; the frames it was "
           "to name are written raw, run symbolize again on the output when it is back\n";
    status = kExitNoInput;
  }
  return status;
}

}  // namespace matrix::report

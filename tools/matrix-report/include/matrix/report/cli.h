// File: matrix/report/cli.h
//
// The matrix-report command line: parsing (ParseCommandLine) and the whole
// run (RunMatrixReport), kept out of main() so tests drive them with their
// own streams, clock and time zone.
//
//   matrix-report [summary|group|show|export|html] [options] [FILE|DIR|-]...
//
//   int main(int argc, char** argv) {
//     return matrix::report::RunMatrixReport(
//         std::vector<std::string>(argv + 1, argv + argc), std::cin, std::cout, std::cerr,
//         {.now = absl::Now(), .local_zone = absl::LocalTimeZone()});
//   }
//
// Exit codes: kExitOk (0); kExitNoInput (1): no input, an input that could
// not be read (the others are still reported) or an output that could not
// be written; kExitUsage (2): a usage error. Errors go to `err`, each line
// starting with "matrix-report: "; malformed lines are warned about there
// once per file, with their count and the first one's line number and reason.
//
// Thread safety: thread-compatible (no shared state).

#ifndef MATRIX_REPORT_CLI_H_
#define MATRIX_REPORT_CLI_H_

#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "matrix/report/export.h"
#include "matrix/report/issue_filter.h"

namespace matrix::report {

inline constexpr int kExitOk = 0;
inline constexpr int kExitNoInput = 1;
inline constexpr int kExitUsage = 2;

// Where inputs are read from when none are given: the sink's default.
inline constexpr char kDefaultInput[] = "./matrix-reports";

enum class Command { kSummary, kGroup, kShow, kExport, kHtml, kTimeline };

struct CommandLine {
  Command command = Command::kSummary;
  bool help = false;
  std::vector<std::string> inputs;
  IssueFilter filter;
  bool utc = false;
  std::optional<int> limit;
  bool newest_first = false;
  bool full_paths = false;
  ExportFormat format = ExportFormat::kCsv;
  bool grouped = false;
  std::string output;  // export, html: empty for stdout.
};

struct RunEnvironment {
  // "Now" for relative times (--since=2h).
  absl::Time now = absl::UnixEpoch();
  // The zone times are shown and read in without --utc, and the zone
  // BlockCanary text files are read in (with or without --utc).
  absl::TimeZone local_zone = absl::UTCTimeZone();
};

// The --help text.
const char* UsageText();

// Parses the arguments after the program name. Errors are usage errors.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const RunEnvironment& env);

// Parses, reads, renders and writes; returns the exit code.
int RunMatrixReport(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
                    std::ostream& err, const RunEnvironment& env);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_CLI_H_

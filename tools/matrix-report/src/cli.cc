#include "matrix/report/cli.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "internal/option_split.h"
#include "matrix/report/export.h"
#include "matrix/report/fleet_cli.h"
#include "matrix/report/format_util.h"
#include "matrix/report/html_report.h"
#include "matrix/report/issue_groups.h"
#include "matrix/report/issue_reader.h"
#include "matrix/report/symbolize.h"
#include "matrix/report/text_render.h"
#include "matrix/report/timeline_export.h"

namespace matrix::report {
namespace {

constexpr char kUsage[] = R"(Usage: matrix-report [COMMAND] [OPTIONS] [FILE|DIR|-]...

Reads the JSON-lines issue files matrix-cpp writes (JsonLinesIssueSink) and
summarizes, groups, shows or exports them. A directory means every *.jsonl
in it, rotated files included, oldest first; "-" reads standard input.
A BlockCanary text file (looper-*.log, as a file or in a directory) is
read as the block's BlockCanary issue. Without inputs, ./matrix-reports is
read. Malformed lines (a line torn by a killed writer, say) are skipped
and counted, with one warning per file on stderr: the count and the first.

Commands:
  summary     counts per tag/detail with worst and median, time range,
              processes, scenes (the default)
  group       issues grouped by tag + detail + key (the stack key of hangs,
              slow methods and blocks, the scene of FPS reports), most frequent
              first, then worst: count, worst and median cost (FPS for frame
              reports), first/last seen, scenes
  show        each issue in full, oldest first: header, then the evidence
              (native stack, call tree, thread, memory; FPS levels, phases,
              smoothness, input latency; startup timeline; BlockCanary
              CPU and merged stack samples; other kinds' fields)
  export      CSV (one row per issue: common columns and the main metric of
              its kind) or JSON, to stdout or --output
  html        one self-contained HTML page (no network needed to view it):
              summary, groups, FPS and dropped-frame plots per scene, a
              frame-time histogram, hangs and slow methods with stacks and
              call trees, and a timeline of a selected issue; to stdout or
              --output
  timeline    the timeline of the newest selected issue that has one (ANR,
              LAG, slow method, frozen frames, block) as Chrome trace-event
              JSON for Perfetto UI, chrome://tracing or speedscope, to stdout
              or --output (docs/timeline.md)

Filters (every command; repeat one to match any of its values):
  --tag=TAG           Trace_FPS, Trace_EvilMethod, Trace_StartUp, BlockCanary
                      (case-insensitive)
  --detail=DETAIL     NORMAL, ANR, LAG, STARTUP, LAG_IDLE_HANDLER, LAG_TOUCH,
                      SIGNAL_ANR; "none" for issues without one
  --key=TEXT          a substring of the key
  --scene=SCENE       the scene, exactly
  --process=NAME|PID  the process name, exactly, or its pid
  --since=TIME        issues reported at or after TIME
  --until=TIME        issues reported before TIME
                      TIME: 2025-11-21T10:00:00Z, "2025-11-21 10:00[:00]"
                      (local time, UTC with --utc), 2025-11-21, ms since the
                      epoch, or a span before now: 90s, 30m, 2h, 3d

Options:
  --utc               show and read times in UTC instead of local time
  --limit=N           group: the first N groups; show: the first N issues
  --newest-first      show: newest issue first
  --full-paths        show: modules by full path instead of file name
  --format=FORMAT     export: csv (default), json (an array) or jsonl (one
                      issue per line, readable again by matrix-report)
  --grouped           export: one row or object per group
  -o, --output=FILE   export, html, timeline: write to FILE instead of stdout
  -h, --help          this text

A command name as the first argument is a command; to read a file or
directory with such a name, write ./summary.

Exit status: 0 ok; 1 no input, an unreadable input (the readable ones are
still used) or an unwritable output; 2 usage error.

Examples:
  matrix-report ./matrix-reports
  matrix-report group --tag=Trace_EvilMethod --since=2h reports/
  matrix-report show --detail=ANR --key=Decode --limit=1 reports/
  matrix-report export --format=csv -o issues.csv reports/
  matrix-report export --grouped --format=json reports/ > groups.json
  matrix-report html -o report.html reports/
  matrix-report timeline --detail=ANR -o anr-trace.json reports/
)";

absl::Status UsageError(absl::string_view message) { return absl::InvalidArgumentError(message); }

// What the options gather: the command line, and what is checked once all
// of them are read (which command they apply to, the time range).
struct ParseState {
  CommandLine cl;
  std::vector<std::string> since;
  std::vector<std::string> until;
  bool export_only_flag = false;  // --format, --grouped.
  bool output_flag = false;       // --output.
  bool show_only_flag = false;    // --newest-first, --full-paths.
};

absl::Status SetLimit(ParseState& p, const std::string& value) {
  int limit = 0;
  if (!absl::SimpleAtoi(value, &limit) || limit <= 0) {
    return UsageError(absl::StrCat("--limit needs a positive number, not \"", value, "\""));
  }
  p.cl.limit = limit;
  return absl::OkStatus();
}

absl::Status SetFormat(ParseState& p, const std::string& value) {
  if (value == "csv") {
    p.cl.format = ExportFormat::kCsv;
  } else if (value == "json") {
    p.cl.format = ExportFormat::kJson;
  } else if (value == "jsonl") {
    p.cl.format = ExportFormat::kJsonLines;
  } else {
    return UsageError(absl::StrCat("--format is csv, json or jsonl, not \"", value, "\""));
  }
  p.export_only_flag = true;
  return absl::OkStatus();
}

absl::Status SetOutput(ParseState& p, const std::string& value) {
  p.cl.output = value;
  p.output_flag = true;
  return absl::OkStatus();
}

absl::Status SetHelp(ParseState& p, const std::string&) {
  p.cl.help = true;
  return absl::OkStatus();
}

using ReportFlag = internal::OptionFlag<ParseState>;

constexpr ReportFlag kReportFlags[] = {
    {"--tag", true,
     [](ParseState& p, const std::string& v) {
       p.cl.filter.tags.push_back(v);
       return absl::OkStatus();
     }},
    {"--detail", true,
     [](ParseState& p, const std::string& v) {
       p.cl.filter.details.push_back(v);
       return absl::OkStatus();
     }},
    {"--key", true,
     [](ParseState& p, const std::string& v) {
       p.cl.filter.keys.push_back(v);
       return absl::OkStatus();
     }},
    {"--scene", true,
     [](ParseState& p, const std::string& v) {
       p.cl.filter.scenes.push_back(v);
       return absl::OkStatus();
     }},
    {"--process", true,
     [](ParseState& p, const std::string& v) {
       p.cl.filter.processes.push_back(v);
       return absl::OkStatus();
     }},
    {"--since", true,
     [](ParseState& p, const std::string& v) {
       p.since.push_back(v);
       return absl::OkStatus();
     }},
    {"--until", true,
     [](ParseState& p, const std::string& v) {
       p.until.push_back(v);
       return absl::OkStatus();
     }},
    {"--utc", false,
     [](ParseState& p, const std::string&) {
       p.cl.utc = true;
       return absl::OkStatus();
     }},
    {"--limit", true, [](ParseState& p, const std::string& v) { return SetLimit(p, v); }},
    {"--newest-first", false,
     [](ParseState& p, const std::string&) {
       p.cl.newest_first = true;
       p.show_only_flag = true;
       return absl::OkStatus();
     }},
    {"--full-paths", false,
     [](ParseState& p, const std::string&) {
       p.cl.full_paths = true;
       p.show_only_flag = true;
       return absl::OkStatus();
     }},
    {"--format", true, [](ParseState& p, const std::string& v) { return SetFormat(p, v); }},
    {"--grouped", false,
     [](ParseState& p, const std::string&) {
       p.cl.grouped = true;
       p.export_only_flag = true;
       return absl::OkStatus();
     }},
    {"--output", true, [](ParseState& p, const std::string& v) { return SetOutput(p, v); }},
    {"-o", true, [](ParseState& p, const std::string& v) { return SetOutput(p, v); }},
    {"--help", false, [](ParseState& p, const std::string& v) { return SetHelp(p, v); }},
    {"-h", false, [](ParseState& p, const std::string& v) { return SetHelp(p, v); }},
};

// The options given apply to the command given.
absl::Status CheckCommandOptions(const ParseState& p) {
  const CommandLine& cl = p.cl;
  if (p.output_flag && cl.command != Command::kExport && cl.command != Command::kHtml &&
      cl.command != Command::kTimeline) {
    return UsageError("--output applies to the export, html and timeline commands only");
  }
  if (p.export_only_flag && cl.command != Command::kExport) {
    return UsageError("--format and --grouped apply to the export command only");
  }
  if (p.show_only_flag && cl.command != Command::kShow) {
    return UsageError("--newest-first and --full-paths apply to the show command only");
  }
  if (cl.limit.has_value() && cl.command != Command::kShow && cl.command != Command::kGroup) {
    return UsageError("--limit applies to the group and show commands only");
  }
  if (cl.grouped && cl.format == ExportFormat::kJsonLines) {
    return UsageError("--grouped exports csv or json, not jsonl");
  }
  return absl::OkStatus();
}

// --since and --until into the filter's time range, read in --utc's zone or
// the local one.
absl::Status SetTimeRange(ParseState& p, const RunEnvironment& env) {
  CommandLine& cl = p.cl;
  if (p.since.size() > 1 || p.until.size() > 1) {
    return UsageError("--since and --until may each be given once");
  }
  const absl::TimeZone tz = cl.utc ? absl::UTCTimeZone() : env.local_zone;
  if (!p.since.empty()) {
    absl::StatusOr<int64_t> ms = ParseTimeSpec(p.since[0], env.now, tz);
    if (!ms.ok()) return UsageError(absl::StrCat("--since: ", ms.status().message()));
    cl.filter.since_ms = *ms;
  }
  if (!p.until.empty()) {
    absl::StatusOr<int64_t> ms = ParseTimeSpec(p.until[0], env.now, tz);
    if (!ms.ok()) return UsageError(absl::StrCat("--until: ", ms.status().message()));
    cl.filter.until_ms = *ms;
  }
  if (cl.filter.since_ms && cl.filter.until_ms && *cl.filter.since_ms >= *cl.filter.until_ms) {
    return UsageError("--since must be before --until");
  }
  return absl::OkStatus();
}

std::optional<Command> CommandNamed(absl::string_view name) {
  if (name == "summary") return Command::kSummary;
  if (name == "group") return Command::kGroup;
  if (name == "show") return Command::kShow;
  if (name == "export") return Command::kExport;
  if (name == "html") return Command::kHtml;
  if (name == "timeline") return Command::kTimeline;
  return std::nullopt;
}

// Warns once per file that had malformed lines: how many, and the first.
void ReportMalformed(const ReadStats& read, std::ostream& err) {
  for (const MalformedFile& file : read.malformed_files) {
    const MalformedLine& first = file.first;
    const int64_t count = file.count;
    err << "matrix-report: " << TextEscape(first.where.file) << ": skipped " << count
        << (count == 1 ? " malformed line" : " malformed lines");
    if (first.where.line > 0) {
      err << (count == 1 ? " at line " : ", the first at line ") << first.where.line;
    }
    err << ": " << TextEscape(first.reason) << "\n";
  }
}

// Reports what could not be read to `err`. False when nothing could be read
// (the caller exits with kExitNoInput).
bool ReportRead(const ReadStats& read, const CommandLine& cl, std::ostream& err) {
  for (const std::string& error : read.errors) {
    err << "matrix-report: " << TextEscape(error) << "\n";
  }
  ReportMalformed(read, err);
  if (read.duplicate_blocks > 0) {
    err << "matrix-report: " << read.duplicate_blocks
        << (read.duplicate_blocks == 1 ? " block was" : " blocks were")
        << " read both from an issue file and from its BlockCanary file; counted once\n";
  }
  if (read.files.empty()) {
    err << "matrix-report: no input: nothing could be read from "
        << (cl.inputs.size() == 1 ? cl.inputs[0] : "the inputs given") << "\n";
    return false;
  }
  return true;
}

// "(3 more groups; drop --limit to see them)".
std::string MoreText(size_t more, absl::string_view what) {
  return absl::StrCat("\n(", more, " more ", what, more == 1 ? "" : "s", "; drop --limit to see ",
                      more == 1 ? "it" : "them", ")\n");
}

// Writes the output to `cl.output` (then says on `err` what `write` returned
// it wrote) or to `out`.
int WriteOutput(const CommandLine& cl, absl::FunctionRef<std::string(std::ostream&)> write,
                std::ostream& out, std::ostream& err, int status) {
  if (cl.output.empty()) {
    write(out);
    out.flush();
    return status;
  }
  std::ofstream file(cl.output, std::ios::out | std::ios::trunc | std::ios::binary);
  std::string what;
  if (file.is_open()) {
    what = write(file);
    file.flush();
  }
  if (!file) {
    err << "matrix-report: cannot write " << cl.output << ": " << std::strerror(errno) << "\n";
    return kExitNoInput;
  }
  err << "matrix-report: wrote " << what << " to " << cl.output << "\n";
  return status;
}

std::string Counted(int64_t n, absl::string_view one, absl::string_view many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

// Where a streamed issue goes in the views' order (SelectIssues').
IssueOrder OrderOf(const IssueRecord& record) { return {record.time_ms(), record.sequence}; }

int RunSummary(const CommandLine& cl, const ReadOptions& read_options,
               const RenderOptions& options, std::istream& in, std::ostream& out,
               std::ostream& err) {
  IssueSummary summary;
  const ReadStats read = ForEachIssue(cl.inputs, &in, read_options, [&](IssueRecord& record) {
    summary.AddRead(record);
    if (cl.filter.Matches(record)) summary.AddSelected(record, OrderOf(record));
  });
  if (!ReportRead(read, cl, err)) return kExitNoInput;
  out << summary.Render(read, !cl.filter.empty(), options);
  out.flush();
  return read.errors.empty() ? kExitOk : kExitNoInput;
}

// `group` and `export --grouped`.
int RunGroups(const CommandLine& cl, const ReadOptions& read_options,
              const RenderOptions& options, std::istream& in, std::ostream& out,
              std::ostream& err) {
  // Only the JSON export lists each issue's source.
  const bool json = cl.command == Command::kExport && cl.format != ExportFormat::kCsv;
  IssueGrouper grouper(/*keep_sources=*/json);
  int64_t selected = 0;
  const ReadStats read = ForEachIssue(cl.inputs, &in, read_options, [&](IssueRecord& record) {
    if (!cl.filter.Matches(record)) return;
    ++selected;
    grouper.Add(record, OrderOf(record));
  });
  if (!ReportRead(read, cl, err)) return kExitNoInput;
  const int status = read.errors.empty() ? kExitOk : kExitNoInput;
  std::vector<IssueGroup> groups = std::move(grouper).Finish();
  if (cl.command == Command::kExport) {
    return WriteOutput(
        cl,
        [&](std::ostream& stream) {
          stream << (json ? ExportGroupsJson(groups, options.time_zone)
                          : ExportGroupsCsv(groups, options.time_zone));
          return absl::StrCat(Counted(static_cast<int64_t>(groups.size()), "group", "groups"),
                              " of ", Counted(selected, "issue", "issues"));
        },
        out, err, status);
  }
  const size_t all = groups.size();
  if (cl.limit.has_value() && groups.size() > static_cast<size_t>(*cl.limit)) {
    groups.resize(static_cast<size_t>(*cl.limit));
  }
  out << RenderGroups(groups, options);
  if (groups.size() < all) out << MoreText(all - groups.size(), "group");
  out.flush();
  return status;
}

// `export` of issues: written as they are merged in time order.
int RunExport(const CommandLine& cl, const ReadOptions& read_options,
              const RenderOptions& options, std::istream& in, std::ostream& out,
              std::ostream& err) {
  IssuesByTime issues = IssuesByTime::Scan(cl.inputs, &in, read_options, cl.filter);
  if (!ReportRead(issues.stats(), cl, err)) return kExitNoInput;
  if (!cl.output.empty()) issues.HoldFile(cl.output);
  return WriteOutput(
      cl,
      [&](std::ostream& stream) {
        ExportWriter writer(cl.format, options.time_zone, stream);
        issues.ForEach([&](const IssueRecord& record) { writer.Add(record); });
        writer.Finish();
        return Counted(writer.written(), "issue", "issues");
      },
      out, err, issues.stats().errors.empty() ? kExitOk : kExitNoInput);
}

// `show`, `html` and `timeline`: they need all the selected issues at once.
int RunOnAllIssues(const CommandLine& cl, const ReadOptions& read_options,
                   const RenderOptions& options, std::istream& in, std::ostream& out,
                   std::ostream& err) {
  const ReadResult read = ReadIssueInputs(cl.inputs, &in, read_options);
  if (!ReportRead(read, cl, err)) return kExitNoInput;
  const int status = read.errors.empty() ? kExitOk : kExitNoInput;
  std::vector<const IssueRecord*> selected = SelectIssues(read.records, cl.filter);
  const bool filtered = !cl.filter.empty();
  if (cl.command == Command::kTimeline) {
    return RunTimelineCommand(selected, cl.output, out, err, status);
  }
  if (cl.command == Command::kHtml) {
    return WriteOutput(
        cl,
        [&](std::ostream& stream) {
          stream << RenderHtmlReport(read, selected, filtered,
                                     {.time_zone = options.time_zone, .full_paths = cl.full_paths});
          return absl::StrCat("an HTML report of ",
                              Counted(static_cast<int64_t>(selected.size()), "issue", "issues"));
        },
        out, err, status);
  }
  // show
  if (cl.newest_first) std::reverse(selected.begin(), selected.end());
  const size_t all = selected.size();
  if (cl.limit.has_value() && selected.size() > static_cast<size_t>(*cl.limit)) {
    selected.resize(static_cast<size_t>(*cl.limit));
  }
  std::string text;
  if (selected.empty()) text = filtered ? "no issues match the filters\n" : "no issues\n";
  for (size_t i = 0; i < selected.size(); ++i) {
    if (i > 0) text += "\n";
    text += RenderIssue(*selected[i], options);
  }
  if (selected.size() < all) text += MoreText(all - selected.size(), "issue");
  out << text;
  out.flush();
  return status;
}

}  // namespace

const char* UsageText() { return kUsage; }

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args,
                                             const RunEnvironment& env) {
  ParseState p;
  CommandLine& cl = p.cl;
  bool options_done = false;
  bool command_seen = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!options_done && arg == "--") {
      options_done = true;
      continue;
    }
    if (options_done || arg == "-" || arg.empty() || arg[0] != '-') {
      if (!command_seen && cl.inputs.empty()) {
        if (std::optional<Command> command = CommandNamed(arg); command.has_value()) {
          cl.command = *command;
          command_seen = true;
          continue;
        }
      }
      cl.inputs.push_back(arg);
      continue;
    }
    auto [name, value] = internal::SplitOptionArgument(arg);
    const ReportFlag* flag = internal::FindOptionFlag(kReportFlags, name);
    if (flag == nullptr) return UsageError(absl::StrCat("unknown option ", name));
    if (!flag->takes_value && value.has_value()) {
      return UsageError(absl::StrCat(name, " takes no value"));
    }
    if (flag->takes_value && !value.has_value()) {
      if (i + 1 >= args.size()) return UsageError(absl::StrCat(name, " needs a value"));
      value = args[++i];
    }
    if (flag->takes_value && value->empty()) {
      return UsageError(absl::StrCat(name, " needs a non-empty value"));
    }
    if (absl::Status s = flag->set(p, value.value_or("")); !s.ok()) return s;
  }
  if (cl.help) return cl;
  if (absl::Status s = CheckCommandOptions(p); !s.ok()) return s;
  if (absl::Status s = SetTimeRange(p, env); !s.ok()) return s;
  return cl;
}

int RunMatrixReport(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
                    std::ostream& err, const RunEnvironment& env) {
  if (IsFleetCommandLine(args)) return RunFleetCommand(args, out, err, env);
  if (!args.empty() && args[0] == "symbolize") return RunSymbolizeCommand(args, out, err);
  absl::StatusOr<CommandLine> parsed = ParseCommandLine(args, env);
  if (!parsed.ok()) {
    err << "matrix-report: " << parsed.status().message() << "\n"
        << "Try 'matrix-report --help'.\n";
    return kExitUsage;
  }
  CommandLine& cl = *parsed;
  if (cl.help) {
    out << kUsage << "\n" << FleetUsageText() << "\n" << SymbolizeUsageText();
    return kExitOk;
  }
  if (cl.inputs.empty()) cl.inputs.push_back(kDefaultInput);

  const ReadOptions read_options{.block_log_time_zone = env.local_zone};
  RenderOptions options;
  options.time_zone = cl.utc ? absl::UTCTimeZone() : env.local_zone;
  options.full_paths = cl.full_paths;
  // summary, group and export read one issue at a time and keep what they
  // print, so their memory does not grow with the input.
  switch (cl.command) {
    case Command::kSummary:
      return RunSummary(cl, read_options, options, in, out, err);
    case Command::kGroup:
      return RunGroups(cl, read_options, options, in, out, err);
    case Command::kExport:
      return cl.grouped ? RunGroups(cl, read_options, options, in, out, err)
                        : RunExport(cl, read_options, options, in, out, err);
    case Command::kShow:
    case Command::kHtml:
    case Command::kTimeline:
      break;
  }
  return RunOnAllIssues(cl, read_options, options, in, out, err);
}

}  // namespace matrix::report

#include "matrix/report/fleet_cli.h"

#include <algorithm>
#include <csignal>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "internal/option_split.h"
#include "internal/redact_url.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"
#include "matrix/report/format_util.h"
#include "matrix/report/html_report.h"
#include "matrix/report/issue_filter.h"
#include "matrix/report/symbolize.h"
#include "matrix/report/text_render.h"

namespace matrix::report {
namespace {

constexpr char kFleetUsage[] = R"(Fleet commands (ClickHouse; docs/fleet.md):
  push --clickhouse URL [--database DB] [--cluster NAME] DIR|FILE...
              ship the issues of report directories into DB.issues (created
              when missing), one row per issue: pushing again stores nothing
              twice, and a checkpoint per directory sends only new lines
    --follow            keep shipping as the files grow (until SIGINT/SIGTERM
                        or --follow-for)
    --follow-for=SECS   stop following after SECS seconds
    --poll-ms=MS        --follow: how often files are looked at (default 1000)
    --all               ignore the checkpoints and send everything again
    --retry-for=SECS    keep retrying an unreachable or failing server this
                        long, with backoff, before giving up (default 60)
    --timeout=SECS      one request's time limit (default 30)
    --batch=N           issues per INSERT (default 20000; per shard's INSERT
                        when push places rows on the shards)
    --cluster=NAME      the servers' <remote_servers> cluster: rows go to
                        DB.issues_local on each shard. With one --clickhouse
                        URL per shard, in the cluster's order, push places
                        each row on its shard itself (as the Distributed
                        DB.issues would) and sends every shard its rows at
                        once; with one URL, rows go through DB.issues there
    --debuginfod URL, --debug-dir DIR
                        name raw frames before the issues are stored
                        (see symbolize)
  fleet --clickhouse URL [--database DB] QUERY
    top                 hang and slow-method keys by machines affected, with
                        counts, worst and median cost
    new --since=VERSION keys seen in VERSION or later and in no earlier version
    fps                 FPS and dropped-frame percentiles per scene and version
    show KEY            one key's hosts, versions and worst report, in full,
                        its raw frames named (--debuginfod, --debug-dir)
    --version=V         only issues of version V;  --limit=N  rows (default 20)
  html --clickhouse URL [--database DB] [-o FILE] [--limit=N]
              the HTML report over the fleet's newest N issues (default
              5000), with the fleet tables (top, new in the newest version,
              FPS) added
)";

// SIGINT/SIGTERM received during push --follow: 1 after the first, 2 after
// a second one.
volatile std::sig_atomic_t g_stop = 0;
void OnStopSignal(int) { g_stop = g_stop < 2 ? g_stop + 1 : 2; }

struct FleetCommandLine {
  std::string command;  // push, fleet, html
  std::vector<std::string> urls;
  std::string database = "matrix";
  std::string cluster;
  bool follow = false;
  std::optional<absl::Duration> follow_for;
  absl::Duration poll = absl::Seconds(1);
  bool all = false;
  absl::Duration retry_for = absl::Seconds(60);
  absl::Duration timeout = absl::Seconds(30);
  int64_t batch = 20000;
  std::string version;
  std::string since;
  int limit = 0;
  std::string output;
  bool utc = false;
  std::vector<std::string> positional;
  SymbolizeOptions symbolize;  // push, fleet show: --debuginfod, --debug-dir.
};

absl::Status UsageError(absl::string_view message) { return absl::InvalidArgumentError(message); }

absl::StatusOr<double> PositiveNumber(const std::string& flag, const std::string& value) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !(v > 0)) {
    return UsageError(absl::StrCat(flag, " needs a positive number, not \"", value, "\""));
  }
  return v;
}

// Sets `out` to a positive number of `unit`s.
absl::Status SetPositive(const std::string& flag, const std::string& value, absl::Duration& out,
                         absl::Duration unit) {
  absl::StatusOr<double> v = PositiveNumber(flag, value);
  if (!v.ok()) return v.status();
  out = *v * unit;
  return absl::OkStatus();
}

absl::Status SetUrl(FleetCommandLine& cl, const std::string& value) {
  if (!absl::StartsWith(value, "http://") && !absl::StartsWith(value, "https://")) {
    return UsageError(
        absl::StrCat("--clickhouse needs the HTTP interface's URL, "
                     "http://HOST:PORT (8123 by default), not \"",
                     internal::RedactUrl(value), "\""));
  }
  cl.urls.push_back(value);
  return absl::OkStatus();
}

absl::Status SetRetryFor(FleetCommandLine& cl, const std::string& value) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || v < 0) {
    return UsageError(absl::StrCat("--retry-for needs seconds, not \"", value, "\""));
  }
  cl.retry_for = absl::Seconds(v);
  return absl::OkStatus();
}

template <typename T>
absl::Status SetCount(const std::string& flag, const std::string& value, T& out) {
  if (!absl::SimpleAtoi(value, &out) || out <= 0) {
    return UsageError(absl::StrCat(flag, " needs a positive number, not \"", value, "\""));
  }
  return absl::OkStatus();
}

using FleetFlag = internal::OptionFlag<FleetCommandLine>;

constexpr FleetFlag kFleetFlags[] = {
    {"--clickhouse", true,
     [](FleetCommandLine& cl, const std::string& v) { return SetUrl(cl, v); }},
    {"--database", true,
     [](FleetCommandLine& cl, const std::string& v) {
       cl.database = v;
       return absl::OkStatus();
     }},
    {"--cluster", true,
     [](FleetCommandLine& cl, const std::string& v) {
       cl.cluster = v;
       return absl::OkStatus();
     }},
    {"--follow", false,
     [](FleetCommandLine& cl, const std::string&) {
       cl.follow = true;
       return absl::OkStatus();
     }},
    {"--follow-for", true,
     [](FleetCommandLine& cl, const std::string& v) {
       absl::Duration d;
       absl::Status s = SetPositive("--follow-for", v, d, absl::Seconds(1));
       if (s.ok()) cl.follow_for = d;
       return s;
     }},
    {"--poll-ms", true,
     [](FleetCommandLine& cl, const std::string& v) {
       return SetPositive("--poll-ms", v, cl.poll, absl::Milliseconds(1));
     }},
    {"--all", false,
     [](FleetCommandLine& cl, const std::string&) {
       cl.all = true;
       return absl::OkStatus();
     }},
    {"--retry-for", true,
     [](FleetCommandLine& cl, const std::string& v) { return SetRetryFor(cl, v); }},
    {"--timeout", true,
     [](FleetCommandLine& cl, const std::string& v) {
       return SetPositive("--timeout", v, cl.timeout, absl::Seconds(1));
     }},
    {"--batch", true,
     [](FleetCommandLine& cl, const std::string& v) { return SetCount("--batch", v, cl.batch); }},
    {"--version", true,
     [](FleetCommandLine& cl, const std::string& v) {
       cl.version = v;
       return absl::OkStatus();
     }},
    {"--since", true,
     [](FleetCommandLine& cl, const std::string& v) {
       cl.since = v;
       return absl::OkStatus();
     }},
    {"--limit", true,
     [](FleetCommandLine& cl, const std::string& v) { return SetCount("--limit", v, cl.limit); }},
    {"--output", true,
     [](FleetCommandLine& cl, const std::string& v) {
       cl.output = v;
       return absl::OkStatus();
     }},
    {"-o", true,
     [](FleetCommandLine& cl, const std::string& v) {
       cl.output = v;
       return absl::OkStatus();
     }},
    {"--utc", false,
     [](FleetCommandLine& cl, const std::string&) {
       cl.utc = true;
       return absl::OkStatus();
     }},
    {"--debuginfod", true,
     [](FleetCommandLine& cl, const std::string& v) {
       if (!absl::StartsWith(v, "http://") && !absl::StartsWith(v, "https://")) {
         return UsageError(absl::StrCat("--debuginfod needs a server's URL, not \"",
                                        internal::RedactUrl(v), "\""));
       }
       cl.symbolize.debuginfod_urls.push_back(v);
       return absl::OkStatus();
     }},
    {"--debug-dir", true,
     [](FleetCommandLine& cl, const std::string& v) {
       cl.symbolize.debug_dirs.push_back(v);
       return absl::OkStatus();
     }},
};

// Letters, digits and _ only: a database or cluster name goes into SQL as is.
absl::Status CheckIdentifier(absl::string_view flag, const std::string& value) {
  for (char c : value) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') {
      return UsageError(absl::StrCat(flag, ": letters, digits and _ only, not \"", value, "\""));
    }
  }
  return absl::OkStatus();
}

// What the options and arguments must be together, per command.
absl::Status CheckCommandLine(FleetCommandLine& cl) {
  if (cl.urls.empty()) return UsageError(absl::StrCat(cl.command, " needs --clickhouse URL"));
  if (cl.urls.size() > 1 && cl.cluster.empty()) {
    return UsageError("--clickhouse is given once, or once per shard with --cluster");
  }
  if (absl::Status s = CheckIdentifier("--database", cl.database); !s.ok()) return s;
  if (absl::Status s = CheckIdentifier("--cluster", cl.cluster); !s.ok()) return s;
  if (cl.command == "push") {
    if (cl.positional.empty()) cl.positional.push_back(kDefaultInput);
  } else if (cl.command == "fleet") {
    if (cl.positional.empty()) return UsageError("fleet needs a query: top, new, fps or show");
    const std::string& q = cl.positional[0];
    if (q != "top" && q != "new" && q != "fps" && q != "show") {
      return UsageError(absl::StrCat("fleet queries are top, new, fps and show, not \"", q, "\""));
    }
    if (q == "new" && cl.since.empty()) return UsageError("fleet new needs --since=VERSION");
    if (q == "show" && cl.positional.size() != 2) return UsageError("fleet show needs one KEY");
    if (q != "show" && cl.positional.size() != 1) {
      return UsageError(absl::StrCat("fleet ", q, " takes no arguments"));
    }
  } else if (!cl.positional.empty()) {
    return UsageError("html --clickhouse reads the server, not files");
  }
  if (cl.command == "html" &&
      (!cl.symbolize.debuginfod_urls.empty() || !cl.symbolize.debug_dirs.empty())) {
    return UsageError("--debuginfod and --debug-dir name frames for push and fleet show, not html");
  }
  return absl::OkStatus();
}

absl::StatusOr<FleetCommandLine> Parse(const std::vector<std::string>& args) {
  FleetCommandLine cl;
  cl.command = args[0];
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.empty() || arg[0] != '-' || arg == "-") {
      cl.positional.push_back(arg);
      continue;
    }
    auto [name, value] = internal::SplitOptionArgument(arg);
    const FleetFlag* flag = internal::FindOptionFlag(kFleetFlags, name);
    if (flag == nullptr) {
      return UsageError(absl::StrCat("unknown option ", name, " for ", cl.command));
    }
    if (flag->takes_value && !value.has_value()) {
      if (i + 1 >= args.size()) return UsageError(absl::StrCat(name, " needs a value"));
      value = args[++i];
    }
    if (flag->takes_value && value->empty()) {
      return UsageError(absl::StrCat(name, " needs a non-empty value"));
    }
    if (!flag->takes_value && value.has_value()) {
      return UsageError(absl::StrCat(name, " takes no value"));
    }
    if (absl::Status s = flag->set(cl, value.value_or("")); !s.ok()) return s;
  }
  if (absl::Status s = CheckCommandLine(cl); !s.ok()) return s;
  return cl;
}

ClickHouseOptions ClientOptions(const FleetCommandLine& cl, const std::string& url,
                                std::ostream& err, std::function<bool()> stop_requested = nullptr) {
  ClickHouseOptions options;
  options.url = url;
  options.retry_for = cl.retry_for;
  options.request_timeout = cl.timeout;
  // Through a Distributed table, an INSERT is acknowledged once every shard
  // has its rows (not when they are queued locally).
  if (!cl.cluster.empty()) options.settings = "insert_distributed_sync=1";
  options.on_retry = [&err](const absl::Status& status, absl::Duration wait) {
    err << "matrix-report: " << status.message() << "; retrying in "
        << absl::FormatDuration(wait) << "\n";
  };
  options.stop_requested = std::move(stop_requested);
  return options;
}

void ReportPushStats(const FleetCommandLine& cl, const PushStats& stats, std::ostream& out,
                     std::ostream& err) {
  for (const std::string& error : stats.errors) err << "matrix-report: " << error << "\n";
  for (const MalformedLine& bad : stats.first_malformed) {
    err << "matrix-report: " << bad.where.file << ": skipped a malformed line at line "
        << bad.where.line << ": " << bad.reason << "\n";
  }
  out << "matrix-report: pushed " << stats.sent << (stats.sent == 1 ? " issue" : " issues")
      << " from " << stats.files << (stats.files == 1 ? " file" : " files") << " in "
      << stats.batches << (stats.batches == 1 ? " batch" : " batches") << " to ";
  if (cl.urls.size() > 1) {
    out << "the " << cl.urls.size() << " shards of " << cl.cluster << " ("
        << internal::RedactUrl(cl.urls[0]) << "...) " << cl.database << ".issues_local";
  } else {
    out << internal::RedactUrl(cl.urls[0]) << " " << cl.database << ".issues";
  }
  if (stats.malformed > 0) out << "; skipped " << stats.malformed << " malformed";
  out << "\n";
  out.flush();
}

// SIGINT/SIGTERM set g_stop while it lives (when `install`), and have their
// default handlers again after (push may run in-process).
class StopSignals {
 public:
  explicit StopSignals(bool install) : installed_(install) {
    if (!installed_) return;
    g_stop = 0;
    std::signal(SIGINT, OnStopSignal);
    std::signal(SIGTERM, OnStopSignal);
  }
  ~StopSignals() {
    if (!installed_) return;
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  const bool installed_;
};

// One push command: its options, its symbolizer, its signals, and the
// pushes (once, or until stopped with --follow).
class PushCommand {
 public:
  PushCommand(const FleetCommandLine& cl, std::ostream& out, std::ostream& err)
      : cl_(cl), out_(out), err_(err), signals_(cl.follow) {
    options_.fleet = {.database = cl.database, .cluster = cl.cluster};
    options_.batch_rows = cl.batch;
    options_.ignore_checkpoints = cl.all;
    options_.take_unterminated_tail = !cl.follow;
    // Issues are stored named when debug files are given (symbolize.h).
    if (!cl.symbolize.debug_dirs.empty() || !cl.symbolize.debuginfod_urls.empty()) {
      symbolizer_.emplace(cl.symbolize);
      options_.before_store = [this](IssueRecord& record) {
        if (!symbolizer_->SymbolizeIssue(&record.issue)) return false;
        if (!record.issue.key().empty()) record.key = record.issue.key();
        return true;
      };
    }
    // --follow stops on SIGINT/SIGTERM at once, even in a request or a
    // retry wait; its last look (LastLook) stops on a second signal.
    if (cl.follow) stop_requested_ = [this] { return g_stop > (last_look_ ? 1 : 0); };
  }
  ~PushCommand() {
    if (!symbolizer_) return;
    for (const std::string& line : symbolizer_->problems()) err_ << "matrix-report: " << line;
  }
  PushCommand(const PushCommand&) = delete;
  PushCommand& operator=(const PushCommand&) = delete;

  int Run() {
    // One client per URL; with a cluster and several URLs, one per shard
    // (FleetPusher::UseShards). The first server's tables are made last.
    for (const std::string& url : cl_.urls) {
      clients_.push_back(
          std::make_unique<ClickHouseClient>(ClientOptions(cl_, url, err_, stop_requested_)));
    }
    for (size_t i = clients_.size(); i-- > 0;) {
      if (!EnsureSchema(*clients_[i])) return kExitNoInput;
    }
    ClickHouseClient& client = *clients_.front();
    FleetPusher pusher(client, options_);
    if (clients_.size() > 1) {
      std::vector<ClickHouseClient*> shards;
      for (const auto& shard : clients_) shards.push_back(shard.get());
      if (absl::Status s = pusher.UseShards(std::move(shards)); !s.ok()) {
        if (!Stopped(s)) {
          err_ << "matrix-report: cannot push to the shards: " << s.message() << "\n";
        }
        return kExitNoInput;
      }
    }
    if (!cl_.follow) {
      PushStats stats;
      const absl::Status status = pusher.Push(cl_.positional, stats);
      ReportPushStats(cl_, stats, out_, err_);
      if (!status.ok()) return Failed(status);
      return stats.errors.empty() ? kExitOk : kExitNoInput;
    }
    return Follow(pusher);
  }

 private:
  // True (and says so) when `status` is the cancel of a stop signal.
  bool Stopped(const absl::Status& status) {
    if (!absl::IsCancelled(status) || !stop_requested_ || !stop_requested_()) return false;
    err_ << "matrix-report: push stopped by a signal: " << status.message()
         << "\nmatrix-report: what was acknowledged is checkpointed; push again to send the "
            "rest (nothing is stored twice)\n";
    return true;
  }

  int Failed(const absl::Status& status) {
    if (Stopped(status)) return kExitNoInput;
    err_ << "matrix-report: push failed: " << status.message()
         << "\nmatrix-report: what was acknowledged is checkpointed; push again to send the "
            "rest (nothing is stored twice)\n";
    return kExitNoInput;
  }

  bool EnsureSchema(ClickHouseClient& client) {
    FleetPusher schema(client, options_);
    const absl::Status s = schema.EnsureSchema();
    if (s.ok()) return true;
    if (!Stopped(s)) err_ << "matrix-report: cannot create the schema: " << s.message() << "\n";
    return false;
  }

  // --follow: pushes every --poll-ms until a signal or --follow-for.
  int Follow(FleetPusher& pusher) {
    const absl::Time end = cl_.follow_for.has_value() ? absl::Now() + *cl_.follow_for
                                                      : absl::InfiniteFuture();
    while (true) {
      PushStats stats;
      const absl::Status status = pusher.Push(cl_.positional, stats);
      if (!status.ok()) {
        ReportPushStats(cl_, stats, out_, err_);
        return Failed(status);
      }
      if (stats.sent > 0 || stats.malformed > 0 || !stats.errors.empty()) {
        ReportPushStats(cl_, stats, out_, err_);
      }
      const absl::Time wake = absl::Now() + cl_.poll;
      while (!g_stop && absl::Now() < end && absl::Now() < wake) {
        absl::SleepFor(std::min(absl::Milliseconds(100), wake - absl::Now()));
      }
      if (g_stop || absl::Now() >= end) return LastLook(pusher);
    }
  }

  // One last look, so what was written before the stop is sent. After a
  // signal: one try per request, and a second signal ends it.
  int LastLook(FleetPusher& pusher) {
    last_look_ = true;
    if (g_stop) {
      for (const auto& each : clients_) each->set_retry_for(absl::ZeroDuration());
    }
    PushStats last;
    const absl::Status s = pusher.Push(cl_.positional, last);
    if (last.sent > 0 || !s.ok()) ReportPushStats(cl_, last, out_, err_);
    if (!s.ok()) {
      if (!Stopped(s)) err_ << "matrix-report: push failed: " << s.message() << "\n";
      return kExitNoInput;
    }
    return kExitOk;
  }

  const FleetCommandLine& cl_;
  std::ostream& out_;
  std::ostream& err_;
  const StopSignals signals_;
  PushOptions options_;
  std::optional<FrameSymbolizer> symbolizer_;
  bool last_look_ = false;
  std::function<bool()> stop_requested_;
  // One per --clickhouse URL, in their order.
  std::vector<std::unique_ptr<ClickHouseClient>> clients_;
};

int RunPush(const FleetCommandLine& cl, std::ostream& out, std::ostream& err) {
  PushCommand command(cl, out, err);
  return command.Run();
}

std::string FleetTablesHtml(FleetQueries& fleet, std::ostream& err) {
  std::string html = "<section id=\"fleet\"><h2>Fleet</h2>\n";
  auto keys_table = [&](const std::vector<FleetKey>& keys, absl::string_view version_header) {
    std::string t = absl::StrCat(
        "<table><tr><th>Hosts</th><th>Count</th><th>Worst ms</th><th>Median ms</th><th>",
        version_header, "</th><th>Tag/detail</th><th>Key</th></tr>\n");
    for (const FleetKey& k : keys) {
      absl::StrAppend(&t, "<tr><td>", k.hosts, "</td><td>", k.count, "</td><td>",
                      FormatFixed(k.worst_ms, 1), "</td><td>",
                      FormatFixed(k.median_ms, 1), "</td><td>", HtmlEscape(k.version),
                      "</td><td>", HtmlEscape(k.tag), k.detail.empty() ? "" : "/",
                      HtmlEscape(k.detail), "</td><td><code>", HtmlEscape(k.key),
                      "</code></td></tr>\n");
    }
    return t + "</table>\n";
  };
  absl::StatusOr<std::vector<FleetKey>> top = fleet.Top({.version = "", .limit = 20});
  if (top.ok()) {
    absl::StrAppend(&html, "<h3>Top hangs and slow methods by machines affected</h3>\n",
                    keys_table(*top, "Last in"));
  } else {
    err << "matrix-report: fleet top: " << top.status().message() << "\n";
  }
  absl::StatusOr<std::vector<std::string>> versions = fleet.Versions();
  if (versions.ok() && !versions->empty()) {
    const std::string newest = versions->back();
    absl::StatusOr<std::vector<FleetKey>> fresh = fleet.New(newest, {.version = "", .limit = 20});
    if (fresh.ok()) {
      absl::StrAppend(&html, "<h3>New in ", HtmlEscape(newest.empty() ? "-" : newest),
                      "</h3>\n", keys_table(*fresh, "First in"));
    }
  }
  absl::StatusOr<std::vector<FleetFps>> fps = fleet.Fps({.version = "", .limit = 1000});
  if (fps.ok()) {
    html += "<h3>FPS per scene and version</h3>\n<table><tr><th>Scene</th><th>Version</th>"
            "<th>Reports</th><th>Hosts</th><th>FPS p50</th><th>FPS p10</th><th>Dropped % p50"
            "</th><th>Dropped % p90</th></tr>\n";
    for (const FleetFps& r : *fps) {
      absl::StrAppend(&html, "<tr><td>", HtmlEscape(r.scene), "</td><td>",
                      HtmlEscape(r.version), "</td><td>", r.reports, "</td><td>", r.hosts,
                      "</td><td>", FormatFixed(r.fps_p50, 1), "</td><td>",
                      FormatFixed(r.fps_p10, 1), "</td><td>",
                      FormatFixed(r.dropped_percent_p50, 1), "</td><td>",
                      FormatFixed(r.dropped_percent_p90, 1), "</td></tr>\n");
    }
    html += "</table>\n";
  }
  return html + "</section>\n";
}

int RunHtml(const FleetCommandLine& cl, std::ostream& out, std::ostream& err,
            const RunEnvironment& env) {
  ClickHouseClient client(ClientOptions(cl, cl.urls[0], err));
  FleetQueries fleet(client, {.database = cl.database, .cluster = cl.cluster});
  const int limit = cl.limit > 0 ? cl.limit : 5000;
  absl::StatusOr<std::string> body = client.Query(absl::StrCat(
      "SELECT report FROM ", cl.database, ".issues FINAL ORDER BY time_ms DESC, issue_id LIMIT ",
      limit, " FORMAT TabSeparated"));
  if (!body.ok()) {
    err << "matrix-report: " << body.status().message() << "\n";
    return kExitNoInput;
  }
  ReadResult read;
  const std::string source = absl::StrCat(cl.database, ".issues@", client.shown_url());
  read.files.push_back(source);
  std::vector<std::vector<std::string>> rows = ParseTsv(*body);
  std::reverse(rows.begin(), rows.end());
  for (const auto& row : rows) {
    if (row.empty()) continue;
    ++read.lines;
    absl::StatusOr<IssueRecord> record =
        ParseIssueLine(row[0], {.file = source, .line = read.lines});
    if (!record.ok()) {
      ++read.malformed_lines;
      continue;
    }
    record->sequence = static_cast<int64_t>(read.records.size());
    read.records.push_back(*std::move(record));
  }
  std::vector<const IssueRecord*> selected = SelectIssues(read.records, IssueFilter{});
  std::string page = RenderHtmlReport(
      read, selected, false,
      {.time_zone = cl.utc ? absl::UTCTimeZone() : env.local_zone, .full_paths = false});
  const std::string anchor = "<ul id=\"render-errors\"></ul>\n";
  const std::string fleet_html = FleetTablesHtml(fleet, err);
  if (const size_t at = page.find(anchor); at != std::string::npos) {
    page.insert(at + anchor.size(), fleet_html);
  }
  if (cl.output.empty()) {
    out << page;
    out.flush();
    return kExitOk;
  }
  std::ofstream file(cl.output, std::ios::trunc | std::ios::binary);
  file << page;
  file.flush();
  if (!file) {
    err << "matrix-report: cannot write " << cl.output << "\n";
    return kExitNoInput;
  }
  err << "matrix-report: wrote an HTML report of " << read.records.size()
      << " fleet issues to " << cl.output << "\n";
  return kExitOk;
}

int RunFleetQuery(const FleetCommandLine& cl, std::ostream& out, std::ostream& err,
                  const RunEnvironment& env) {
  ClickHouseClient client(ClientOptions(cl, cl.urls[0], err));
  FleetQueries fleet(client, {.database = cl.database, .cluster = cl.cluster});
  FleetFilter filter{.version = cl.version, .limit = cl.limit > 0 ? cl.limit : 20};
  const std::string& q = cl.positional[0];
  auto fail = [&](const absl::Status& status) {
    err << "matrix-report: fleet " << q << ": " << status.message() << "\n";
    return kExitNoInput;
  };
  if (q == "top" || q == "new") {
    absl::StatusOr<std::vector<FleetKey>> keys =
        q == "top" ? fleet.Top(filter) : fleet.New(cl.since, filter);
    if (!keys.ok()) return fail(keys.status());
    out << RenderFleetKeys(*keys, q == "new");
  } else if (q == "fps") {
    absl::StatusOr<std::vector<FleetFps>> rows = fleet.Fps(filter);
    if (!rows.ok()) return fail(rows.status());
    out << RenderFleetFps(*rows);
  } else {
    absl::StatusOr<FleetShow> show = fleet.Show(cl.positional[1], filter);
    if (!show.ok()) return fail(show.status());
    // What is still raw is named here (symbolize.h; the module's own file
    // when this host has the same build, without --debuginfod/--debug-dir).
    FrameSymbolizer symbolizer(cl.symbolize);
    if (symbolizer.SymbolizeIssue(&show->worst.issue) && !show->worst.issue.key().empty()) {
      show->worst.key = show->worst.issue.key();
    }
    for (const std::string& problem : symbolizer.problems()) err << "matrix-report: " << problem;
    RenderOptions options;
    options.time_zone = cl.utc ? absl::UTCTimeZone() : env.local_zone;
    out << RenderFleetShow(cl.positional[1], *show, options);
  }
  out.flush();
  return kExitOk;
}

}  // namespace

const char* FleetUsageText() { return kFleetUsage; }

bool IsFleetCommandLine(const std::vector<std::string>& args) {
  if (args.empty()) return false;
  if (args[0] == "push" || args[0] == "fleet") return true;
  if (args[0] != "html") return false;
  for (const std::string& arg : args) {
    if (arg == "--clickhouse" || absl::StartsWith(arg, "--clickhouse=")) return true;
  }
  return false;
}

int RunFleetCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    const RunEnvironment& env) {
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      out << kFleetUsage;
      return kExitOk;
    }
  }
  absl::StatusOr<FleetCommandLine> cl = Parse(args);
  if (!cl.ok()) {
    err << "matrix-report: " << cl.status().message() << "\nTry 'matrix-report --help'.\n";
    return kExitUsage;
  }
  if (cl->command == "push") return RunPush(*cl, out, err);
  if (cl->command == "fleet") return RunFleetQuery(*cl, out, err, env);
  return RunHtml(*cl, out, err, env);
}

}  // namespace matrix::report

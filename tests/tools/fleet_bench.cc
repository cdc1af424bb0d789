// The fleet at scale (docs/fleet.md, "At scale"): generates N issues
// (default 1,000,000) from H simulated hosts (default 1,000) as report
// directories, starts a clickhouse-server on loopback (as the tests do), and
// measures:
//   - ingest: FleetPusher over every directory (parsing, rows, INSERTs),
//     issues per second, and the bytes per issue the table stores; first with
//     every line through the strict parse (PushOptions::fast_parse false,
//     the baseline), then through the fast path;
//   - the latency of each fleet query (top, new --since, fps, show), median
//     of 5 runs; top, new and fps from the rollups (FleetOptions::rollups),
//     with the same questions over FINAL as the baseline of the same run,
//     and the answers of both compared;
//   - what building the rollups costs (median of 3 builds);
//   - the store alone: the same rows (read back as RowBinary, in the order
//     push sent them) inserted again with no parsing, over HTTP in push's
//     batches one after another, and by clickhouse-client as one INSERT;
//     with the CPU seconds of the pushing process and of the servers, and
//     the load average, for each ingest;
// then the same on a two-shard cluster of two local servers, through the
// Distributed table and straight to each shard.
//
//   build/tests/tools/tools_fleet_bench [--issues=N] [--hosts=H] [--copies=C] [--keep]
//                                       [--reuse] [--shards-only] [--single-only]
//                                       [--no-baseline] [--no-formats] [--no-store] [--no-queries]
//                                       [--batch=ROWS] [--batch-mib=MIB] [--parse-threads=N]
//                                       [--server-cpu-quota=US] [--shards-via=WHICH]
//
// On two shards push goes through the first server's Distributed table and
// then straight to each shard (FleetPusher::UseShards), each into a fresh
// database (--shards-via=distributed or direct: one of them).
// --server-cpu-quota=US holds each clickhouse-server to US microseconds of
// CPU per 100 ms (cgroup v1, as root; 50000: half a core), so that the
// store limits the push as on machines of their own (CpuCap).
//
// Not a ctest test (minutes, gigabytes of scratch); run by hand.

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "clickhouse_test_server.h"
#include "internal/fleet_row_view.h"
#include "matrix/core/issue.h"
#include "matrix/proto/issue.pb.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"

namespace matrix::report {
namespace {

constexpr int kVersions = 5;
constexpr int kKeys = 2000;
constexpr int kNewKeys = 100;  // Only in the newest version.

std::string VersionOf(int host) { return absl::StrCat("3.", host % kVersions); }

// One issue: 60% slow methods, 10% hangs (with a native stack), 30% frames.
proto::Issue MakeIssue(std::mt19937_64& rng, int host, int64_t time_ms) {
  proto::Issue issue;
  issue.set_plugin("Trace");
  issue.set_time_ms(time_ms);
  issue.set_process("fleet-app");
  issue.set_pid(10000 + host);
  issue.mutable_app()->set_host_id(absl::StrFormat("host-%04d", host));
  issue.mutable_app()->set_version(VersionOf(host));
  issue.mutable_app()->set_build_id(absl::StrFormat("%040x", host % kVersions + 1));
  issue.mutable_device()->set_machine(proto::DeviceInfo::HIGH);
  issue.mutable_device()->set_cpu_cores(8);
  issue.mutable_device()->set_mem(int64_t{16} << 30);
  const int kind = static_cast<int>(rng() % 10);
  const bool newest = host % kVersions == kVersions - 1;
  int key_index = static_cast<int>(rng() % kKeys);
  if (newest && rng() % 20 == 0) key_index = kKeys + static_cast<int>(rng() % kNewKeys);
  const std::string key = absl::StrCat("app::module", key_index % 37, "::Function", key_index,
                                       "(int, std::string const&)");
  const std::string scene = absl::StrCat("Scene", rng() % 12);
  if (kind < 6) {
    issue.set_tag("Trace_EvilMethod");
    issue.set_key(key);
    proto::EvilMethodReport* r = issue.mutable_evil_method();
    r->set_detail(proto::NORMAL);
    r->set_cost_ms(700 + static_cast<double>(rng() % 3000));
    r->set_scene(scene);
    r->set_stack_key(key);
    for (int d = 0; d < 3; ++d) {
      proto::MethodCall* call = r->add_stack();
      call->set_depth(d);
      call->set_name(d == 2 ? key : absl::StrCat("app::Caller", d));
      call->set_count(1);
      call->set_cost_ms(r->cost_ms() - d);
    }
  } else if (kind < 7) {
    issue.set_tag("Trace_EvilMethod");
    issue.set_key(key);
    proto::AnrReport* r = issue.mutable_anr();
    r->set_detail(rng() % 2 ? proto::ANR : proto::LAG);
    r->set_cost_ms(2000 + static_cast<double>(rng() % 8000));
    r->set_scene(scene);
    r->set_stack_key(key);
    proto::ThreadStack* stack = r->mutable_thread_stack();
    for (int d = 0; d < 6; ++d) {
      proto::StackFrame* f = stack->add_frames();
      f->set_function(d == 0 ? key : absl::StrCat("app::Frame", d, "()"));
      f->set_module("/usr/bin/fleet-app");
      f->set_pc(absl::StrFormat("0x%x", 0x401000 + d * 64));
      f->set_offset(static_cast<uint64_t>(d * 64));
    }
  } else {
    issue.set_tag("Trace_FPS");
    issue.set_key(scene);
    proto::FrameReport* f = issue.mutable_frame();
    f->set_scene(scene);
    const int64_t frames = 500 + static_cast<int64_t>(rng() % 100);
    const int64_t dropped = static_cast<int64_t>(rng() % 200);
    f->set_frames(frames);
    f->set_dropped_frames(dropped);
    f->set_fps(60.0 * frames / (frames + dropped));
    f->mutable_drop_level()->set_best(frames - 20);
    f->mutable_drop_level()->set_normal(12);
    f->mutable_drop_level()->set_middle(5);
    f->mutable_drop_level()->set_high(2);
    f->mutable_drop_level()->set_frozen(1);
    f->set_refresh_rate(60);
    f->set_window_ms(10000);
  }
  return issue;
}

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
};

template <typename F>
Timing Time(F&& run, int times = 5) {
  std::vector<double> ms;
  for (int i = 0; i < times; ++i) {
    const absl::Time start = absl::Now();
    run();
    ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[0]};
}

int64_t Scalar(ClickHouseClient& client, const std::string& sql) {
  absl::StatusOr<std::string> body = client.Query(sql);
  int64_t v = -1;
  if (body.ok()) (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(*body), &v);
  if (!body.ok()) std::fprintf(stderr, "query failed: %s\n", body.status().ToString().c_str());
  return v;
}

// One ingest: its wall time, the CPU seconds of this process (the pusher)
// or of clickhouse-client, and of the servers, and the load average
// (1 minute) before and after.
struct Ingested {
  double wall_s = 0;
  double client_cpu_s = 0;
  double server_cpu_s = 0;
  double load_before = 0;
  double load_after = 0;
};

struct Result {
  double baseline_ingest_s = 0;  // Every line through ParseIssueLine.
  double ingest_s = 0;
  Ingested baseline_run, push_run;
  // push with each BatchFormat (push_run: the default's).
  Ingested format_runs[3];
  Ingested store_http;    // The same rows, the same batches, no parsing.
  Ingested store_sorted;  // The same batches in the table's order.
  Ingested store_native;  // The same batches in the table's order, Native.
  Ingested store_client;  // clickhouse-client, one INSERT of them all.
  bool store_measured = false;
  double sort_s = 0;    // CPU to sort the batches (kSortedRowBinary).
  double native_s = 0;  // CPU to make them Native blocks (kNative).
  int64_t sent = 0;
  int64_t stored = 0;
  int64_t bytes_on_disk = 0;
  Timing top, fresh, fps, show, count;
  Timing top_final, fresh_final, fps_final;  // The same questions over FINAL.
  Timing rebuild;                             // Building both rollups.
  bool same_answers = false;
};

std::string Describe(const absl::StatusOr<std::vector<FleetKey>>& keys) {
  if (!keys.ok()) return keys.status().ToString();
  std::string out;
  for (const FleetKey& k : *keys) {
    absl::StrAppend(&out, k.tag, "|", k.detail, "|", k.key, "|", k.hosts, "|", k.count, "|",
                    k.worst_ms, "|", k.median_ms, "|", k.version, "\n");
  }
  return out;
}

std::string Describe(const absl::StatusOr<std::vector<FleetFps>>& rows) {
  if (!rows.ok()) return rows.status().ToString();
  std::string out;
  for (const FleetFps& r : *rows) {
    absl::StrAppend(&out, r.scene, "|", r.version, "|", r.reports, "|", r.hosts, "|", r.fps_p50,
                    "|", r.fps_p10, "|", r.dropped_percent_p50, "|", r.dropped_percent_p90);
    for (int64_t level : r.drop_level) absl::StrAppend(&out, "|", level);
    out += "\n";
  }
  return out;
}

// Times top, new and fps from the rollups (after timing their build) and
// over FINAL, and compares the answers.
void MeasureQueries(ClickHouseClient& client, const FleetOptions& fleet_options,
                    Result& result) {
  FleetOptions final_options = fleet_options;
  final_options.rollups = false;
  FleetQueries final(client, final_options);
  FleetQueries fleet(client, fleet_options);
  result.rebuild = Time(
      [&] {
        (void)client.Query("DROP TABLE IF EXISTS matrix.fleet_keys");
        const absl::StatusOr<bool> built = fleet.RefreshRollups();
        if (!built.ok() || !*built) std::fprintf(stderr, "the rollups were not built\n");
      },
      3);
  const FleetFilter filter;
  const std::string since = VersionOf(kVersions - 1);
  result.top_final = Time([&] { (void)final.Top(filter); });
  result.top = Time([&] { (void)fleet.Top(filter); });
  result.fresh_final = Time([&] { (void)final.New(since, filter); });
  result.fresh = Time([&] { (void)fleet.New(since, filter); });
  result.fps_final = Time([&] { (void)final.Fps(filter); });
  result.fps = Time([&] { (void)fleet.Fps(filter); });
  const FleetFilter one{.version = VersionOf(1), .limit = 5};
  result.same_answers = Describe(fleet.Top(filter)) == Describe(final.Top(filter)) &&
                        Describe(fleet.Top(one)) == Describe(final.Top(one)) &&
                        Describe(fleet.New(since, filter)) == Describe(final.New(since, filter)) &&
                        Describe(fleet.New(VersionOf(2), one)) ==
                            Describe(final.New(VersionOf(2), one)) &&
                        Describe(fleet.Fps(filter)) == Describe(final.Fps(filter)) &&
                        Describe(fleet.Fps(one)) == Describe(final.Fps(one));
  if (fleet.stats().from_final != 0 || fleet.stats().rebuilds != 3) {
    std::fprintf(stderr, "rollups: %lld answers from FINAL, %lld builds\n",
                 static_cast<long long>(fleet.stats().from_final),
                 static_cast<long long>(fleet.stats().rebuilds));
  }
}

// CPU seconds (user and system) the process `pid` used so far, from
// /proc/PID/stat (utime and stime, fields 14 and 15).
double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');  // After the command name, which may hold spaces.
  if (close == std::string::npos) return 0;
  const std::vector<std::string> fields =
      absl::StrSplit(absl::string_view(text).substr(close + 1), ' ', absl::SkipEmpty());
  double utime = 0;
  double stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &utime) ||
      !absl::SimpleAtod(fields[12], &stime)) {
    return 0;
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double ThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

double Seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

// CPU seconds of this process (all its threads), or of its reaped children.
double OwnCpuSeconds(int who) {
  rusage usage{};
  getrusage(who, &usage);
  return Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
}

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  in >> load;
  return load;
}

// Times `run` with the CPU of this process (`who` RUSAGE_SELF) or of the
// children it runs (RUSAGE_CHILDREN), and of the servers.
template <typename F>
Ingested Account(const std::vector<pid_t>& servers, int who, F&& run) {
  auto server_cpu = [&servers] {
    double sum = 0;
    for (pid_t pid : servers) sum += CpuSeconds(pid);
    return sum;
  };
  Ingested out;
  out.load_before = LoadAverage();
  const double client_start = OwnCpuSeconds(who);
  const double server_start = server_cpu();
  const absl::Time start = absl::Now();
  run();
  out.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  out.client_cpu_s = OwnCpuSeconds(who) - client_start;
  out.server_cpu_s = server_cpu() - server_start;
  out.load_after = LoadAverage();
  return out;
}

// Waits (up to 2 minutes) until no server merges parts, so that one
// ingest's merges are not counted in the next one's CPU.
void AwaitMerges(const std::vector<ClickHouseClient*>& shards) {
  const absl::Time give_up = absl::Now() + absl::Minutes(2);
  for (ClickHouseClient* shard : shards) {
    while (absl::Now() < give_up &&
           Scalar(*shard, "SELECT count() FROM system.merges FORMAT TabSeparated") > 0) {
      absl::SleepFor(absl::Milliseconds(200));
    }
  }
}

// The end of the RowBinary row at `at` of the fleet's columns (kFleetColumns:
// 12 strings, 9 64-bit numbers and an Int32 among them, a UInt8 last).
size_t SkipString(absl::string_view rows, size_t at) {
  uint64_t size = 0;
  for (int shift = 0; at < rows.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(rows[at++]);
    size |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) break;
  }
  return at + size;
}
size_t SkipRow(absl::string_view rows, size_t at) {
  at = SkipString(rows, at) + 8;                     // issue_id, time_ms
  for (int i = 0; i < 3; ++i) at = SkipString(rows, at);  // host_id .. process
  at += 4;                                           // pid
  for (int i = 0; i < 7; ++i) at = SkipString(rows, at);  // build_id .. scene
  at += 8 * 9;                                       // cost_ms .. drop_frozen
  return SkipString(rows, at) + 1;                   // report, quality
}

// The rows in push's batches, and their counts: a batch ends at the row that
// makes it `batch_rows` rows or `batch_bytes` bytes (FleetPusher's rule).
std::vector<std::pair<absl::string_view, int64_t>> Batches(absl::string_view rows,
                                                           int64_t batch_rows,
                                                           int64_t batch_bytes) {
  std::vector<std::pair<absl::string_view, int64_t>> batches;
  size_t begin = 0;
  int64_t count = 0;
  for (size_t at = 0; at < rows.size();) {
    at = std::min(SkipRow(rows, at), rows.size());
    ++count;
    if (count >= batch_rows || static_cast<int64_t>(at - begin) >= batch_bytes ||
        at == rows.size()) {
      batches.emplace_back(rows.substr(begin, at - begin), count);
      begin = at;
      count = 0;
    }
  }
  return batches;
}

// The store alone: the pushed rows, read back as RowBinary in the order
// push sent them (host by host, each host's issues in time order), into a
// database of its own, first over HTTP in push's batches one after another
// (the same client and settings), then by clickhouse-client as one INSERT
// over the native protocol.
void MeasureStore(ClickHouseClient& client, const std::vector<ClickHouseClient*>& shards,
                  const std::vector<pid_t>& servers, int tcp_port, const PushOptions& push,
                  const std::filesystem::path& scratch, Result& result) {
  absl::StatusOr<std::string> rows =
      client.Query(absl::StrCat("SELECT ", kFleetColumns, " FROM ", push.fleet.database,
                                ".issues ORDER BY host_id, time_ms FORMAT RowBinary"));
  if (!rows.ok()) {
    std::fprintf(stderr, "export: %s\n", rows.status().ToString().c_str());
    return;
  }
  PushOptions raw = push;
  raw.fleet.database = "matrix_store";
  const std::string insert = absl::StrCat("INSERT INTO ", raw.fleet.database, ".issues (",
                                          kFleetColumns, ") FORMAT RowBinary");
  auto fresh = [&] {
    for (ClickHouseClient* shard : shards) {
      (void)shard->Query("DROP DATABASE IF EXISTS matrix_store");
      FleetPusher schema(*shard, raw);
      if (!schema.EnsureSchema().ok()) std::fprintf(stderr, "store schema failed\n");
    }
    AwaitMerges(shards);
  };
  fresh();
  const std::vector<std::pair<absl::string_view, int64_t>> batches =
      Batches(*rows, push.batch_rows, push.batch_bytes);
  result.store_http = Account(servers, RUSAGE_SELF, [&] {
    for (const auto& [batch, count] : batches) {
      absl::StatusOr<InsertResult> done = client.Insert(insert, batch);
      if (!done.ok()) std::fprintf(stderr, "insert: %s\n", done.status().ToString().c_str());
    }
  });
  // The same batches sorted, then as Native blocks, made before the clock
  // starts (the thread's CPU time to make them: what push's sending thread
  // spends).
  const auto sorted_insert = [&](BatchFormat format, double& cpu_s) {
    std::vector<std::string> sorted(batches.size());
    const double start = ThreadCpuSeconds();
    for (size_t i = 0; i < batches.size(); ++i) {
      if (!internal::SortFleetRows(batches[i].first, batches[i].second, format, sorted[i])) {
        std::fprintf(stderr, "batch %zu is not whole rows\n", i);
      }
    }
    cpu_s = ThreadCpuSeconds() - start;
    fresh();
    const std::string sql =
        absl::StrCat("INSERT INTO ", raw.fleet.database, ".issues (", kFleetColumns, ") FORMAT ",
                     format == BatchFormat::kNative ? "Native" : "RowBinary");
    return Account(servers, RUSAGE_SELF, [&] {
      for (const std::string& batch : sorted) {
        absl::StatusOr<InsertResult> done = client.Insert(sql, batch);
        if (!done.ok()) std::fprintf(stderr, "insert: %s\n", done.status().ToString().c_str());
      }
    });
  };
  result.store_sorted = sorted_insert(BatchFormat::kSortedRowBinary, result.sort_s);
  result.store_native = sorted_insert(BatchFormat::kNative, result.native_s);
  const std::filesystem::path file = scratch / "rows.bin";
  std::ofstream(file, std::ios::binary)
      .write(rows->data(), static_cast<std::streamsize>(rows->size()));
  std::string().swap(*rows);
  fresh();
  const std::string command = absl::StrCat(
      MATRIX_CLICKHOUSE_CLIENT, " --host 127.0.0.1 --port ", tcp_port,
      push.fleet.cluster.empty() ? "" : " --insert_distributed_sync=1", " --query '", insert,
      "' < ", file.string());
  result.store_client = Account(servers, RUSAGE_CHILDREN, [&] {
    if (std::system(command.c_str()) != 0) std::fprintf(stderr, "failed: %s\n", command.c_str());
  });
  std::filesystem::remove(file);
  for (ClickHouseClient* shard : shards) {
    (void)shard->Query("DROP DATABASE IF EXISTS matrix_store");
  }
  result.store_measured = true;
}

// Pushes every directory into `options.fleet.database`.
Ingested Ingest(ClickHouseClient& client, const std::vector<ClickHouseClient*>& shards,
                const std::vector<pid_t>& servers, const PushOptions& options,
                const std::vector<std::string>& dirs, int64_t* sent,
                const std::vector<ClickHouseClient*>& direct) {
  for (ClickHouseClient* shard : shards) {
    FleetPusher schema(*shard, options);
    if (!schema.EnsureSchema().ok()) std::fprintf(stderr, "schema failed\n");
  }
  FleetPusher pusher(client, options);
  const absl::Status schema = pusher.EnsureSchema();
  if (!schema.ok()) std::fprintf(stderr, "schema: %s\n", schema.ToString().c_str());
  if (!direct.empty()) {
    const absl::Status placed = pusher.UseShards(direct);
    if (!placed.ok()) std::fprintf(stderr, "shards: %s\n", placed.ToString().c_str());
  }
  AwaitMerges(shards);
  PushStats stats;
  absl::Status status;
  const Ingested run = Account(servers, RUSAGE_SELF, [&] { status = pusher.Push(dirs, stats); });
  if (!status.ok()) std::fprintf(stderr, "push: %s\n", status.ToString().c_str());
  if (sent != nullptr) *sent = stats.sent;
  return run;
}

// A clickhouse-server held to `quota_us` of CPU per 100 ms (cgroup v1's
// cpu controller, as root: /sys/fs/cgroup/cpu/<name>, every thread of the
// process moved there through cgroup.procs), so that the store, not the
// pusher, limits the push on a machine whose cores the servers and the
// pusher share; as on separate machines, two shards then have twice the
// CPU of one server. The process goes back to the root group, and the
// group is removed, at the end.
class CpuCap {
 public:
  CpuCap(pid_t pid, int64_t quota_us, const std::string& name)
      : pid_(pid), dir_(std::filesystem::path("/sys/fs/cgroup/cpu") / name) {
    std::error_code ec;
    std::filesystem::create_directory(dir_, ec);
    ok_ = !ec && Write(dir_ / "cpu.cfs_period_us", 100000) &&
          Write(dir_ / "cpu.cfs_quota_us", quota_us) && Write(dir_ / "cgroup.procs", pid_);
    if (!ok_) {
      std::fprintf(stderr, "cannot cap the CPU of %d in %s (cgroup v1, as root)\n",
                   static_cast<int>(pid_), dir_.c_str());
    }
  }
  bool ok() const { return ok_; }
  ~CpuCap() {
    (void)Write("/sys/fs/cgroup/cpu/cgroup.procs", pid_);
    std::error_code ec;
    std::filesystem::remove(dir_, ec);
  }
  CpuCap(const CpuCap&) = delete;
  CpuCap& operator=(const CpuCap&) = delete;

 private:
  static bool Write(const std::filesystem::path& file, int64_t value) {
    std::ofstream out(file);
    out << value << '\n';
    out.flush();
    return static_cast<bool>(out);
  }
  const pid_t pid_;
  const std::filesystem::path dir_;
  bool ok_ = false;
};

// What Measure does, from the command line.
struct Plan {
  bool baseline = true;
  bool formats = true;  // push with each BatchFormat.
  bool store = true;
  bool queries = true;
  int64_t batch_rows = 100000;
  int64_t batch_bytes = 64 << 20;
  int parse_threads = 0;  // PushOptions::parse_threads
  // Clients of every shard, in the cluster's order: push places the rows on
  // them itself (FleetPusher::UseShards). Empty: through `issues`.
  std::vector<ClickHouseClient*> direct;
};

Result Measure(ClickHouseClient& client, const std::vector<ClickHouseClient*>& shards,
               const std::vector<pid_t>& servers, int tcp_port,
               const FleetOptions& fleet_options, const std::vector<std::string>& dirs,
               const std::filesystem::path& scratch, const Plan& plan) {
  Result result;
  PushOptions push;
  push.fleet = fleet_options;
  push.batch_rows = plan.batch_rows;
  push.batch_bytes = plan.batch_bytes;
  push.parse_threads = plan.parse_threads;
  push.ignore_checkpoints = true;
  if (plan.baseline) {
    // The same push through the strict parse only, into a database of its
    // own, dropped after.
    PushOptions strict = push;
    strict.fleet.database = "matrix_baseline";
    strict.fast_parse = false;
    result.baseline_run = Ingest(client, shards, servers, strict, dirs, nullptr, plan.direct);
    result.baseline_ingest_s = result.baseline_run.wall_s;
    for (ClickHouseClient* shard : shards) {
      (void)shard->Query("DROP DATABASE IF EXISTS matrix_baseline");
    }
  }
  for (BatchFormat format : {BatchFormat::kRowBinary, BatchFormat::kSortedRowBinary,
                             BatchFormat::kNative}) {
    if (!plan.formats || format == push.batch_format) continue;
    // The same push with batches sent as `format`, into a database of its own.
    PushOptions other = push;
    other.fleet.database = "matrix_format";
    other.batch_format = format;
    result.format_runs[static_cast<int>(format)] =
        Ingest(client, shards, servers, other, dirs, nullptr, plan.direct);
    for (ClickHouseClient* shard : shards) {
      (void)shard->Query("DROP DATABASE IF EXISTS matrix_format");
    }
  }
  result.push_run = Ingest(client, shards, servers, push, dirs, &result.sent, plan.direct);
  result.format_runs[static_cast<int>(push.batch_format)] = result.push_run;
  result.ingest_s = result.push_run.wall_s;
  if (plan.store) MeasureStore(client, shards, servers, tcp_port, push, scratch, result);
  const std::string table = fleet_options.cluster.empty() ? "issues" : "issues_local";
  for (ClickHouseClient* shard : shards) {
    // Merges run in the background; the bytes are those of the active parts.
    result.bytes_on_disk += Scalar(*shard, absl::StrCat(
        "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = 'matrix' "
        "AND table = '", table, "'"));
  }
  FleetQueries fleet(client, fleet_options);
  result.count = Time([&] { result.stored = *fleet.Count(); });
  if (!plan.queries) return result;
  FleetFilter filter;
  std::string top_key;
  absl::StatusOr<std::vector<FleetKey>> top = fleet.Top(filter);
  if (top.ok() && !top->empty()) top_key = top->front().key;
  result.show = Time([&] { (void)fleet.Show(top_key, filter); });
  MeasureQueries(client, fleet_options, result);
  return result;
}

void Print(const char* setup, const Result& r, int64_t issues, int64_t input_bytes) {
  std::printf("\n## %s\n", setup);
  std::printf("issues pushed %lld, stored (FINAL) %lld\n", static_cast<long long>(r.sent),
              static_cast<long long>(r.stored));
  const auto line = [&r](const char* what, const Ingested& run) {
    std::printf("%s: %.1f s, %.0f issues/s; CPU s: client %.1f (%.1f us/issue), server %.1f "
                "(%.1f us/issue); load %.1f-%.1f\n",
                what, run.wall_s, r.sent / run.wall_s, run.client_cpu_s,
                1e6 * run.client_cpu_s / r.sent, run.server_cpu_s,
                1e6 * run.server_cpu_s / r.sent, run.load_before, run.load_after);
  };
  if (r.baseline_ingest_s > 0) line("ingest, strict parse only (baseline)", r.baseline_run);
  const char* kFormats[] = {"RowBinary as read", "RowBinary sorted", "Native sorted"};
  for (int format = 0; format < 3; ++format) {
    const Ingested& run = r.format_runs[format];
    if (run.wall_s == 0 || run.wall_s == r.push_run.wall_s) continue;
    line(absl::StrCat("ingest (push, batches as ", kFormats[format], ")").c_str(), run);
    std::printf("push: %.2fx push with batches as %s\n", run.wall_s / r.ingest_s,
                kFormats[format]);
  }
  line("ingest (push)", r.push_run);
  if (r.baseline_ingest_s > 0) {
    std::printf("push: %.2fx the baseline\n", r.baseline_ingest_s / r.ingest_s);
  }
  if (r.store_measured) {
    line("the store alone, the same rows in push's batches over HTTP", r.store_http);
    line("the store alone, the same batches sorted over HTTP", r.store_sorted);
    line("the store alone, the same batches sorted as Native blocks over HTTP", r.store_native);
    std::printf("sorting the batches: %.2f us/issue of CPU; as Native blocks: %.2f\n",
                1e6 * r.sort_s / r.sent, 1e6 * r.native_s / r.sent);
    line("the store alone, the same rows by clickhouse-client, one INSERT", r.store_client);
    std::printf("push: %.2f of the store's HTTP speed (RowBinary as read), %.2f (sorted), "
                "%.2f (Native sorted), %.2f of clickhouse-client's\n",
                r.store_http.wall_s / r.ingest_s, r.store_sorted.wall_s / r.ingest_s,
                r.store_native.wall_s / r.ingest_s, r.store_client.wall_s / r.ingest_s);
  }
  std::printf("stored %.1f MiB: %.1f bytes/issue (JSON lines: %.1f bytes/issue)\n",
              r.bytes_on_disk / 1048576.0, static_cast<double>(r.bytes_on_disk) / issues,
              static_cast<double>(input_bytes) / issues);
  if (r.rebuild.median_ms == 0) {
    std::fflush(stdout);
    return;  // --no-queries
  }
  std::printf("rollups built in %.0f ms (median of 3; min %.0f)\n", r.rebuild.median_ms,
              r.rebuild.min_ms);
  std::printf("answers from the rollups and over FINAL: %s\n",
              r.same_answers ? "identical" : "DIFFERENT");
  std::printf("| query | median ms | min ms | over FINAL: median ms | min ms | ratio |\n"
              "|---|---|---|---|---|---|\n");
  auto row = [](const char* name, const Timing& t, const Timing* final) {
    std::printf("| %s | %.1f | %.1f |", name, t.median_ms, t.min_ms);
    if (final == nullptr) {
      std::printf(" | | |\n");
    } else {
      std::printf(" %.1f | %.1f | %.0fx |\n", final->median_ms, final->min_ms,
                  final->median_ms / t.median_ms);
    }
  };
  row("count() FINAL", r.count, nullptr);
  row("top", r.top, &r.top_final);
  row("new --since", r.fresh, &r.fresh_final);
  row("fps", r.fps, &r.fps_final);
  row("show KEY", r.show, nullptr);
  std::fflush(stdout);
}

// The report directories, h0000... one per host, of `issues` issues in all.
// With `copies` N, hosts / N of them are generated and each other copy is
// their files again under host ids of its own ("host-0042" ->
// "host-c1-0042"): N times the issues for the time of generating one set.
// Without `generate`, the directories a --keep run left. Adds the bytes of
// the files to `input_bytes`.
std::vector<std::string> Generate(const std::filesystem::path& root, int64_t issues, int hosts,
                                  int copies, bool generate, int64_t& input_bytes) {
  std::vector<std::string> dirs;
  std::mt19937_64 rng(42);
  const int base_hosts = hosts / copies;
  const int64_t per_host = issues / hosts;
  for (int host = 0; host < hosts; ++host) {
    const std::filesystem::path dir = root / absl::StrFormat("h%04d", host);
    dirs.push_back(dir.string());
    if (!generate) {
      input_bytes += static_cast<int64_t>(std::filesystem::file_size(dir / "issues.jsonl"));
      continue;
    }
    std::filesystem::create_directories(dir);
    std::ofstream out(dir / "issues.jsonl", std::ios::binary);
    const int copy = host / base_hosts;
    if (copy > 0 && copy < copies) {
      std::ifstream in(root / absl::StrFormat("h%04d", host % base_hosts) / "issues.jsonl");
      for (std::string line; std::getline(in, line);) {
        line = absl::StrReplaceAll(line, {{"\"host_id\":\"host-",
                                           absl::StrCat("\"host_id\":\"host-c", copy, "-")}});
        out << line << '\n';
        input_bytes += static_cast<int64_t>(line.size()) + 1;
      }
      continue;
    }
    const int64_t n = per_host + (host < issues % hosts ? 1 : 0);
    for (int64_t i = 0; i < n; ++i) {
      const std::string line =
          Issue(MakeIssue(rng, host, 1763719200000 + i * 1000 + host)).ToJson();
      out << line << '\n';
      input_bytes += static_cast<int64_t>(line.size()) + 1;
    }
  }
  return dirs;
}

int Main(int argc, char** argv) {
  int64_t issues = 1000000;
  int hosts = 1000;
  bool keep = false;
  bool shards_only = false;
  bool single_only = false;
  bool reuse = false;  // Keep the data a --keep run left (same --issues/--hosts).
  Plan plan;  // --no-baseline: the fast path only.
  int64_t batch_mib = 64;
  int copies = 1;
  int64_t server_cpu_quota_us = 0;  // Per 100 ms of each server (0: none).
  std::string shards_via = "both";  // distributed, direct or both.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--issues=")) (void)absl::SimpleAtoi(arg.substr(9), &issues);
    if (absl::StartsWith(arg, "--hosts=")) (void)absl::SimpleAtoi(arg.substr(8), &hosts);
    if (arg == "--keep") keep = true;
    if (arg == "--shards-only") shards_only = true;
    if (arg == "--single-only") single_only = true;
    if (arg == "--reuse") reuse = true;
    if (arg == "--no-baseline") plan.baseline = false;
    if (arg == "--no-formats") plan.formats = false;
    if (arg == "--no-store") plan.store = false;
    if (arg == "--no-queries") plan.queries = false;
    if (absl::StartsWith(arg, "--batch=")) (void)absl::SimpleAtoi(arg.substr(8), &plan.batch_rows);
    if (absl::StartsWith(arg, "--batch-mib=")) (void)absl::SimpleAtoi(arg.substr(12), &batch_mib);
    if (absl::StartsWith(arg, "--parse-threads=")) {
      (void)absl::SimpleAtoi(arg.substr(16), &plan.parse_threads);
    }
    if (absl::StartsWith(arg, "--copies=")) (void)absl::SimpleAtoi(arg.substr(9), &copies);
    if (absl::StartsWith(arg, "--server-cpu-quota=")) {
      (void)absl::SimpleAtoi(arg.substr(19), &server_cpu_quota_us);
    }
    if (absl::StartsWith(arg, "--shards-via=")) shards_via = arg.substr(13);
  }
  plan.batch_bytes = batch_mib << 20;
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / "matrix-fleet-bench";
  const bool generate = !reuse || !std::filesystem::exists(root);
  if (generate) std::filesystem::remove_all(root);
  int64_t input_bytes = 0;
  const absl::Time gen_start = absl::Now();
  const std::vector<std::string> dirs =
      Generate(root, issues, hosts, std::max(copies, 1), generate, input_bytes);
  std::printf("# fleet bench: %lld issues from %d hosts, %d versions; generated in %.1f s "
              "(%.1f MiB of JSON lines)\n",
              static_cast<long long>(issues), hosts, kVersions,
              absl::ToDoubleSeconds(absl::Now() - gen_start), input_bytes / 1048576.0);
  if (server_cpu_quota_us > 0) {
    std::printf(
        "# each clickhouse-server capped at %.2f CPUs (cgroup v1 cpu quota %lld us per "
        "100 ms)\n",
        server_cpu_quota_us / 100000.0, static_cast<long long>(server_cpu_quota_us));
  }
  std::fflush(stdout);
  const auto cap = [&](pid_t pid, int n) {
    return server_cpu_quota_us > 0
               ? std::make_unique<CpuCap>(pid, server_cpu_quota_us,
                                          absl::StrCat("matrix-fleet-bench-", getpid(), "-", n))
               : nullptr;
  };

  if (!shards_only) {
    test_util::ClickHouseTestServer server;
    if (absl::Status s = server.Start(); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    const std::unique_ptr<CpuCap> capped = cap(server.pid(), 0);
    if (capped != nullptr && !capped->ok()) return 1;
    // A query over FINAL, or a rollup build, of 10 M issues takes more than
    // the default 30 s on a busy machine.
    ClickHouseOptions options = test_util::ClientOptions(server.url(), absl::Seconds(60));
    options.request_timeout = absl::Minutes(10);
    ClickHouseClient client(options);
    const Result single = Measure(client, {&client}, {server.pid()}, server.tcp_port(), {},
                                  dirs, root, plan);
    Print("single server", single, issues, input_bytes);
  }
  if (!single_only) {
    test_util::ClickHouseTestServer a;
    test_util::ClickHouseTestServer b;
    const std::string cluster = test_util::TwoShardCluster("fleet", a.tcp_port(), b.tcp_port());
    if (!a.Start(cluster).ok() || !b.Start(cluster).ok()) return 1;
    ClickHouseOptions options = test_util::ClientOptions(a.url(), absl::Seconds(60));
    options.request_timeout = absl::Minutes(10);
    options.settings = "insert_distributed_sync=1";
    ClickHouseClient client_a(options);
    ClickHouseOptions options_b = test_util::ClientOptions(b.url(), absl::Seconds(60));
    options_b.request_timeout = absl::Minutes(10);
    ClickHouseClient client_b(options_b);
    const std::unique_ptr<CpuCap> capped_a = cap(a.pid(), 1);
    const std::unique_ptr<CpuCap> capped_b = cap(b.pid(), 2);
    if (capped_a != nullptr && (!capped_a->ok() || !capped_b->ok())) return 1;
    // Through the first server's Distributed `issues` (before push placed
    // rows itself), then straight to each shard, each into a fresh database.
    for (const bool direct : {false, true}) {
      if (shards_via != "both" && (shards_via == "direct") != direct) continue;
      for (ClickHouseClient* shard : {&client_a, &client_b}) {
        (void)shard->Query("DROP DATABASE IF EXISTS matrix");
      }
      Plan shard_plan = plan;
      if (direct) shard_plan.direct = {&client_a, &client_b};
      const Result sharded =
          Measure(client_a, {&client_a, &client_b}, {a.pid(), b.pid()}, a.tcp_port(),
                  {.database = "matrix", .cluster = "fleet"}, dirs, root, shard_plan);
      Print(direct ? "two shards, push straight to each shard's issues_local"
                   : "two shards, push through the Distributed issues of the first server",
            sharded, issues, input_bytes);
    }
  }
  if (!keep) std::filesystem::remove_all(root);
  return 0;
}

}  // namespace
}  // namespace matrix::report

int main(int argc, char** argv) { return matrix::report::Main(argc, argv); }

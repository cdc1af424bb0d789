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
// then the same on a two-shard cluster of two local servers (Distributed).
//
//   build/tests/tools/tools_fleet_bench [--issues=N] [--hosts=H] [--copies=C] [--keep]
//                                       [--reuse] [--shards-only] [--single-only]
//                                       [--no-baseline]
//
// Not a ctest test (minutes, gigabytes of scratch); run by hand.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "clickhouse_test_server.h"
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

struct Result {
  double baseline_ingest_s = 0;  // Every line through ParseIssueLine.
  double ingest_s = 0;
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

// Seconds to push every directory into `options.fleet.database`.
double Ingest(ClickHouseClient& client, const std::vector<ClickHouseClient*>& shards,
              const PushOptions& options, const std::vector<std::string>& dirs,
              int64_t* sent) {
  for (ClickHouseClient* shard : shards) {
    FleetPusher schema(*shard, options);
    if (!schema.EnsureSchema().ok()) std::fprintf(stderr, "schema failed\n");
  }
  FleetPusher pusher(client, options);
  const absl::Status schema = pusher.EnsureSchema();
  if (!schema.ok()) std::fprintf(stderr, "schema: %s\n", schema.ToString().c_str());
  PushStats stats;
  const absl::Time start = absl::Now();
  const absl::Status status = pusher.Push(dirs, stats);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!status.ok()) std::fprintf(stderr, "push: %s\n", status.ToString().c_str());
  if (sent != nullptr) *sent = stats.sent;
  return seconds;
}

Result Measure(ClickHouseClient& client, const std::vector<ClickHouseClient*>& shards,
               const FleetOptions& fleet_options, const std::vector<std::string>& dirs,
               bool baseline) {
  Result result;
  PushOptions push;
  push.fleet = fleet_options;
  push.batch_rows = 100000;
  push.batch_bytes = 64 << 20;
  push.ignore_checkpoints = true;
  if (baseline) {
    // The same push through the strict parse only, into a database of its
    // own, dropped after.
    PushOptions strict = push;
    strict.fleet.database = "matrix_baseline";
    strict.fast_parse = false;
    result.baseline_ingest_s = Ingest(client, shards, strict, dirs, nullptr);
    for (ClickHouseClient* shard : shards) {
      (void)shard->Query("DROP DATABASE IF EXISTS matrix_baseline");
    }
  }
  result.ingest_s = Ingest(client, shards, push, dirs, &result.sent);
  const std::string table = fleet_options.cluster.empty() ? "issues" : "issues_local";
  for (ClickHouseClient* shard : shards) {
    // Merges run in the background; the bytes are those of the active parts.
    result.bytes_on_disk += Scalar(*shard, absl::StrCat(
        "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = 'matrix' "
        "AND table = '", table, "'"));
  }
  FleetQueries fleet(client, fleet_options);
  result.count = Time([&] { result.stored = *fleet.Count(); });
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
  if (r.baseline_ingest_s > 0) {
    std::printf("ingest, strict parse only (baseline) %.1f s: %.0f issues/s\n",
                r.baseline_ingest_s, r.sent / r.baseline_ingest_s);
  }
  std::printf("ingest %.1f s: %.0f issues/s", r.ingest_s, r.sent / r.ingest_s);
  if (r.baseline_ingest_s > 0) {
    std::printf(" (%.2fx the baseline)", r.baseline_ingest_s / r.ingest_s);
  }
  std::printf("\n");
  std::printf("stored %.1f MiB: %.1f bytes/issue (JSON lines: %.1f bytes/issue)\n",
              r.bytes_on_disk / 1048576.0, static_cast<double>(r.bytes_on_disk) / issues,
              static_cast<double>(input_bytes) / issues);
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
  bool baseline = true;  // --no-baseline: the fast path only.
  int copies = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--issues=")) (void)absl::SimpleAtoi(arg.substr(9), &issues);
    if (absl::StartsWith(arg, "--hosts=")) (void)absl::SimpleAtoi(arg.substr(8), &hosts);
    if (arg == "--keep") keep = true;
    if (arg == "--shards-only") shards_only = true;
    if (arg == "--single-only") single_only = true;
    if (arg == "--reuse") reuse = true;
    if (arg == "--no-baseline") baseline = false;
    if (absl::StartsWith(arg, "--copies=")) (void)absl::SimpleAtoi(arg.substr(9), &copies);
  }
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
  std::fflush(stdout);

  if (!shards_only) {
    test_util::ClickHouseTestServer server;
    if (absl::Status s = server.Start(); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    // A query over FINAL, or a rollup build, of 10 M issues takes more than
    // the default 30 s on a busy machine.
    ClickHouseOptions options = test_util::ClientOptions(server.url(), absl::Seconds(60));
    options.request_timeout = absl::Minutes(10);
    ClickHouseClient client(options);
    const Result single = Measure(client, {&client}, {}, dirs, baseline);
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
    ClickHouseClient client_b(test_util::ClientOptions(b.url(), absl::Seconds(60)));
    const Result sharded =
        Measure(client_a, {&client_a, &client_b},
                {.database = "matrix", .cluster = "fleet"}, dirs, baseline);
    Print("two shards (Distributed over two local servers)", sharded, issues, input_bytes);
  }
  if (!keep) std::filesystem::remove_all(root);
  return 0;
}

}  // namespace
}  // namespace matrix::report

int main(int argc, char** argv) { return matrix::report::Main(argc, argv); }

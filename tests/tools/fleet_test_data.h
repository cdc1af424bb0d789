// The fleet tests' data set: 12 hosts in three versions (hosts 0-3 run
// "1.9", 4-7 "2.9", 8-11 "2.10", so natural version order matters), each a
// report directory with hangs and slow methods in issues.jsonl and frame
// reports in issues.fps.jsonl, as JsonLinesIssueSink writes them. The
// answers fleet top/new/fps/show must give are below each key.
//
//   WriteFleetDataSet(dir);  // dir/h00 ... dir/h11
//
// Thread safety: test thread only.

#ifndef MATRIX_TESTS_TOOLS_FLEET_TEST_DATA_H_
#define MATRIX_TESTS_TOOLS_FLEET_TEST_DATA_H_

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "report_test_util.h"

namespace matrix::report::test_util {

inline constexpr int kFleetHosts = 12;

inline std::string FleetHostId(int host) { return absl::StrFormat("fleet-host-%02d", host); }
inline std::string FleetVersion(int host) { return host < 4 ? "1.9" : host < 8 ? "2.9" : "2.10"; }

inline proto::Issue OnHost(proto::Issue issue, int host) {
  issue.mutable_app()->set_host_id(FleetHostId(host));
  issue.mutable_app()->set_version(FleetVersion(host));
  issue.mutable_app()->set_build_id(absl::StrFormat("b%s", FleetVersion(host)));
  issue.set_pid(1000 + host);
  return issue;
}

// Keys (top order: hosts, then count, then tag, detail, key):
//   app::Decode()   ANR on all 12 hosts, 5000 + 100 * host ms: worst 6100, median 5600
//   app::Parse()    NORMAL twice on hosts 0-5, 800/900 + 10 * host: 6 hosts, 12, worst 950, median 900
//   app::Flush()    BlockCanary on hosts 0-2, 2000 + 100 * host: 3 hosts, worst 2200, median 2100
//   app::NewThing() ANR on hosts 8-10 (2.10 only), 7000 + host: worst 7010, median 7009
//   app::Regress()  LAG on hosts 4-5 (2.9 only), 3000 + 100 * (host - 4): worst 3100, median 3100
// Frames per host: Gallery at 40 + host FPS, 1000 frames, 10 * host dropped;
// Settings at 58 FPS, 1000 frames, none dropped. One startup per host.
inline int WriteFleetDataSet(const std::string& root) {
  int issues = 0;
  for (int host = 0; host < kFleetHosts; ++host) {
    const std::string dir = absl::StrFormat("%s/h%02d", root, host);
    std::filesystem::create_directories(dir);
    std::ofstream hangs(dir + "/issues.jsonl", std::ios::trunc);
    std::ofstream frames(dir + "/issues.fps.jsonl", std::ios::trunc);
    const int64_t t0 = kBaseTimeMs + host * 60000;
    auto hang = [&](const proto::Issue& issue) {
      hangs << Line(OnHost(issue, host)) << "\n";
      ++issues;
    };
    hang(StartupIssue(t0));
    hang(AnrIssue("app::Decode()", proto::ANR, 5000 + 100 * host, t0 + 1000));
    if (host < 6) {
      hang(EvilMethodIssue("app::Parse()", 800 + 10 * host, t0 + 2000));
      hang(EvilMethodIssue("app::Parse()", 900 + 10 * host, t0 + 3000));
    }
    if (host < 3) hang(BlockIssue("app::Flush()", 2000 + 100 * host, t0 + 4000));
    if (host >= 8 && host <= 10) hang(AnrIssue("app::NewThing()", proto::ANR, 7000 + host, t0 + 5000));
    if (host == 4 || host == 5) {
      hang(AnrIssue("app::Regress()", proto::LAG, 3000 + 100 * (host - 4), t0 + 6000));
    }
    proto::Issue gallery = FrameIssue("Gallery", 40 + host, t0 + 7000);
    gallery.mutable_frame()->set_frames(1000);
    gallery.mutable_frame()->set_dropped_frames(10 * host);
    frames << Line(OnHost(gallery, host)) << "\n";
    proto::Issue settings = FrameIssue("Settings", 58, t0 + 8000);
    settings.mutable_frame()->set_frames(1000);
    settings.mutable_frame()->set_dropped_frames(0);
    frames << Line(OnHost(settings, host)) << "\n";
    issues += 2;
  }
  return issues;
}

}  // namespace matrix::report::test_util

#endif  // MATRIX_TESTS_TOOLS_FLEET_TEST_DATA_H_

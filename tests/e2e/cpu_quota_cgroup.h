// CpuQuotaCgroup: a CPU cgroup limited to a share of one CPU, for tests of
// hangs on a throttled process (a CPU quota is a wait to run, not a stop).
//
//   CpuQuotaCgroup cgroup(10);  // 10 % of a CPU, in periods of 100 ms
//   if (cgroup.procs.empty()) GTEST_SKIP() << cgroup.why;
//   // Children: "echo $$ > <procs> && exec ..."; or the test process itself:
//   ASSERT_TRUE(cgroup.Enter()) << cgroup.why;  // Left again when destroyed.
//
// Thread safety: one test thread.

#ifndef MATRIX_TESTS_E2E_CPU_QUOTA_CGROUP_H_
#define MATRIX_TESTS_E2E_CPU_QUOTA_CGROUP_H_

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

struct CpuQuotaCgroup {
  // `percent` of a CPU in each period of `period_ms` (a throttled process
  // waits up to the rest of the period). Cgroup v2 cpu.max, else v1
  // cpu.cfs_quota_us; empty `procs` with `why` set when the machine does not
  // let the test create one.
  explicit CpuQuotaCgroup(int percent, int period_ms = 100) {
    const std::string name = absl::StrCat("matrix-quota-", getpid());
    const std::string period = std::to_string(period_ms * 1000);
    const std::string quota = std::to_string(percent * period_ms * 10);
    if (std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers")) {
      v2 = true;
      Write("/sys/fs/cgroup/cgroup.subtree_control", "+cpu");
      dir = "/sys/fs/cgroup/" + name;
      if (mkdir(dir.c_str(), 0755) == 0 && Write(dir + "/cpu.max", quota + " " + period)) {
        procs = dir + "/cgroup.procs";
        return;
      }
    } else {
      for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
        dir = std::string(mount) + "/" + name;
        if (mkdir(dir.c_str(), 0755) == 0 && Write(dir + "/cpu.cfs_period_us", period) &&
            Write(dir + "/cpu.cfs_quota_us", quota)) {
          procs = dir + "/cgroup.procs";
          return;
        }
      }
    }
    why = absl::StrCat("cannot create a CPU cgroup with a quota (", dir, ": ",
                       std::strerror(errno), "): the cpu controller is not writable here");
    if (!dir.empty()) rmdir(dir.c_str());
  }
  ~CpuQuotaCgroup() {
    if (!home_procs.empty()) Write(home_procs, std::to_string(getpid()));
    if (!procs.empty()) rmdir(dir.c_str());  // Its processes have exited or left.
  }
  CpuQuotaCgroup(const CpuQuotaCgroup&) = delete;
  CpuQuotaCgroup& operator=(const CpuQuotaCgroup&) = delete;

  // Moves this whole process (every thread) into the cgroup, until the
  // cgroup is destroyed. False, with `why` set, when it cannot.
  bool Enter() {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
      // v2: "0::/path"; v1: "N:cpu,cpuacct:/path".
      const size_t second = line.find(':', line.find(':') + 1);
      if (second == std::string::npos) continue;
      const std::string controllers = line.substr(line.find(':') + 1, second - line.find(':') - 1);
      if (v2 != controllers.empty()) continue;
      if (!v2 && !absl::StrContains(absl::StrCat(",", controllers, ","), ",cpu,")) continue;
      home_procs = dir.substr(0, dir.rfind('/')) + line.substr(second + 1) + "/cgroup.procs";
      break;
    }
    if (home_procs.empty() || !Write(procs, std::to_string(getpid()))) {
      why = absl::StrCat("cannot move this process into ", dir, ": ", std::strerror(errno));
      home_procs.clear();
      return false;
    }
    return true;
  }

  // How long the cgroup's processes were throttled so far.
  int64_t ThrottledMicros() const {
    std::ifstream in(dir + "/cpu.stat");
    std::string key;
    int64_t value = 0;
    while (in >> key >> value) {
      if (key == "throttled_usec") return value;
      if (key == "throttled_time") return value / 1000;  // v1: ns
    }
    return 0;
  }

  static bool Write(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    out.flush();
    return static_cast<bool>(out);
  }

  bool v2 = false;
  std::string dir;
  std::string procs;
  std::string home_procs;  // Where Enter() moved the process from.
  std::string why;
};

#endif  // MATRIX_TESTS_E2E_CPU_QUOTA_CGROUP_H_

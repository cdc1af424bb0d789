// A real clickhouse-server for the fleet tests: loopback only, a temporary
// data directory, free ports picked at start, stopped (and its directory
// removed) at the end. No system service is used. The config written is the
// one docs/fleet.md shows (ServerConfigXml).
//
//   ClickHouseTestServer server;
//   ASSERT_TRUE(server.Start().ok());
//   ClickHouseClient client({.url = server.url()});
//
// Two servers as a two-shard cluster "fleet": pick both servers' ports
// first, then start each with the same <remote_servers>.
//
//   ClickHouseTestServer a, b;
//   const std::string shards = TwoShardCluster("fleet", a.tcp_port(), b.tcp_port());
//   a.Start(shards); b.Start(shards);
//
// Thread safety: thread-compatible; test thread only.

#ifndef MATRIX_TESTS_TOOLS_CLICKHOUSE_TEST_SERVER_H_
#define MATRIX_TESTS_TOOLS_CLICKHOUSE_TEST_SERVER_H_

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "matrix/report/clickhouse_client.h"

extern char** environ;

namespace matrix::report::test_util {

// A TCP port nobody listens on now (bound to port 0 and released).
inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// Options for a client of `url` that tries once (retry_for zero) or retries.
inline ClickHouseOptions ClientOptions(const std::string& url,
                                       absl::Duration retry_for = absl::Seconds(10)) {
  ClickHouseOptions options;
  options.url = url;
  options.retry_for = retry_for;
  return options;
}

// The <remote_servers> of a cluster of two shards on loopback, one replica
// each (no replication: that needs ZooKeeper, see docs/fleet.md), with
// their weights (1: none written, ClickHouse's default).
inline std::string TwoShardCluster(const std::string& name, int tcp_port_a, int tcp_port_b,
                                   int weight_a = 1, int weight_b = 1) {
  const auto weight = [](int w) {
    return w == 1 ? std::string() : absl::StrCat("<weight>", w, "</weight>");
  };
  return absl::StrCat("  <remote_servers>\n    <", name, ">\n", "      <shard>", weight(weight_a),
                      "<replica><host>127.0.0.1</host><port>", tcp_port_a,
                      "</port></replica></shard>\n", "      <shard>", weight(weight_b),
                      "<replica><host>127.0.0.1</host><port>", tcp_port_b,
                      "</port></replica></shard>\n    </", name, ">\n  </remote_servers>\n");
}

// The whole server config (ClickHouse 18.16's <yandex> root; users inline).
inline std::string ServerConfigXml(const std::string& dir, int http_port, int tcp_port,
                                   const std::string& remote_servers) {
  return absl::StrCat(R"(<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>)", dir, R"(/server.log</log>
    <errorlog>)", dir, R"(/server.err.log</errorlog>
  </logger>
  <http_port>)", http_port, R"(</http_port>
  <tcp_port>)", tcp_port, R"(</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>)", dir, R"(/data/</path>
  <tmp_path>)", dir, R"(/tmp/</tmp_path>
  <user_files_path>)", dir, R"(/user_files/</user_files_path>
  <format_schema_path>)", dir, R"(/format_schemas/</format_schema_path>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <max_concurrent_queries>50</max_concurrent_queries>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <profiles><default></default></profiles>
  <quotas><default></default></quotas>
)", remote_servers, "</yandex>\n");
}

class ClickHouseTestServer {
 public:
  ClickHouseTestServer() : http_port_(FreePort()), tcp_port_(FreePort()) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "matrix-clickhouse-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
  }
  ~ClickHouseTestServer() {
    Stop();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  ClickHouseTestServer(const ClickHouseTestServer&) = delete;
  ClickHouseTestServer& operator=(const ClickHouseTestServer&) = delete;

  // Writes the config and starts the server; OK once it answers queries.
  // Without a cluster, a port taken between FreePort() and the server's bind
  // (another test's) is replaced and the start tried again.
  absl::Status Start(const std::string& remote_servers = "") {
    if (dir_.empty()) return absl::InternalError("no temporary directory");
    config_ = dir_ + "/config.xml";
    absl::Status status;
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (attempt > 0) {
        http_port_ = FreePort();
        tcp_port_ = FreePort();
      }
      std::string config = ServerConfigXml(dir_, http_port_, tcp_port_, remote_servers);
      config.insert(config.find("  </users>"), more_users_);
      std::ofstream(config_, std::ios::trunc) << config;
      status = Launch();
      if (status.ok() || !remote_servers.empty() ||
          ErrorLog().find("Address already in use") == std::string::npos) {
        return status;
      }
    }
    return status;
  }

  // A user `name` with `password` (plain text) and the default user's
  // networks, profile and quota, added to the config Start() writes (the
  // one docs/fleet.md shows has the default user only). Call before Start().
  void AddUser(const std::string& name, const std::string& password) {
    absl::StrAppend(&more_users_, "    <", name, ">\n      <password>", password,
                    "</password>\n      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>\n"
                    "      <profile>default</profile>\n      <quota>default</quota>\n    </",
                    name, ">\n");
  }

  // Starts it again on the same ports and data (after Kill or Stop).
  absl::Status Restart() { return Launch(); }

  // SIGKILL: the server dies mid-whatever, as on a crash.
  void Kill() { Signal(SIGKILL, absl::Seconds(10)); }

  // SIGTERM, then SIGKILL after 15 s.
  void Stop() {
    if (pid_ <= 0) return;
    if (!Signal(SIGTERM, absl::Seconds(15))) Kill();
  }

  std::string url() const { return absl::StrCat("http://127.0.0.1:", http_port_); }
  int http_port() const { return http_port_; }
  int tcp_port() const { return tcp_port_; }
  const std::string& dir() const { return dir_; }
  bool running() const { return pid_ > 0; }
  // The server's process id (0 when it does not run).
  pid_t pid() const { return pid_; }

  // The server's error log, for failure messages.
  std::string ErrorLog() const {
    std::ifstream in(dir_ + "/server.err.log");
    std::stringstream text;
    text << in.rdbuf();
    std::ifstream out(dir_ + "/stdout.txt");
    text << out.rdbuf();
    return text.str();
  }

 private:
  absl::Status Launch() {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    const std::string out = dir_ + "/stdout.txt";
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawn_file_actions_addchdir_np(&actions, dir_.c_str());
    const std::string config_arg = "--config-file=" + config_;
    std::vector<char*> argv = {const_cast<char*>(MATRIX_CLICKHOUSE_SERVER),
                               const_cast<char*>(config_arg.c_str()), nullptr};
    const int spawned =
        posix_spawn(&pid_, MATRIX_CLICKHOUSE_SERVER, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
      pid_ = 0;
      return absl::InternalError(absl::StrCat("cannot run ", MATRIX_CLICKHOUSE_SERVER));
    }
    ClickHouseOptions options;
    options.url = url();
    options.request_timeout = absl::Seconds(2);
    options.retry_for = absl::ZeroDuration();
    ClickHouseClient client(options);
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (absl::Now() < give_up) {
      if (client.Query("SELECT 1").ok()) return absl::OkStatus();
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return absl::InternalError(absl::StrCat("clickhouse-server exited: ", ErrorLog()));
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return absl::DeadlineExceededError(
        absl::StrCat("clickhouse-server did not answer in 30 s: ", ErrorLog()));
  }

  // Sends `sig` and waits up to `wait` for the exit. True when it exited.
  bool Signal(int sig, absl::Duration wait) {
    if (pid_ <= 0) return true;
    kill(pid_, sig);
    const absl::Time give_up = absl::Now() + wait;
    while (absl::Now() < give_up) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return true;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  int http_port_;
  int tcp_port_;
  std::string dir_;
  std::string config_;
  std::string more_users_;  // AddUser's elements, inside <users>.
  pid_t pid_ = 0;
};

}  // namespace matrix::report::test_util

#endif  // MATRIX_TESTS_TOOLS_CLICKHOUSE_TEST_SERVER_H_

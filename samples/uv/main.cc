// uv-sample: matrix-cpp on a libuv program with one line
// (matrix::uv::Attach). A TCP echo server on 127.0.0.1 answers a client that
// the program runs itself (a message every 50 ms). A "reindex" timer runs a
// 300 ms callback (slow method: RebuildIndex) and a "load" timer blocks the
// loop for 1.5 s (ANR with the loop thread's stack: LoadHugeFile). Reports
// are printed to stdout; the program ends after 4 s.
//
//   ./build/samples/uv/uv-sample

#include <uv.h>

#include <cstdio>
#include <memory>

#include "absl/time/clock.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/uv/uv_monitor.h"

namespace {

__attribute__((no_instrument_function)) void Spin(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
  }
}

class Console : public matrix::PluginListener {
 public:
  void OnReportIssue(const matrix::Issue& issue) override {
    std::printf("[issue] %s\n", matrix::SummarizeIssue(issue).c_str());
    std::fflush(stdout);
  }
};

uv_tcp_t g_server, g_conn, g_client;
uv_connect_t g_connect;
uv_timer_t g_ping, g_reindex, g_load, g_quit;
char g_buffer[1024];
int g_echoes = 0;
matrix::uv::UvMonitor* g_monitor = nullptr;

void Alloc(uv_handle_t*, size_t, uv_buf_t* buf) { *buf = uv_buf_init(g_buffer, sizeof(g_buffer)); }

void Echo(uv_stream_t* stream, ssize_t n, const uv_buf_t* buf) {
  if (n <= 0) return;
  uv_buf_t out = uv_buf_init(buf->base, static_cast<unsigned>(n));
  uv_try_write(stream, &out, 1);
}

__attribute__((noinline)) void LoadHugeFile() { absl::SleepFor(absl::Milliseconds(1500)); }

__attribute__((noinline)) void RebuildIndex(uv_timer_t*) { Spin(absl::Milliseconds(300)); }

}  // namespace

int main() {
  auto config = matrix::TraceConfig::Builder()
                    .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
                    .UseChoreographer(false)
                    .EnableAnrTrace(true)
                    .SetLagThreshold(absl::Milliseconds(500))
                    .SetAnrThreshold(absl::Seconds(1))
                    .EnableEvilMethodTrace(true)
                    .SetEvilThreshold(absl::Milliseconds(200))
                    .Build();
  if (!config.ok()) return 1;
  auto trace = std::make_unique<matrix::TracePlugin>(*config);
  matrix::TracePlugin* plugin = trace.get();
  if (!matrix::Matrix::Init(matrix::Matrix::Builder()
                                .AddPlugin(std::move(trace))
                                .SetPluginListener(std::make_shared<Console>())
                                .Build())
           .ok() ||
      !plugin->Start().ok()) {  // On the loop's thread.
    return 1;
  }
  uv_loop_t* loop = uv_default_loop();
  auto monitor = matrix::uv::Attach(loop, plugin);  // The one line.
  if (!monitor.ok()) std::fprintf(stderr, "unmonitored: %s\n", monitor.status().ToString().c_str());
  if (monitor.ok()) g_monitor = monitor->get();

  sockaddr_in addr;
  uv_ip4_addr("127.0.0.1", 0, &addr);
  uv_tcp_init(loop, &g_server);
  uv_tcp_init(loop, &g_conn);
  uv_tcp_init(loop, &g_client);
  uv_tcp_bind(&g_server, reinterpret_cast<const sockaddr*>(&addr), 0);
  uv_listen(reinterpret_cast<uv_stream_t*>(&g_server), 1, [](uv_stream_t* server, int) {
    if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&g_conn)) == 0) {
      uv_read_start(reinterpret_cast<uv_stream_t*>(&g_conn), &Alloc, &Echo);
    }
  });
  sockaddr_storage bound;
  int len = sizeof(bound);
  uv_tcp_getsockname(&g_server, reinterpret_cast<sockaddr*>(&bound), &len);
  uv_tcp_connect(&g_connect, &g_client, reinterpret_cast<const sockaddr*>(&bound),
                 [](uv_connect_t*, int status) {
                   if (status != 0) return;
                   uv_read_start(reinterpret_cast<uv_stream_t*>(&g_client), &Alloc,
                                 [](uv_stream_t*, ssize_t n, const uv_buf_t*) {
                                   if (n > 0) ++g_echoes;
                                 });
                 });

  for (uv_timer_t* t : {&g_ping, &g_reindex, &g_load, &g_quit}) uv_timer_init(loop, t);
  uv_timer_start(&g_ping, [](uv_timer_t*) {
    static char ping[] = "ping";
    uv_buf_t buf = uv_buf_init(ping, 4);
    uv_try_write(reinterpret_cast<uv_stream_t*>(&g_client), &buf, 1);
  }, 50, 50);
  uv_timer_start(&g_reindex, &RebuildIndex, 500, 0);
  uv_timer_start(&g_load, [](uv_timer_t*) { LoadHugeFile(); }, 1000, 0);
  uv_timer_start(&g_quit, [](uv_timer_t* t) {
    if (g_monitor != nullptr) g_monitor->Detach();  // Before closing every handle.
    uv_walk(t->loop, [](uv_handle_t* h, void*) { if (!uv_is_closing(h)) uv_close(h, nullptr); },
            nullptr);
  }, 4000, 0);

  uv_run(loop, UV_RUN_DEFAULT);
  std::printf("echoes: %d\n", g_echoes);
  if (monitor.ok()) monitor->reset();
  uv_run(loop, UV_RUN_NOWAIT);
  uv_loop_close(loop);
  absl::SleepFor(absl::Milliseconds(300));  // Let the worker deliver the last reports.
  matrix::Matrix::Shutdown();
  return 0;
}

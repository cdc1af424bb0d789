// matrix::uv on a real libuv loop with real matrix threads, no display. The
// program runs a 10 ms timer, TCP echo traffic on loopback (a client writes
// every 20 ms, the server echoes, the client reads), a 300 ms slow timer
// callback (SlowTimerCallback, method-traced: this file is built with
// matrix_trace_methods), and a 1.5 s block in HangInUninstrumentedCode (a
// file built without tracing), and, at 3.2 s, a 2.5 s block in
// BlockInReadHandler (same file) inside the client's TCP read callback (an
// I/O callback, before libuv's check phase). The reports must show:
//   slow method: a report whose key names SlowTimerCallback, cost >= 290 ms,
//        and one naming SlowIdleCallback (a uv_idle_t callback, 300 ms);
//   no idle lag: uv_idle_t callbacks run on every turn, they are not idle
//        handlers (idle-handler tracing is on, with a 200 ms threshold);
//   ANR: cost >= 1 s (threshold), native stack naming HangInUninstrumentedCode,
//        scene "libuv" (the default scene named at attach);
//   ANR in the I/O callback: taken while it hangs (the stack names
//        BlockInReadHandler), one ANR per block (two in all);
//   dispatches: every tick and read ran in one; the waits were idle (the sum
//        of dispatch times is at least the blocks, and at least 600 ms
//        below the wall time: the program is otherwise idle for ~1.4 s);
//   the monitor's handles did not keep the loop alive and were closed.

#include <uv.h>

#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "e2e_util.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/uv/uv_monitor.h"
#include "uninstrumented.h"

namespace {

class SumListener : public matrix::LooperDispatchListener {
 public:
  void OnDispatchBegin(matrix::TimeTicks, const matrix::DispatchInfo&) override {}
  void OnDispatchEnd(matrix::TimeTicks begin, matrix::TimeTicks end) override {
    busy += end - begin;
  }
  absl::Duration busy;
};

struct Program {
  uv_loop_t* loop = nullptr;
  matrix::uv::UvMonitor* monitor = nullptr;
  uv_tcp_t server;
  uv_tcp_t server_conn;
  uv_tcp_t client;
  uv_connect_t connect;
  uv_timer_t tick;
  uv_timer_t writer;
  uv_timer_t slow;
  uv_timer_t hang;
  uv_timer_t quit;
  uv_timer_t idle_starter;
  uv_timer_t io_hang_arm;
  bool hang_next_read = false;
  bool io_hang_ran = false;
  uv_idle_t slow_idle;
  bool connected = false;
  int ticks = 0;
  int writes = 0;
  int reads = 0;      // Client-side read callbacks.
  size_t echoed = 0;  // Bytes back at the client.
  bool slow_ran = false;
  bool hang_ran = false;
  bool slow_idle_ran = false;
  char buffer[4096];
};

Program* ProgramOf(void* handle) {
  return static_cast<Program*>(static_cast<uv_handle_t*>(handle)->data);
}

void Alloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  Program* p = ProgramOf(handle);
  *buf = uv_buf_init(p->buffer, sizeof(p->buffer));
}

void OnServerRead(uv_stream_t* stream, ssize_t n, const uv_buf_t* buf) {
  if (n <= 0) return;
  auto* req = new uv_write_t;
  auto* copy = new char[n];
  std::memcpy(copy, buf->base, n);
  req->data = copy;
  uv_buf_t out = uv_buf_init(copy, static_cast<unsigned>(n));
  uv_write(req, stream, &out, 1, [](uv_write_t* r, int) {
    delete[] static_cast<char*>(r->data);
    delete r;
  });
}

void OnClientRead(uv_stream_t* stream, ssize_t n, const uv_buf_t*) {
  if (n <= 0) return;
  Program* p = ProgramOf(stream);
  ++p->reads;
  p->echoed += static_cast<size_t>(n);
  if (p->hang_next_read) {
    p->hang_next_read = false;
    e2e::BlockInReadHandler(absl::Milliseconds(2500));  // ANR in an I/O callback.
    p->io_hang_ran = true;
  }
}

__attribute__((noinline)) void SlowTimerCallback(uv_timer_t* timer) {
  e2e::SpinFor(absl::Milliseconds(300));
  ProgramOf(timer)->slow_ran = true;
}

// A uv_idle_t callback: runs once per loop turn (libuv's "idle" phase),
// stopped after its first, slow, run.
__attribute__((noinline)) void SlowIdleCallback(uv_idle_t* idle) {
  e2e::SpinFor(absl::Milliseconds(300));
  ProgramOf(idle)->slow_idle_ran = true;
  uv_idle_stop(idle);
}

void CloseAll(uv_loop_t* loop) {
  uv_walk(loop, [](uv_handle_t* h, void*) {
    if (!uv_is_closing(h)) uv_close(h, nullptr);
  }, nullptr);
}

TEST(UvE2ETest, TimersTcpSlowCallbackAndAnrOnARealLoop) {
  auto config = matrix::TraceConfig::Builder()
                    .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
                    .UseChoreographer(false)
                    .EnableAnrTrace(true)
                    .SetLagThreshold(absl::Milliseconds(500))
                    .SetAnrThreshold(absl::Seconds(1))
                    .EnableEvilMethodTrace(true)
                    .SetEvilThreshold(absl::Milliseconds(200))
                    .EnableIdleHandlerTrace(true)
                    .SetIdleHandlerThreshold(absl::Milliseconds(200))
                    .Build();
  ASSERT_TRUE(config.ok()) << config.status();
  matrix::AppState::Get()->ResetForTesting();
  e2e::TracedProgram traced(*config, e2e::MainLooper::kNone);
  ASSERT_TRUE(traced.status().ok()) << traced.status();
  matrix::TracePlugin* plugin = traced.plugin();
  e2e::CollectingListener* listener = &traced.listener();

  Program p;
  p.loop = uv_default_loop();
  auto monitor = matrix::uv::Attach(p.loop, plugin);  // The one line.
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  EXPECT_EQ((*monitor)->scene(), "libuv");
  p.monitor = monitor->get();
  SumListener sum;
  auto sum_registration = plugin->GetLooperMonitor()->AddListener(&sum);

  // TCP echo on loopback.
  for (uv_handle_t* h : {reinterpret_cast<uv_handle_t*>(&p.server),
                         reinterpret_cast<uv_handle_t*>(&p.server_conn),
                         reinterpret_cast<uv_handle_t*>(&p.client)}) {
    uv_tcp_init(p.loop, reinterpret_cast<uv_tcp_t*>(h));
    h->data = &p;
  }
  sockaddr_in addr;
  uv_ip4_addr("127.0.0.1", 0, &addr);
  ASSERT_EQ(uv_tcp_bind(&p.server, reinterpret_cast<const sockaddr*>(&addr), 0), 0);
  ASSERT_EQ(uv_listen(reinterpret_cast<uv_stream_t*>(&p.server), 1,
                      [](uv_stream_t* server, int status) {
                        ASSERT_EQ(status, 0);
                        Program* p = ProgramOf(server);
                        auto* conn = reinterpret_cast<uv_stream_t*>(&p->server_conn);
                        ASSERT_EQ(uv_accept(server, conn), 0);
                        uv_read_start(conn, &Alloc, &OnServerRead);
                      }),
            0);
  sockaddr_storage bound;
  int len = sizeof(bound);
  ASSERT_EQ(uv_tcp_getsockname(&p.server, reinterpret_cast<sockaddr*>(&bound), &len), 0);
  p.connect.data = &p;
  ASSERT_EQ(uv_tcp_connect(&p.connect, &p.client, reinterpret_cast<const sockaddr*>(&bound),
                           [](uv_connect_t* req, int status) {
                             ASSERT_EQ(status, 0);
                             Program* p = static_cast<Program*>(req->data);
                             p->connected = true;
                             uv_read_start(reinterpret_cast<uv_stream_t*>(&p->client), &Alloc,
                                           &OnClientRead);
                           }),
            0);

  for (uv_timer_t* t : {&p.tick, &p.writer, &p.slow, &p.hang, &p.quit, &p.idle_starter,
                        &p.io_hang_arm}) {
    uv_timer_init(p.loop, t);
    t->data = &p;
  }
  uv_timer_start(&p.tick, [](uv_timer_t* t) { ++ProgramOf(t)->ticks; }, 10, 10);
  uv_timer_start(&p.writer, [](uv_timer_t* t) {
    Program* p = ProgramOf(t);
    if (!p->connected) return;
    static char message[] = "ping";
    uv_buf_t buf = uv_buf_init(message, 4);
    if (uv_try_write(reinterpret_cast<uv_stream_t*>(&p->client), &buf, 1) == 4) ++p->writes;
  }, 20, 20);
  uv_timer_start(&p.slow, &SlowTimerCallback, 300, 0);
  uv_timer_start(&p.hang, [](uv_timer_t* t) {
    e2e::HangInUninstrumentedCode(absl::Milliseconds(1500));  // ANR.
    ProgramOf(t)->hang_ran = true;
  }, 1000, 0);
  uv_idle_init(p.loop, &p.slow_idle);
  p.slow_idle.data = &p;
  uv_timer_start(&p.idle_starter, [](uv_timer_t* t) {
    uv_idle_start(&ProgramOf(t)->slow_idle, &SlowIdleCallback);
  }, 2700, 0);
  uv_timer_start(&p.io_hang_arm, [](uv_timer_t* t) {
    ProgramOf(t)->hang_next_read = true;  // The next echo read blocks.
  }, 3200, 0);
  uv_timer_start(&p.quit, [](uv_timer_t* t) {
    // A uv_walk teardown would close the monitor's handles too: detach first.
    ProgramOf(t)->monitor->Detach();
    CloseAll(t->loop);
  }, 6000, 0);

  const absl::Time start = absl::Now();
  // Returns once every handle of the program is closed: ours (unref'ed) do
  // not keep it running.
  EXPECT_EQ(uv_run(p.loop, UV_RUN_DEFAULT), 0);
  const absl::Duration wall = absl::Now() - start;
  EXPECT_FALSE((*monitor)->attached());

  EXPECT_TRUE(p.slow_ran);
  EXPECT_TRUE(p.hang_ran);
  EXPECT_TRUE(p.slow_idle_ran);
  EXPECT_TRUE(p.io_hang_ran);
  EXPECT_GT(p.ticks, 50);  // ~6 s / 10 ms minus 4.3 s of blocking; generous.
  EXPECT_GT(p.writes, 40);
  EXPECT_GT(p.reads, 10);
  EXPECT_GE((*monitor)->dispatch_count(), static_cast<uint64_t>(p.ticks));
  monitor->reset();
  sum_registration = matrix::ObserverRegistration();
  uv_run(p.loop, UV_RUN_NOWAIT);  // Finishes closing the monitor's handles.
  EXPECT_EQ(uv_loop_close(p.loop), 0);
  EXPECT_GE(sum.busy, absl::Milliseconds(4590)) << "the four blocks";
  EXPECT_LE(sum.busy, wall - absl::Milliseconds(600)) << "waits must be idle; wall " << wall;

  auto is_anr = [](const matrix::Issue& i) {
    return i.proto().has_anr() && i.proto().anr().detail() == matrix::proto::ANR;
  };
  auto is_slow = [](const matrix::Issue& i) {
    return i.proto().has_evil_method() &&
           absl::StrContains(i.proto().evil_method().stack_key(), "SlowTimerCallback");
  };
  auto is_slow_idle = [](const matrix::Issue& i) {
    return i.proto().has_evil_method() &&
           absl::StrContains(i.proto().evil_method().stack_key(), "SlowIdleCallback");
  };
  auto has = [](const std::vector<matrix::Issue>& issues, auto pred) {
    for (const auto& issue : issues) {
      if (pred(issue)) return true;
    }
    return false;
  };
  auto stack_names = [](const matrix::Issue& i, const char* function) {
    for (const auto& frame : i.proto().anr().thread_stack().frames()) {
      if (absl::StrContains(frame.function(), function)) return true;
    }
    return false;
  };
  auto is_io_anr = [&](const matrix::Issue& i) {
    return is_anr(i) && stack_names(i, "BlockInReadHandler");
  };
  const bool reported = listener->WaitFor(
      [&](const auto& issues) {
        return has(issues, is_anr) && has(issues, is_slow) && has(issues, is_slow_idle) &&
               has(issues, is_io_anr);
      },
      absl::Seconds(15));
  std::vector<matrix::Issue> issues = listener->issues();
  std::string keys;
  for (const auto& issue : issues) {
    if (issue.proto().has_evil_method()) keys += issue.proto().evil_method().stack_key() + "\n";
  }
  ASSERT_TRUE(reported) << "slow-method keys:\n" << keys;

  for (const auto& issue : issues) {
    if (is_slow(issue) || is_slow_idle(issue)) {
      EXPECT_GE(issue.proto().evil_method().cost_ms(), 290);
    }
    EXPECT_FALSE(issue.proto().has_anr() &&
                 issue.proto().anr().detail() == matrix::proto::LAG_IDLE_HANDLER)
        << "a uv_idle_t callback is no idle handler";
  }
  const matrix::Issue* anr = nullptr;
  const matrix::Issue* io_anr = nullptr;
  int anrs = 0;
  std::string anr_stacks;
  for (const auto& issue : issues) {
    if (!is_anr(issue)) continue;
    ++anrs;
    for (const auto& frame : issue.proto().anr().thread_stack().frames()) {
      anr_stacks += frame.function() + "\n";
    }
    anr_stacks += "--\n";
    if (stack_names(issue, "HangInUninstrumentedCode")) anr = &issue;
    if (is_io_anr(issue)) io_anr = &issue;
  }
  EXPECT_EQ(anrs, 2) << "one ANR per block; stacks:\n" << anr_stacks;
  ASSERT_NE(io_anr, nullptr) << anr_stacks;
  EXPECT_GE(io_anr->proto().anr().cost_ms(), 1000);
  EXPECT_LT(io_anr->proto().anr().cost_ms(), 2500) << "taken while it hung";
  EXPECT_EQ(io_anr->proto().anr().message().callback(), "uv-dispatch");
  ASSERT_NE(anr, nullptr);
  EXPECT_GE(anr->proto().anr().cost_ms(), 1000);
  EXPECT_EQ(anr->proto().anr().scene(), "libuv");
  std::string stack;
  bool named = false;
  for (const auto& frame : anr->proto().anr().thread_stack().frames()) {
    stack += frame.function() + "\n";
    named |= absl::StrContains(frame.function(), "HangInUninstrumentedCode");
  }
  EXPECT_TRUE(named) << stack << anr->proto().anr().thread_stack().error();

  matrix::AppState::Get()->ResetForTesting();
}

}  // namespace

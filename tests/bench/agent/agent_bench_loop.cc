// agent_bench_loop: an unmodified loop (not linked to matrix-cpp) for
// matrix_agent_bench. With CALL poll (the default) each iteration is one
// blocking poll() (timeout -1) on a pipe that always holds a byte, so it
// returns at once: the loop is all wait/dispatch boundaries, the agent's
// worst case. The other calls are ones the agent interposes for the loop
// wait sites it learns, made the way ordinary work makes them: `syscall`,
// syscall(SYS_getppid) (not a futex wait: passed through); `read`, a write
// then a read of one byte on a pipe.
//
//   agent_bench_loop ITERATIONS [main|thread] [poll|syscall|read]
//
// Prints the loop's nanoseconds per iteration (CLOCK_MONOTONIC). "thread"
// runs the loop on a second thread (the agent passes its calls through).

#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

long g_iterations = 0;
const char* g_call = "poll";
double g_ns_per_iteration = 0;

double NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

void* Loop(void*) {
  int fds[2];
  if (pipe(fds) != 0 || write(fds[1], "x", 1) != 1) std::exit(3);
  struct pollfd pfd = {fds[0], POLLIN, 0};
  for (int i = 0; i < 1000; ++i) (void)poll(&pfd, 1, -1);  // Warm up (and start the agent).
  const bool use_syscall = std::strcmp(g_call, "syscall") == 0;
  const bool use_read = std::strcmp(g_call, "read") == 0;
  char byte = 0;
  if (use_read && read(fds[0], &byte, 1) != 1) std::exit(3);  // Empty: each read follows a write.
  const double start = NowNs();
  for (long i = 0; i < g_iterations; ++i) {
    if (use_syscall) {
      if (syscall(SYS_getppid) <= 0) std::exit(3);
    } else if (use_read) {
      if (write(fds[1], "x", 1) != 1 || read(fds[0], &byte, 1) != 1) std::exit(3);
    } else if (poll(&pfd, 1, -1) != 1) {
      std::exit(3);
    }
  }
  g_ns_per_iteration = (NowNs() - start) / static_cast<double>(g_iterations);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (g_iterations = std::atol(argv[1])) <= 0) {
    std::fprintf(stderr, "usage: agent_bench_loop ITERATIONS [main|thread] [poll|syscall|read]\n");
    return 2;
  }
  if (argc > 3) g_call = argv[3];
  if (std::strcmp(g_call, "poll") != 0 && std::strcmp(g_call, "syscall") != 0 &&
      std::strcmp(g_call, "read") != 0) {
    std::fprintf(stderr, "agent_bench_loop: unknown call \"%s\"\n", g_call);
    return 2;
  }
  if (argc > 2 && std::strcmp(argv[2], "thread") == 0) {
    pthread_t thread;
    if (pthread_create(&thread, nullptr, &Loop, nullptr) != 0) return 3;
    pthread_join(thread, nullptr);
  } else {
    Loop(nullptr);
  }
  std::printf("%.2f\n", g_ns_per_iteration);
  return 0;
}

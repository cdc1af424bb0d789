// agent_target: a small poll-loop program for matrix-run's tests. NOT linked
// to matrix-cpp: the agent is preloaded by matrix-run.
//
//   agent_target stall MS     a poll loop (20 ms timeouts on a pipe) that stalls
//                             once in StallInKnownFunction() for MS ms
//   agent_target signals MS   the same, with the program's own SIGQUIT and
//                             SIGPROF handlers; checks they still run
//   agent_target fork MS      polls, forks; the child (no exec) runs the stalling
//                             loop and exit()s; the parent waits, then runs it too
//   agent_target fork-early MS  the same without the polls before fork()
//   agent_target exec MS      forks and execs `agent_target stall MS` (the child
//                             is another program: the agent must stay dormant)
//   agent_target threads MS   a thread started before main() polls and stalls
//                             too; the main thread runs the stalling loop
//   agent_target startup MS   sleeps MS ms before its first blocking wait, then
//                             runs the poll loop without a stall
//   agent_target nowait       computes without any blocking wait, prints, exits
//
// Exit status 0 on success, 3 when a check of the program itself failed.

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int64_t NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

std::atomic<int> g_sigquit{0};
std::atomic<int> g_sigprof{0};

}  // namespace

// Exported and never inlined: the ANR stack must name them.
extern "C" __attribute__((noinline, visibility("default"))) void StallInKnownFunction(int ms) {
  const int64_t end = NowMs() + ms;
  volatile uint64_t sink = 0;
  while (NowMs() < end) {
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<uint64_t>(i);
  }
  asm volatile("" ::: "memory");
}

extern "C" __attribute__((noinline, visibility("default"))) void OtherThreadStall(int ms) {
  const int64_t end = NowMs() + ms;
  volatile uint64_t sink = 0;
  while (NowMs() < end) sink = sink + 1;
  asm volatile("" ::: "memory");
}

namespace {

// 10 iterations of a real poll loop, the stall, 10 more.
void RunLoop(int stall_ms) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(3);
  for (int i = 0; i < 21; ++i) {
    struct pollfd pfd = {fds[0], POLLIN, 0};
    (void)poll(&pfd, 1, 20);
    if (i == 10) StallInKnownFunction(stall_ms);
  }
  close(fds[0]);
  close(fds[1]);
}

std::atomic<bool> g_thread_ran{false};

void* EarlyThread(void*) {
  int fds[2];
  if (pipe(fds) != 0) return nullptr;
  for (int i = 0;; ++i) {
    struct pollfd pfd = {fds[0], POLLIN, 0};
    (void)poll(&pfd, 1, 10);
    if (i == 5) OtherThreadStall(300);
    g_thread_ran.store(true);
  }
  return nullptr;
}

bool g_threads_mode = false;

// Before main(): start a polling thread when asked for the "threads" mode.
__attribute__((constructor)) void StartEarlyThread() {
  const char* mode = std::getenv("AGENT_TARGET_EARLY_THREAD");
  if (mode == nullptr || std::strcmp(mode, "1") != 0) return;
  g_threads_mode = true;
  pthread_t thread;
  if (pthread_create(&thread, nullptr, &EarlyThread, nullptr) == 0) pthread_detach(thread);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: agent_target stall|signals|fork|exec|threads MS | nowait\n");
    return 2;
  }
  const char* mode = argv[1];
  const int ms = argc > 2 ? std::atoi(argv[2]) : 0;
  if (std::strcmp(mode, "stall") == 0) {
    RunLoop(ms);
  } else if (std::strcmp(mode, "signals") == 0) {
    struct sigaction action = {};
    action.sa_handler = [](int) { g_sigquit.fetch_add(1); };
    sigaction(SIGQUIT, &action, nullptr);
    action.sa_handler = [](int) { g_sigprof.fetch_add(1); };
    sigaction(SIGPROF, &action, nullptr);
    RunLoop(ms);
    raise(SIGQUIT);
    raise(SIGPROF);
    if (g_sigquit.load() != 1 || g_sigprof.load() != 1) {
      std::printf("own handlers: SIGQUIT %d SIGPROF %d\n", g_sigquit.load(), g_sigprof.load());
      return 3;
    }
    std::printf("own handlers ran\n");
  } else if (std::strcmp(mode, "fork") == 0 || std::strcmp(mode, "fork-early") == 0) {
    // "fork": a few waits first, so the agent is running when the process
    // forks; "fork-early": the fork comes before the agent started.
    if (std::strcmp(mode, "fork") == 0) {
      for (int i = 0; i < 3; ++i) (void)poll(nullptr, 0, 10);
    }
    std::fflush(nullptr);
    const pid_t child = fork();
    if (child == 0) {
      RunLoop(ms);
      std::printf("child %d done\n", static_cast<int>(getpid()));
      std::exit(0);  // Runs the agent's destructor in the child.
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      std::printf("child failed: %d\n", status);
      return 3;
    }
    RunLoop(ms);
  } else if (std::strcmp(mode, "exec") == 0) {
    std::fflush(nullptr);
    const pid_t child = fork();
    if (child == 0) {
      char stall[] = "stall";
      char* args[] = {argv[0], stall, argv[2], nullptr};
      execv("/proc/self/exe", args);
      _exit(127);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      std::printf("child failed: %d\n", status);
      return 3;
    }
    std::printf("exec child %d done\n", static_cast<int>(child));
  } else if (std::strcmp(mode, "threads") == 0) {
    if (!g_threads_mode) {
      std::printf("set AGENT_TARGET_EARLY_THREAD=1\n");
      return 3;
    }
    RunLoop(ms);
    if (!g_thread_ran.load()) return 3;
  } else if (std::strcmp(mode, "startup") == 0) {
    // nanosleep is not a wait the agent times: the startup lasts until poll.
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0) {
    }
    RunLoop(0);
  } else if (std::strcmp(mode, "nowait") == 0) {
    uint64_t x = 1;
    for (int i = 0; i < 1000000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    std::printf("nowait %llu\n", static_cast<unsigned long long>(x % 1000));
  } else {
    std::fprintf(stderr, "agent_target: unknown mode %s\n", mode);
    return 2;
  }
  return 0;
}

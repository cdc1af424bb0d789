// agent_target: a small poll-loop program for matrix-run's tests. NOT linked
// to matrix-cpp: the agent is preloaded by matrix-run.
//
//   agent_target stall MS     a poll loop (20 ms timeouts on a pipe) that stalls
//                             once in StallInKnownFunction() for MS ms
//   agent_target sleep MS     the same loop that sleeps once in SleepInHandler()
//                             for MS ms (nanosleep, resumed after each EINTR)
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
//   agent_target last MS END  a few polls, a last busy dispatch of MS ms (in
//                             StallInKnownFunction), a 1 ms poll that ends it,
//                             then at once END: exit (std::exit), _exit, exec
//                             (execl of /bin/true) or sigterm (kill(getpid(),
//                             SIGTERM), default action). With END "inside-" +
//                             END (inside-exit, inside-_exit, ...) the end
//                             comes inside the busy dispatch, without the poll.
//   agent_target hold MS      a few polls, prints "stalling", then a busy
//                             dispatch of MS ms (in StallInKnownFunction),
//                             then polls until a signal ends it
//   agent_target wait KIND IDLE LAG ANR SLEEP [READ]
//                             an event loop that waits without poll, KIND: cond
//                             (pthread_cond_wait), sem (sem_wait), eventfd (read of an eventfd),
//                             futex (std::atomic<uint32_t>::wait: syscall(SYS_futex) in libstdc++),
//                             pace (nanosleep every 10 ms, no events). After one poll (a toolkit's
//                             round trip: the agent starts) and 6 quick events, it sits idle IDLE
//                             ms, then handles a busy event of LAG ms, one of ANR ms (both in
//                             StallInKnownFunction) and a sleep of SLEEP ms in SleepInHandler, 300
//                             ms apart; with READ, then a blocking read of a pipe written READ ms
//                             later, in ReadInHandler. AGENT_TARGET_NO_POLL=1: without the first
//                             poll (the agent starts at the loop's learned wait). Prints "start
//                             <name> <epoch ms>" as each begins.
//   agent_target count MS FILE [CHILD_FILE]  the program's own SIGINT, SIGHUP
//                             and SIGTERM handlers count the signals (as a
//                             program that asks "really quit?" at the first
//                             ^C would); prints "counting" once they are
//                             installed, spins until one arrives and then MS
//                             ms more (time for a second copy), writes
//                             "SIGINT n SIGHUP m SIGTERM k" to FILE and exits
//                             0 (after 60 s without a signal too). With
//                             CHILD_FILE, a forked child (in the program's
//                             process group) counts what reaches it the same
//                             way until the program is done, and writes its
//                             counts there before the program exits.
//                             AGENT_TARGET_CPU=N: the program runs on CPU N
//
// Exit status 0 on success, 3 when a check of the program itself failed.

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

int64_t NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

std::atomic<int> g_sigquit{0};
std::atomic<int> g_sigprof{0};
volatile sig_atomic_t g_sigint_count = 0;
volatile sig_atomic_t g_sighup_count = 0;
volatile sig_atomic_t g_sigterm_count = 0;

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

// A wait inside a handler: its own call site, not the loop's.
extern "C" __attribute__((noinline, visibility("default"))) void SleepInHandler(int ms) {
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
  }
  asm volatile("" ::: "memory");
}

// A blocking read inside a handler: a pipe that another thread writes `ms`
// later (a handler waiting for a child process's output).
extern "C" __attribute__((noinline, visibility("default"))) void ReadInHandler(int ms) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(3);
  std::thread writer([&] {
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
    if (write(fds[1], "x", 1) != 1) std::exit(3);
  });
  char byte = 0;
  while (read(fds[0], &byte, 1) != 1) {
  }
  writer.join();
  close(fds[0]);
  close(fds[1]);
  asm volatile("" ::: "memory");
}

namespace {

// 10 iterations of a real poll loop, the stall (`handler`), 10 more.
void RunLoop(int stall_ms, void (*handler)(int) = StallInKnownFunction) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(3);
  for (int i = 0; i < 21; ++i) {
    struct pollfd pfd = {fds[0], POLLIN, 0};
    (void)poll(&pfd, 1, 20);
    if (i == 10) handler(stall_ms);
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

// The "wait" mode: events handed to the main thread's loop.
struct Event {
  const char* name;  // "tick", "lag", "anr", "sleep", "read", "quit".
  int ms = 0;
};
struct Step {
  int delay_ms;  // After the previous event was handled.
  Event event;
};

int64_t EpochMs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void SleepMs(int ms) {
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
  }
}

// Returns false on "quit".
bool Handle(const Event& event) {
  if (std::strcmp(event.name, "tick") == 0) return true;
  if (std::strcmp(event.name, "quit") == 0) return false;
  std::printf("start %s %lld\n", event.name, static_cast<long long>(EpochMs()));
  if (std::strcmp(event.name, "sleep") == 0) {
    SleepInHandler(event.ms);
  } else if (std::strcmp(event.name, "read") == 0) {
    ReadInHandler(event.ms);
  } else {
    StallInKnownFunction(event.ms);
  }
  return true;
}

class EventQueue {
 public:
  explicit EventQueue(const std::string& kind) : kind_(kind) {
    pthread_mutex_init(&mutex_, nullptr);
    pthread_cond_init(&cond_, nullptr);
    sem_init(&sem_, 0, 0);
    eventfd_ = eventfd(0, 0);
  }

  // Producer thread.
  void Post(const Event& event) {
    pthread_mutex_lock(&mutex_);
    events_.push_back(event);
    pthread_cond_signal(&cond_);
    pthread_mutex_unlock(&mutex_);
    if (kind_ == "sem") sem_post(&sem_);
    if (kind_ == "futex") {
      posted_.fetch_add(1);
      posted_.notify_one();
    }
    if (kind_ == "eventfd") {
      const uint64_t one = 1;
      if (write(eventfd_, &one, sizeof(one)) != sizeof(one)) std::exit(3);
    }
  }

  // The main thread's loop: each kind waits in its own call.
  void Run() {
    for (;;) {
      if (kind_ == "sem") {
        while (sem_wait(&sem_) != 0) {
        }
      } else if (kind_ == "eventfd") {
        uint64_t count = 0;
        if (read(eventfd_, &count, sizeof(count)) != sizeof(count)) std::exit(3);
      } else if (kind_ == "futex") {
        // Waits in the kernel while nothing new was posted.
        posted_.wait(taken_);
        taken_ = posted_.load();
      }
      pthread_mutex_lock(&mutex_);
      if (kind_ == "cond") {
        while (events_.empty()) pthread_cond_wait(&cond_, &mutex_);
      }
      std::deque<Event> ready;
      ready.swap(events_);
      pthread_mutex_unlock(&mutex_);
      for (const Event& event : ready) {
        const bool go_on = Handle(event);
        handled_.fetch_add(1);
        if (!go_on) return;
      }
    }
  }

  int handled() const { return handled_.load(); }

 private:
  const std::string kind_;
  pthread_mutex_t mutex_;
  pthread_cond_t cond_;
  sem_t sem_;
  int eventfd_ = -1;
  std::deque<Event> events_;
  std::atomic<int> handled_{0};
  std::atomic<uint32_t> posted_{0};  // futex: events posted so far.
  uint32_t taken_ = 0;               // futex: the count the loop last saw.
};

int RunWaitLoop(const std::string& kind, const std::vector<Step>& steps) {
  // A toolkit's first round trip: one blocking poll, so the agent starts and
  // watches the waits that follow.
  const char* no_poll = std::getenv("AGENT_TARGET_NO_POLL");
  if (no_poll == nullptr || std::strcmp(no_poll, "1") != 0) (void)poll(nullptr, 0, 1);
  if (kind == "pace") {
    // A game loop paced by nanosleep: no events, the schedule by time.
    size_t next = 0;
    int64_t due = NowMs() + steps[0].delay_ms;
    for (;;) {
      struct timespec frame = {0, 10 * 1000000L};
      nanosleep(&frame, nullptr);
      if (NowMs() < due) continue;
      if (!Handle(steps[next].event)) return 0;
      if (++next == steps.size()) return 0;
      due = NowMs() + steps[next].delay_ms;
    }
  }
  if (kind != "cond" && kind != "sem" && kind != "eventfd" && kind != "futex") return 2;
  EventQueue queue(kind);
  std::thread producer([&] {
    int handled = 0;
    for (const Step& step : steps) {
      SleepMs(step.delay_ms);
      queue.Post(step.event);
      ++handled;
      while (queue.handled() < handled) SleepMs(5);
    }
  });
  queue.Run();
  producer.join();
  return 0;
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

// "signals": the program's own SIGQUIT and SIGPROF handlers still run.
int RunSignals(int ms) {
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
  return 0;
}

// Waits for `child`; false (printed) unless it exited with status 0.
bool ChildSucceeded(pid_t child) {
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::printf("child failed: %d\n", status);
    return false;
  }
  return true;
}

// "fork": a few waits first, so the agent is running when the process
// forks; "fork-early": the fork comes before the agent started. The child
// and then the parent run the loop.
int RunFork(bool early, int ms) {
  if (!early) {
    for (int i = 0; i < 3; ++i) (void)poll(nullptr, 0, 10);
  }
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    RunLoop(ms);
    std::printf("child %d done\n", static_cast<int>(getpid()));
    std::exit(0);  // Runs the agent's destructor in the child.
  }
  if (!ChildSucceeded(child)) return 3;
  RunLoop(ms);
  return 0;
}

// "exec": a child execs this program in the "stall" mode for `ms_arg`.
int RunExec(char* self, char* ms_arg) {
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    char stall[] = "stall";
    char* args[] = {self, stall, ms_arg, nullptr};
    execv("/proc/self/exe", args);
    _exit(127);
  }
  if (!ChildSucceeded(child)) return 3;
  std::printf("exec child %d done\n", static_cast<int>(child));
  return 0;
}

// "wait KIND IDLE LAG ANR SLEEP [READ]": RunWaitLoop's script.
int RunWait(int argc, char** argv) {
  std::vector<Step> steps;
  // Six quick events to learn the loop's wait from, 100 ms apart: libstdc++'s
  // std::atomic<T>::wait spins and yields before it makes the futex call,
  // and on a loaded machine the yields alone can outlast a shorter gap.
  for (int i = 0; i < 6; ++i) steps.push_back({100, {"tick"}});
  steps.push_back({std::atoi(argv[3]), {"lag", std::atoi(argv[4])}});
  steps.push_back({300, {"anr", std::atoi(argv[5])}});
  steps.push_back({300, {"sleep", std::atoi(argv[6])}});
  if (argc == 8) steps.push_back({300, {"read", std::atoi(argv[7])}});
  steps.push_back({300, {"quit"}});
  return RunWaitLoop(argv[2], steps);
}

// "last MS END": a few waits, a stall of `ms`, then the process ends by
// `end` (exit, _exit, exec, sigterm), after one more wait unless the end is
// "inside-..." (the stall is the dispatch in progress).
int RunLast(int ms, std::string end) {
  const bool inside = end.rfind("inside-", 0) == 0;
  if (inside) end = end.substr(7);
  for (int i = 0; i < 5; ++i) (void)poll(nullptr, 0, 10);
  StallInKnownFunction(ms);
  if (!inside) (void)poll(nullptr, 0, 1);
  std::fflush(nullptr);
  if (end == "exit") {
    std::exit(0);
  } else if (end == "_exit") {
    _exit(0);
  } else if (end == "exec") {
    execl("/bin/true", "true", static_cast<char*>(nullptr));
    return 3;
  } else if (end == "sigterm") {
    kill(getpid(), SIGTERM);
    for (;;) pause();
  }
  std::fprintf(stderr, "agent_target: unknown end %s\n", end.c_str());
  return 2;
}

// "hold MS": the process is to end by a signal, during or after the stall.
int RunHold(int ms) {
  for (int i = 0; i < 5; ++i) (void)poll(nullptr, 0, 10);
  std::printf("stalling\n");
  std::fflush(nullptr);
  StallInKnownFunction(ms);
  for (;;) (void)poll(nullptr, 0, 100);
}

// "startup MS": nanosleep is not a wait the agent times: the startup lasts
// until poll.
int RunStartup(int ms) {
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&pause, &pause) != 0) {
  }
  RunLoop(0);
  return 0;
}

// Writes "SIGINT n SIGHUP m SIGTERM k" to `file`. False when it cannot.
bool WriteCounts(const char* file) {
  FILE* out = std::fopen(file, "w");
  if (out == nullptr) return false;
  std::fprintf(out, "SIGINT %d SIGHUP %d SIGTERM %d\n", static_cast<int>(g_sigint_count),
               static_cast<int>(g_sighup_count), static_cast<int>(g_sigterm_count));
  return std::fclose(out) == 0;
}

bool AnyCounted() { return g_sigint_count > 0 || g_sighup_count > 0 || g_sigterm_count > 0; }

// The counting child of "count MS FILE CHILD_FILE": counts (with the
// handlers it inherited) until `done` reads end of file (the program is
// done) and, after a signal, `ms` more; then writes `file`.
[[noreturn]] void CountInChild(int ms, int done, const char* file) {
  int64_t end = 0;
  bool program_done = false;
  while (!program_done || (end != 0 && NowMs() < end)) {
    struct pollfd pfd = {done, POLLIN, 0};
    if (!program_done && poll(&pfd, 1, 20) > 0) {
      char byte;
      program_done = read(done, &byte, 1) == 0;
    } else if (program_done) {
      (void)poll(nullptr, 0, 20);
    }
    if (end == 0 && AnyCounted()) end = NowMs() + ms;
  }
  _exit(WriteCounts(file) ? 0 : 3);
}

// "count MS FILE [CHILD_FILE]": counts SIGINT, SIGHUP and SIGTERM with
// handlers of its own, from the first signal for `ms` more, and writes the
// counts to `file`; with `child_file`, a child counts too.
int RunCount(int ms, const char* file, const char* child_file) {
  struct sigaction action = {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = [](int) { g_sigint_count = g_sigint_count + 1; };
  sigaction(SIGINT, &action, nullptr);
  action.sa_handler = [](int) { g_sighup_count = g_sighup_count + 1; };
  sigaction(SIGHUP, &action, nullptr);
  action.sa_handler = [](int) { g_sigterm_count = g_sigterm_count + 1; };
  sigaction(SIGTERM, &action, nullptr);
  // AGENT_TARGET_CPU=N: the program alone on CPU N (its senders elsewhere):
  // each copy it is sent is taken at once, none waits for it to be
  // scheduled.
  if (const char* cpu = std::getenv("AGENT_TARGET_CPU"); cpu != nullptr) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(std::atoi(cpu), &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) return 3;
  }
  int done[2] = {-1, -1};
  pid_t child = -1;
  if (child_file != nullptr) {
    if (pipe(done) != 0) return 3;
    child = fork();
    if (child < 0) return 3;
    if (child == 0) {
      close(done[1]);
      CountInChild(ms, done[0], child_file);
    }
    close(done[0]);
  }
  std::printf("counting\n");
  std::fflush(nullptr);
  const int64_t give_up = NowMs() + 60000;
  int64_t end = 0;
  // Busy, not asleep: a signal is taken as soon as it arrives (on the way
  // back to user space), so a second copy sent a few microseconds later is
  // counted rather than merged into the first while that one is pending.
  while (end == 0 || NowMs() < end) {
    if (end == 0 && AnyCounted()) end = NowMs() + ms;
    if (end == 0 && NowMs() > give_up) break;
  }
  bool ok = WriteCounts(file);
  if (child > 0) {
    close(done[1]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok ? 0 : 3;
}

// "nowait": work without any wait.
int RunNoWait() {
  uint64_t x = 1;
  for (int i = 0; i < 1000000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  std::printf("nowait %llu\n", static_cast<unsigned long long>(x % 1000));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: agent_target stall|signals|fork|exec|threads MS | nowait\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int ms = argc > 2 ? std::atoi(argv[2]) : 0;
  if (mode == "stall") {
    RunLoop(ms);
    return 0;
  }
  if (mode == "sleep") {
    RunLoop(ms, SleepInHandler);
    return 0;
  }
  if (mode == "signals") return RunSignals(ms);
  if (mode == "fork" || mode == "fork-early") return RunFork(mode == "fork-early", ms);
  if (mode == "exec") return RunExec(argv[0], argv[2]);
  if (mode == "threads") {
    if (!g_threads_mode) {
      std::printf("set AGENT_TARGET_EARLY_THREAD=1\n");
      return 3;
    }
    RunLoop(ms);
    return g_thread_ran.load() ? 0 : 3;
  }
  if (mode == "startup") return RunStartup(ms);
  if (mode == "wait" && (argc == 7 || argc == 8)) return RunWait(argc, argv);
  if (mode == "last" && argc == 4) return RunLast(ms, argv[3]);
  if (mode == "hold") return RunHold(ms);
  if (mode == "nowait") return RunNoWait();
  if (mode == "count" && (argc == 4 || argc == 5)) {
    return RunCount(ms, argv[3], argc == 5 ? argv[4] : nullptr);
  }
  std::fprintf(stderr, "agent_target: unknown mode %s\n", mode.c_str());
  return 2;
}

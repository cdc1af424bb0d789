// libpoll_event_stall.so: a test tool that freezes an SDL 2 program inside
// its event handling. Preloaded after the agent, it interposes
// SDL_PollEvent: once, on the first call at least POLL_EVENT_STALL_AFTER_MS
// (default 3000) after the first call, it spins POLL_EVENT_STALL_MS (default
// 6000) on the calling thread before calling SDL's function, and prints
//   poll-event-stall: stalled <ms> ms at <ms> ms since the first call
// A game's main thread then stops drawing for that long while busy (no
// wait), as a stall in its own input handling would.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*PollEvent)(void*);

static double NowMs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double EnvMs(const char* name, double fallback) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? atof(v) : fallback;
}

int SDL_PollEvent(void* event) {
  static PollEvent real;
  static double first = -1;
  static int stalled;
  if (real == NULL) real = (PollEvent)dlsym(RTLD_NEXT, "SDL_PollEvent");
  const double now = NowMs();
  if (first < 0) first = now;
  if (!stalled && now - first >= EnvMs("POLL_EVENT_STALL_AFTER_MS", 3000)) {
    stalled = 1;
    const double stall = EnvMs("POLL_EVENT_STALL_MS", 6000);
    const double begin = NowMs();
    while (NowMs() - begin < stall) {
    }
    fprintf(stderr, "poll-event-stall: stalled %.0f ms at %.0f ms since the first call\n",
            NowMs() - begin, begin - first);
  }
  return real(event);
}

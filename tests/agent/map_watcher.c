// map_watcher OUT -- COMMAND [ARGS...]
//
// Runs COMMAND and writes to OUT the milliseconds (CLOCK_MONOTONIC, one
// decimal) from just before it was started to the X server's first MapNotify
// of a top-level window (a child of the root), or -1 when none came. The
// startup tests compare it with the startup the agent reported: the server's
// own account of when the window was on screen, seen at a real-time priority
// so that a loaded machine does not delay it. Exits with COMMAND's status
// (128 + signal when killed).

#define _GNU_SOURCE  // SCHED_RESET_ON_FORK
#include <X11/Xlib.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double NowMs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fprintf(stderr, "usage: map_watcher OUT -- COMMAND [ARGS...]\n");
    return 2;
  }
  Display* display = XOpenDisplay(NULL);
  if (display == NULL) {
    fprintf(stderr, "map_watcher: cannot open the display\n");
    return 2;
  }
  const Window root = DefaultRootWindow(display);
  XSelectInput(display, root, SubstructureNotifyMask);
  XSync(display, False);
  // Its clock must not lag on a loaded machine: a real-time priority (as
  // root; best effort otherwise) wakes it as soon as the server's MapNotify
  // arrives. Its children run as usual (SCHED_RESET_ON_FORK).
  struct sched_param priority = {.sched_priority = 1};
  sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &priority);
  const double start = NowMs();
  const pid_t child = fork();
  if (child == 0) {
    close(ConnectionNumber(display));
    execvp(argv[3], argv + 3);
    perror("map_watcher: exec");
    _exit(127);
  }
  double mapped_ms = -1;
  int status = 0;
  for (;;) {
    while (XPending(display) > 0) {
      XEvent event;
      XNextEvent(display, &event);
      if (event.type == MapNotify && event.xmap.event == root && mapped_ms < 0) {
        mapped_ms = NowMs() - start;
      }
    }
    if (waitpid(child, &status, WNOHANG) == child) break;
    struct pollfd fd = {ConnectionNumber(display), POLLIN, 0};
    poll(&fd, 1, 20);
  }
  FILE* out = fopen(argv[1], "w");
  if (out != NULL) {
    fprintf(out, "%.1f\n", mapped_ms);
    fclose(out);
  }
  XCloseDisplay(display);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

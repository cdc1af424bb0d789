/* symbolize_target: a GLib loop whose one timeout callback hangs for
 * STALL_MS ms of CPU time in ComputeLayoutForever, then the loop quits. NOT
 * linked to matrix-cpp (matrix-run preloads the agent). The build strips a
 * copy of it (tests/tools/CMakeLists.txt) and keeps its debug file apart, so
 * the program's frames have no names on the host: symbolize_e2e_test names
 * them off it.
 *
 *   symbolize_target STALL_MS
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static GMainLoop* g_loop = NULL;
static int g_stall_ms = 0;

static gint64 ThreadCpuNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (gint64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One call site, a system call: a stack captured in the loop is almost
 * always inside clock_gettime, returning to the same address here. */
static __attribute__((noinline)) void ComputeLayoutForever(gint64 ns) {
  struct timespec ts;
  const gint64 end = ThreadCpuNs() + ns;
  do {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* spin-line */
  } while ((gint64)ts.tv_sec * 1000000000 + ts.tv_nsec < end);
}

static gboolean Quit(gpointer data) {
  (void)data;
  g_main_loop_quit(g_loop);
  return G_SOURCE_REMOVE;
}

static __attribute__((noinline)) gboolean OnLayoutTimeout(gpointer data) {
  (void)data;
  ComputeLayoutForever((gint64)g_stall_ms * 1000000);
  g_timeout_add(300, Quit, NULL);
  return G_SOURCE_REMOVE;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: symbolize_target STALL_MS\n");
    return 2;
  }
  g_stall_ms = atoi(argv[1]);
  g_loop = g_main_loop_new(NULL, FALSE);
  g_timeout_add(300, OnLayoutTimeout, NULL);
  g_main_loop_run(g_loop);
  g_main_loop_unref(g_loop);
  return 0;
}

/* agent_glib_target: a GLib main loop (no GTK) for matrix-run's tests. NOT
 * linked to matrix-cpp: the agent is preloaded by matrix-run.
 *
 *   agent_glib_target IDLE_MS STALL_MS
 *     An idle callback does 2 ms of work per call for IDLE_MS ms, keeping the
 *     loop busy (GLib polls with timeout 0 while it is pending), beside a
 *     50 ms heartbeat timeout. Then one timeout callback, SlowCallback, is
 *     busy STALL_MS ms, and the loop quits 300 ms later.
 *
 * Prints "heartbeat_max_gap_ms N": the longest the 50 ms heartbeat waited
 * while the idle work ran (the loop kept answering when it stays small).
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>

static GMainLoop* g_loop = NULL;
static gint64 g_idle_end = 0;
static gint64 g_last_beat = 0;
static gint64 g_max_gap = 0;
static int g_stall_ms = 0;

static void Spin(gint64 us) {
  const gint64 end = g_get_monotonic_time() + us;
  while (g_get_monotonic_time() < end) {
  }
}

static gboolean Quit(gpointer data) {
  (void)data;
  g_main_loop_quit(g_loop);
  return G_SOURCE_REMOVE;
}

__attribute__((noinline)) gboolean SlowCallback(gpointer data) {
  (void)data;
  Spin((gint64)g_stall_ms * 1000);
  g_timeout_add(300, Quit, NULL);
  return G_SOURCE_REMOVE;
}

static gboolean Heartbeat(gpointer data) {
  (void)data;
  const gint64 now = g_get_monotonic_time();
  if (g_idle_end == 0) return G_SOURCE_CONTINUE;
  if (g_last_beat != 0 && now <= g_idle_end && now - g_last_beat > g_max_gap) {
    g_max_gap = now - g_last_beat;
  }
  g_last_beat = now;
  return now <= g_idle_end ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

__attribute__((noinline)) gboolean IdleWork(gpointer data) {
  (void)data;
  Spin(2000);
  if (g_get_monotonic_time() < g_idle_end) return G_SOURCE_CONTINUE;
  printf("heartbeat_max_gap_ms %lld\n", (long long)(g_max_gap / 1000));
  fflush(stdout);
  g_timeout_add(100, SlowCallback, NULL);
  return G_SOURCE_REMOVE;
}

static gboolean Begin(gpointer data) {
  const int idle_ms = GPOINTER_TO_INT(data);
  g_idle_end = g_get_monotonic_time() + (gint64)idle_ms * 1000;
  g_last_beat = g_get_monotonic_time();
  g_idle_add(IdleWork, NULL);
  return G_SOURCE_REMOVE;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: agent_glib_target IDLE_MS STALL_MS\n");
    return 2;
  }
  g_stall_ms = atoi(argv[2]);
  g_loop = g_main_loop_new(NULL, FALSE);
  g_timeout_add(50, Heartbeat, NULL);
  /* A few quiet iterations first: the loop's blocking poll is seen. */
  g_timeout_add(300, Begin, GINT_TO_POINTER(atoi(argv[1])));
  g_main_loop_run(g_loop);
  g_main_loop_unref(g_loop);
  return 0;
}

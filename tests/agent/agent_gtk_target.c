/* agent_gtk_target: a small GTK 3 program for matrix-run's tests. NOT linked
 * to matrix-cpp: the agent is preloaded by matrix-run.
 *
 *   agent_gtk_target MS [SLEEP_MS [STALL_MS]]
 *                         sleeps SLEEP_MS ms (default 0) before gtk_init, then
 *                         opens window "First", redrawn every frame (a tick
 *                         callback queues a draw); after MS ms opens a second
 *                         window "Second" (also animated) and destroys the
 *                         first; quits MS ms later. With STALL_MS, once
 *                         "First" has drawn for MS / 2 ms (frames at 60 Hz),
 *                         a timeout is busy STALL_MS ms (the animation
 *                         freezes: frozen_frame_e2e_test), and "Second" opens
 *                         MS / 2 ms after the stall. The stall is armed by
 *                         frames drawn, not time since start: on a loaded
 *                         machine the first frame can come late, and a stall
 *                         before it freezes no animation.
 *
 * Prints "refresh_mhz N" (gdk_monitor_get_refresh_rate of the first window's
 * monitor, 0 when unknown), "frames_second N" and "frames_third N" (frames
 * drawn by the second window before and after it was re-realized), then exits 0.
 */
#include <gtk/gtk.h>
#include <stdio.h>
#include <stdlib.h>

static int g_ms = 1500;
static GtkWidget* g_first = NULL;
static GtkWidget* g_second = NULL;
static long g_second_frames = 0;
static long g_third_frames = 0;
static int g_rerealized = 0;
static int g_stall_ms = 0;
static long g_first_frames = 0;

static gboolean OpenSecond(gpointer data);

static gboolean Stall(gpointer data) {
  (void)data;
  const gint64 end = g_get_monotonic_time() + (gint64)g_stall_ms * 1000;
  while (g_get_monotonic_time() < end) {
  }
  g_timeout_add(g_ms / 2, OpenSecond, NULL);
  return G_SOURCE_REMOVE;
}

static gboolean Tick(GtkWidget* widget, GdkFrameClock* clock, gpointer data) {
  (void)clock;
  (void)data;
  if (widget == g_first && ++g_first_frames == (long)g_ms * 60 / 2000 && g_stall_ms > 0) {
    g_timeout_add(1, Stall, NULL);  /* A dispatch of its own. */
  }
  if (widget == g_second) {
    if (g_rerealized) {
      ++g_third_frames;
    } else {
      ++g_second_frames;
    }
  }
  gtk_widget_queue_draw(widget);
  return G_SOURCE_CONTINUE;
}

static GtkWidget* OpenWindow(const char* title) {
  GtkWidget* window = gtk_window_new(GTK_WINDOW_TOPLEVEL);
  gtk_window_set_title(GTK_WINDOW(window), title);
  gtk_window_set_default_size(GTK_WINDOW(window), 200, 150);
  gtk_container_add(GTK_CONTAINER(window), gtk_drawing_area_new());
  gtk_widget_add_tick_callback(window, Tick, NULL, NULL);
  gtk_widget_show_all(window);
  return window;
}

static gboolean Quit(gpointer data) {
  (void)data;
  gtk_main_quit();
  return G_SOURCE_REMOVE;
}

static gboolean Rerealize(gpointer data) {
  (void)data;
  gtk_widget_hide(g_second);
  gtk_widget_unrealize(g_second);
  gtk_window_set_title(GTK_WINDOW(g_second), "Third");
  g_rerealized = 1;
  gtk_widget_show_all(g_second);
  g_timeout_add(g_ms, Quit, NULL);
  return G_SOURCE_REMOVE;
}

static gboolean OpenSecond(gpointer data) {
  (void)data;
  g_second = OpenWindow("Second");
  gtk_widget_destroy(g_first);
  g_first = NULL;
  g_timeout_add(g_ms, Rerealize, NULL);
  return G_SOURCE_REMOVE;
}

int main(int argc, char** argv) {
  if (argc > 1) g_ms = atoi(argv[1]);
  if (argc > 2) g_usleep((gulong)atoi(argv[2]) * 1000);  /* Not a wait the agent times. */
  if (argc > 3) g_stall_ms = atoi(argv[3]);
  gtk_init(&argc, &argv);
  g_first = OpenWindow("First");
  GdkMonitor* monitor = gdk_display_get_monitor_at_window(
      gdk_display_get_default(), gtk_widget_get_window(g_first));
  printf("refresh_mhz %d\n", monitor != NULL ? gdk_monitor_get_refresh_rate(monitor) : 0);
  if (g_stall_ms == 0) g_timeout_add(g_ms, OpenSecond, NULL);
  gtk_main();
  printf("frames_second %ld\nframes_third %ld\n", g_second_frames, g_third_frames);
  return 0;
}

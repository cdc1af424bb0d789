/* agent_gtk4_target: a small GTK 4 program for matrix-run's frozen-frame
 * test (frozen_frame_e2e_test.cc). NOT linked to matrix-cpp: the agent is
 * preloaded by matrix-run. GTK 4 draws through EGL via libepoxy, on its
 * frame clock.
 *
 *   agent_gtk4_target MS STALL_MS
 *                       opens a window redrawn every frame (a tick callback
 *                       queues a draw); once it has drawn for MS / 2 ms
 *                       (kFramesBeforeStall frames), a timeout is busy
 *                       STALL_MS ms (the animation freezes); quits MS ms
 *                       after the stall.
 *
 * The stall is armed by frames drawn, not by time since start: GTK 4's first
 * frame through EGL can take over a second on a loaded machine, and a stall
 * before any frame freezes no animation (the CI failure of 2026-11-27).
 *
 * Prints "frames N" (tick callbacks run), then exits 0.
 */
#include <gtk/gtk.h>
#include <stdio.h>
#include <stdlib.h>

static int g_ms = 2500;
static int g_stall_ms = 3000;
static long g_frames = 0;
static gboolean g_done = FALSE;
static gboolean g_stall_armed = FALSE;

static gboolean Stall(gpointer data);

static gboolean Tick(GtkWidget* widget, GdkFrameClock* clock, gpointer data) {
  (void)clock;
  (void)data;
  ++g_frames;
  /* MS / 2 ms of frames at 60 Hz, then the stall in a dispatch of its own. */
  if (!g_stall_armed && g_frames >= (long)g_ms * 60 / 2000) {
    g_stall_armed = TRUE;
    g_timeout_add(1, Stall, NULL);
  }
  gtk_widget_queue_draw(widget);
  return G_SOURCE_CONTINUE;
}

static void Draw(GtkDrawingArea* area, cairo_t* cr, int width, int height, gpointer data) {
  (void)area;
  (void)data;
  /* Something that changes every frame. */
  cairo_set_source_rgb(cr, (double)(g_frames % 60) / 60.0, 0.2, 0.4);
  cairo_rectangle(cr, 0, 0, width, height);
  cairo_fill(cr);
}

static gboolean Quit(gpointer data) {
  (void)data;
  g_done = TRUE;
  return G_SOURCE_REMOVE;
}

static gboolean Stall(gpointer data) {
  (void)data;
  const gint64 end = g_get_monotonic_time() + (gint64)g_stall_ms * 1000;
  while (g_get_monotonic_time() < end) {
  }
  g_timeout_add(g_ms, Quit, NULL);
  return G_SOURCE_REMOVE;
}

int main(int argc, char** argv) {
  if (argc > 1) g_ms = atoi(argv[1]);
  if (argc > 2) g_stall_ms = atoi(argv[2]);
  gtk_init();
  GtkWidget* window = gtk_window_new();
  gtk_window_set_title(GTK_WINDOW(window), "matrix-frozen-gtk4");
  gtk_window_set_default_size(GTK_WINDOW(window), 200, 150);
  GtkWidget* area = gtk_drawing_area_new();
  gtk_drawing_area_set_draw_func(GTK_DRAWING_AREA(area), Draw, NULL, NULL);
  gtk_window_set_child(GTK_WINDOW(window), area);
  gtk_widget_add_tick_callback(area, Tick, NULL, NULL);
  gtk_window_present(GTK_WINDOW(window));
  while (!g_done) g_main_context_iteration(NULL, TRUE);
  printf("frames %ld\n", g_frames);
  return 0;
}

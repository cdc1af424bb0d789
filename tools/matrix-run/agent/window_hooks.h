// Window hooks of libmatrix-agent.so: when a program's first window is on
// screen, for the startup of a program that draws without a buffer swap
// (see docs/matrix-run.md, "Startup").
//
// A program's startup ends at its first presented frame. A program that
// never presents (Xt, Tk, a GTK 2 program drawing with Xlib/cairo) has no
// such frame: its startup ends when its first top-level window is mapped.
// window_hooks.cc interposes Xlib's XMapWindow and XMapRaised and libxcb's
// xcb_map_window and xcb_map_window_checked. After the real call, while the
// agent still waits for the first top-level map, it asks the X server for
// the window's parent (XQueryTree / xcb_query_tree: the request flushes the
// map first, so the window is mapped when the reply comes). A window whose
// parent is the root is top-level.
//
// Thread safety: every function here may be called from any thread; only the
// main thread's calls count.

#ifndef MATRIX_TOOLS_MATRIX_RUN_AGENT_WINDOW_HOOKS_H_
#define MATRIX_TOOLS_MATRIX_RUN_AGENT_WINDOW_HOOKS_H_

namespace matrix::agent {

// Whether the process talks to a display server: libX11, libxcb or
// libwayland-client is loaded. Any thread (a few dlopen(RTLD_NOLOAD) calls).
bool DisplayClientLoaded();

// Defined in agent.cc. Whether the calling thread is the main thread and the
// agent still waits for the program's first top-level map (armed or
// running). One relaxed load and a thread comparison.
bool WaitingForFirstWindowMap();
// The main thread's first top-level window is mapped (the X server has done
// it). Called once.
void OnFirstWindowMapped();

}  // namespace matrix::agent

#endif  // MATRIX_TOOLS_MATRIX_RUN_AGENT_WINDOW_HOOKS_H_

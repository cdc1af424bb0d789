// GTK hooks of libmatrix-agent.so: frames and the scene of GTK 3 and GTK 2
// programs (see docs/matrix-run.md, "GTK 3 frames", "GTK 2 frames", "Scene
// (GTK)").
//
// The agent links no GTK: it looks up the GTK, GDK and GObject functions it
// needs with dlsym on the loaded library. GTK 3: every toplevel window's
// GdkFrameClock reports frames ("before-paint", "after-paint"): the windows
// mapped when GTK is hooked, and every toplevel mapped later (an emission
// hook on GtkWidget "map", which also catches a re-realized window's new
// clock). A clock or window already connected carries a GObject data mark,
// so it is connected once and the mark dies with it (no stale pointers). The
// focused (else newest) toplevel's title names the scene. GTK 2 paints in
// "expose-event" handlers (there is no frame clock): an emission hook on it
// marks frames.
//
// Thread safety: main thread only (the callbacks check it: GTK calls them
// there).

#ifndef MATRIX_TOOLS_MATRIX_RUN_AGENT_GTK_HOOKS_H_
#define MATRIX_TOOLS_MATRIX_RUN_AGENT_GTK_HOOKS_H_

namespace matrix::agent {

// GTK 3 in the process (linked, or dlopen'ed before the first wait): looks
// up its functions. Returns whether all the required ones were found (then
// TryHookGtk() hooks it). At the session's start.
bool FindGtk();

// Between dispatches, while GTK 3 is found but not hooked: once GDK has a
// display (gtk_init ran), installs the "map" hook, attaches the toplevels
// mapped so far and sets Session::gtk_hooked. One call
// (gdk_display_get_default) per dispatch until then.
void TryHookGtk();

// GTK 2 in the process: installs the "expose-event" emission hook on
// GtkWidget. Returns whether it did. At the session's start.
bool HookGtk2Paint();

}  // namespace matrix::agent

#endif  // MATRIX_TOOLS_MATRIX_RUN_AGENT_GTK_HOOKS_H_

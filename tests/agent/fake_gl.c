// libfake_gl.so: a stand-in GL/EGL library for present_hooks_e2e_test. Its
// swaps do nothing but count; present_target dlopen()s it RTLD_LOCAL and
// looks its functions up at run time, as SDL and libepoxy do with libGL.
#include <stdatomic.h>

static atomic_long g_swaps;

__attribute__((visibility("default"))) void glXSwapBuffers(void* display, unsigned long drawable) {
  (void)display;
  (void)drawable;
  atomic_fetch_add(&g_swaps, 1);
}

__attribute__((visibility("default"))) unsigned eglSwapBuffers(void* display, void* surface) {
  (void)display;
  (void)surface;
  atomic_fetch_add(&g_swaps, 1);
  return 1;
}

static void* GetProc(const char* name);
__attribute__((visibility("default"))) void* glXGetProcAddressARB(const unsigned char* name) {
  return GetProc((const char*)name);
}

__attribute__((visibility("default"))) long fake_gl_swaps(void) { return atomic_load(&g_swaps); }

static int Same(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// Like a real GL library, returns its own implementation (a global-scope
// reference to glXSwapBuffers would bind to the agent's preloaded wrapper).
static void GlxSwapImpl(void* display, unsigned long drawable) {
  (void)display;
  (void)drawable;
  atomic_fetch_add(&g_swaps, 1);
}

static void* GetProc(const char* name) {
  if (Same(name, "glXSwapBuffers")) return (void*)&GlxSwapImpl;
  return 0;
}

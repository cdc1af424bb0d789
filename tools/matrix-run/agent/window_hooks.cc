#include "window_hooks.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "present_hooks.h"  // AnyLibraryLoaded, RealDlsym, Resolve

#define MATRIX_AGENT_EXPORT extern "C" __attribute__((visibility("default")))

namespace matrix::agent {
namespace {

// Xlib and libxcb, declared here: the agent links neither.
using XMapFn = int (*)(void*, unsigned long);
using XQueryTreeFn = int (*)(void*, unsigned long, unsigned long*, unsigned long*,
                             unsigned long**, unsigned*);
using XFreeFn = int (*)(void*);
struct XcbCookie {
  unsigned sequence;
};
struct XcbQueryTreeReply {
  uint8_t response_type;
  uint8_t pad0;
  uint16_t sequence;
  uint32_t length;
  uint32_t root;
  uint32_t parent;
  uint16_t children_len;
  uint8_t pad1[14];
};
using XcbMapFn = XcbCookie (*)(void*, uint32_t);
using XcbQueryTreeFn = XcbCookie (*)(void*, uint32_t);
using XcbQueryTreeReplyFn = XcbQueryTreeReply* (*)(void*, XcbCookie, void**);

std::atomic<XMapFn> g_x_map_window{nullptr};
std::atomic<XMapFn> g_x_map_raised{nullptr};
std::atomic<XQueryTreeFn> g_x_query_tree{nullptr};
std::atomic<XFreeFn> g_x_free{nullptr};
std::atomic<XcbMapFn> g_xcb_map_window{nullptr};
std::atomic<XcbMapFn> g_xcb_map_window_checked{nullptr};
std::atomic<XcbQueryTreeFn> g_xcb_query_tree{nullptr};
std::atomic<XcbQueryTreeReplyFn> g_xcb_query_tree_reply{nullptr};

// The real `name` of `library`: the next definition after the agent's, else
// (a library dlopen'ed with RTLD_LOCAL, as tkinter's libX11 is, is not in
// the global scope RTLD_NEXT searches) the loaded library's own. Null when
// neither has it.
template <typename Fn>
Fn ResolveIn(std::atomic<Fn>& slot, const char* library, const char* name) {
  Fn fn = Resolve(slot, name);
  if (fn != nullptr) return fn;
  if (void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD)) {
    fn = reinterpret_cast<Fn>(RealDlsym(handle, name));
    dlclose(handle);  // RTLD_NOLOAD took a reference; the program keeps its own.
    slot.store(fn, std::memory_order_relaxed);
  }
  return fn;
}
constexpr char kXlib[] = "libX11.so.6";
constexpr char kXcb[] = "libxcb.so.1";

// After an Xlib map of `window`: one round trip while the first map is
// awaited, none after.
void AfterXMap(void* display, unsigned long window) {
  if (!WaitingForFirstWindowMap()) return;
  XQueryTreeFn query = ResolveIn(g_x_query_tree, kXlib, "XQueryTree");
  XFreeFn free_fn = ResolveIn(g_x_free, kXlib, "XFree");
  if (query == nullptr || free_fn == nullptr) return;
  unsigned long root = 0, parent = 0;
  unsigned long* children = nullptr;
  unsigned n = 0;
  if (query(display, window, &root, &parent, &children, &n) == 0) return;
  if (children != nullptr) free_fn(children);
  if (parent == root) OnFirstWindowMapped();
}

// The same after an xcb map (the reply is malloc'ed by libxcb).
void AfterXcbMap(void* connection, uint32_t window) {
  if (!WaitingForFirstWindowMap()) return;
  XcbQueryTreeFn query = ResolveIn(g_xcb_query_tree, kXcb, "xcb_query_tree");
  XcbQueryTreeReplyFn reply_of = ResolveIn(g_xcb_query_tree_reply, kXcb, "xcb_query_tree_reply");
  if (query == nullptr || reply_of == nullptr) return;
  XcbQueryTreeReply* reply = reply_of(connection, query(connection, window), nullptr);
  if (reply == nullptr) return;
  const bool top_level = reply->parent == reply->root;
  free(reply);
  if (top_level) OnFirstWindowMapped();
}

}  // namespace

bool DisplayClientLoaded() {
  return AnyLibraryLoaded({"libX11.so.6", "libxcb.so.1", "libwayland-client.so.0"});
}

}  // namespace matrix::agent

namespace ma = matrix::agent;

MATRIX_AGENT_EXPORT int XMapWindow(void* display, unsigned long window) {
  ma::XMapFn real = ma::ResolveIn(ma::g_x_map_window, ma::kXlib, "XMapWindow");
  const int result = real(display, window);
  ma::AfterXMap(display, window);
  return result;
}

MATRIX_AGENT_EXPORT int XMapRaised(void* display, unsigned long window) {
  ma::XMapFn real = ma::ResolveIn(ma::g_x_map_raised, ma::kXlib, "XMapRaised");
  const int result = real(display, window);
  ma::AfterXMap(display, window);
  return result;
}

MATRIX_AGENT_EXPORT ma::XcbCookie xcb_map_window(void* connection, uint32_t window) {
  ma::XcbMapFn real = ma::ResolveIn(ma::g_xcb_map_window, ma::kXcb, "xcb_map_window");
  const ma::XcbCookie cookie = real(connection, window);
  ma::AfterXcbMap(connection, window);
  return cookie;
}

MATRIX_AGENT_EXPORT ma::XcbCookie xcb_map_window_checked(void* connection, uint32_t window) {
  ma::XcbMapFn real =
      ma::ResolveIn(ma::g_xcb_map_window_checked, ma::kXcb, "xcb_map_window_checked");
  const ma::XcbCookie cookie = real(connection, window);
  ma::AfterXcbMap(connection, window);
  return cookie;
}

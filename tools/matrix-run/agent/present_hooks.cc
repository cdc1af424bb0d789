// Present hooks of libmatrix-agent.so (see present_hooks.h).

#include "present_hooks.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>

#define MATRIX_AGENT_EXPORT extern "C" __attribute__((visibility("default")))

namespace matrix::agent {
namespace {

using DlsymFn = void* (*)(void*, const char*);
using GetProcFn = void* (*)(const char*);
using EglSwapDamageFn = unsigned (*)(void*, void*, const int*, int);

std::atomic<DlsymFn> g_real_dlsym{nullptr};
std::atomic<GetProcFn> g_glx_get_proc{nullptr};
std::atomic<GetProcFn> g_glx_get_proc_arb{nullptr};
std::atomic<GetProcFn> g_egl_get_proc{nullptr};
std::atomic<EglSwapDamageFn> g_egl_swap_damage_ext{nullptr};
std::atomic<EglSwapDamageFn> g_egl_swap_damage_khr{nullptr};
std::atomic<int64_t> g_off_thread_presents{0};

DlsymFn RealDlsymFn() {
  DlsymFn fn = g_real_dlsym.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    // dlvsym is not interposed. glibc 2.34+ has dlsym in libc (GLIBC_2.34),
    // older ones in libdl (GLIBC_2.2.5).
    fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
    if (fn == nullptr) fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
    g_real_dlsym.store(fn, std::memory_order_relaxed);
  }
  return fn;
}

template <typename Fn>
Fn Store(std::atomic<Fn>& slot, void* real) {
  Fn expected = nullptr;
  slot.compare_exchange_strong(expected, reinterpret_cast<Fn>(real), std::memory_order_relaxed);
  return slot.load(std::memory_order_relaxed);
}

// The GetProcAddress names: the interposers below stand for them.
std::atomic<GetProcFn>* GetProcSlot(const char* name) {
  if (std::strcmp(name, "glXGetProcAddressARB") == 0) return &g_glx_get_proc_arb;
  if (std::strcmp(name, "glXGetProcAddress") == 0) return &g_glx_get_proc;
  if (std::strcmp(name, "eglGetProcAddress") == 0) return &g_egl_get_proc;
  return nullptr;
}

GetProcFn ResolveGetProc(std::atomic<GetProcFn>& slot, const char* name) {
  GetProcFn fn = slot.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    fn = reinterpret_cast<GetProcFn>(RealDlsym(RTLD_NEXT, name));
    slot.store(fn, std::memory_order_relaxed);
  }
  return fn;
}

// Runs an eglSwapBuffersWithDamage{EXT,KHR} through the agent's frame hooks.
unsigned SwapWithDamage(EglSwapDamageFn real, void* display, void* surface, const int* rects,
                        int n_rects) {
  if (real == nullptr) return 0;  // EGL_FALSE: never looked up, cannot be called.
  if (!PresentBegin()) return real(display, surface, rects, n_rects);
  const unsigned result = real(display, surface, rects, n_rects);
  PresentEnd();
  return result;
}

}  // namespace

void* RealDlsym(void* handle, const char* name) {
  DlsymFn fn = RealDlsymFn();
  return fn == nullptr ? nullptr : fn(handle, name);
}

bool IsSwapName(const char* name) {
  // First letters decide quickly for the many other names.
  if (name == nullptr || (name[0] != 'g' && name[0] != 'e')) return false;
  return std::strcmp(name, "glXSwapBuffers") == 0 || std::strcmp(name, "eglSwapBuffers") == 0 ||
         std::strcmp(name, "eglSwapBuffersWithDamageEXT") == 0 ||
         std::strcmp(name, "eglSwapBuffersWithDamageKHR") == 0;
}

bool RendererLoaded() {
  static constexpr const char* kLibraries[] = {
      "libgtk-4.so.1", "libSDL2-2.0.so.0", "libQt6Quick.so.6", "libQt5Quick.so.5",
  };
  for (const char* library : kLibraries) {
    if (void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(handle);  // RTLD_NOLOAD took a reference; the program keeps its own.
      return true;
    }
  }
  return false;
}

void CountOffThreadPresent() { g_off_thread_presents.fetch_add(1, std::memory_order_relaxed); }

int64_t TakeOffThreadPresents() {
  if (g_off_thread_presents.load(std::memory_order_relaxed) == 0) return 0;
  return g_off_thread_presents.exchange(0, std::memory_order_relaxed);
}

}  // namespace matrix::agent

namespace ma = matrix::agent;

MATRIX_AGENT_EXPORT unsigned eglSwapBuffersWithDamageEXT(void* display, void* surface,
                                                         const int* rects, int n_rects) {
  return ma::SwapWithDamage(ma::g_egl_swap_damage_ext.load(std::memory_order_relaxed), display,
                            surface, rects, n_rects);
}

MATRIX_AGENT_EXPORT unsigned eglSwapBuffersWithDamageKHR(void* display, void* surface,
                                                         const int* rects, int n_rects) {
  return ma::SwapWithDamage(ma::g_egl_swap_damage_khr.load(std::memory_order_relaxed), display,
                            surface, rects, n_rects);
}

namespace matrix::agent {
// The damage variants: only ever reached through a look-up (no library links
// them by symbol), so their real functions come from RecordRealSwap.
void* RecordDamageSwap(const char* name, void* real) {
  const bool ext = std::strcmp(name, "eglSwapBuffersWithDamageEXT") == 0;
  void* wrapper = ext ? reinterpret_cast<void*>(&eglSwapBuffersWithDamageEXT)
                      : reinterpret_cast<void*>(&eglSwapBuffersWithDamageKHR);
  // A look-up in the global scope finds the agent's own wrapper first.
  if (real != wrapper) Store(ext ? g_egl_swap_damage_ext : g_egl_swap_damage_khr, real);
  return wrapper;
}
}  // namespace matrix::agent

// The GetProcAddress functions: a swap name gives the agent's wrapper (and
// records the real function), any other name the real answer.
MATRIX_AGENT_EXPORT void* glXGetProcAddressARB(const unsigned char* name) {
  const ma::GetProcFn real = ma::ResolveGetProc(ma::g_glx_get_proc_arb, "glXGetProcAddressARB");
  if (real == nullptr) return nullptr;
  void* fn = real(reinterpret_cast<const char*>(name));
  const char* text = reinterpret_cast<const char*>(name);
  return fn != nullptr && ma::IsSwapName(text) ? ma::RecordRealSwap(text, fn) : fn;
}

MATRIX_AGENT_EXPORT void* glXGetProcAddress(const unsigned char* name) {
  const ma::GetProcFn real = ma::ResolveGetProc(ma::g_glx_get_proc, "glXGetProcAddress");
  if (real == nullptr) return nullptr;
  void* fn = real(reinterpret_cast<const char*>(name));
  const char* text = reinterpret_cast<const char*>(name);
  return fn != nullptr && ma::IsSwapName(text) ? ma::RecordRealSwap(text, fn) : fn;
}

MATRIX_AGENT_EXPORT void* eglGetProcAddress(const char* name) {
  const ma::GetProcFn real = ma::ResolveGetProc(ma::g_egl_get_proc, "eglGetProcAddress");
  if (real == nullptr) return nullptr;
  void* fn = real(name);
  return fn != nullptr && ma::IsSwapName(name) ? ma::RecordRealSwap(name, fn) : fn;
}

// dlsym. A swap name: the real function is recorded and the agent's wrapper
// returned. A GetProcAddress name (SDL looks glXGetProcAddressARB up on its
// own libGL handle): the real one is recorded and the agent's returned, so
// the names looked up through it are wrapped too. Anything else: the real
// answer, through a tail call, so that glibc sees the caller's return address
// (RTLD_NEXT stays relative to the caller's object).
MATRIX_AGENT_EXPORT void* dlsym(void* handle, const char* name) {
  const ma::DlsymFn real = ma::RealDlsymFn();
  if (name[0] != 'g' && name[0] != 'e') return real(handle, name);
  if (ma::IsSwapName(name)) {
    void* fn = real(handle, name);
    return fn == nullptr ? nullptr : ma::RecordRealSwap(name, fn);
  }
  if (std::atomic<ma::GetProcFn>* slot = ma::GetProcSlot(name)) {
    void* fn = real(handle, name);
    if (fn == nullptr) return nullptr;
    void* ours = slot == &ma::g_glx_get_proc_arb ? reinterpret_cast<void*>(&glXGetProcAddressARB)
                 : slot == &ma::g_glx_get_proc   ? reinterpret_cast<void*>(&glXGetProcAddress)
                                                 : reinterpret_cast<void*>(&eglGetProcAddress);
    // A look-up in the global scope finds the agent's own interposer first.
    if (fn != ours) ma::Store(*slot, fn);
    return ours;
  }
  return real(handle, name);
}

// Present hooks of libmatrix-agent.so: buffer swaps reached at run time, and
// presents made on threads other than the main thread (see
// docs/matrix-run.md, "Frames").
//
// The agent interposes glXSwapBuffers and eglSwapBuffers by symbol (agent.cc).
// Programs that look the swap up at run time bypass that: SDL2 calls
// dlsym(its own libGL handle, "glXSwapBuffers"), libepoxy (GTK 4) calls
// dlsym(its own libEGL handle, "eglSwapBuffers"), others use
// glXGetProcAddress(ARB) or eglGetProcAddress. present_hooks.cc interposes
// dlsym, glXGetProcAddress, glXGetProcAddressARB and eglGetProcAddress: for a
// swap name they record the real function (RecordRealSwap) and return the
// agent's wrapper; every other name gets the real answer.
//
// Vulkan presents (vkQueuePresentKHR) are frames too. Programs link the
// loader's vkQueuePresentKHR, or get a pointer from vkGetDeviceProcAddr or
// vkGetInstanceProcAddr (vkcube: vkGetInstanceProcAddr(instance,
// "vkGetDeviceProcAddr"), then vkGetDeviceProcAddr(device,
// "vkQueuePresentKHR")), or look those up with dlsym on a dlopen'ed
// libvulkan (SDL, GLFW, volk). present_hooks.cc exports the three functions
// and answers the three names through dlsym: the GetProcAddr ones return the
// agent's, which pass every other name to the loader, and each distinct
// vkQueuePresentKHR pointer the loader hands out (one per driver and layer
// chain) gets a wrapper of its own that calls exactly it (a fixed table of 8).
// The agent declares the few Vulkan types it needs itself: it links no Vulkan.
//
// Presents on another thread (Qt Quick's threaded render loop swaps on its
// render thread) must not touch the monitors, whose single producer is the
// main thread. They only count: CountOffThreadPresent() is one relaxed atomic
// increment. The main thread takes the count at the end of each dispatch
// (TakeOffThreadPresents()) and marks that dispatch as a frame when a present
// happened since the last one: the main thread's part of the frame (Qt's
// polish and sync, animations) is that dispatch.
//
// Thread safety: every function here may be called from any thread.

#ifndef MATRIX_TOOLS_MATRIX_RUN_AGENT_PRESENT_HOOKS_H_
#define MATRIX_TOOLS_MATRIX_RUN_AGENT_PRESENT_HOOKS_H_

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>

#include "matrix/core/time_ticks.h"

namespace matrix::agent {

// glibc's dlsym (not the agent's interposer). The agent resolves its real
// functions through it. Any thread.
void* RealDlsym(void* handle, const char* name);

// The real `name` (the next definition after the agent's, RTLD_NEXT), looked
// up once and kept in `slot`. Any thread.
template <typename Fn>
Fn Resolve(std::atomic<Fn>& slot, const char* name) {
  Fn fn = slot.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    fn = reinterpret_cast<Fn>(RealDlsym(RTLD_NEXT, name));
    slot.store(fn, std::memory_order_relaxed);
  }
  return fn;
}

// Whether `name` is a swap the agent wraps ("glXSwapBuffers",
// "eglSwapBuffers", "eglSwapBuffersWithDamageEXT", "eglSwapBuffersWithDamageKHR").
bool IsSwapName(const char* name);

// `real` is the library's `name` (a swap name, non-null): records it as the
// real function when none is known yet and returns the agent's wrapper.
// Defined in agent.cc (for glXSwapBuffers and eglSwapBuffers) and
// present_hooks.cc. Any thread.
void* RecordRealSwap(const char* name, void* real);
// The same for the eglSwapBuffersWithDamage{EXT,KHR} names (present_hooks.cc).
void* RecordDamageSwap(const char* name, void* real);

// Whether any of `libraries` (sonames) is loaded: one dlopen(RTLD_NOLOAD)
// each until one is. Any thread.
bool AnyLibraryLoaded(std::initializer_list<const char*> libraries);

// A renderer library whose programs draw is loaded (GTK 4, SDL 2, Qt Quick 5
// or 6, the Vulkan loader libvulkan.so.1): the program registers as a frame source, so its
// startup ends at its first presented frame. Main thread, once per session.
bool RendererLoaded();

// A swap or present on a thread other than the main thread returned, while
// monitoring: one clock read (vDSO), one relaxed store and one atomic increment.
void CountOffThreadPresent();
// The main thread: how many off-thread presents happened since its last
// call (one atomic exchange), and when the last of them returned.
int64_t TakeOffThreadPresents(TimeTicks* last_present);

// The agent's frame hooks for the wrappers in present_hooks.cc (defined in
// agent.cc). PresentBegin returns true when the call is the main thread's and
// monitored (then PresentEnd must follow the real call); otherwise it returns
// false, and PresentedOffThread must follow the real call (it counts a present
// of another thread while monitoring).
bool PresentBegin();
void PresentEnd();
void PresentedOffThread();

}  // namespace matrix::agent

#endif  // MATRIX_TOOLS_MATRIX_RUN_AGENT_PRESENT_HOOKS_H_

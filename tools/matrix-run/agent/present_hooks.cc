// Present hooks of libmatrix-agent.so (see present_hooks.h).

#include "present_hooks.h"

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstring>
#include <utility>

#include "matrix/core/tick_clock.h"

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
// CLOCK_MONOTONIC nanoseconds of the last off-thread present's return.
std::atomic<int64_t> g_last_off_thread_present_ns{0};

// Vulkan, declared here: the agent links no Vulkan and must load into
// programs without libvulkan. Dispatchable handles are opaque pointers,
// VkResult is an int32_t enum, and VKAPI_CALL is the default C convention on
// Linux.
using VkResult = int32_t;
constexpr VkResult kVkErrorInitializationFailed = -3;
using VkVoidFunction = void (*)();
using VkGetInstanceProcAddrFn = VkVoidFunction (*)(void* instance, const char* name);
using VkGetDeviceProcAddrFn = VkVoidFunction (*)(void* device, const char* name);
using VkQueuePresentFn = VkResult (*)(void* queue, const void* present_info);

// The loader's vkGetInstanceProcAddr and vkGetDeviceProcAddr (the first
// found): both answer for every instance and device of the process.
std::atomic<VkGetInstanceProcAddrFn> g_vk_get_instance_proc{nullptr};
std::atomic<VkGetDeviceProcAddrFn> g_vk_get_device_proc{nullptr};
// The loader's exported vkQueuePresentKHR, for programs that link it.
std::atomic<VkQueuePresentFn> g_vk_present_export{nullptr};

// The vkQueuePresentKHR pointers handed out by the loader, one slot each: a
// device's pointer may be its driver's (or its first layer's), so each real
// pointer gets a wrapper of its own (PresentThunk<slot>) that calls exactly
// it. Pointers differ per driver and layer chain, not per device: a few
// slots are plenty. A slot, once taken, is never reused (no table to clean
// when a device goes away); a ninth pointer is handed out unwrapped.
constexpr int kPresentSlots = 8;
std::atomic<VkQueuePresentFn> g_vk_present[kPresentSlots];

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

// Runs an eglSwapBuffersWithDamage{EXT,KHR} through the agent's frame hooks.
unsigned SwapWithDamage(EglSwapDamageFn real, void* display, void* surface, const int* rects,
                        int n_rects) {
  if (real == nullptr) return 0;  // EGL_FALSE: never looked up, cannot be called.
  if (!PresentBegin()) {
    const unsigned result = real(display, surface, rects, n_rects);
    PresentedOffThread();
    return result;
  }
  const unsigned result = real(display, surface, rects, n_rects);
  PresentEnd();
  return result;
}

// Runs a vkQueuePresentKHR through the agent's frame hooks: the time inside
// it is the present, like a swap's.
VkResult Present(VkQueuePresentFn real, void* queue, const void* present_info) {
  if (real == nullptr) return kVkErrorInitializationFailed;  // Never looked up.
  if (!PresentBegin()) {
    const VkResult result = real(queue, present_info);
    PresentedOffThread();
    return result;
  }
  const VkResult result = real(queue, present_info);
  PresentEnd();
  return result;
}

// Slot kSlot's wrapper. A relaxed load: the program got this wrapper from a
// look-up that filled the slot first, and it synchronizes its own threads.
template <int kSlot>
VkResult PresentThunk(void* queue, const void* present_info) {
  return Present(g_vk_present[kSlot].load(std::memory_order_relaxed), queue, present_info);
}

template <int... kSlots>
constexpr std::array<VkQueuePresentFn, sizeof...(kSlots)> MakePresentThunks(
    std::integer_sequence<int, kSlots...>) {
  return {&PresentThunk<kSlots>...};
}
constexpr std::array<VkQueuePresentFn, kPresentSlots> kPresentThunks =
    MakePresentThunks(std::make_integer_sequence<int, kPresentSlots>());

enum class VulkanName { kNone, kGetInstanceProcAddr, kGetDeviceProcAddr, kQueuePresent };

// The Vulkan names the agent answers for itself.
VulkanName VulkanNameOf(const char* name) {
  if (name == nullptr || name[0] != 'v' || name[1] != 'k') return VulkanName::kNone;
  if (std::strcmp(name, "vkQueuePresentKHR") == 0) return VulkanName::kQueuePresent;
  if (std::strcmp(name, "vkGetDeviceProcAddr") == 0) return VulkanName::kGetDeviceProcAddr;
  if (std::strcmp(name, "vkGetInstanceProcAddr") == 0) return VulkanName::kGetInstanceProcAddr;
  return VulkanName::kNone;
}

// Whether `fn` is in the Vulkan loader (libvulkan.so.1). Only the loader's
// functions found through dlsym are wrapped: the loader itself looks up its
// layers' and drivers' vkGetInstanceProcAddr/vkGetDeviceProcAddr with dlsym
// (the MESA overlay layer exports both), and those must stay the layer's.
bool InVulkanLoader(void* fn) {
  Dl_info info;
  if (dladdr(fn, &info) == 0 || info.dli_fname == nullptr) return false;
  const char* slash = std::strrchr(info.dli_fname, '/');
  return std::strncmp(slash == nullptr ? info.dli_fname : slash + 1, "libvulkan.so", 12) == 0;
}

}  // namespace
}  // namespace matrix::agent

// The agent's Vulkan functions (defined below, after dlsym's helpers).
MATRIX_AGENT_EXPORT matrix::agent::VkVoidFunction vkGetInstanceProcAddr(void* instance,
                                                                       const char* name);
MATRIX_AGENT_EXPORT matrix::agent::VkVoidFunction vkGetDeviceProcAddr(void* device,
                                                                     const char* name);
MATRIX_AGENT_EXPORT matrix::agent::VkResult vkQueuePresentKHR(void* queue,
                                                             const void* present_info);

namespace matrix::agent {
namespace {

// `handle` resolved a Vulkan name to the loader: the loader's three
// functions, looked up on the same handle, become the real ones (when none is
// known yet). A loader dlopen'ed with RTLD_LOCAL (SDL, GLFW, volk) is not in
// the global scope, so RTLD_NEXT cannot find them; and the loader's own
// references to its exported functions bind to the agent's (first in the
// global scope): its vkGetInstanceProcAddr hands out the agent's
// vkGetDeviceProcAddr and vkQueuePresentKHR, which need the real ones.
// A handle whose scope has the agent first (the global one) gives the
// agent's own functions, never recorded (they would call themselves).
void RecordVulkanLoader(void* handle) {
  auto record = [handle](auto& slot, const char* name, void* ours) {
    void* fn = RealDlsym(handle, name);
    if (fn != nullptr && fn != ours) Store(slot, fn);
  };
  record(g_vk_get_instance_proc, "vkGetInstanceProcAddr",
         reinterpret_cast<void*>(&vkGetInstanceProcAddr));
  record(g_vk_get_device_proc, "vkGetDeviceProcAddr",
         reinterpret_cast<void*>(&vkGetDeviceProcAddr));
  record(g_vk_present_export, "vkQueuePresentKHR", reinterpret_cast<void*>(&vkQueuePresentKHR));
}

// The loader's `name` for `slot` (null when no loader is loaded): the one
// recorded, else the next definition after the agent in the global scope,
// else the loaded libvulkan.so.1's own (a loader dlopen'ed RTLD_LOCAL, whose
// handle the program looked up through some path other than the agent's
// dlsym: one dlopen(RTLD_NOLOAD) per call until a loader is found).
template <typename Fn>
Fn RealVulkan(std::atomic<Fn>& slot, const char* name) {
  if (Fn fn = slot.load(std::memory_order_relaxed); fn != nullptr) return fn;
  if (void* next = RealDlsym(RTLD_NEXT, name)) return Store(slot, next);
  if (void* loader = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    RecordVulkanLoader(loader);
    dlclose(loader);  // RTLD_NOLOAD took a reference; the program keeps its own.
  }
  return slot.load(std::memory_order_relaxed);
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

bool AnyLibraryLoaded(std::initializer_list<const char*> libraries) {
  for (const char* library : libraries) {
    if (void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(handle);  // RTLD_NOLOAD took a reference; the program keeps its own.
      return true;
    }
  }
  return false;
}

bool RendererLoaded() {
  return AnyLibraryLoaded({"libgtk-4.so.1", "libSDL2-2.0.so.0", "libQt6Quick.so.6",
                           "libQt5Quick.so.5", "libvulkan.so.1"});
}

void CountOffThreadPresent() {
  g_last_off_thread_present_ns.store(MonotonicNow().ToNanoseconds(), std::memory_order_relaxed);
  g_off_thread_presents.fetch_add(1, std::memory_order_release);
}

int64_t TakeOffThreadPresents(TimeTicks* last_present) {
  if (g_off_thread_presents.load(std::memory_order_relaxed) == 0) return 0;
  const int64_t presents = g_off_thread_presents.exchange(0, std::memory_order_acquire);
  *last_present =
      TimeTicks::FromNanoseconds(g_last_off_thread_present_ns.load(std::memory_order_relaxed));
  return presents;
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
  const ma::GetProcFn real = ma::Resolve(ma::g_glx_get_proc_arb, "glXGetProcAddressARB");
  if (real == nullptr) return nullptr;
  void* fn = real(reinterpret_cast<const char*>(name));
  const char* text = reinterpret_cast<const char*>(name);
  return fn != nullptr && ma::IsSwapName(text) ? ma::RecordRealSwap(text, fn) : fn;
}

MATRIX_AGENT_EXPORT void* glXGetProcAddress(const unsigned char* name) {
  const ma::GetProcFn real = ma::Resolve(ma::g_glx_get_proc, "glXGetProcAddress");
  if (real == nullptr) return nullptr;
  void* fn = real(reinterpret_cast<const char*>(name));
  const char* text = reinterpret_cast<const char*>(name);
  return fn != nullptr && ma::IsSwapName(text) ? ma::RecordRealSwap(text, fn) : fn;
}

MATRIX_AGENT_EXPORT void* eglGetProcAddress(const char* name) {
  const ma::GetProcFn real = ma::Resolve(ma::g_egl_get_proc, "eglGetProcAddress");
  if (real == nullptr) return nullptr;
  void* fn = real(name);
  return fn != nullptr && ma::IsSwapName(name) ? ma::RecordRealSwap(name, fn) : fn;
}

// Vulkan (vkcube and most programs: vkGetInstanceProcAddr(instance,
// "vkGetDeviceProcAddr"), then vkGetDeviceProcAddr(device,
// "vkQueuePresentKHR")). The exported present, for programs that link it:
// the loader's exported function dispatches on the queue itself.
MATRIX_AGENT_EXPORT ma::VkResult vkQueuePresentKHR(void* queue, const void* present_info) {
  return ma::Present(ma::RealVulkan(ma::g_vk_present_export, "vkQueuePresentKHR"), queue,
                     present_info);
}

namespace matrix::agent {
namespace {
// `real`, a vkQueuePresentKHR the loader handed out (non-null): the wrapper
// of its slot, taking a free slot the first time. Lock-free (look-ups may
// come from any thread); a full table hands `real` back unwrapped.
VkVoidFunction WrapPresent(VkQueuePresentFn real) {
  if (real == &vkQueuePresentKHR) return reinterpret_cast<VkVoidFunction>(real);
  for (int i = 0; i < kPresentSlots; ++i) {
    if (real == kPresentThunks[i]) return reinterpret_cast<VkVoidFunction>(real);
  }
  for (int i = 0; i < kPresentSlots; ++i) {
    VkQueuePresentFn expected = nullptr;
    if (g_vk_present[i].compare_exchange_strong(expected, real, std::memory_order_relaxed) ||
        expected == real) {
      return reinterpret_cast<VkVoidFunction>(kPresentThunks[i]);
    }
  }
  return reinterpret_cast<VkVoidFunction>(real);
}
}  // namespace
}  // namespace matrix::agent

// The loader's answer, except for the three names the agent wraps: the
// present (each real pointer its wrapper) and the two GetProcAddr functions
// (the agent's, so the names looked up through them are wrapped too).
MATRIX_AGENT_EXPORT ma::VkVoidFunction vkGetInstanceProcAddr(void* instance, const char* name) {
  const ma::VkGetInstanceProcAddrFn real =
      ma::RealVulkan(ma::g_vk_get_instance_proc, "vkGetInstanceProcAddr");
  if (real == nullptr) return nullptr;  // No loader: cannot be called legitimately.
  const ma::VkVoidFunction fn = real(instance, name);
  if (fn == nullptr) return nullptr;
  switch (ma::VulkanNameOf(name)) {
    case ma::VulkanName::kNone:
      return fn;
    case ma::VulkanName::kQueuePresent:
      return ma::WrapPresent(reinterpret_cast<ma::VkQueuePresentFn>(fn));
    case ma::VulkanName::kGetDeviceProcAddr:
      if (fn != reinterpret_cast<ma::VkVoidFunction>(&vkGetDeviceProcAddr)) {
        ma::Store(ma::g_vk_get_device_proc, reinterpret_cast<void*>(fn));
      }
      return reinterpret_cast<ma::VkVoidFunction>(&vkGetDeviceProcAddr);
    case ma::VulkanName::kGetInstanceProcAddr:
      return reinterpret_cast<ma::VkVoidFunction>(&vkGetInstanceProcAddr);
  }
  return fn;
}

MATRIX_AGENT_EXPORT ma::VkVoidFunction vkGetDeviceProcAddr(void* device, const char* name) {
  const ma::VkGetDeviceProcAddrFn real =
      ma::RealVulkan(ma::g_vk_get_device_proc, "vkGetDeviceProcAddr");
  if (real == nullptr) return nullptr;
  const ma::VkVoidFunction fn = real(device, name);
  if (fn == nullptr) return nullptr;
  switch (ma::VulkanNameOf(name)) {
    case ma::VulkanName::kQueuePresent:
      return ma::WrapPresent(reinterpret_cast<ma::VkQueuePresentFn>(fn));
    case ma::VulkanName::kGetDeviceProcAddr:
      return reinterpret_cast<ma::VkVoidFunction>(&vkGetDeviceProcAddr);
    default:
      return fn;
  }
}

namespace matrix::agent {
namespace {
// dlsym(`handle`)'s answer `fn` (non-null) for a Vulkan name it wraps. The
// agent's own function (a look-up in the global scope) stays, unless no
// loader is in the global scope (then the program would have found nothing).
// A function of the loader: the loader's functions are recorded as the real
// ones, the agent's GetProcAddr returned, the present wrapped. Anything else
// (a layer's or a driver's, looked up by the loader itself) is left alone.
void* VulkanDlsym(VulkanName kind, void* handle, const char* name, void* fn) {
  void* ours = kind == VulkanName::kQueuePresent ? reinterpret_cast<void*>(&vkQueuePresentKHR)
               : kind == VulkanName::kGetDeviceProcAddr
                   ? reinterpret_cast<void*>(&vkGetDeviceProcAddr)
                   : reinterpret_cast<void*>(&vkGetInstanceProcAddr);
  if (fn == ours) return RealDlsym(RTLD_NEXT, name) == nullptr ? nullptr : ours;
  if (!InVulkanLoader(fn)) return fn;
  RecordVulkanLoader(handle);
  return kind == VulkanName::kQueuePresent
             ? reinterpret_cast<void*>(WrapPresent(reinterpret_cast<VkQueuePresentFn>(fn)))
             : ours;
}
}  // namespace
}  // namespace matrix::agent

// dlsym. A swap name: the real function is recorded and the agent's wrapper
// returned. A GetProcAddress name (SDL looks glXGetProcAddressARB up on its
// own libGL handle): the real one is recorded and the agent's returned, so
// the names looked up through it are wrapped too. Anything else: the real
// answer, through a tail call, so that glibc sees the caller's return address
// (RTLD_NEXT stays relative to the caller's object). The Vulkan names:
// VulkanDlsym.
MATRIX_AGENT_EXPORT void* dlsym(void* handle, const char* name) {
  const ma::DlsymFn real = ma::RealDlsymFn();
  if (name[0] != 'g' && name[0] != 'e' && name[0] != 'v') return real(handle, name);
  if (const ma::VulkanName kind = ma::VulkanNameOf(name); kind != ma::VulkanName::kNone) {
    void* fn = real(handle, name);
    return fn == nullptr ? nullptr : ma::VulkanDlsym(kind, handle, name, fn);
  }
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

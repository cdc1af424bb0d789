// libswap_counter.so: a test tool that counts a program's buffer swaps
// independently of the agent, to check the agent's FPS against. Preloaded
// AFTER the agent (matrix-run puts the agent first in LD_PRELOAD). It
// defines dlsym under glibc's versions GLIBC_2.34 and GLIBC_2.2.5
// (swap_counter.map), so the agent's own look-up of the real dlsym (dlvsym(RTLD_NEXT, "dlsym",
// "GLIBC_2.34")) reaches it: for a swap name (glXSwapBuffers, eglSwapBuffers,
// eglSwapBuffersWithDamage{EXT,KHR}) it returns a counting wrapper around the
// library's function, which the agent then records as the real function. So
// every swap the program makes, through the agent's symbol or its dlsym
// interposer, passes the counter once. Vulkan presents count as swaps: for
// vkGetInstanceProcAddr and vkGetDeviceProcAddr (the agent's real ones) it
// returns counting look-ups that wrap vkQueuePresentKHR (the first device's:
// the programs of the tests create one). It prints about once a second, from
// its first swap on, and at exit:
//   swap-counter: first swap at <ms> ms since process start
//   swap-counter: <swaps after the first> swaps in <seconds since the first> s
//   swap-counter: total <swaps>
// With SWAP_COUNTER_PACE_MS set (a program presenting at its own steady pace,
// on a 60 Hz display), it also times each swap's return and prints at exit
//   swap-counter: late <presents> presents, <vsyncs> vsyncs
// where a present more than one pace plus half a refresh interval after the
// previous one was late, and missed ceil((gap - (pace - half an interval)) /
// interval) - 1 vsyncs: the rule of docs/tracers.md, measured here
// independently of the agent.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*GlxSwap)(void*, unsigned long);
typedef unsigned (*EglSwap)(void*, void*);
typedef unsigned (*EglSwapDamage)(void*, void*, const int*, int);
typedef void* (*Dlsym)(void*, const char*);
typedef void (*VkVoid)(void);
typedef VkVoid (*VkGetProc)(void*, const char*);  // Instance or device look-up.
typedef int32_t (*VkPresent)(void*, const void*);

static GlxSwap g_glx;
static EglSwap g_egl;
static EglSwapDamage g_damage_ext, g_damage_khr;
static VkGetProc g_vk_instance_proc, g_vk_device_proc;
static VkPresent g_vk_present;
static atomic_long g_swaps, g_first_ns, g_next_print_ns;
static atomic_long g_last_return_ns, g_late_presents, g_late_vsyncs;
static long g_pace_ns;  // From SWAP_COUNTER_PACE_MS; 0: not timed.
static const long kIntervalNs = 16666667;  // 60 Hz.

static long NowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

// The first swap's time since the process started (its start time in
// /proc/self/stat, in clock ticks since boot, against CLOCK_BOOTTIME).
static void PrintFirstSwap(void) {
  FILE* stat = fopen("/proc/self/stat", "r");
  if (stat == NULL) return;
  char text[1024];
  const size_t n = fread(text, 1, sizeof(text) - 1, stat);
  fclose(stat);
  text[n] = '\0';
  const char* p = strrchr(text, ')');  // After the command name.
  if (p == NULL) return;
  unsigned long long start_ticks = 0;
  // Fields 3..22 follow ") "; field 22 is starttime.
  if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
             &start_ticks) != 1) {
    return;
  }
  struct timespec boot;
  clock_gettime(CLOCK_BOOTTIME, &boot);
  const double now_ms = (double)boot.tv_sec * 1e3 + (double)boot.tv_nsec / 1e6;
  const double start_ms = (double)start_ticks * 1e3 / (double)sysconf(_SC_CLK_TCK);
  fprintf(stderr, "swap-counter: first swap at %.0f ms since process start\n", now_ms - start_ms);
}

static void Count(void) {
  const long n = atomic_fetch_add(&g_swaps, 1);  // Swaps before this one.
  const long now = NowNs();
  long first = 0;
  if (atomic_compare_exchange_strong(&g_first_ns, &first, now)) {
    atomic_store(&g_next_print_ns, now + 1000000000L);
    PrintFirstSwap();
    return;
  }
  long next = atomic_load(&g_next_print_ns);
  if (now >= next && atomic_compare_exchange_strong(&g_next_print_ns, &next, now + 1000000000L)) {
    fprintf(stderr, "swap-counter: %ld swaps in %.3f s\n", n,
            (double)(now - atomic_load(&g_first_ns)) / 1e9);
  }
}

// After a swap returned: a late present, against the pace (see the top).
static void Returned(void) {
  if (g_pace_ns == 0) return;
  const long now = NowNs();
  const long last = atomic_exchange(&g_last_return_ns, now);
  if (last == 0) return;
  const long late = now - last - (g_pace_ns - kIntervalNs / 2);
  if (late <= kIntervalNs) return;
  atomic_fetch_add(&g_late_presents, 1);
  atomic_fetch_add(&g_late_vsyncs, (late + kIntervalNs - 1) / kIntervalNs - 1);
}

static void CountedGlx(void* d, unsigned long w) {
  Count();
  g_glx(d, w);
  Returned();
}
static unsigned CountedEgl(void* d, void* s) {
  Count();
  const unsigned result = g_egl(d, s);
  Returned();
  return result;
}
static unsigned CountedDamageExt(void* d, void* s, const int* r, int n) {
  Count();
  const unsigned result = g_damage_ext(d, s, r, n);
  Returned();
  return result;
}
static unsigned CountedDamageKhr(void* d, void* s, const int* r, int n) {
  Count();
  const unsigned result = g_damage_khr(d, s, r, n);
  Returned();
  return result;
}

static int32_t CountedPresent(void* queue, const void* info) {
  Count();
  const int32_t result = g_vk_present(queue, info);
  Returned();
  return result;
}

__attribute__((constructor)) static void ReadPace(void) {
  const char* pace = getenv("SWAP_COUNTER_PACE_MS");
  if (pace != NULL) g_pace_ns = (long)(atof(pace) * 1e6);
}

static VkVoid CountedInstanceProc(void* instance, const char* name);
static VkVoid CountedDeviceProc(void* device, const char* name);

static Dlsym RealDlsym(void);

// `fn`, the real function named `name` (non-null): the counting one for the
// three Vulkan names, else `fn`. The loader hands out its exported functions
// through the global scope, where the agent's come first: those are replaced
// by the loader's own (the next definition after this library).
static VkVoid WrapVulkan(const char* name, VkVoid fn) {
  if ((void*)fn == RealDlsym()(RTLD_DEFAULT, name)) {
    VkVoid next = (VkVoid)RealDlsym()(RTLD_NEXT, name);
    if (next != NULL) fn = next;
  }
  if (strcmp(name, "vkQueuePresentKHR") == 0) {
    if (g_vk_present == NULL) g_vk_present = (VkPresent)fn;
    return (VkVoid)&CountedPresent;
  }
  if (strcmp(name, "vkGetDeviceProcAddr") == 0) {
    if (g_vk_device_proc == NULL) g_vk_device_proc = (VkGetProc)fn;
    return (VkVoid)&CountedDeviceProc;
  }
  if (strcmp(name, "vkGetInstanceProcAddr") == 0) {
    if (g_vk_instance_proc == NULL) g_vk_instance_proc = (VkGetProc)fn;
    return (VkVoid)&CountedInstanceProc;
  }
  return fn;
}

static VkVoid CountedInstanceProc(void* instance, const char* name) {
  VkVoid fn = g_vk_instance_proc(instance, name);
  return fn == NULL ? NULL : WrapVulkan(name, fn);
}
static VkVoid CountedDeviceProc(void* device, const char* name) {
  VkVoid fn = g_vk_device_proc(device, name);
  return fn == NULL ? NULL : WrapVulkan(name, fn);
}

__attribute__((destructor)) static void PrintTotal(void) {
  const long swaps = atomic_load(&g_swaps);
  if (swaps > 0) fprintf(stderr, "swap-counter: total %ld\n", swaps);
  if (swaps > 0 && g_pace_ns != 0) {
    fprintf(stderr, "swap-counter: late %ld presents, %ld vsyncs\n",
            atomic_load(&g_late_presents), atomic_load(&g_late_vsyncs));
  }
}

static Dlsym RealDlsym(void) {
  static Dlsym real;
  if (real == NULL) real = (Dlsym)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  return real;
}

// One wrapper per name (the first library function seen): the programs of
// the tests load one GL library.
void* counter_dlsym(void* handle, const char* name) {
  void* fn = RealDlsym()(handle, name);
  if (fn == NULL) return fn;
  if (strcmp(name, "glXSwapBuffers") == 0) {
    if (g_glx == NULL) g_glx = (GlxSwap)fn;
    return (void*)&CountedGlx;
  }
  if (strcmp(name, "eglSwapBuffers") == 0) {
    if (g_egl == NULL) g_egl = (EglSwap)fn;
    return (void*)&CountedEgl;
  }
  if (strcmp(name, "eglSwapBuffersWithDamageEXT") == 0) {
    if (g_damage_ext == NULL) g_damage_ext = (EglSwapDamage)fn;
    return (void*)&CountedDamageExt;
  }
  if (strcmp(name, "eglSwapBuffersWithDamageKHR") == 0) {
    if (g_damage_khr == NULL) g_damage_khr = (EglSwapDamage)fn;
    return (void*)&CountedDamageKhr;
  }
  if (strncmp(name, "vk", 2) == 0) return (void*)WrapVulkan(name, (VkVoid)fn);
  return fn;
}
// Both versions glibc defines: programs bind dlsym@GLIBC_2.2.5 or
// dlsym@GLIBC_2.34; the agent looks up dlsym@GLIBC_2.34.
void* counter_dlsym_old(void* handle, const char* name) { return counter_dlsym(handle, name); }
__asm__(".symver counter_dlsym,dlsym@@GLIBC_2.34");
__asm__(".symver counter_dlsym_old,dlsym@GLIBC_2.2.5");

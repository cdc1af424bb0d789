// present_target: a program of ours (not linked to matrix-cpp or GL) for
// present_hooks_e2e_test. Its main thread waits in poll() (the event loop).
// It dlopen()s libfake_gl.so (argv[2]) RTLD_LOCAL and presents 100 times:
//   dlsym    the main thread calls eglSwapBuffers found by dlsym(handle),
//            one present per loop iteration (as SDL does with libGL)
//   getproc  the same through glXGetProcAddressARB (itself found by dlsym)
//   thread   a render thread calls glXSwapBuffers (found by dlsym) every
//            20 ms while the main thread polls every 2 ms
//   stall    an animation: the main thread presents (eglSwapBuffers by
//            dlsym) after a 12 ms wait, 30 times; then busy 3 s in a
//            dispatch of its own, waits 1 ms, and presents 30 more frames
//            (frozen_frame_e2e_test)
//   paced    a game capped at 30 fps: 120 frames, each drawn (2 ms busy)
//            and presented (eglSwapBuffers by dlsym), then a sleep until
//            the next 1/30 s (clock_nanosleep, TIMER_ABSTIME): 4 s
//   hitch    paced, with one hitch: frame 60 is drawn after 200 ms busy
// and prints "presents N" (the library's own count) before exiting.
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { kPresents = 100 };
typedef void (*GlxSwap)(void*, unsigned long);
typedef unsigned (*EglSwap)(void*, void*);
typedef void* (*GetProc)(const unsigned char*);

static GlxSwap g_glx;

static void SleepMs(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void* RenderThread(void* arg) {
  (void)arg;
  for (int i = 0; i < kPresents; ++i) {
    SleepMs(20);
    g_glx(NULL, 0);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  void* gl = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (gl == NULL) return 3;
  long (*swaps)(void) = (long (*)(void))dlsym(gl, "fake_gl_swaps");
  poll(NULL, 0, 1);  // The event loop's first wait.
  if (strcmp(argv[1], "stall") == 0) {
    EglSwap egl = (EglSwap)dlsym(gl, "eglSwapBuffers");
    for (int i = 0; i < 60; ++i) {
      if (i == 30) {
        poll(NULL, 0, 12);
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        do {
          clock_gettime(CLOCK_MONOTONIC, &now);
        } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 <
                 3000);
        poll(NULL, 0, 1);
      } else {
        poll(NULL, 0, 12);
      }
      egl(NULL, NULL);
    }
    poll(NULL, 0, 2);
  } else if (strcmp(argv[1], "paced") == 0 || strcmp(argv[1], "hitch") == 0) {
    EglSwap egl = (EglSwap)dlsym(gl, "eglSwapBuffers");
    const int hitch = strcmp(argv[1], "hitch") == 0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (int i = 0; i < 120; ++i) {
      struct timespec start, now;
      const long busy_ns = hitch && i == 60 ? 202000000L : 2000000L;
      clock_gettime(CLOCK_MONOTONIC, &start);
      do {
        clock_gettime(CLOCK_MONOTONIC, &now);
      } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) <
               busy_ns);
      egl(NULL, NULL);
      next.tv_nsec += 1000000000L / 30;
      if (next.tv_nsec >= 1000000000L) {
        next.tv_nsec -= 1000000000L;
        ++next.tv_sec;
      }
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    poll(NULL, 0, 2);
  } else if (strcmp(argv[1], "thread") == 0) {
    g_glx = (GlxSwap)dlsym(gl, "glXSwapBuffers");
    pthread_t thread;
    pthread_create(&thread, NULL, &RenderThread, NULL);
    while (swaps() < kPresents) poll(NULL, 0, 2);
    pthread_join(thread, NULL);
    poll(NULL, 0, 2);  // The dispatch after the last present ends.
  } else {
    EglSwap egl = NULL;
    GlxSwap glx = NULL;
    if (strcmp(argv[1], "getproc") == 0) {
      GetProc get = (GetProc)dlsym(gl, "glXGetProcAddressARB");
      glx = (GlxSwap)get((const unsigned char*)"glXSwapBuffers");
    } else {
      egl = (EglSwap)dlsym(gl, "eglSwapBuffers");
    }
    for (int i = 0; i < kPresents; ++i) {
      poll(NULL, 0, 2);
      if (egl != NULL) egl(NULL, NULL);
      if (glx != NULL) glx(NULL, 0);
    }
    poll(NULL, 0, 2);
  }
  printf("presents %ld\n", swaps());
  return 0;
}
